//! The model and a persistent embedding cache shared by all strategies of a bench run: an
//! `aril-store` SQLite file keyed by (model + mode, text hash), so a warm run embeds nothing.

use std::path::Path;
use std::sync::Arc;

use aril_core::content_hash;
use aril_embed::{Embedder, embed_chunked, embed_truncated};
use aril_store::{Embedding, SqliteStore, Store, StoredChunk, WriteBatch};

use crate::BenchError;

/// Embeds through the cache. Cloning shares the model and the cache.
#[derive(Clone)]
pub struct Embeddings {
    model: Arc<dyn Embedder>,
    cache: Arc<std::sync::Mutex<SqliteStore>>,
    misses: Arc<std::sync::atomic::AtomicUsize>,
}

impl Embeddings {
    pub fn open(model: Arc<dyn Embedder>, cache_file: &Path) -> Result<Self, BenchError> {
        if let Some(dir) = cache_file.parent() {
            std::fs::create_dir_all(dir).map_err(|e| BenchError::Io {
                what: format!("creating {}", dir.display()),
                cause: e,
            })?;
        }
        Ok(Self {
            model,
            cache: Arc::new(std::sync::Mutex::new(SqliteStore::open(cache_file)?)),
            misses: Arc::default(),
        })
    }

    pub fn model(&self) -> Arc<dyn Embedder> {
        self.model.clone()
    }

    /// Texts embedded by the model so far (not served from the cache).
    pub fn misses(&self) -> usize {
        self.misses.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// ChromaDB-style vectors: the first 254 word pieces of each text.
    pub fn truncated(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, BenchError> {
        let out = self.through_cache("trunc", texts, |missing| {
            let (vectors, _) = embed_truncated(self.model.as_ref(), missing)?;
            Ok(vectors
                .into_iter()
                .map(|v| {
                    vec![StoredChunk {
                        start: 0,
                        end: 0,
                        vector: v,
                    }]
                })
                .collect())
        })?;
        Ok(out
            .into_iter()
            .map(|mut c| c.swap_remove(0).vector)
            .collect())
    }

    /// aril-style vectors: every chunk of each text.
    pub fn chunked(&self, texts: &[String]) -> Result<Vec<Vec<Vec<f32>>>, BenchError> {
        let out = self.through_cache("chunked", texts, |missing| {
            Ok(embed_chunked(self.model.as_ref(), missing)?
                .into_iter()
                .map(|t| aril_engine::stored_chunks(t.chunks))
                .collect())
        })?;
        Ok(out
            .into_iter()
            .map(|chunks| chunks.into_iter().map(|c| c.vector).collect())
            .collect())
    }

    fn through_cache(
        &self,
        mode: &str,
        texts: &[String],
        embed: impl Fn(&[&str]) -> Result<Vec<Vec<StoredChunk>>, BenchError>,
    ) -> Result<Vec<Vec<StoredChunk>>, BenchError> {
        let model = match self.model.variant() {
            "" => format!("{}#{mode}", self.model.name()),
            variant => format!("{}#{mode}#{variant}", self.model.name()),
        };
        let hashes: Vec<String> = texts.iter().map(|t| content_hash(&[t])).collect();
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| BenchError::data(Path::new("embedding cache"), "lock poisoned"))?;
        let mut known = cache.embeddings(&model, &hashes)?;
        let mut missing: Vec<(String, &str)> = Vec::new();
        for (h, t) in hashes.iter().zip(texts) {
            if !known.contains_key(h) && !missing.iter().any(|(m, _)| m == h) {
                missing.push((h.clone(), t));
            }
        }
        if !missing.is_empty() {
            let views: Vec<&str> = missing.iter().map(|(_, t)| *t).collect();
            let embedded = embed(&views)?;
            self.misses
                .fetch_add(missing.len(), std::sync::atomic::Ordering::Relaxed);
            let entries: Vec<Embedding> = missing
                .iter()
                .zip(embedded)
                .map(|((hash, _), chunks)| Embedding {
                    model: model.clone(),
                    text_hash: hash.clone(),
                    pieces: 0,
                    chunks,
                })
                .collect();
            for e in &entries {
                known.insert(e.text_hash.clone(), e.clone());
            }
            cache.commit(WriteBatch {
                embeddings: entries,
                ..WriteBatch::default()
            })?;
        }
        hashes
            .iter()
            .map(|h| {
                known.get(h).map(|e| e.chunks.clone()).ok_or_else(|| {
                    BenchError::data(Path::new("embedding cache"), "an entry went missing")
                })
            })
            .collect()
    }
}
