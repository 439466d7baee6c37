//! Ingest against the bare embedder, on the same forward passes in one run: how close the write
//! path runs to the model's speed. Reads the first questions' haystacks of a LongMemEval file and
//! ingests them into a fresh data directory through an embedder that records every batch of
//! piece sequences it is given (turn sentences, segment texts: whatever ingest embeds); then
//! runs exactly those batches through the bare model, one after another, and prints both times.
//! What ingest spends beyond the model's own time (tokenizing, segmenting, SQLite, tantivy, the
//! waits between them) is the difference.
//!
//! `cargo run --release -p aril-engine --example ingest_speed -- FILE [QUESTIONS [CONFIG.toml]]`
//! (default 10 questions, about 5,000 turns, default configuration; the model from
//! `scripts/fetch-model`).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use aril_engine::embed::{EmbedError, Embedder, MiniLm, Pieces};
use aril_engine::{Config, Engine, IngestOptions, NewTurn};

/// The model, with every batch it embeds for storage kept, and the time it took.
struct Recording {
    model: Arc<MiniLm>,
    batches: Mutex<(Vec<Vec<Vec<u32>>>, Duration)>,
}

impl Embedder for Recording {
    fn name(&self) -> &str {
        self.model.name()
    }
    fn dim(&self) -> usize {
        self.model.dim()
    }
    fn max_pieces(&self) -> usize {
        self.model.max_pieces()
    }
    fn tokenize(&self, text: &str) -> Result<Pieces, EmbedError> {
        self.model.tokenize(text)
    }
    fn embed_pieces(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let start = Instant::now();
        let vectors = self.model.embed_pieces(seqs)?;
        let took = start.elapsed();
        let mut batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        batches.0.push(seqs.iter().map(|s| s.to_vec()).collect());
        batches.1 += took;
        Ok(vectors)
    }
    fn embed_question_pieces(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.model.embed_question_pieces(seqs)
    }
}

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
    let model = Arc::new(MiniLm::load(&aril_engine::embed::default_model_dir())?);
    // Warm the runtime up before either run is timed.
    let warm = model.tokenize("A sentence to warm the model up.")?;
    model.embed_pieces(&[&warm.ids])?;
    let recording = Arc::new(Recording {
        model: model.clone(),
        batches: Mutex::new((Vec::new(), Duration::ZERO)),
    });
    let dir = tempfile::tempdir()?;
    let mut engine = Engine::open_with_embedder(dir.path(), config, recording.clone())?;
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
    drop(engine);
    let (batches, inside) = std::mem::take(
        &mut *recording
            .batches
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    let seqs: usize = batches.iter().map(Vec::len).sum();
    let pieces: usize = batches.iter().flatten().map(Vec::len).sum();
    let start = Instant::now();
    for batch in &batches {
        let refs: Vec<&[u32]> = batch.iter().map(Vec::as_slice).collect();
        model.embed_pieces(&refs)?;
    }
    let bare_s = start.elapsed().as_secs_f64();
    println!(
        "ingest:      {} turns, {} texts embedded ({} batches, {seqs} sequences, {pieces} pieces) \
         in {ingest_s:.1} s: {:.0} turns/s, {:.0} texts/s; the model ran {:.1} s of it",
        report.turns_added,
        report.embedded_texts,
        batches.len(),
        report.turns_added as f64 / ingest_s,
        report.embedded_texts as f64 / ingest_s,
        inside.as_secs_f64(),
    );
    println!("bare model:  the same batches one after another in {bare_s:.1} s");
    println!(
        "ingest runs at {:.0}% of the bare model's speed on the same forward passes",
        100.0 * bare_s / ingest_s
    );
    Ok(())
}
