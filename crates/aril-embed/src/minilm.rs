//! all-MiniLM-L6-v2 on candle: reads `model.safetensors`, `tokenizer.json` and `config.json` from a
//! local directory, runs BERT on the CPU, mean-pools over the attention mask and L2-normalises,
//! exactly as sentence-transformers does.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::Tokenizer;

use crate::{EmbedError, Embedder, Pieces, normalize};

pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
const MAX_PIECES: usize = 256;
/// Sequences per forward pass; larger batches gain little on 2 cores and pad more.
const BATCH: usize = 32;

/// Where the model is looked for: `$ARIL_MODEL_DIR`, else `models/all-MiniLM-L6-v2` in the cache
/// root (`$ARIL_CACHE`, else `~/.cache/aril`), where `scripts/fetch-model` puts it.
pub fn default_model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ARIL_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    aril_core::cache_root().join("models").join(MODEL_NAME)
}

/// The all-MiniLM-L6-v2 sentence embedder (384 dimensions, 256 word pieces).
pub struct MiniLm {
    model: BertModel,
    tokenizer: Tokenizer,
    cls: u32,
    sep: u32,
    dim: usize,
    device: Device,
}

impl MiniLm {
    /// Loads the model from `dir`; a missing file gives an error that says how to fetch it.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let missing: Vec<&str> = ["model.safetensors", "tokenizer.json", "config.json"]
            .into_iter()
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
        let config: Config = serde_json::from_str(&config_text)
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
        let device = Device::Cpu;
        // SAFETY: the weights file is memory-mapped read-only; aril never writes to the model
        // directory, and the user is told not to change the files while aril runs.
        let vb = unsafe {
            VarBuilder::from_mmaped_safetensors(
                &[dir.join("model.safetensors")],
                DType::F32,
                &device,
            )
        }
        .map_err(|e| load_err(e.to_string()))?;
        let model = BertModel::load(vb, &config).map_err(|e| load_err(e.to_string()))?;
        Ok(Self {
            model,
            tokenizer,
            cls,
            sep,
            dim: config.hidden_size,
            device,
        })
    }

    fn forward(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inf = |e: candle_core::Error| EmbedError::Inference(e.to_string());
        let width = seqs.iter().map(|s| s.len()).max().unwrap_or(0) + 2;
        let mut ids = Vec::with_capacity(seqs.len() * width);
        let mut mask = Vec::with_capacity(seqs.len() * width);
        for seq in seqs {
            ids.push(self.cls);
            ids.extend_from_slice(seq);
            ids.push(self.sep);
            ids.extend(std::iter::repeat_n(0, width - seq.len() - 2));
            mask.extend(std::iter::repeat_n(1u32, seq.len() + 2));
            mask.extend(std::iter::repeat_n(0u32, width - seq.len() - 2));
        }
        let shape = (seqs.len(), width);
        let ids = Tensor::from_vec(ids, shape, &self.device).map_err(inf)?;
        let mask = Tensor::from_vec(mask, shape, &self.device).map_err(inf)?;
        let types = ids.zeros_like().map_err(inf)?;
        let hidden = self.model.forward(&ids, &types, Some(&mask)).map_err(inf)?;
        // Mean pooling over the attention mask (sentence-transformers' Pooling, mean mode).
        let mask_f = mask
            .to_dtype(DType::F32)
            .and_then(|m| m.unsqueeze(2))
            .map_err(inf)?;
        let summed = hidden
            .broadcast_mul(&mask_f)
            .and_then(|h| h.sum(1))
            .map_err(inf)?;
        let counts = mask_f.sum(1).map_err(inf)?;
        let pooled = summed.broadcast_div(&counts).map_err(inf)?;
        let mut rows: Vec<Vec<f32>> = pooled.to_vec2().map_err(inf)?;
        rows.iter_mut().for_each(|r| normalize(r));
        Ok(rows)
    }
}

impl Embedder for MiniLm {
    fn name(&self) -> &str {
        MODEL_NAME
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
        let max = MAX_PIECES - 2;
        if let Some(long) = seqs.iter().find(|s| s.len() > max) {
            return Err(EmbedError::TooLong {
                got: long.len(),
                max,
            });
        }
        let pieces: usize = seqs.iter().map(|s| s.len()).sum();
        if pieces <= SMALL_INPUT_PIECES {
            // A question: the threads' handshakes cost more than splitting its small products
            // saves, and concurrent searches each keep a core instead of contending for both.
            return ON_CALLING_THREAD.with(|pool| match pool {
                Some(pool) => pool.install(|| self.embed_batches(seqs)),
                None => self.embed_batches(seqs),
            });
        }
        self.embed_batches(seqs)
    }
}

/// Inputs of at most this many pieces in all are embedded on the calling thread alone.
const SMALL_INPUT_PIECES: usize = 128;

thread_local! {
    /// A rayon pool whose only worker is this thread: candle run inside it never hands work to
    /// another thread. `None` only if rayon could not make one (then the global pool serves).
    static ON_CALLING_THREAD: Option<rayon::ThreadPool> = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .use_current_thread()
        .build()
        .map_err(|e| tracing::warn!("no single-thread pool for small inputs: {e}"))
        .ok();
}

impl MiniLm {
    /// Embeds `seqs` in length-sorted batches of [`BATCH`].
    fn embed_batches(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Sort by length so each batch pads little, then restore the caller's order.
        let mut order: Vec<usize> = (0..seqs.len()).collect();
        order.sort_by_key(|&i| seqs[i].len());
        let mut out = vec![Vec::new(); seqs.len()];
        for batch in order.chunks(BATCH) {
            let batch_seqs: Vec<&[u32]> = batch.iter().map(|&i| seqs[i]).collect();
            for (&i, v) in batch.iter().zip(self.forward(&batch_seqs)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}
