//! An approximate nearest-neighbour graph (HNSW, `usearch`, 8-bit scalars) over the chunk vectors
//! of one user's units of one kind, kept in the data directory so a large scope opens without
//! rebuilding it. It only proposes candidates: [`crate::VectorIndex`] rescores them with the
//! exact f32 vectors, so its 8-bit copies never decide a score.
//!
//! A chunk's key is its unit's store order and its place in the unit ([`chunk_key`]), so keys stay
//! valid whatever else is loaded or deleted. Files: `<stem>.usearch` (the graph) and `<stem>.json`
//! ([`AnnMeta`]: whose vectors, up to which unit, how many). A save writes the graph to a
//! temporary file, removes the meta, renames the graph and writes the meta last: a `kill -9` at
//! any point leaves either a meta that describes its graph or no meta, and no meta means a
//! rebuild. Graphs are only ever added to: [`Ann::remove_files`] runs before a deletion reaches
//! the store (the next load rebuilds the graph from what remains), so no file keeps a deleted
//! vector. A saved graph opens as a memory-mapped view, searched in place (a million-turn scope
//! is searchable without reading its graph into memory); its first add loads it whole.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};

use aril_core::UnitKind;
use serde::{Deserialize, Serialize};
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use crate::IndexError;

/// Chunks of one unit the graph holds at most; a unit's later chunks are still scored when the
/// unit is a candidate (rescoring reads every chunk).
pub(crate) const MAX_CHUNKS_PER_UNIT: usize = 1 << CHUNK_BITS;
const CHUNK_BITS: u32 = 12;
/// 2: the meta names its last unit (checked against the store instead of counting chunks).
const FORMAT: u32 = 2;

/// The graph's key of chunk `chunk` of the unit with store order `seq`.
pub(crate) fn chunk_key(seq: i64, chunk: usize) -> u64 {
    ((seq as u64) << CHUNK_BITS) | chunk as u64
}

/// The store order of the unit a key belongs to.
pub(crate) fn key_seq(key: u64) -> i64 {
    (key >> CHUNK_BITS) as i64
}

/// What a graph file holds, written beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AnnMeta {
    format: u32,
    #[serde(flatten)]
    owner: AnnOwner,
    /// Every chunk of the units up to this store order is in the graph, none after it.
    last_seq: i64,
    /// The id of the unit at `last_seq`: a store that holds another unit there (or none) is
    /// not the one the graph was built from. (Absent from format 1, which is rebuilt.)
    #[serde(default)]
    last_id: String,
    /// Chunks in the graph.
    size: usize,
    /// Bytes of the graph file.
    bytes: u64,
}

/// Whose vectors a graph holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AnnOwner {
    pub(crate) user: String,
    pub(crate) kind: UnitKind,
    pub(crate) model: String,
    pub(crate) dim: usize,
}

/// The file stem of a user's graph of `kind` inside `dir`: the user id hashed (ids may hold any
/// character), the kind in clear.
fn stem(dir: &Path, user: &str, kind: UnitKind) -> PathBuf {
    let hash = blake3::hash(user.as_bytes()).to_hex();
    dir.join(format!("{}-{}", &hash[..24], kind.as_str()))
}

/// One user's graph of one kind, in memory, with where it is saved.
pub(crate) struct Ann {
    index: Index,
    owner: AnnOwner,
    stem: PathBuf,
    pub(crate) last_seq: i64,
    last_id: String,
    /// Chunks added since the last save.
    unsaved: usize,
    contexts: Contexts,
    /// Whether `index` is a memory-mapped view of the saved file (as opened): searched in
    /// place, read from the page cache as needed, and loaded whole only when a chunk is added
    /// (a view takes none).
    viewed: bool,
}

/// usearch searches in one of a fixed number of thread contexts and fails when all are taken;
/// a search here waits for a free one instead. Hand-written: a counting semaphore is ten lines
/// over `Mutex` + `Condvar`, and the async ones (tokio) do not fit this synchronous path.
struct Contexts {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Contexts {
    /// Contexts per graph: twice the cores, so searches beyond the cores queue on the CPU
    /// rather than here.
    fn count() -> usize {
        2 * std::thread::available_parallelism().map_or(2, |n| n.get())
    }

    fn new() -> Self {
        Self {
            free: Mutex::new(Self::count()),
            freed: Condvar::new(),
        }
    }

    /// Runs `f` holding one context (given back even if `f` panics).
    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        while *free == 0 {
            free = self
                .freed
                .wait(free)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *free -= 1;
        drop(free);
        let _held = Held(self);
        f()
    }
}

/// One context taken from [`Contexts`], given back when dropped.
struct Held<'a>(&'a Contexts);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.0.freed.notify_one();
    }
}

fn options(dim: usize) -> IndexOptions {
    IndexOptions {
        dimensions: dim,
        // Vectors are unit length: the inner product is the cosine.
        metric: MetricKind::IP,
        quantization: ScalarKind::I8,
        connectivity: 0,
        expansion_add: 0,
        expansion_search: 0,
        multi: false,
    }
}

fn ann_error(stem: &Path, what: &str, cause: impl std::fmt::Display) -> IndexError {
    IndexError::VectorFile {
        path: stem.display().to_string(),
        reason: format!("{what}: {cause}"),
    }
}

impl Ann {
    /// An empty graph for `owner`, saved under `dir`.
    pub(crate) fn new(dir: &Path, owner: AnnOwner) -> Result<Self, IndexError> {
        let stem = stem(dir, &owner.user, owner.kind);
        let index = Index::new(&options(owner.dim)).map_err(|e| ann_error(&stem, "creating", e))?;
        Ok(Self {
            index,
            owner,
            stem,
            last_seq: 0,
            last_id: String::new(),
            unsaved: 0,
            contexts: Contexts::new(),
            viewed: false,
        })
    }

    /// The saved graph of `user`'s units of `kind` under `model`, if a complete one of at least
    /// `min_size` chunks is there and `fits` says the store holds the unit it names last (store
    /// order and id). Anything else — no file, another model or format, a file cut short,
    /// another store, a graph smaller than graphs are now wanted — is `None`: the caller
    /// reads the units from the store (and builds a graph if they are enough).
    pub(crate) fn open(
        dir: &Path,
        (user, kind, model): (&str, UnitKind, &str),
        min_size: usize,
        fits: impl FnOnce(i64, &str) -> bool,
    ) -> Option<Self> {
        let stem = stem(dir, user, kind);
        let meta: AnnMeta = match fs::read(stem.with_extension("json")) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| tracing::warn!(path = %stem.display(), "unreadable vector graph meta, rebuilding: {e}"))
                .ok()?,
            Err(_) => return None,
        };
        let graph = stem.with_extension("usearch");
        let bytes = fs::metadata(&graph).ok()?.len();
        if meta.size < min_size {
            return None;
        }
        let fits = meta.format == FORMAT
            && meta.owner.user == user
            && meta.owner.kind == kind
            && meta.owner.model == model
            && meta.bytes == bytes
            && fits(meta.last_seq, &meta.last_id);
        if !fits {
            tracing::info!(path = %stem.display(), "vector graph does not match the store; rebuilding it");
            return None;
        }
        let index = Index::new(&options(meta.owner.dim)).ok()?;
        // Viewed, not loaded: a large graph is searched at once (its pages come from the page
        // cache as searches reach them) and costs memory only for the pages read.
        if let Err(e) = index.view(&graph.to_string_lossy()) {
            tracing::warn!(path = %graph.display(), "unreadable vector graph, rebuilding: {e}");
            return None;
        }
        if index.size() != meta.size
            || index
                .reserve_capacity_and_threads(index.size().max(1024), Contexts::count())
                .is_err()
        {
            return None;
        }
        Some(Self {
            index,
            owner: meta.owner,
            stem,
            last_seq: meta.last_seq,
            last_id: meta.last_id,
            unsaved: 0,
            contexts: Contexts::new(),
            viewed: true,
        })
    }

    /// Chunks in the graph.
    pub(crate) fn size(&self) -> usize {
        self.index.size()
    }

    /// Floats per vector.
    pub(crate) fn dim(&self) -> usize {
        self.owner.dim
    }

    /// Adds chunks (`key`, unit-length vector); `last` is the unit (store order, id) with the
    /// highest order now held. Many chunks (a build) are inserted from one thread per core.
    pub(crate) fn add(
        &mut self,
        chunks: &[(u64, &[f32])],
        last: (i64, &str),
    ) -> Result<(), IndexError> {
        if self.viewed {
            // The file is the graph as viewed: the data directory has one owner, and a save
            // replaces the file by a rename, which a view does not see.
            let graph = self.stem.with_extension("usearch");
            self.index
                .load(&graph.to_string_lossy())
                .map_err(|e| ann_error(&self.stem, "loading the viewed graph to add to it", e))?;
            self.viewed = false;
        }
        let need = self.index.size() + chunks.len();
        if need > self.index.capacity() {
            self.index
                .reserve_capacity_and_threads(
                    need.max(2 * self.index.capacity()).max(1024),
                    Contexts::count(),
                )
                .map_err(|e| ann_error(&self.stem, "reserving", e))?;
        }
        // Fewer threads than contexts: no insert waits for one.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let part = chunks.len().div_ceil(threads).max(1_000);
        let index = &self.index;
        let added: Result<(), String> = std::thread::scope(|s| {
            let workers: Vec<_> = chunks
                .chunks(part)
                .map(|part| {
                    s.spawn(move || {
                        part.iter()
                            .try_for_each(|(key, v)| index.add(*key, v).map_err(|e| e.to_string()))
                    })
                })
                .collect();
            workers
                .into_iter()
                .try_for_each(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        });
        added.map_err(|e| ann_error(&self.stem, "adding a vector", e))?;
        self.unsaved += chunks.len();
        if last.0 > self.last_seq {
            self.last_seq = last.0;
            self.last_id = last.1.to_string();
        }
        Ok(())
    }

    /// The `count` keys nearest `query` (by their 8-bit copies) that `keep` admits. usearch
    /// explores at least `count` candidates (its expansion is the larger of both).
    pub(crate) fn search(
        &self,
        query: &[f32],
        count: usize,
        keep: Option<&dyn Fn(u64) -> bool>,
    ) -> Result<Vec<u64>, IndexError> {
        let found = self.contexts.with(|| match keep {
            None => self.index.search(query, count),
            Some(keep) => self.index.filtered_search(query, count, keep),
        });
        found
            .map(|m| m.keys)
            .map_err(|e| ann_error(&self.stem, "searching", e))
    }

    /// Whether the graph has changed enough since its last save to save it again: a tenth of
    /// its size, and at least a few thousand chunks (a save writes the whole graph).
    pub(crate) fn worth_saving(&self) -> bool {
        self.unsaved >= (self.index.size() / 10).max(2_000)
    }

    /// Writes the graph and its meta (see the module doc for the order that survives a kill).
    pub(crate) fn save(&mut self) -> Result<(), IndexError> {
        let io = |what: &str, e: std::io::Error| ann_error(&self.stem, what, e);
        if let Some(parent) = self.stem.parent() {
            fs::create_dir_all(parent).map_err(|e| io("creating the directory", e))?;
        }
        let graph = self.stem.with_extension("usearch");
        let meta_path = self.stem.with_extension("json");
        let tmp = self.stem.with_extension("usearch.tmp");
        self.index
            .save(&tmp.to_string_lossy())
            .map_err(|e| ann_error(&self.stem, "saving", e))?;
        fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| io("syncing", e))?;
        remove_if_there(&meta_path).map_err(|e| io("removing the old meta", e))?;
        fs::rename(&tmp, &graph).map_err(|e| io("renaming", e))?;
        let meta = AnnMeta {
            format: FORMAT,
            owner: self.owner.clone(),
            last_seq: self.last_seq,
            last_id: self.last_id.clone(),
            size: self.index.size(),
            bytes: fs::metadata(&graph).map_err(|e| io("reading", e))?.len(),
        };
        let meta_tmp = self.stem.with_extension("json.tmp");
        let mut file = fs::File::create(&meta_tmp).map_err(|e| io("writing the meta", e))?;
        file.write_all(&serde_json::to_vec(&meta).unwrap_or_default())
            .and_then(|()| file.sync_all())
            .map_err(|e| io("writing the meta", e))?;
        fs::rename(&meta_tmp, &meta_path).map_err(|e| io("renaming the meta", e))?;
        if let Some(parent) = self.stem.parent() {
            fs::File::open(parent)
                .and_then(|d| d.sync_all())
                .map_err(|e| io("syncing the directory", e))?;
        }
        self.unsaved = 0;
        Ok(())
    }

    /// Removes the saved graph files of `user` (before a deletion reaches the store).
    pub(crate) fn remove_files(dir: &Path, user: &str) -> Result<(), IndexError> {
        for kind in [UnitKind::Turn, UnitKind::Segment] {
            let stem = stem(dir, user, kind);
            for ext in ["json", "usearch", "usearch.tmp", "json.tmp"] {
                let path = stem.with_extension(ext);
                remove_if_there(&path).map_err(|e| ann_error(&stem, "removing", e))?;
            }
        }
        Ok(())
    }
}

/// What the store must hold for a graph to describe it: its user, and the unit the graph names
/// last (user, kind, model, store order, id).
pub(crate) struct GraphChecks<'a> {
    pub(crate) known: &'a dyn Fn(&str) -> bool,
    pub(crate) holds_last: &'a dyn Fn(&str, UnitKind, &str, i64, &str) -> bool,
}

/// Checks every saved graph in `dir` (`aril check`): its meta reads, its graph file has the
/// size the meta says, its user is one the store holds (a graph of a user the store no longer
/// holds would keep deleted vectors), and the store holds the unit it names last (else it is a
/// graph of another store). Returns how many graphs were checked.
pub(crate) fn check_files(dir: &Path, checks: &GraphChecks<'_>) -> Result<usize, IndexError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(ann_error(dir, "listing", e)),
    };
    let mut checked = 0;
    for entry in entries {
        let path = entry.map_err(|e| ann_error(dir, "listing", e))?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let bad = |reason: String| IndexError::VectorFile {
            path: path.display().to_string(),
            reason,
        };
        let meta: AnnMeta = fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
            .map_err(|e| bad(format!("unreadable meta: {e}")))?;
        if !(checks.known)(&meta.owner.user) {
            return Err(bad(format!(
                "holds vectors of user {:?}, whom the store does not hold",
                meta.owner.user
            )));
        }
        let graph = path.with_extension("usearch");
        let bytes = fs::metadata(&graph).map(|m| m.len()).unwrap_or(0);
        if bytes != meta.bytes {
            return Err(bad(format!(
                "its graph has {bytes} bytes where the meta says {}",
                meta.bytes
            )));
        }
        let o = &meta.owner;
        if !(checks.holds_last)(&o.user, o.kind, &o.model, meta.last_seq, &meta.last_id) {
            return Err(bad(format!(
                "names as its last unit {:?} at store order {}, which the store does not hold \
                 (a graph of another copy of the store)",
                meta.last_id, meta.last_seq
            )));
        }
        checked += 1;
    }
    Ok(checked)
}

fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
