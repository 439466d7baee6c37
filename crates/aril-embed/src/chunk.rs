//! Turning texts into vectors without losing any of them: texts longer than the model reads are
//! split into balanced chunks of word pieces, each embedded on its own.

use crate::{EmbedError, Embedder};

/// One embedded piece of a text: its byte range in the text and its vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub start: usize,
    pub end: usize,
    pub vector: Vec<f32>,
}

/// All chunks of one text (one chunk when the text fits the model).
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkedText {
    pub chunks: Vec<Chunk>,
    /// Word pieces in the whole text.
    pub pieces: usize,
}

/// Splits `n` pieces into the fewest balanced windows of at most `max` pieces: `[start, end)` ranges.
pub fn split_pieces(n: usize, max: usize) -> Vec<(usize, usize)> {
    if n == 0 {
        return vec![(0, 0)];
    }
    let parts = n.div_ceil(max.max(1));
    let size = n.div_ceil(parts);
    (0..parts)
        .map(|p| (p * size, ((p + 1) * size).min(n)))
        .filter(|(a, b)| a < b)
        .collect()
}

/// Embeds every text whole: each becomes as many chunks as it needs, none truncated.
pub fn embed_chunked(
    embedder: &dyn Embedder,
    texts: &[&str],
) -> Result<Vec<ChunkedText>, EmbedError> {
    let max = embedder.max_pieces() - 2;
    let mut pieces = Vec::with_capacity(texts.len());
    for text in texts {
        pieces.push(embedder.tokenize(text)?);
    }
    // (text index, byte start, byte end, piece range)
    let mut windows = Vec::new();
    for (i, (p, text)) in pieces.iter().zip(texts).enumerate() {
        for (a, b) in split_pieces(p.ids.len(), max) {
            let (start, end) = if a == b {
                (0, text.len())
            } else {
                (p.spans[a].0, p.spans[b - 1].1)
            };
            windows.push((i, start, end, a, b));
        }
    }
    let seqs: Vec<&[u32]> = windows
        .iter()
        .map(|&(i, _, _, a, b)| &pieces[i].ids[a..b])
        .collect();
    let vectors = embedder.embed_pieces(&seqs)?;
    let mut out: Vec<ChunkedText> = pieces
        .iter()
        .map(|p| ChunkedText {
            chunks: Vec::new(),
            pieces: p.ids.len(),
        })
        .collect();
    for ((i, start, end, _, _), vector) in windows.into_iter().zip(vectors) {
        out[i].chunks.push(Chunk { start, end, vector });
    }
    Ok(out)
}

/// Embeds each text from its first `max_pieces - 2` word pieces only, as sentence-transformers and
/// ChromaDB do. Returns the vectors and how many texts were cut. For baselines only.
pub fn embed_truncated(
    embedder: &dyn Embedder,
    texts: &[&str],
) -> Result<(Vec<Vec<f32>>, usize), EmbedError> {
    let max = embedder.max_pieces() - 2;
    let mut seqs = Vec::with_capacity(texts.len());
    for text in texts {
        seqs.push(embedder.tokenize(text)?.ids);
    }
    let truncated = seqs.iter().filter(|s| s.len() > max).count();
    if truncated > 0 {
        tracing::debug!(
            truncated,
            "inputs truncated to the model's window (baseline mode)"
        );
    }
    let views: Vec<&[u32]> = seqs.iter().map(|s| &s[..s.len().min(max)]).collect();
    Ok((embedder.embed_pieces(&views)?, truncated))
}

#[cfg(test)]
mod tests {
    use super::split_pieces;

    #[test]
    fn split_is_balanced_and_covers_everything() {
        assert_eq!(split_pieces(0, 254), vec![(0, 0)]);
        assert_eq!(split_pieces(10, 254), vec![(0, 10)]);
        assert_eq!(split_pieces(254, 254), vec![(0, 254)]);
        assert_eq!(split_pieces(255, 254), vec![(0, 128), (128, 255)]);
        let w = split_pieces(1000, 254);
        assert_eq!(w.len(), 4);
        assert!(w.iter().all(|(a, b)| b - a <= 254));
        assert_eq!(w.first().unwrap().0, 0);
        assert_eq!(w.last().unwrap().1, 1000);
        assert!(w.windows(2).all(|p| p[0].1 == p[1].0));
    }
}
