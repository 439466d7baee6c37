//! Sentence embeddings for aril: the [`Embedder`] seam, the offline all-MiniLM-L6-v2 runtime
//! ([`MiniLm`], ONNX Runtime), and the ways to embed text:
//!
//! - [`embed_chunked`]: aril's own units. Text longer than the model reads is split into chunks
//!   that fit, and every chunk is embedded. Nothing is ever truncated.
//! - [`embed_sentences`]: the same, one sentence (or run of short sentences) at a time, so a
//!   text that says several things has a vector for each.
//! - [`embed_truncated`]: what sentence-transformers and ChromaDB do (keep the first 254 word
//!   pieces). Only for baselines that reproduce that behaviour on purpose; it reports how many
//!   inputs it cut.
//!
//! Cost: one transformer pass per chunk, batched by length (throughput in docs/benchmarks.md).

mod chunk;
mod error;
mod minilm;

pub use chunk::{
    Chunk, ChunkedText, embed_chunked, embed_question, embed_sentences, embed_truncated,
    sentence_spans, split_pieces,
};
pub use error::EmbedError;
pub use minilm::{
    INT8_MODEL_FILE, MODEL_NAME, MiniLm, MiniLmOptions, RUNTIME_VERSION, Weights,
    default_model_dir, default_runtime_path,
};

/// The word pieces of a text, without special tokens, with each piece's byte span in the text.
#[derive(Debug, Clone, Default)]
pub struct Pieces {
    pub ids: Vec<u32>,
    pub spans: Vec<(usize, usize)>,
}

/// A sentence-embedding model. Implementations: [`MiniLm`] (ONNX Runtime). Vectors are L2-normalised,
/// so a dot product is the cosine similarity.
pub trait Embedder: Send + Sync {
    /// Model name, part of every embedding-cache key.
    fn name(&self) -> &str;
    /// What, besides the name, tells apart the vectors this embedder makes for storage: `""` for
    /// the model's own weights, another tag (`"int8"`) for a cheaper copy of them. Part of a
    /// cache key, so vectors of two copies never stand in for each other; never part of the
    /// name, so vectors of every copy are searched together as the same model's.
    fn variant(&self) -> &str {
        ""
    }
    /// Dimension of the vectors.
    fn dim(&self) -> usize;
    /// Word pieces the model reads per input, special tokens included (256 for MiniLM).
    fn max_pieces(&self) -> usize;
    /// Splits text into word pieces (no special tokens added).
    fn tokenize(&self, text: &str) -> Result<Pieces, EmbedError>;
    /// Embeds piece sequences, each at most `max_pieces() - 2` long (the model adds its two special
    /// tokens). Returns one normalised vector per sequence, in order.
    fn embed_pieces(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// Embeds a question's piece sequences as [`Embedder::embed_pieces`] does, for vectors that
    /// are compared with stored ones and never stored themselves: an embedder may run them on a
    /// cheaper copy of its model ([`MiniLm`]: 8-bit weights, [`Weights`]). Default: the
    /// same as `embed_pieces`.
    fn embed_question_pieces(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_pieces(seqs)
    }
}

/// Dot product of two vectors (the cosine similarity for normalised vectors).
///
/// Summed in 16 lanes, so the compiler keeps it in SIMD registers (a plain `sum()` adds one
/// product at a time: floats may not be reordered): vector scans spend their time here.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut lanes = [0.0f32; LANES];
    let (mut xs, mut ys) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    for (x, y) in (&mut xs).zip(&mut ys) {
        for ((lane, x), y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += x * y;
        }
    }
    let tail: f32 = xs
        .remainder()
        .iter()
        .zip(ys.remainder())
        .map(|(x, y)| x * y)
        .sum();
    lanes.iter().sum::<f32>() + tail
}

/// Scales `v` to unit length in place (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = dot(v, v).sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lane-wise sum is the plain sum, whatever the length (tails shorter than a lane too),
    /// and a length mismatch reads only the common part.
    #[test]
    fn dot_is_the_plain_sum_at_every_length() {
        for n in [0usize, 1, 7, 15, 16, 17, 31, 32, 384, 385] {
            let a: Vec<f32> = (0..n).map(|i| ((i * 7 % 13) as f32 - 6.0) / 5.0).collect();
            let b: Vec<f32> = (0..n).map(|i| ((i * 5 % 11) as f32 - 5.0) / 3.0).collect();
            let plain: f64 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (*x as f64) * (*y as f64))
                .sum();
            assert!((dot(&a, &b) as f64 - plain).abs() < 1e-4, "n = {n}");
            assert!((dot(&a, &b[..n / 2]) - dot(&a[..n / 2], &b[..n / 2])).abs() < 1e-6);
        }
    }
}
