//! Builds (or goes on building) one store of the scale benchmark: the first `size` turns of the
//! [`Corpus`] stream in one scope, committed in batches, with a progress file beside the data so an
//! interrupted build goes on from its count. An embedded store of a size starts as a copy of the
//! largest smaller store already built (its turns are the stream's first ones too).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use aril_core::{Scope, ScopeFilter};
use aril_embed::Embedder;
use aril_engine::{Config, Engine, IngestOptions, SearchRequest, StoreAt};
use serde::{Deserialize, Serialize};

use super::corpus::Corpus;
use crate::BenchError;

/// Turns committed per ingest call (the engine batches inside it too).
const BATCH: usize = 2000;
/// The progress file inside a size's directory.
const PROGRESS: &str = "scale-progress.json";

/// How far a store's build has come.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Progress {
    /// Stream turns committed (the first `turns` of the stream).
    pub turns: usize,
    /// Seconds spent ingesting them, over every run that built this store (and the store it was
    /// copied from).
    pub ingest_s: f64,
    /// Texts the model embedded for them (repeated texts come from the embedding cache).
    pub embedded_texts: usize,
    /// Seconds the last build run's closing search took: it loads the scope's vectors and, for
    /// a large scope, builds and saves its graph (or opens the saved one).
    #[serde(default)]
    pub index_s: f64,
}

impl Progress {
    fn read(dir: &Path) -> Result<Option<Self>, BenchError> {
        let path = dir.join(PROGRESS);
        match std::fs::read_to_string(&path) {
            Ok(text) => crate::parse_json(&path, &text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(format!("reading {}", path.display()), e)),
        }
    }

    /// Written whole or not at all (a new file renamed over the old).
    fn write(&self, dir: &Path) -> Result<(), BenchError> {
        let path = dir.join(PROGRESS);
        let tmp = dir.join(format!("{PROGRESS}.new"));
        let text = serde_json::to_string(self).unwrap_or_default();
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| io(format!("writing {}", path.display()), e))
    }
}

fn io(what: String, cause: std::io::Error) -> BenchError {
    BenchError::Io { what, cause }
}

/// Where the stores of one scale run live, and the scope each size's turns go into.
pub struct Layout {
    pub root: PathBuf,
    pub store: StoreAt,
}

impl Layout {
    /// A size's data directory (the store itself when embedded; derived files and the lock
    /// with PostgreSQL).
    pub fn dir(&self, size: usize) -> PathBuf {
        self.root.join(size.to_string())
    }

    /// A size's scope: one per directory when embedded; one per size in the shared database with
    /// PostgreSQL, so the sizes share its embedding cache.
    pub fn scope(&self, size: usize) -> Result<Scope, BenchError> {
        let user = match self.store {
            StoreAt::Embedded => "scale".to_string(),
            StoreAt::Postgres(_) => format!("scale-{size}"),
        };
        Scope::user(user).map_err(|e| BenchError::data(&self.root, e.0))
    }

    /// How far the store of `size` has been built (nothing when it was never started).
    pub fn progress(&self, size: usize) -> Result<Progress, BenchError> {
        Ok(Progress::read(&self.dir(size))?.unwrap_or_default())
    }

    /// Starts an embedded store of `size` as a copy of the largest smaller one already built,
    /// whole (copied under a temporary name, then renamed). Nothing when it exists already or
    /// the store is PostgreSQL.
    fn seed(&self, size: usize) -> Result<(), BenchError> {
        let dir = self.dir(size);
        if self.store != StoreAt::Embedded || dir.exists() {
            return Ok(());
        }
        let mut built: Vec<(usize, PathBuf)> = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&self.root) {
            for e in entries.flatten() {
                let Some(n) = e.file_name().to_str().and_then(|s| s.parse::<usize>().ok()) else {
                    continue;
                };
                if n < size && Progress::read(&e.path())?.is_some_and(|p| p.turns == n) {
                    built.push((n, e.path()));
                }
            }
        }
        let Some((_, from)) = built.into_iter().max_by_key(|(n, _)| *n) else {
            return Ok(());
        };
        let tmp = self.root.join(format!("{size}.copying"));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp)
                .map_err(|e| io(format!("removing {}", tmp.display()), e))?;
        }
        copy_dir(&from, &tmp)?;
        std::fs::rename(&tmp, &dir).map_err(|e| {
            io(
                format!("renaming {} to {}", tmp.display(), dir.display()),
                e,
            )
        })
    }
}

/// Copies a directory tree (files and directories only; a data directory holds nothing else).
fn copy_dir(from: &Path, to: &Path) -> Result<(), BenchError> {
    std::fs::create_dir_all(to).map_err(|e| io(format!("creating {}", to.display()), e))?;
    let entries =
        std::fs::read_dir(from).map_err(|e| io(format!("reading {}", from.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io(format!("reading {}", from.display()), e))?;
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(|e| {
                io(
                    format!("copying {} to {}", entry.path().display(), target.display()),
                    e,
                )
            })?;
        }
    }
    Ok(())
}

/// Builds the store of `size` up to its size, from wherever it stands. `progress(done, size)`
/// follows the turns committed; `cancel` stops between batches, keeping what is committed (the
/// next build goes on from there).
pub fn build(
    layout: &Layout,
    corpus: &Corpus,
    size: usize,
    config: &Config,
    model: Arc<dyn Embedder>,
    progress: &mut dyn FnMut(usize, usize),
    cancel: &AtomicBool,
) -> Result<Progress, BenchError> {
    std::fs::create_dir_all(&layout.root)
        .map_err(|e| io(format!("creating {}", layout.root.display()), e))?;
    layout.seed(size)?;
    let dir = layout.dir(size);
    let mut done = layout.progress(size)?;
    progress(done.turns, size);
    std::fs::create_dir_all(&dir).map_err(|e| io(format!("creating {}", dir.display()), e))?;
    let scope = layout.scope(size)?;
    let mut engine = Engine::open_at(&dir, &layout.store, config.clone(), Some(model))?;
    while done.turns < size {
        if cancel.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(BenchError::BuildInterrupted);
        }
        let to = (done.turns + BATCH).min(size);
        let turns = corpus.turns(&scope, done.turns, to);
        let started = Instant::now();
        let report = engine.ingest(
            turns,
            // The last batch closes the open segment: a built store has none pending.
            &IngestOptions {
                flush: to == size,
                ..Default::default()
            },
            &mut |_| {},
            cancel,
        )?;
        if report.interrupted {
            return Err(BenchError::BuildInterrupted);
        }
        done.turns = to;
        done.ingest_s += started.elapsed().as_secs_f64();
        done.embedded_texts += report.embedded_texts;
        done.write(&dir)?;
        progress(done.turns, size);
    }
    // One search readies what searches need beyond the store (a large scope's saved graph), so
    // the measuring process finds the directory as a served one would be.
    let started = Instant::now();
    engine.search(&SearchRequest {
        filter: ScopeFilter::user(scope.user_id),
        query: "what did I say".into(),
        k: Some(1),
        budget: None,
        asked_at: None,
        condition: None,
        threshold: None,
    })?;
    done.index_s = started.elapsed().as_secs_f64();
    done.write(&dir)?;
    Ok(done)
}
