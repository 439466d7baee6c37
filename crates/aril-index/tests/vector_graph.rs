//! The vector index of a large block: candidates from its HNSW graph, rescored exactly with the
//! vectors read from the store (here the units in hand); the graph saved in the data directory,
//! reopened instead of rebuilt, caught up with what was stored after its save, rebuilt when its
//! files do not describe the store, and removed on request.

use std::path::Path;

use aril_core::UnitKind;
use aril_core::{Scope, ScopeFilter};
use aril_index::{VectorIndex, VectorSettings};
use aril_store::{StoredChunk, UnitVectors};

const DIM: usize = 32;

/// A deterministic generator of unit vectors around a few hundred directions (text embeddings
/// cluster by topic).
struct Vectors {
    state: u64,
    centres: Vec<Vec<f32>>,
}

impl Vectors {
    fn new() -> Self {
        let mut v = Self {
            state: 7,
            centres: Vec::new(),
        };
        v.centres = (0..300).map(|_| v.random_unit()).collect();
        v
    }

    fn next(&mut self) -> f32 {
        self.state = self
            .state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.state >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
    }

    fn random_unit(&mut self) -> Vec<f32> {
        let v: Vec<f32> = (0..DIM).map(|_| self.next()).collect();
        unit_length(v)
    }

    fn near_a_centre(&mut self) -> Vec<f32> {
        let c = ((self.next() + 1.0) / 2.0 * (self.centres.len() - 1) as f32) as usize;
        let centre = self.centres[c].clone();
        unit_length(centre.iter().map(|x| x + 0.25 * self.next()).collect())
    }
}

fn unit_length(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

fn unit(seq: i64, scope: &Scope, chunks: Vec<Vec<f32>>) -> UnitVectors {
    UnitVectors {
        kind: UnitKind::Turn,
        id: format!("t{seq:05}"),
        seq,
        scope: scope.clone(),
        chunks: chunks
            .into_iter()
            .map(|vector| StoredChunk {
                start: 0,
                end: 1,
                vector,
            })
            .collect(),
    }
}

/// `n` units of user `u`, one to three chunks each, every fourth of agent `a`.
fn units(vectors: &mut Vectors, first_seq: i64, n: usize) -> Vec<UnitVectors> {
    let plain = Scope::user("u").unwrap();
    let agent = Scope::new("u".into(), Some("a".into()), None).unwrap();
    (0..n)
        .map(|i| {
            let seq = first_seq + i as i64;
            let chunks = (0..1 + seq % 3).map(|_| vectors.near_a_centre()).collect();
            unit(seq, if seq % 4 == 0 { &agent } else { &plain }, chunks)
        })
        .collect()
}

fn graph(dir: &Path) -> VectorSettings {
    VectorSettings {
        dir: Some(dir.to_path_buf()),
        ann_min_chunks: 500,
        max_held_bytes: usize::MAX,
    }
}

fn files(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == ext))
                .collect()
        })
        .unwrap_or_default()
}

fn search(
    idx: &VectorIndex,
    stored: &Vec<UnitVectors>,
    filter: &ScopeFilter,
    q: &[f32],
    k: usize,
) -> Vec<(String, f32)> {
    idx.search(filter, q, k, &[UnitKind::Turn], stored)
        .unwrap()
        .into_iter()
        .map(|h| (h.unit.as_str().to_string(), h.score))
        .collect()
}

#[test]
fn a_graph_finds_what_the_exact_scan_finds_with_exact_scores() {
    let dir = tempfile::tempdir().unwrap();
    let mut vectors = Vectors::new();
    let all = units(&mut vectors, 1, 3_000);
    let mut exact = VectorIndex::default();
    exact.load_user("u", "m", all.clone()).unwrap();
    let mut approx = VectorIndex::new(graph(dir.path()));
    approx.load_user("u", "m", all.clone()).unwrap();
    assert_eq!(files(dir.path(), "usearch").len(), 1, "the graph is saved");

    let (mut found, mut wanted) = (0, 0);
    for filter in [
        ScopeFilter::user("u"),
        ScopeFilter {
            agent_id: Some("a".into()),
            ..ScopeFilter::user("u")
        },
    ] {
        for _ in 0..40 {
            let q = vectors.near_a_centre();
            let truth = search(&exact, &all, &filter, &q, 10);
            let got = search(&approx, &all, &filter, &q, 10);
            assert_eq!(got.len(), 10);
            for (id, score) in &got {
                // Whatever the graph proposes is scored exactly, and only units the filter admits.
                let exact_score = search(&exact, &all, &filter, &q, 3_000)
                    .into_iter()
                    .find(|(i, _)| i == id)
                    .map(|(_, s)| s);
                assert_eq!(exact_score, Some(*score), "{id}");
            }
            wanted += truth.len();
            found += truth.iter().filter(|t| got.contains(t)).count();
        }
    }
    let recall = found as f64 / wanted as f64;
    assert!(recall >= 0.95, "recall@10 against the exact scan: {recall}");
}

#[test]
fn a_saved_graph_is_reopened_caught_up_and_rebuilt_only_when_it_does_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    let mut vectors = Vectors::new();
    let first = units(&mut vectors, 1, 1_000);
    let q = vectors.random_unit();
    let user = ScopeFilter::user("u");
    let mut idx = VectorIndex::new(graph(dir.path()));
    idx.load_user("u", "m", first.clone()).unwrap();
    let graph_file = files(dir.path(), "usearch").pop().unwrap();
    let saved_at = std::fs::metadata(&graph_file).unwrap().modified().unwrap();
    let before = search(&idx, &first, &user, &q, 10);

    // A few units more: searched at once, too few to save the graph again.
    let mut needle = unit(5_000, &Scope::user("u").unwrap(), vec![q.clone()]);
    needle.id = "needle".into();
    let mut store = first.clone();
    store.push(needle.clone());
    idx.append("u", vec![needle]).unwrap();
    assert_eq!(search(&idx, &store, &user, &q, 1)[0].0, "needle");
    assert_eq!(idx.held_through("u"), Some(("m".to_string(), 5_000, 0)));
    assert_eq!(
        std::fs::metadata(&graph_file).unwrap().modified().unwrap(),
        saved_at
    );

    // Reopened over the store it was saved from: taken as it is, not written again.
    let mut same = VectorIndex::new(graph(dir.path()));
    same.load_user("u", "m", first.clone()).unwrap();
    assert_eq!(search(&same, &first, &user, &q, 10), before);
    assert_eq!(
        std::fs::metadata(&graph_file).unwrap().modified().unwrap(),
        saved_at
    );

    // Reopened over the store with the needle: the saved graph is caught up with it (and saved).
    let mut reopened = VectorIndex::new(graph(dir.path()));
    reopened.load_user("u", "m", store.clone()).unwrap();
    assert_eq!(search(&reopened, &store, &user, &q, 1)[0].0, "needle");
    let caught_up_at = std::fs::metadata(&graph_file).unwrap().modified().unwrap();
    assert_ne!(caught_up_at, saved_at);

    // A store without the unit the graph names last (an older copy of the store), one holding
    // another unit at that place, or a graph of another model: rebuilt, the same answers.
    let overlap = |got: Vec<(String, f32)>| got.iter().filter(|h| before.contains(h)).count();
    let mut older = VectorIndex::new(graph(dir.path()));
    older.load_user("u", "m", first.clone()).unwrap();
    assert_eq!(search(&older, &first, &user, &q, 1)[0].0, before[0].0);
    assert!(
        search(&older, &first, &user, &q, 10)
            .iter()
            .all(|h| h.0 != "needle"),
        "nothing of the graph that held the needle is kept"
    );
    let renamed: Vec<UnitVectors> = first
        .iter()
        .cloned()
        .map(|mut u| {
            u.id = format!("other{}", u.seq);
            u
        })
        .collect();
    let mut other_store = VectorIndex::new(graph(dir.path()));
    other_store.load_user("u", "m", renamed.clone()).unwrap();
    let found = search(&other_store, &renamed, &user, &q, 10);
    assert!(found.iter().all(|h| h.0.starts_with("other")), "{found:?}");
    let mut other_model = VectorIndex::new(graph(dir.path()));
    other_model.load_user("u", "m2", first.clone()).unwrap();
    // A graph is approximate and built in parallel: another build may differ at the margin.
    assert!(overlap(search(&other_model, &first, &user, &q, 10)) >= 8);

    // A save cut short (a graph written, no meta) is rebuilt too.
    for meta in files(dir.path(), "json") {
        std::fs::remove_file(meta).unwrap();
    }
    let mut cut = VectorIndex::new(graph(dir.path()));
    cut.load_user("u", "m", first.clone()).unwrap();
    assert!(overlap(search(&cut, &first, &user, &q, 10)) >= 8);
    assert_eq!(files(dir.path(), "json").len(), 1);
}

#[test]
fn removing_a_users_files_leaves_nothing_of_them_and_others_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let mut vectors = Vectors::new();
    let mut idx = VectorIndex::new(graph(dir.path()));
    idx.load_user("u", "m", units(&mut vectors, 1, 800))
        .unwrap();
    let other: Vec<UnitVectors> = units(&mut vectors, 1, 800)
        .into_iter()
        .map(|mut u| {
            u.scope = Scope::user("v").unwrap();
            u
        })
        .collect();
    idx.load_user("v", "m", other).unwrap();
    assert_eq!(files(dir.path(), "usearch").len(), 2);
    assert_eq!(
        idx.check_files(&|_| true, &|_, _, _, _, _| true).unwrap(),
        2
    );
    // A graph of a user the store no longer holds is an error for `aril check`.
    let err = idx
        .check_files(&|user| user == "v", &|_, _, _, _, _| true)
        .unwrap_err();
    assert!(
        err.to_string().contains("whom the store does not hold"),
        "{err}"
    );
    // So is a graph naming as its last unit one the store does not hold (another store's).
    let err = idx
        .check_files(&|_| true, &|user, _, _, _, _| user == "v")
        .unwrap_err();
    assert!(
        err.to_string().contains("another copy of the store"),
        "{err}"
    );
    idx.remove_files("u").unwrap();
    assert_eq!(
        idx.check_files(&|user| user == "v", &|_, _, _, _, _| true)
            .unwrap(),
        1
    );
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 2, "v's graph and meta stay");
    assert!(
        std::fs::read_to_string(files(dir.path(), "json").pop().unwrap())
            .unwrap()
            .contains("\"user\":\"v\"")
    );
    idx.clear().unwrap();
    assert!(!dir.path().exists());
}

#[test]
fn more_searches_at_once_than_the_graph_has_contexts_all_answer() {
    let dir = tempfile::tempdir().unwrap();
    let mut vectors = Vectors::new();
    let all = units(&mut vectors, 1, 4_000);
    let mut idx = VectorIndex::new(graph(dir.path()));
    idx.load_user("u", "m", all.clone()).unwrap();
    let queries: Vec<Vec<f32>> = (0..16).map(|_| vectors.near_a_centre()).collect();
    let (idx, all) = (&idx, &all);
    std::thread::scope(|s| {
        for q in &queries {
            // Deep searches (600 candidates each) overlap on every core.
            s.spawn(move || {
                for _ in 0..30 {
                    assert_eq!(search(idx, all, &ScopeFilter::user("u"), q, 200).len(), 200);
                }
            });
        }
    });
}
