//! seed 003's verbatim chunks: 512-character sliding windows (stride 384, so 128 characters of
//! overlap) over each session's transcript, no LLM at write time, hybrid retrieval: cosine over
//! chunk vectors and BM25 (tantivy), fused with RRF (k = 60). A chunk covers the turns its window
//! overlaps. (The seed used bge-m3 and a reranker; here it runs on the same MiniLM as everything
//! else, so the comparison isolates the unit, not the model.)

use aril_core::UnitKind;
use aril_core::{Scope, ScopeFilter, render_line};
use aril_index::{LexicalIndex, Watermark};
use aril_store::UnitText;

use super::{Embeddings, Strategy, Unit};
use crate::BenchError;
use crate::data::Case;

const WINDOW: usize = 512;
const STRIDE: usize = 384;

pub struct VerbatimChunks {
    embeddings: Embeddings,
    units: Vec<Unit>,
    vectors: Vec<Vec<Vec<f32>>>,
    lexical: Option<(tempfile::TempDir, LexicalIndex)>,
}

impl VerbatimChunks {
    pub fn new(embeddings: Embeddings) -> Result<Self, BenchError> {
        Ok(Self {
            embeddings,
            units: Vec::new(),
            vectors: Vec::new(),
            lexical: None,
        })
    }
}

/// Character windows of `text` with the byte range of each.
fn windows(text: &str) -> Vec<(usize, usize)> {
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let chars = bounds.len() - 1;
    let mut out = Vec::new();
    let mut start = 0;
    loop {
        let end = (start + WINDOW).min(chars);
        out.push((bounds[start], bounds[end]));
        if end == chars {
            break;
        }
        start += STRIDE;
    }
    out
}

impl Strategy for VerbatimChunks {
    fn name(&self) -> &'static str {
        "verbatim-chunks"
    }

    fn index(&mut self, case: &Case) -> Result<(), BenchError> {
        self.units.clear();
        for s in case.sessions.iter() {
            // The transcript and each turn's byte range in it.
            let mut transcript = String::new();
            let mut spans = Vec::new();
            for t in &s.turns {
                if !transcript.is_empty() {
                    transcript.push('\n');
                }
                let start = transcript.len();
                transcript.push_str(&render_line(t.role, t.speaker.as_deref(), &t.text));
                spans.push((start, transcript.len(), t.id.clone()));
            }
            if transcript.is_empty() {
                continue;
            }
            for (a, b) in windows(&transcript) {
                self.units.push(Unit {
                    session: s.id.clone(),
                    turns: spans
                        .iter()
                        .filter(|(s, e, _)| *s < b && *e > a)
                        .map(|(_, _, id)| id.clone())
                        .collect(),
                    text: transcript[a..b].to_string(),
                });
            }
        }
        let texts: Vec<String> = self.units.iter().map(|u| u.text.clone()).collect();
        self.vectors = self.embeddings.chunked(&texts)?;
        let dir = tempfile::tempdir().map_err(|e| BenchError::Io {
            what: "creating a temporary index directory".into(),
            cause: e,
        })?;
        let index = LexicalIndex::open(dir.path())?;
        let scope =
            Scope::user("bench").map_err(|e| BenchError::data(std::path::Path::new("-"), e.0))?;
        let docs: Vec<UnitText> = self
            .units
            .iter()
            .enumerate()
            .map(|(i, u)| UnitText {
                kind: UnitKind::Turn,
                id: i.to_string(),
                scope: scope.clone(),
                text: u.text.clone(),
                seq: i as i64 + 1,
                role: None,
            })
            .collect();
        index.add(
            &docs,
            Watermark {
                turn_seq: docs.len() as i64,
                segment_seq: 0,
                ..Default::default()
            },
        )?;
        self.lexical = Some((dir, index));
        Ok(())
    }

    fn rank(&mut self, case: &Case, k: usize) -> Result<Vec<Unit>, BenchError> {
        let q = self
            .embeddings
            .chunked(std::slice::from_ref(&case.question))?;
        let qv = &q[0][0];
        let mut dense: Vec<(usize, f32)> = self
            .vectors
            .iter()
            .enumerate()
            .map(|(i, chunks)| {
                (
                    i,
                    chunks
                        .iter()
                        .map(|c| aril_embed::dot(qv, c))
                        .fold(f32::MIN, f32::max),
                )
            })
            .collect();
        dense.sort_by(|a, b| b.1.total_cmp(&a.1));
        let dense: Vec<usize> = dense.into_iter().take(100).map(|(i, _)| i).collect();
        let lexical: Vec<usize> = match &self.lexical {
            Some((_, index)) => index
                .search(
                    &ScopeFilter::user("bench"),
                    &case.question,
                    100,
                    &[UnitKind::Turn],
                    None,
                )?
                .into_iter()
                .filter_map(|h| h.unit.as_str().parse().ok())
                .collect(),
            None => Vec::new(),
        };
        Ok(aril_recall::rrf(&[(&dense, 1.0), (&lexical, 1.0)], 60.0)
            .into_iter()
            .take(k)
            .map(|(i, _)| self.units[i].clone())
            .collect())
    }

    fn embedded_texts(&self) -> usize {
        self.embeddings.misses()
    }
}

#[cfg(test)]
mod tests {
    use super::windows;

    #[test]
    fn windows_overlap_and_cover_the_text() {
        let text = "a".repeat(1000);
        let w = windows(&text);
        assert_eq!(w, vec![(0, 512), (384, 896), (768, 1000)]);
        assert_eq!(windows("short"), vec![(0, 5)]);
        let multi = "é".repeat(600);
        let w = windows(&multi);
        assert_eq!(w[0], (0, 1024));
        assert!(
            w.iter()
                .all(|(a, b)| multi.is_char_boundary(*a) && multi.is_char_boundary(*b))
        );
    }
}
