//! all-MiniLM-L6-v2 on ONNX Runtime: reads `model.onnx` (written from the model's safetensors by
//! `scripts/fetch-model`), `tokenizer.json` and `config.json` from a local directory and runs the
//! graph, which mean-pools over the attention mask and L2-normalises exactly as
//! sentence-transformers does. ONNX Runtime itself is loaded at run time from the
//! `libonnxruntime.so` that the PyPI `onnxruntime` wheel ships (see [`default_runtime_path`]).
//!
//! Sessions of one graph share its weights' packed copies. Questions run on sessions of their
//! own, one per core, each on its caller's thread, so a search never waits behind a bulk
//! embedding and concurrent searches each keep a core; by default those run
//! `model-questions-int8.onnx`, the same graph with 8-bit weights (per output channel), which
//! `scripts/fetch-model` writes: a question embeds in about half the time, at a cosine of ~0.995
//! to the full model's vector and the same recall (docs/benchmarks-scale.md). Stored texts run on
//! the full weights by default, in padded batches (their vectors do not depend on the batch): one
//! session runs large inputs on every core (or on the threads the caller gives), one a small
//! input on its caller's thread alone. [`MiniLmOptions::stored`] may put them on the 8-bit graph
//! too, at about three times the throughput and within a question of the recall
//! (docs/benchmarks.md): each sequence then runs alone on a one-thread session, one session per
//! core, because the graph quantizes its activations with one scale per tensor, so in a padded
//! batch a text's vector would depend on the texts beside it (a cosine of ~0.992 between a text
//! alone and batched); alone it depends on its own pieces only.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use ort::environment::Environment;
use ort::session::Session;
use ort::session::builder::{GraphOptimizationLevel, PrepackedWeights};
use ort::value::Tensor;
use serde::{Deserialize, Serialize};
use tokenizers::Tokenizer;

use crate::{EmbedError, Embedder, Pieces};

pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// The ONNX Runtime release `scripts/fetch-model` installs (from the PyPI wheel of that version).
pub const RUNTIME_VERSION: &str = "1.31.1";
const MAX_PIECES: usize = 256;
/// Sequences per forward pass; larger batches gain little on 2 cores and pad more.
const BATCH: usize = 32;
/// Inputs of at most this many pieces in all run on the one-thread session.
const SMALL_INPUT_PIECES: usize = 128;
/// The files a model directory must hold.
const MODEL_FILES: [&str; 3] = ["model.onnx", "tokenizer.json", "config.json"];
/// The graph with 8-bit weights ([`Weights::Int8`]), written by `scripts/fetch-model` from
/// `model.onnx`.
pub const INT8_MODEL_FILE: &str = "model-questions-int8.onnx";

/// The weights a model runs (for questions or for stored texts: [`MiniLmOptions`], whose
/// defaults differ for the two).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Weights {
    /// [`INT8_MODEL_FILE`]: 8-bit weights, about twice as fast on a CPU, vectors within a
    /// cosine of ~0.995 of the full weights'.
    Int8,
    /// `model.onnx`, the full weights, exactly as sentence-transformers.
    F32,
}

impl Weights {
    /// The tag of vectors stored from these weights ([`Embedder::variant`]).
    pub fn variant(self) -> &'static str {
        match self {
            Weights::Int8 => "int8",
            Weights::F32 => "",
        }
    }

    /// The graph file these weights are in.
    fn file(self) -> &'static str {
        match self {
            Weights::Int8 => INT8_MODEL_FILE,
            Weights::F32 => "model.onnx",
        }
    }
}

/// How [`MiniLm`] runs.
#[derive(Debug, Clone, PartialEq)]
pub struct MiniLmOptions {
    /// The `libonnxruntime.so` to load (one per process).
    pub runtime: PathBuf,
    /// Threads a large input runs on (every core when `None`).
    pub bulk_threads: Option<usize>,
    /// The weights questions run on (vectors compared, never stored).
    pub questions: Weights,
    /// The weights texts to store run on ([`Embedder::embed_pieces`]). Vectors of both weights
    /// are vectors of the same model (one name), told apart in caches by
    /// [`Embedder::variant`].
    pub stored: Weights,
}

impl Default for MiniLmOptions {
    /// ONNX Runtime from [`default_runtime_path`], every core, 8-bit questions, stored texts on
    /// the full weights.
    fn default() -> Self {
        Self {
            runtime: default_runtime_path(),
            bulk_threads: None,
            questions: Weights::Int8,
            stored: Weights::F32,
        }
    }
}

/// Where the model is looked for: `$ARIL_MODEL_DIR`, else `models/all-MiniLM-L6-v2` in the cache
/// root (`$ARIL_CACHE`, else `~/.cache/aril`), where `scripts/fetch-model` puts it.
pub fn default_model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ARIL_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    aril_core::cache_root().join("models").join(MODEL_NAME)
}

/// Where ONNX Runtime is loaded from: `$ARIL_ONNXRUNTIME` (a path to `libonnxruntime.so`), else
/// `onnxruntime/libonnxruntime.so.<RUNTIME_VERSION>` in the cache root, where
/// `scripts/fetch-model` puts it.
pub fn default_runtime_path() -> PathBuf {
    if let Some(path) = std::env::var_os("ARIL_ONNXRUNTIME") {
        return PathBuf::from(path);
    }
    aril_core::cache_root()
        .join("onnxruntime")
        .join(format!("libonnxruntime.so.{RUNTIME_VERSION}"))
}

/// The ONNX Runtime environment of this process, made once from the first library path asked
/// for (a process can load one ONNX Runtime only).
fn environment(library: &Path) -> Result<&'static Environment, EmbedError> {
    static ENVIRONMENT: OnceLock<Result<(PathBuf, Environment), String>> = OnceLock::new();
    let made = ENVIRONMENT.get_or_init(|| {
        if !library.is_file() {
            return Err(format!(
                "{} does not exist. Run `scripts/fetch-model` to install ONNX Runtime \
                 {RUNTIME_VERSION} from its PyPI wheel, or set ARIL_ONNXRUNTIME to a \
                 libonnxruntime.so of version 1.24 or later",
                library.display()
            ));
        }
        let environment = ort::init_from(library)
            .map_err(|e| e.to_string())?
            .with_name("aril")
            .with_telemetry(false)
            .build()
            .map_err(|e| e.to_string())?;
        Ok((library.to_path_buf(), environment))
    });
    match made {
        Ok((loaded, environment)) if loaded == library => Ok(environment),
        Ok((loaded, _)) => Err(EmbedError::Runtime(format!(
            "ONNX Runtime is already loaded from {} in this process; {} cannot be loaded beside it",
            loaded.display(),
            library.display()
        ))),
        Err(reason) => Err(EmbedError::Runtime(reason.clone())),
    }
}

/// Locks a session; a panic in another holder leaves the session itself intact (ONNX Runtime
/// keeps no state between runs), so a poisoned lock is taken over.
fn lock(session: &Mutex<Session>) -> MutexGuard<'_, Session> {
    session.lock().unwrap_or_else(|p| p.into_inner())
}

/// A session if it is free (taken over if poisoned, as [`lock`] does), else `None`.
fn try_lock(session: &Mutex<Session>) -> Option<MutexGuard<'_, Session>> {
    match session.try_lock() {
        Ok(session) => Some(session),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// A vector with the position of its sequence in the caller's list.
type Numbered = (usize, Vec<f32>);

/// How [`MiniLm`] runs the texts to store.
enum StoredRuns {
    /// The full weights, in padded batches: an input of many pieces on every core, a small one
    /// on one thread.
    Batched {
        bulk: Mutex<Session>,
        small: Mutex<Session>,
    },
    /// The 8-bit weights: one-thread sessions, one per core (or per `bulk_threads`), each
    /// running one sequence at a time, so a vector depends on its own pieces only.
    Alone(Vec<Mutex<Session>>),
}

/// The fields of `config.json` the embedder reads.
#[derive(Deserialize)]
struct ModelConfig {
    hidden_size: usize,
}

/// The all-MiniLM-L6-v2 sentence embedder (384 dimensions, 256 word pieces).
pub struct MiniLm {
    /// How texts to store run.
    stored_runs: StoredRuns,
    /// Run questions (on the question weights), each on one thread: one session per core (a
    /// session runs one input at a time).
    questions: Vec<Mutex<Session>>,
    tokenizer: Tokenizer,
    cls: u32,
    sep: u32,
    dim: usize,
}

impl MiniLm {
    /// Loads the model from `dir` with the default [`MiniLmOptions`].
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        Self::load_with(dir, &MiniLmOptions::default())
    }

    /// Loads the model from `dir` as `options` say. A missing file gives an error that says how
    /// to fetch it.
    pub fn load_with(dir: &Path, options: &MiniLmOptions) -> Result<Self, EmbedError> {
        let int8 = (options.questions == Weights::Int8 || options.stored == Weights::Int8)
            .then_some(INT8_MODEL_FILE);
        let missing: Vec<&str> = MODEL_FILES
            .into_iter()
            .chain(int8)
            .filter(|f| !dir.join(f).is_file())
            .collect();
        if !missing.is_empty() {
            return Err(EmbedError::ModelMissing {
                dir: dir.to_path_buf(),
                missing: missing.join(", "),
            });
        }
        let load_err = |reason: String| EmbedError::ModelLoad {
            dir: dir.to_path_buf(),
            reason,
        };
        let config_text = std::fs::read_to_string(dir.join("config.json"))
            .map_err(|e| load_err(e.to_string()))?;
        let config: ModelConfig = serde_json::from_str(&config_text)
            .map_err(|e| load_err(format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| load_err(format!("tokenizer.json: {e}")))?;
        // tokenizer.json ships with truncation and padding at 128; aril chunks instead of
        // truncating.
        tokenizer
            .with_truncation(None)
            .map_err(|e| load_err(e.to_string()))?;
        tokenizer.with_padding(None);
        let special = |name: &str| {
            tokenizer
                .token_to_id(name)
                .ok_or_else(|| load_err(format!("tokenizer has no {name} token")))
        };
        let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);

        let environment = environment(&options.runtime)?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let bulk_threads = options.bulk_threads.unwrap_or(cores).max(1);
        // Sessions of one file share the packed copies of its weights.
        let session = |file: &str, packed: &PrepackedWeights, threads: usize| {
            let model = dir.join(file);
            Session::builder(environment)
                .and_then(|b| Ok(b.with_optimization_level(GraphOptimizationLevel::All)?))
                .and_then(|b| Ok(b.with_intra_threads(threads)?))
                // Idle workers sleep instead of spinning: a server's searches need the cores.
                .and_then(|b| Ok(b.with_intra_op_spinning(false)?))
                .and_then(|b| Ok(b.with_prepacked_weights(packed)?))
                .and_then(|mut b| b.commit_from_file(&model))
                .map_err(|e| load_err(format!("{}: {e}", model.display())))
        };
        let (int8_packed, full_packed) = (PrepackedWeights::new(), PrepackedWeights::new());
        let packed = |weights: Weights| match weights {
            Weights::Int8 => &int8_packed,
            Weights::F32 => &full_packed,
        };
        let questions = (0..cores)
            .map(|_| {
                session(options.questions.file(), packed(options.questions), 1).map(Mutex::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let stored_runs = match options.stored {
            Weights::Int8 => StoredRuns::Alone(
                (0..bulk_threads)
                    .map(|_| session(INT8_MODEL_FILE, &int8_packed, 1).map(Mutex::new))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Weights::F32 => StoredRuns::Batched {
                bulk: Mutex::new(session("model.onnx", &full_packed, bulk_threads)?),
                small: Mutex::new(session("model.onnx", &full_packed, 1)?),
            },
        };
        Ok(Self {
            stored_runs,
            questions,
            tokenizer,
            cls,
            sep,
            dim: config.hidden_size,
        })
    }

    /// The session for an input of `pieces` pieces: a small one takes whichever session is free
    /// (the one-thread session first), a large one the every-core session.
    fn session_for<'a>(
        bulk: &'a Mutex<Session>,
        small: &'a Mutex<Session>,
        pieces: usize,
    ) -> MutexGuard<'a, Session> {
        if pieces > SMALL_INPUT_PIECES {
            return lock(bulk);
        }
        try_lock(small)
            .or_else(|| try_lock(bulk))
            .unwrap_or_else(|| lock(small))
    }

    /// One forward pass over `seqs`, padded to the longest.
    fn forward(&self, session: &mut Session, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inf = |e: ort::Error| EmbedError::Inference(e.to_string());
        let width = seqs.iter().map(|s| s.len()).max().unwrap_or(0) + 2;
        let mut ids = Vec::with_capacity(seqs.len() * width);
        let mut mask = Vec::with_capacity(seqs.len() * width);
        for seq in seqs {
            ids.push(i64::from(self.cls));
            ids.extend(seq.iter().map(|&id| i64::from(id)));
            ids.push(i64::from(self.sep));
            ids.extend(std::iter::repeat_n(0i64, width - seq.len() - 2));
            mask.extend(std::iter::repeat_n(1i64, seq.len() + 2));
            mask.extend(std::iter::repeat_n(0i64, width - seq.len() - 2));
        }
        let shape = [seqs.len(), width];
        let ids = Tensor::from_array((shape, ids)).map_err(inf)?;
        let mask = Tensor::from_array((shape, mask)).map_err(inf)?;
        let outputs = session
            .run(ort::inputs!["input_ids" => ids, "attention_mask" => mask])
            .map_err(inf)?;
        let (shape, values) = outputs["sentence_embedding"]
            .try_extract_tensor::<f32>()
            .map_err(inf)?;
        if shape.len() != 2 || shape[0] as usize != seqs.len() || shape[1] as usize != self.dim {
            return Err(EmbedError::Inference(format!(
                "the model returned shape {shape:?} for {} inputs of dimension {}",
                seqs.len(),
                self.dim
            )));
        }
        Ok(values.chunks_exact(self.dim).map(<[f32]>::to_vec).collect())
    }

    /// Embeds each sequence alone, on every one-thread session at once: each worker takes the
    /// next sequence (longest first) and holds its session for that sequence only, so a small
    /// write meanwhile finds a session free between two of them.
    fn embed_alone(
        &self,
        singles: &[Mutex<Session>],
        seqs: &[&[u32]],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let run = |session: &mut Session, seq: &[u32]| {
            self.forward(session, &[seq])
                .map(|mut v| v.pop().unwrap_or_default())
        };
        let alone = |session: &Mutex<Session>, seq: &[u32]| run(&mut lock(session), seq);
        if seqs.len() == 1 {
            let free = singles.iter().find_map(try_lock);
            if let Some(mut session) = free.or_else(|| singles.first().map(lock)) {
                return Ok(vec![run(&mut session, seqs[0])?]);
            }
        }
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(seqs[i].len()));
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let workers = singles.len().min(seqs.len());
        let done: Vec<Result<Vec<Numbered>, EmbedError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = singles[..workers]
                .iter()
                .map(|session| {
                    let (order, next, failed) = (&order, &next, &failed);
                    scope.spawn(move || {
                        let mut out = Vec::new();
                        while !failed.load(Ordering::Relaxed) {
                            let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) else {
                                break;
                            };
                            match alone(session, seqs[i]) {
                                Ok(v) => out.push((i, v)),
                                Err(e) => {
                                    failed.store(true, Ordering::Relaxed);
                                    return Err(e);
                                }
                            }
                        }
                        Ok(out)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        let mut vectors = vec![Vec::new(); seqs.len()];
        for worker in done {
            for (i, v) in worker? {
                vectors[i] = v;
            }
        }
        Ok(vectors)
    }

    /// A free question session, else the first one once it is free.
    fn question_session(&self) -> Option<MutexGuard<'_, Session>> {
        let free = self.questions.iter().find_map(try_lock);
        free.or_else(|| self.questions.first().map(lock))
    }

    /// Embeds `seqs` in length-sorted batches of [`BATCH`] on `session`.
    fn embed_batches(
        &self,
        mut session: MutexGuard<'_, Session>,
        seqs: &[&[u32]],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Sort by length so each batch pads little, then restore the caller's order.
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        order.sort_by_key(|&i| seqs[i].len());
        let mut out = vec![Vec::new(); seqs.len()];
        for batch in order.chunks(BATCH) {
            let batch_seqs: Vec<&[u32]> = batch.iter().map(|&i| seqs[i]).collect();
            for (&i, v) in batch.iter().zip(self.forward(&mut session, &batch_seqs)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

impl Embedder for MiniLm {
    fn name(&self) -> &str {
        MODEL_NAME
    }

    fn variant(&self) -> &str {
        match self.stored_runs {
            StoredRuns::Batched { .. } => Weights::F32.variant(),
            StoredRuns::Alone(_) => Weights::Int8.variant(),
        }
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn max_pieces(&self) -> usize {
        MAX_PIECES
    }

    fn tokenize(&self, text: &str) -> Result<Pieces, EmbedError> {
        let enc = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| EmbedError::Tokenize(e.to_string()))?;
        Ok(Pieces {
            ids: enc.get_ids().to_vec(),
            spans: enc.get_offsets().to_vec(),
        })
    }

    fn embed_pieces(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if !fits(seqs)? {
            return Ok(Vec::new());
        }
        match &self.stored_runs {
            StoredRuns::Alone(singles) => self.embed_alone(singles, seqs),
            StoredRuns::Batched { bulk, small } => {
                let pieces: usize = seqs.iter().map(|s| s.len()).sum();
                self.embed_batches(Self::session_for(bulk, small, pieces), seqs)
            }
        }
    }

    fn embed_question_pieces(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if !fits(seqs)? {
            return Ok(Vec::new());
        }
        match self.question_session() {
            Some(session) => self.embed_batches(session, seqs),
            None => self.embed_pieces(seqs),
        }
    }
}

/// Whether there is anything to embed in `seqs`, or an error when a sequence is longer than the
/// model reads.
fn fits(seqs: &[&[u32]]) -> Result<bool, EmbedError> {
    let max = MAX_PIECES - 2;
    if let Some(long) = seqs.iter().find(|s| s.len() > max) {
        return Err(EmbedError::TooLong {
            got: long.len(),
            max,
        });
    }
    Ok(!seqs.is_empty())
}
