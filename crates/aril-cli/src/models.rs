//! The language models a command uses, one per role, from the `ARIL_LLM_*` environment and the
//! configuration file's `[llm]` table (`ARIL_LLM_<ROLE>_*`, `[llm.<role>]`, `ARIL_LLM_*`, `[llm]`).

use std::sync::Arc;

use aril_engine::llm::{
    ClientOptions, Endpoint, LlmSettings, OpenAiClient, OpenAiEmbedder, RerankClient, Reranker,
    Role,
};

use crate::args::EncodeArgs;

/// The client of a role, or `None` when no endpoint is configured for it.
pub fn client(role: Role, settings: &LlmSettings) -> anyhow::Result<Option<OpenAiClient>> {
    Ok(OpenAiClient::for_role(role, settings)?)
}

/// The client of a role that the command cannot do without.
pub fn required(role: Role, settings: &LlmSettings) -> anyhow::Result<OpenAiClient> {
    Ok(OpenAiClient::required(role, settings)?)
}

/// The encoder's bounds with the command's overrides checked.
pub fn encode_config(args: &EncodeArgs) -> anyhow::Result<aril_engine::EncodeConfig> {
    let mut config = aril_engine::EncodeConfig::default();
    if let Some(n) = args.max_cards {
        anyhow::ensure!(n > 0, "--max-cards must be at least 1");
        config.max_cards = n;
    }
    if let Some(n) = args.max_tokens {
        anyhow::ensure!(n >= 64, "--max-tokens must be at least 64");
        config.max_tokens = n;
    }
    Ok(config)
}

/// The cross-encoder from `ARIL_LLM_RERANKER_*` or `[llm.reranker]`, if configured.
pub fn reranker(settings: &LlmSettings) -> anyhow::Result<Option<Arc<dyn Reranker>>> {
    Ok(RerankClient::from_settings(settings)?.map(|r| Arc::new(r) as Arc<dyn Reranker>))
}

/// o200k tokens per chunk sent to a remote embedder.
const REMOTE_CHUNK_TOKENS: usize = 512;

/// The `/embeddings` endpoint from `ARIL_LLM_EMBEDDER_*` or `[llm.embedder]`, used instead of the
/// local model when configured (asked once for its dimension).
pub fn remote_embedder(
    settings: &LlmSettings,
) -> anyhow::Result<Option<Arc<dyn aril_engine::embed::Embedder>>> {
    let Some(endpoint) = Endpoint::from_env_and(Role::Embedder, settings)? else {
        return Ok(None);
    };
    let url = endpoint.base_url.clone();
    let embedder = OpenAiEmbedder::new(endpoint, ClientOptions::from_env()?, REMOTE_CHUNK_TOKENS)
        .map_err(|e| {
        anyhow::anyhow!("the embedding endpoint {url} did not answer a probe: {e}")
    })?;
    Ok(Some(Arc::new(embedder)))
}
