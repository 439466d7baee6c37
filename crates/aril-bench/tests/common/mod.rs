//! Shared by the bench's integration tests: the benchmark data beside the checkout, and small
//! LongMemEval and LoCoMo files cut from it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aril_bench::{BenchOptions, Benchmark};
use aril_embed::{MiniLm, default_model_dir};

/// A file under `../shared/data`.
pub fn shared(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}

/// The dev file cut to its first two questions and four sessions each, with or without gold.
pub fn small_file(dir: &Path, strip_gold: bool) -> PathBuf {
    let text = std::fs::read_to_string(shared("longmemeval/longmemeval_s_dev.json")).unwrap();
    let mut all: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    all.truncate(2);
    for q in &mut all {
        let o = q.as_object_mut().unwrap();
        for key in [
            "haystack_sessions",
            "haystack_session_ids",
            "haystack_dates",
        ] {
            o.get_mut(key).unwrap().as_array_mut().unwrap().truncate(4);
        }
        if strip_gold {
            for key in ["answer", "answer_session_ids", "question_type"] {
                o.remove(key);
            }
            for session in o["haystack_sessions"].as_array_mut().unwrap() {
                for m in session.as_array_mut().unwrap() {
                    m.as_object_mut().unwrap().remove("has_answer");
                }
            }
        }
    }
    let path = dir.join(if strip_gold {
        "stripped.json"
    } else {
        "full.json"
    });
    std::fs::write(&path, serde_json::to_string(&all).unwrap()).unwrap();
    path
}

/// The first dev conversation (`conv-26`, the full LoCoMo file's first) with its first six
/// questions, in the official format.
#[allow(dead_code)] // not every test binary uses it
pub fn first_conversation(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(shared("locomo/locomo_dev7.json")).unwrap();
    let mut all: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    all.truncate(1);
    all[0]["qa"].as_array_mut().unwrap().truncate(6);
    let path = dir.join("conv-26.json");
    std::fs::write(&path, serde_json::to_string(&all).unwrap()).unwrap();
    path
}

/// A run of `raw-session-user` (cheap to embed) on `data` with the real embedder and everything
/// else at its default: no answers, no audit.
#[allow(dead_code)] // not every test binary uses it
pub fn bench_options(benchmark: Benchmark, data: PathBuf, cache: &Path) -> BenchOptions {
    BenchOptions {
        benchmark,
        data,
        strategy: "raw-session-user".into(),
        limit: None,
        ks: None,
        cache_dir: cache.to_path_buf(),
        model: Arc::new(MiniLm::load(&default_model_dir()).unwrap()),
        engine: aril_engine::Config::default(),
        store: aril_engine::StoreAt::Embedded,
        models: Default::default(),
        qa: None,
        audit: None,
    }
}
