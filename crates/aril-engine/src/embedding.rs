//! Embedding through the cache: texts already embedded under the current model (keyed by model
//! and [`Engine::vector_key`]) are read from the store; only the rest go through the model.

use aril_core::content_hash;
use aril_embed::{embed_chunked, embed_sentences};
use aril_store::{Embedding, StoredChunk};
use serde::Serialize;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use aril_embed::Embedder;

use crate::config::TurnVectors;
use crate::{Engine, EngineError};

/// What the model has embedded for storage (cache misses: turn texts, segment texts when they are
/// embedded, card texts; never questions, never pooled vectors) since the engine opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ModelWorkDone {
    /// Texts embedded.
    pub texts: u64,
    /// Forward passes: one per chunk or sentence run of a text.
    pub passes: u64,
    /// Word pieces of the texts (without the model's two special tokens per pass).
    pub pieces: u64,
}

/// The running count behind [`ModelWorkDone`], shared with the threads that embed ahead.
#[derive(Debug, Default)]
pub(crate) struct ModelMeter {
    texts: AtomicU64,
    passes: AtomicU64,
    pieces: AtomicU64,
}

impl ModelMeter {
    fn add(&self, made: &[Embedding]) {
        self.count(made.iter().map(|e| (e.chunks.len(), e.pieces as usize)));
    }

    /// Counts texts embedded, each as (passes, pieces).
    pub(crate) fn count(&self, texts: impl Iterator<Item = (usize, usize)>) {
        let (mut n, mut passes, mut pieces) = (0u64, 0u64, 0u64);
        for (p, w) in texts {
            n += 1;
            passes += p as u64;
            pieces += w as u64;
        }
        self.texts.fetch_add(n, Ordering::Relaxed);
        self.passes.fetch_add(passes, Ordering::Relaxed);
        self.pieces.fetch_add(pieces, Ordering::Relaxed);
    }

    pub(crate) fn done(&self) -> ModelWorkDone {
        ModelWorkDone {
            texts: self.texts.load(Ordering::Relaxed),
            passes: self.passes.load(Ordering::Relaxed),
            pieces: self.pieces.load(Ordering::Relaxed),
        }
    }
}

/// Texts the cache lacks, with what embedding them needs: the model's work of
/// [`Engine::cache_misses`], which owns everything it uses, so it runs on any thread.
pub(crate) struct ModelWork {
    embedder: Arc<dyn Embedder>,
    model: String,
    turn_vectors: TurnVectors,
    sentence_min_bytes: usize,
    /// Cache key and text of each text to embed.
    missing: Vec<(String, String)>,
    meter: Arc<ModelMeter>,
}

impl ModelWork {
    /// The new cache entries, one per missing text, in order.
    pub(crate) fn run(self) -> Result<Vec<Embedding>, EngineError> {
        if self.missing.is_empty() {
            return Ok(Vec::new());
        }
        let views: Vec<&str> = self.missing.iter().map(|(_, t)| t.as_str()).collect();
        let embedded = match self.turn_vectors {
            TurnVectors::Chunks => embed_chunked(self.embedder.as_ref(), &views)?,
            TurnVectors::Sentences => {
                embed_sentences(self.embedder.as_ref(), &views, self.sentence_min_bytes)?
            }
        };
        let made: Vec<Embedding> = self
            .missing
            .into_iter()
            .zip(embedded)
            .map(|((hash, _), chunked)| Embedding {
                model: self.model.clone(),
                text_hash: hash,
                pieces: chunked.pieces as u32,
                chunks: stored_chunks(chunked.chunks),
            })
            .collect();
        self.meter.add(&made);
        Ok(made)
    }
}

/// What [`Engine::cache_misses`] found for a list of texts.
pub(crate) struct CacheLookup {
    /// Each text's cache key ([`Engine::vector_key`]), in the texts' order.
    pub keys: Vec<String>,
    /// The entries the cache and the pending ones hold, by key.
    pub known: HashMap<String, Embedding>,
    /// The texts neither holds, for the model.
    pub work: ModelWork,
}

/// Model chunks as the store keeps them.
pub fn stored_chunks(chunks: Vec<aril_embed::Chunk>) -> Vec<StoredChunk> {
    chunks
        .into_iter()
        .map(|c| StoredChunk {
            start: c.start as u32,
            end: c.end as u32,
            vector: c.vector,
        })
        .collect()
}

impl Engine {
    /// What the model has embedded for storage since this engine opened (every caller's writes
    /// together): the model's share of the write cost.
    pub fn model_work(&self) -> ModelWorkDone {
        self.model_work.done()
    }

    /// The cache key of a dense text's vectors under the configured [`TurnVectors`]: the text's
    /// hash when it is embedded whole, a hash of the rule and the text when it is embedded
    /// sentence by sentence (so the two never take each other's entries). A turn record keeps
    /// the key of the vectors it was stored with. Vectors of another variant of the model's
    /// weights ([`Embedder::variant`]) are keyed apart too.
    pub(crate) fn vector_key(&self, text: &str) -> String {
        let min_bytes = self.config.sentence_min_bytes.to_string();
        let rule: &[&str] = match self.config.turn_vectors {
            TurnVectors::Chunks => &[],
            TurnVectors::Sentences => &["sentences of at least", &min_bytes],
        };
        cache_key(rule, &self.variant, text)
    }

    /// Embeddings for `texts` (same order). Returns them and the entries that are new to the cache,
    /// which the caller commits with the rest of its batch. `pending` holds entries made earlier in
    /// the same batch, not committed yet.
    pub(crate) fn embed_cached(
        &self,
        texts: &[String],
        pending: &[Embedding],
    ) -> Result<(Vec<Embedding>, Vec<Embedding>), EngineError> {
        let CacheLookup {
            keys,
            mut known,
            work,
        } = self.cache_misses(texts, pending)?;
        let fresh = work.run()?;
        for e in &fresh {
            known.insert(e.text_hash.clone(), e.clone());
        }
        let all = keys
            .iter()
            .map(|h| known.get(h).cloned())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                EngineError::Config("embedding cache lost an entry while embedding".into())
            })?;
        Ok((all, fresh))
    }

    /// What the cache and `pending` hold for `texts`, and what the model must embed (each
    /// distinct text they lack, in order of first appearance) as work that can run on another
    /// thread.
    pub(crate) fn cache_misses(
        &self,
        texts: &[String],
        pending: &[Embedding],
    ) -> Result<CacheLookup, EngineError> {
        let embedder = self.embedder()?;
        let model = embedder.name().to_string();
        let hashes: Vec<String> = texts.iter().map(|t| self.vector_key(t)).collect();
        let mut known = self.store.embeddings(&model, &hashes)?;
        for e in pending {
            known
                .entry(e.text_hash.clone())
                .or_insert_with(|| e.clone());
        }
        let mut missing: Vec<(String, String)> = Vec::new();
        let mut asked = HashSet::new();
        for (h, t) in hashes.iter().zip(texts) {
            if !known.contains_key(h) && asked.insert(h) {
                missing.push((h.clone(), t.clone()));
            }
        }
        let work = ModelWork {
            embedder,
            model,
            turn_vectors: self.config.turn_vectors,
            sentence_min_bytes: self.config.sentence_min_bytes,
            missing,
            meter: self.model_work.clone(),
        };
        Ok(CacheLookup {
            keys: hashes,
            known,
            work,
        })
    }

    /// A segment's vector pooled from its turns' chunks: their mean weighted by chunk length in
    /// bytes (close to the token mean that sentence-transformers pools), normalised. Stored under a
    /// hash of its own (`segment_vector_key`) so it is never taken for a model embedding of the
    /// text.
    pub(crate) fn pooled_embedding(
        model: &str,
        variant: &str,
        text: &str,
        members: &[Embedding],
    ) -> Embedding {
        let dim = members
            .iter()
            .find_map(|e| e.chunks.first())
            .map_or(0, |c| c.vector.len());
        let mut mean = vec![0.0f32; dim];
        for c in members.iter().flat_map(|e| &e.chunks) {
            let w = (c.end.saturating_sub(c.start)).max(1) as f32;
            mean.iter_mut()
                .zip(&c.vector)
                .for_each(|(m, x)| *m += w * x);
        }
        aril_embed::normalize(&mut mean);
        Embedding {
            model: model.to_string(),
            text_hash: pooled_key(variant, text),
            pieces: members.iter().map(|e| e.pieces).sum(),
            chunks: vec![StoredChunk {
                start: 0,
                end: text.len() as u32,
                vector: mean,
            }],
        }
    }

    /// The unit vector that stands for a whole text: the normalised mean of its chunk vectors.
    pub(crate) fn mean_vector(e: &Embedding) -> Vec<f32> {
        let dim = e.chunks.first().map_or(0, |c| c.vector.len());
        let mut mean = vec![0.0f32; dim];
        for c in &e.chunks {
            mean.iter_mut().zip(&c.vector).for_each(|(m, x)| *m += x);
        }
        aril_embed::normalize(&mut mean);
        mean
    }
}

/// The cache key of a pooled segment vector: distinct from the key of the same text embedded by
/// the model.
pub(crate) fn pooled_key(variant: &str, text: &str) -> String {
    cache_key(&["pooled from turn chunks"], variant, text)
}

/// A cache key: the hash of the rule that made the vectors, the weights' variant unless it is
/// the full weights' (`""`: so keys made before variants existed still match), and the text.
fn cache_key(rule: &[&str], variant: &str, text: &str) -> String {
    let mut parts = rule.to_vec();
    if !variant.is_empty() {
        parts.extend(["weights", variant]);
    }
    parts.push(text);
    content_hash(&parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full weights' keys are those made before variants existed, so caches and stores
    /// built then still serve; another variant's keys differ from them.
    #[test]
    fn full_weight_keys_are_the_old_keys_and_a_variant_is_keyed_apart() {
        let text = "I keep my bike in the hallway.";
        assert_eq!(cache_key(&[], "", text), content_hash(&[text]));
        assert_eq!(
            cache_key(&["sentences of at least", "80"], "", text),
            content_hash(&["sentences of at least", "80", text])
        );
        assert_eq!(
            pooled_key("", text),
            content_hash(&["pooled from turn chunks", text])
        );
        assert_ne!(cache_key(&[], "int8", text), cache_key(&[], "", text));
        assert_ne!(pooled_key("int8", text), pooled_key("", text));
    }
}
