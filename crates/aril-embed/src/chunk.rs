//! Turning texts into vectors without losing any of them: texts longer than the model reads are
//! split into balanced chunks of word pieces, each embedded on its own; or a text is embedded
//! sentence by sentence, each sentence chunked the same way.

use unicode_segmentation::UnicodeSegmentation;

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

/// Splits `n` pieces into the fewest balanced windows of at most `max` pieces: `[start, end)`
/// ranges.
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
    let spans: Vec<Vec<(usize, usize)>> = texts.iter().map(|t| vec![(0, t.len())]).collect();
    embed_spans(embedder, texts, &spans)
}

/// Embeds a question for search: one unit vector, the sum of its chunks' vectors normalised (a
/// question longer than the model reads is chunked like any text), by
/// [`Embedder::embed_question_pieces`]. Never stored: a stored text is embedded by
/// [`embed_chunked`] or [`embed_sentences`].
pub fn embed_question(embedder: &dyn Embedder, question: &str) -> Result<Vec<f32>, EmbedError> {
    let pieces = embedder.tokenize(question)?;
    let seqs: Vec<&[u32]> = split_pieces(pieces.ids.len(), embedder.max_pieces() - 2)
        .into_iter()
        .map(|(a, b)| &pieces.ids[a..b])
        .collect();
    let mut qv = vec![0.0f32; embedder.dim()];
    for v in embedder.embed_question_pieces(&seqs)? {
        qv.iter_mut().zip(&v).for_each(|(a, b)| *a += b);
    }
    crate::normalize(&mut qv);
    Ok(qv)
}

/// Embeds every text as its sentences ([`sentence_spans`] with `min_bytes`), each sentence
/// chunked as [`embed_chunked`] chunks a text: a text saying several things gets a vector for
/// each, so one of them is not averaged away by the rest. The chunks tile the text.
pub fn embed_sentences(
    embedder: &dyn Embedder,
    texts: &[&str],
    min_bytes: usize,
) -> Result<Vec<ChunkedText>, EmbedError> {
    let spans: Vec<Vec<(usize, usize)>> =
        texts.iter().map(|t| sentence_spans(t, min_bytes)).collect();
    embed_spans(embedder, texts, &spans)
}

/// The byte ranges of `text`'s sentences (Unicode UAX #29 boundaries), each merged with the next
/// until it holds at least `min_bytes`, and a last one shorter than that merged into the one
/// before. The ranges tile the text; a text shorter than `min_bytes` is one range.
pub fn sentence_spans(text: &str, min_bytes: usize) -> Vec<(usize, usize)> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut open: Option<usize> = None;
    for (start, sentence) in text.split_sentence_bound_indices() {
        let from = *open.get_or_insert(start);
        let end = start + sentence.len();
        if end - from >= min_bytes {
            spans.push((from, end));
            open = None;
        }
    }
    if let Some(from) = open {
        match spans.last_mut() {
            Some(last) => last.1 = text.len(),
            None => spans.push((from, text.len())),
        }
    }
    if spans.is_empty() {
        spans.push((0, text.len()));
    }
    spans
}

/// Embeds the given byte ranges of every text, each split into balanced windows of word pieces
/// the model reads whole, all in one batched pass.
fn embed_spans(
    embedder: &dyn Embedder,
    texts: &[&str],
    spans: &[Vec<(usize, usize)>],
) -> Result<Vec<ChunkedText>, EmbedError> {
    let max = embedder.max_pieces() - 2;
    // Per (text, range): its word pieces and where the range starts in the text.
    let mut pieces = Vec::new();
    for (i, (text, ranges)) in texts.iter().zip(spans).enumerate() {
        for &(a, b) in ranges {
            pieces.push((i, a, b, embedder.tokenize(&text[a..b])?));
        }
    }
    // (text index, byte start, byte end, piece list, piece range)
    let mut windows = Vec::new();
    for (n, (i, a, b, p)) in pieces.iter().enumerate() {
        for (x, y) in split_pieces(p.ids.len(), max) {
            let (start, end) = if x == y {
                (*a, *b)
            } else {
                (a + p.spans[x].0, a + p.spans[y - 1].1)
            };
            windows.push((*i, start, end, n, x, y));
        }
    }
    let seqs: Vec<&[u32]> = windows
        .iter()
        .map(|&(_, _, _, n, x, y)| &pieces[n].3.ids[x..y])
        .collect();
    let vectors = embedder.embed_pieces(&seqs)?;
    let mut out: Vec<ChunkedText> = texts
        .iter()
        .map(|_| ChunkedText {
            chunks: Vec::new(),
            pieces: 0,
        })
        .collect();
    for (i, _, _, p) in &pieces {
        out[*i].pieces += p.ids.len();
    }
    for ((i, start, end, _, _, _), vector) in windows.into_iter().zip(vectors) {
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
    use super::{sentence_spans, split_pieces};

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

    #[test]
    fn sentences_are_merged_until_long_enough_and_tile_the_text() {
        let text = "Hi! I'm considering a career change into data science. By the way, I just \
                    turned 32 last month. Ok.";
        let spans = sentence_spans(text, 40);
        // "Hi! " is too short alone and joins the next sentence; "Ok." is too short and joins
        // the one before it.
        let parts: Vec<&str> = spans.iter().map(|&(a, b)| &text[a..b]).collect();
        assert_eq!(
            parts,
            vec![
                "Hi! I'm considering a career change into data science. ",
                "By the way, I just turned 32 last month. Ok.",
            ]
        );
        assert_eq!(spans.first().map(|s| s.0), Some(0));
        assert_eq!(spans.last().map(|s| s.1), Some(text.len()));
        assert!(spans.windows(2).all(|p| p[0].1 == p[1].0));
    }

    #[test]
    fn a_short_or_empty_text_is_one_span() {
        assert_eq!(sentence_spans("Sure. Thanks!", 80), vec![(0, 13)]);
        assert_eq!(sentence_spans("", 80), vec![(0, 0)]);
        assert_eq!(sentence_spans("One. Two.", 0), vec![(0, 5), (5, 9)]);
    }
}
