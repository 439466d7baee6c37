//! `aril bench scale` end to end at a small size with the real model: a stopped build keeps
//! nothing half-done and goes on from its count, a larger size starts from a smaller one's copy,
//! and a built store is measured and scored.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use aril_bench::BenchError;
use aril_bench::scale::{self, ScaleOptions};
use aril_embed::{MiniLm, default_model_dir};
use aril_engine::{Config, Engine, ScopeFilter, StoreAt};

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/longmemeval/longmemeval_s_dev.json")
}

#[test]
fn builds_resume_grow_from_a_copy_and_measure() {
    let cache = tempfile::tempdir().unwrap();
    let options = ScaleOptions {
        data: data(),
        sizes: vec![120, 300],
        store: StoreAt::Embedded,
        cache_dir: cache.path().to_path_buf(),
        searches: 5,
        model: Arc::new(MiniLm::load(&default_model_dir()).unwrap()),
        engine: Config::default(),
    };
    let (cases, corpus) = scale::cases_and_corpus(&options.data).unwrap();
    let layout = options.layout().unwrap();
    let build = |size: usize, cancel: &AtomicBool| {
        scale::build::build(
            &layout,
            &corpus,
            size,
            &options.engine,
            options.model.clone(),
            &mut |_, _| {},
            cancel,
        )
    };

    // Stopped before its first batch: nothing is recorded as built.
    let stopped = build(120, &AtomicBool::new(true));
    assert!(matches!(stopped, Err(BenchError::BuildInterrupted)));
    assert_eq!(layout.progress(120).unwrap().turns, 0);

    let small = build(120, &AtomicBool::new(false)).unwrap();
    assert_eq!(small.turns, 120);
    assert!(small.embedded_texts > 0);
    // Built already: nothing more is done.
    let again = build(120, &AtomicBool::new(false)).unwrap();
    assert_eq!(again.embedded_texts, small.embedded_texts);

    // The larger store starts from the smaller one's turns and adds the rest of the stream.
    let large = build(300, &AtomicBool::new(false)).unwrap();
    assert_eq!(large.turns, 300);
    assert!(large.embedded_texts > small.embedded_texts);
    {
        let engine = Engine::open_existing_at(
            &layout.dir(300),
            &StoreAt::Embedded,
            Config::default(),
            None,
        )
        .unwrap();
        let (_, total) = engine
            .list_turns(&ScopeFilter::user(layout.scope(300).unwrap().user_id), 0, 1)
            .unwrap();
        assert_eq!(total, 300, "each stream turn stored once");
    }

    let measured = scale::measure::measure(
        &layout,
        &corpus,
        300,
        &options.engine,
        options.model.clone(),
        &cases,
        &options.data,
        options.searches,
    )
    .unwrap();
    assert_eq!(measured.turns, 300);
    assert_eq!(measured.searches, 5);
    assert!(measured.bytes > 0 && measured.search_ms_p50 > 0.0);
    // The slowest questions are named, slowest first, each one of the file's.
    assert!(!measured.slowest.is_empty() && measured.slowest.len() <= 5);
    assert!(
        measured
            .slowest
            .windows(2)
            .all(|w| w[0].median_ms >= w[1].median_ms)
    );
    assert!(measured.slowest.iter().all(|q| {
        cases
            .iter()
            .any(|c| c.id == q.id && c.question == q.question)
    }));
    // Only questions whose evidence sits in the first 300 turns are scored.
    assert!(measured.recall.questions < cases.len());

    // A size not built yet cannot be measured.
    let unbuilt = scale::measure::measure(
        &layout,
        &corpus,
        500,
        &options.engine,
        options.model.clone(),
        &cases,
        &options.data,
        1,
    );
    assert!(matches!(unbuilt, Err(BenchError::Data { .. })));
}
