//! The ONNX Runtime embedder reproduces sentence-transformers 6.2.0 on every reference item, and aril's
//! chunked embedding never truncates.

use std::path::PathBuf;

use aril_embed::{Embedder, MiniLm, default_model_dir, dot, embed_chunked, embed_truncated};
use serde::Deserialize;

#[derive(Deserialize)]
struct Reference {
    max_seq_length: usize,
    items: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    text: String,
    word_pieces: usize,
    embedding: Vec<f32>,
}

fn reference() -> Reference {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/embedder/all-MiniLM-L6-v2.reference.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).expect("reference file parses")
}

fn model() -> MiniLm {
    MiniLm::load(&default_model_dir()).unwrap_or_else(|e| panic!("{e}"))
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
}

#[test]
fn truncated_embeddings_match_sentence_transformers() {
    let reference = reference();
    let model = model();
    assert_eq!(model.max_pieces(), reference.max_seq_length);
    let texts: Vec<&str> = reference.items.iter().map(|i| i.text.as_str()).collect();
    let (vectors, truncated) = embed_truncated(&model, &texts).unwrap();
    let expected_truncated = reference
        .items
        .iter()
        .filter(|i| i.word_pieces > reference.max_seq_length)
        .count();
    assert!(expected_truncated >= 1, "the reference has a long item");
    assert_eq!(truncated, expected_truncated);
    for (item, v) in reference.items.iter().zip(&vectors) {
        assert_eq!(v.len(), 384);
        let c = cosine(v, &item.embedding);
        assert!(
            c >= 0.9999,
            "cosine {c} for {:?}",
            &item.text[..item.text.len().min(60)]
        );
    }
}

#[test]
fn word_piece_counts_match_the_reference() {
    let reference = reference();
    let model = model();
    for item in &reference.items {
        // The reference counts [CLS] and [SEP]; tokenize() does not add them.
        let pieces = model.tokenize(&item.text).unwrap().ids.len() + 2;
        assert_eq!(
            pieces,
            item.word_pieces,
            "{:?}",
            &item.text[..item.text.len().min(60)]
        );
    }
}

#[test]
fn chunked_embedding_keeps_every_piece_of_a_long_text() {
    let reference = reference();
    let model = model();
    let long = reference
        .items
        .iter()
        .find(|i| i.word_pieces > reference.max_seq_length)
        .unwrap();
    let short = reference
        .items
        .iter()
        .find(|i| i.word_pieces < 64 && !i.text.is_empty())
        .unwrap();
    let out = embed_chunked(&model, &[&long.text, &short.text]).unwrap();
    assert_eq!(
        out[0].chunks.len(),
        2,
        "482 pieces need two 254-piece chunks"
    );
    assert_eq!(out[0].chunks[0].start, 0);
    assert!(out[0].chunks[1].end >= long.text.trim_end().len());
    assert!(out[0].chunks[0].end <= out[0].chunks[1].start);
    // The tail of the long text, invisible to the truncated embedding, has its own vector.
    let tail = &long.text[out[0].chunks[1].start..out[0].chunks[1].end];
    let (tail_vec, _) = embed_truncated(&model, &[tail]).unwrap();
    assert!(cosine(&tail_vec[0], &out[0].chunks[1].vector) > 0.99);
    // A short text is one chunk equal to its plain embedding.
    assert_eq!(out[1].chunks.len(), 1);
    assert!(cosine(&out[1].chunks[0].vector, &short.embedding) >= 0.9999);
}
