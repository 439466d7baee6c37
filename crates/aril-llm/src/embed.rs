//! Embeddings from an OpenAI-compatible `/embeddings` endpoint (OpenAI, vLLM, llama.cpp started
//! with `--embeddings`, Ollama), behind the same `Embedder` seam as the local model. Texts are cut
//! into o200k pieces, so chunking works as it does locally; each chunk is decoded back to text and
//! sent. Vectors are normalised; the dimension is learnt from one probe when the client is made.

use aril_core::tokens;
use aril_embed::{EmbedError, Embedder, Pieces, normalize};
use serde::Deserialize;
use serde_json::json;

use crate::transport::Transport;
use crate::{ClientOptions, Endpoint, LlmError};

/// Inputs sent per request.
const BATCH: usize = 32;

/// An `/embeddings` endpoint.
pub struct OpenAiEmbedder {
    endpoint: Endpoint,
    transport: Transport,
    name: String,
    dim: usize,
    max_pieces: usize,
}

#[derive(Deserialize)]
struct Embeddings {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    index: usize,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    /// A client for `endpoint` that sends chunks of at most `max_pieces` o200k tokens; asks once
    /// to learn the vectors' dimension, so a wrong endpoint fails here, not in the middle of work.
    pub fn new(
        endpoint: Endpoint,
        options: ClientOptions,
        max_pieces: usize,
    ) -> Result<Self, LlmError> {
        if max_pieces < 8 {
            return Err(LlmError::Config(format!(
                "an embedding chunk of {max_pieces} tokens is too small (at least 8)"
            )));
        }
        let mut client = Self {
            name: format!("{} (openai-compatible)", endpoint.model),
            transport: Transport::new(endpoint.api_key.clone(), options)?,
            endpoint,
            dim: 0,
            max_pieces,
        };
        let probe = client.embed_texts(&["dimension probe".to_string()])?;
        client.dim = probe.first().map(Vec::len).unwrap_or(0);
        if client.dim == 0 {
            return Err(LlmError::InvalidReply {
                reason: "the embedding endpoint returned an empty vector".into(),
            });
        }
        Ok(client)
    }

    fn url(&self) -> String {
        format!("{}/embeddings", self.endpoint.base_url)
    }

    /// One normalised vector per text, in order.
    fn embed_texts(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            let body = json!({"model": self.endpoint.model, "input": batch});
            let parsed: Embeddings = self
                .transport
                .post(&self.url(), &body)?
                .json(&self.url(), "an embeddings list")?;
            let mut vectors: Vec<Option<Vec<f32>>> = vec![None; batch.len()];
            for item in parsed.data {
                let dim_ok = self.dim == 0 || item.embedding.len() == self.dim;
                match vectors.get_mut(item.index) {
                    Some(slot) if dim_ok => *slot = Some(item.embedding),
                    _ => {
                        return Err(LlmError::InvalidReply {
                            reason: format!(
                                "embedding {} has {} dimensions for {} inputs (expected {})",
                                item.index,
                                item.embedding.len(),
                                batch.len(),
                                self.dim
                            ),
                        });
                    }
                }
            }
            for (i, v) in vectors.into_iter().enumerate() {
                let mut v = v.ok_or_else(|| LlmError::InvalidReply {
                    reason: format!("input {i} of {} got no embedding", batch.len()),
                })?;
                normalize(&mut v);
                out.push(v);
            }
        }
        Ok(out)
    }
}

impl Embedder for OpenAiEmbedder {
    fn name(&self) -> &str {
        &self.name
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn max_pieces(&self) -> usize {
        self.max_pieces
    }

    fn tokenize(&self, text: &str) -> Result<Pieces, EmbedError> {
        let (ids, spans) = tokens::encode_with_spans(text);
        Ok(Pieces { ids, spans })
    }

    fn embed_pieces(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if let Some(long) = seqs.iter().find(|s| s.len() > self.max_pieces - 2) {
            return Err(EmbedError::TooLong {
                got: long.len(),
                max: self.max_pieces - 2,
            });
        }
        let texts: Vec<String> = seqs
            .iter()
            .map(|s| {
                let t = tokens::decode(s);
                // An empty input is refused by some servers; a space embeds as "nothing".
                if t.trim().is_empty() {
                    " ".to_string()
                } else {
                    t
                }
            })
            .collect();
        self.embed_texts(&texts)
            .map_err(|e| EmbedError::Inference(e.to_string()))
    }
}
