//! Embedding through the cache: texts already embedded under the current model (keyed by model
//! and text hash) are read from the store; only the rest go through the model.

use aril_core::content_hash;
use aril_embed::embed_chunked;
use aril_store::{Embedding, StoredChunk};

use crate::{Engine, EngineError};

impl Engine {
    /// Embeddings for `texts` (same order). Returns them and the entries that are new to the cache,
    /// which the caller commits with the rest of its batch.
    pub(crate) fn embed_cached(
        &mut self,
        texts: &[String],
    ) -> Result<(Vec<Embedding>, Vec<Embedding>), EngineError> {
        let embedder = self.embedder()?;
        let model = embedder.name().to_string();
        let hashes: Vec<String> = texts.iter().map(|t| content_hash(&[t])).collect();
        let mut known = self.store.embeddings(&model, &hashes)?;
        // Each distinct missing text once.
        let mut missing: Vec<(String, &str)> = Vec::new();
        for (h, t) in hashes.iter().zip(texts) {
            if !known.contains_key(h) && !missing.iter().any(|(m, _)| m == h) {
                missing.push((h.clone(), t));
            }
        }
        let mut fresh = Vec::with_capacity(missing.len());
        if !missing.is_empty() {
            let views: Vec<&str> = missing.iter().map(|(_, t)| *t).collect();
            let embedded = embed_chunked(embedder.as_ref(), &views)?;
            for ((hash, _), chunked) in missing.iter().zip(embedded) {
                let e = Embedding {
                    model: model.clone(),
                    text_hash: hash.clone(),
                    pieces: chunked.pieces as u32,
                    chunks: chunked
                        .chunks
                        .into_iter()
                        .map(|c| StoredChunk {
                            start: c.start as u32,
                            end: c.end as u32,
                            vector: c.vector,
                        })
                        .collect(),
                };
                known.insert(hash.clone(), e.clone());
                fresh.push(e);
            }
        }
        let all = hashes
            .iter()
            .map(|h| known.get(h).cloned())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                EngineError::Config("embedding cache lost an entry while embedding".into())
            })?;
        Ok((all, fresh))
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
