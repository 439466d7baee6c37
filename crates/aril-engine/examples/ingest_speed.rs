//! Ingest against the bare embedder, on the same texts in one run: how close the write path runs
//! to the model's speed. Reads the first questions' haystacks of a LongMemEval file, embeds the
//! texts ingest would embed (the dense roles' turns, sentence by sentence) straight through the
//! model, then ingests the same turns into a fresh data directory, and prints both rates.
//!
//! `cargo run --release -p aril-engine --example ingest_speed -- FILE [QUESTIONS [CONFIG.toml]]`
//! (default 10 questions, about 5,000 turns, default configuration; the model from
//! `scripts/fetch-model`).

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use aril_engine::{Config, Engine, IngestOptions, NewTurn};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let file = args
        .next()
        .ok_or("usage: ingest_speed LONGMEMEVAL.json [QUESTIONS [CONFIG.toml]]")?;
    let questions: usize = args.next().map_or(Ok(10), |n| n.parse())?;
    let config = match args.next() {
        Some(path) => Config::load(path.as_ref())?,
        None => Config::default(),
    };
    let mut turns: Vec<NewTurn> = Vec::new();
    for q in aril_engine::datasets::longmemeval::read(file.as_ref())?
        .into_iter()
        .take(questions)
    {
        turns.extend(q.haystack.turns);
    }
    // The texts ingest sends to the model: each distinct dense-role turn text, once.
    let mut seen = HashSet::new();
    let texts: Vec<&str> = turns
        .iter()
        .filter(|t| config.dense_roles.contains(&t.role))
        .map(|t| t.text.as_str())
        .filter(|t| seen.insert(*t))
        .collect();
    let model = aril_engine::embed::MiniLm::load(&aril_engine::embed::default_model_dir())?;
    aril_engine::embed::embed_sentences(&model, &texts[..1], config.sentence_min_bytes)?;
    let start = Instant::now();
    let embedded = aril_engine::embed::embed_sentences(&model, &texts, config.sentence_min_bytes)?;
    let bare_s = start.elapsed().as_secs_f64();
    let chunks: usize = embedded.iter().map(|t| t.chunks.len()).sum();
    println!(
        "bare model:  {} texts ({chunks} sentence pieces) of {} turns in {bare_s:.1} s: {:.0} texts/s",
        texts.len(),
        turns.len(),
        texts.len() as f64 / bare_s
    );
    drop(model);
    let dir = tempfile::tempdir()?;
    let mut engine = Engine::open(dir.path(), config)?;
    engine.load_model()?;
    let start = Instant::now();
    let report = engine.ingest(
        turns,
        &IngestOptions {
            flush: true,
            ..Default::default()
        },
        &mut |_| {},
        &AtomicBool::new(false),
    )?;
    let ingest_s = start.elapsed().as_secs_f64();
    println!(
        "ingest:      {} texts of {} turns in {ingest_s:.1} s: {:.0} texts/s, {:.0} turns/s",
        report.embedded_texts,
        report.turns_added,
        report.embedded_texts as f64 / ingest_s,
        report.turns_added as f64 / ingest_s
    );
    println!(
        "ingest runs at {:.0}% of the bare model's speed on these texts",
        100.0 * bare_s / ingest_s
    );
    Ok(())
}
