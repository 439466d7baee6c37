//! The ONNX Runtime embedder reproduces sentence-transformers 6.2.0 on every reference item, and aril's
//! chunked embedding never truncates.

use std::path::PathBuf;

use aril_embed::{
    Embedder, INT8_MODEL_FILE, MiniLm, MiniLmOptions, Weights, default_model_dir, dot,
    embed_chunked, embed_question, embed_truncated,
};
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

/// The model on its full weights, for questions and stored texts: the graph sentence-transformers
/// is reproduced by.
fn model() -> MiniLm {
    MiniLm::load_with(&default_model_dir(), &full_weights()).unwrap_or_else(|e| panic!("{e}"))
}

fn int8_weights() -> MiniLmOptions {
    MiniLmOptions {
        questions: Weights::Int8,
        stored: Weights::Int8,
        ..MiniLmOptions::default()
    }
}

fn full_weights() -> MiniLmOptions {
    MiniLmOptions {
        questions: Weights::F32,
        stored: Weights::F32,
        ..MiniLmOptions::default()
    }
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

/// Questions embed on the 8-bit graph by default, stored texts when the options say so: close to
/// the full weights' vectors, and equal to them on the full weights, each setting on its own.
#[test]
fn the_8_bit_graph_stays_close_to_the_full_weights_for_questions_and_stored_texts() {
    let reference = reference();
    let int8 = MiniLm::load_with(&default_model_dir(), &int8_weights()).unwrap();
    let f32 = model();
    let full_questions = MiniLm::load_with(
        &default_model_dir(),
        &MiniLmOptions {
            questions: Weights::F32,
            ..int8_weights()
        },
    )
    .unwrap();
    let by_default = MiniLm::load(&default_model_dir()).unwrap();
    let short: Vec<&Item> = reference
        .items
        .iter()
        .filter(|i| i.word_pieces < 64 && !i.text.is_empty())
        .collect();
    assert!(short.len() >= 3, "the reference has short items");
    let close = |c: f32, what: &str, text: &str| {
        assert!(
            (0.97..0.9999).contains(&c),
            "{what}: cosine {c} for {text:?}"
        );
    };
    for item in short {
        let text = item.text.as_str();
        let stored = |m: &MiniLm| {
            embed_chunked(m, &[text]).unwrap()[0].chunks[0]
                .vector
                .clone()
        };
        assert!(cosine(&embed_question(&f32, text).unwrap(), &item.embedding) >= 0.9999);
        assert!(cosine(&stored(&f32), &item.embedding) >= 0.9999);
        close(
            cosine(&embed_question(&int8, text).unwrap(), &item.embedding),
            "8-bit question",
            text,
        );
        close(
            cosine(&stored(&int8), &item.embedding),
            "8-bit stored text",
            text,
        );
        // By default: 8-bit questions, stored texts on the full weights.
        close(
            cosine(&embed_question(&by_default, text).unwrap(), &item.embedding),
            "8-bit question",
            text,
        );
        assert!(cosine(&stored(&by_default), &item.embedding) >= 0.9999);
        // Full-weight questions beside 8-bit stored texts.
        let q = embed_question(&full_questions, text).unwrap();
        assert!(cosine(&q, &item.embedding) >= 0.9999);
        close(
            cosine(&stored(&full_questions), &item.embedding),
            "8-bit stored text",
            text,
        );
    }
}

/// A model directory without the 8-bit graph is refused with the file named, unless neither
/// questions nor stored texts embed with it.
#[test]
fn a_missing_8_bit_graph_is_named_unless_nothing_runs_on_it() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["model.onnx", "tokenizer.json", "config.json"] {
        std::os::unix::fs::symlink(default_model_dir().join(file), dir.path().join(file)).unwrap();
    }
    let stored_only = MiniLmOptions {
        questions: Weights::F32,
        ..int8_weights()
    };
    for options in [MiniLmOptions::default(), stored_only] {
        let err = MiniLm::load_with(dir.path(), &options)
            .err()
            .expect("the 8-bit graph is missing");
        let message = err.to_string();
        assert!(message.contains(INT8_MODEL_FILE), "{message}");
        assert!(message.contains("question_weights"), "{message}");
        assert!(message.contains("stored_weights"), "{message}");
    }
    let model = MiniLm::load_with(dir.path(), &full_weights()).unwrap();
    assert_eq!(
        embed_question(&model, "Where do I work?").unwrap().len(),
        384
    );
    assert_eq!(
        embed_chunked(&model, &["I work in Porto."]).unwrap()[0]
            .chunks
            .len(),
        1
    );
}

/// On the 8-bit graph, whose activations are quantized with one scale per tensor, a stored text's
/// vector depends on its own pieces only: the same alone, beside a long text, and as a question.
#[test]
fn an_8_bit_stored_vector_depends_on_its_own_pieces_only() {
    let reference = reference();
    let model = MiniLm::load_with(&default_model_dir(), &int8_weights()).unwrap();
    let short = reference
        .items
        .iter()
        .find(|i| i.word_pieces < 64 && !i.text.is_empty())
        .unwrap();
    let long = reference
        .items
        .iter()
        .find(|i| i.word_pieces > 200)
        .unwrap();
    let a = model.tokenize(&short.text).unwrap().ids;
    let mut b = model.tokenize(&long.text).unwrap().ids;
    b.truncate(model.max_pieces() - 2);
    let alone = model.embed_pieces(&[&a]).unwrap();
    let beside = model.embed_pieces(&[&b, &a, &b]).unwrap();
    assert_eq!(alone[0], beside[1]);
    assert_eq!(model.embed_question_pieces(&[&a]).unwrap()[0], alone[0]);
    // The full weights in a padded batch, for contrast, are the reference's within 1e-4.
    let full = MiniLm::load_with(&default_model_dir(), &full_weights()).unwrap();
    let batched = full.embed_pieces(&[&b, &a]).unwrap();
    assert!(cosine(&batched[1], &short.embedding) >= 0.9999);
}
