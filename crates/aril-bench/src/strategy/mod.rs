//! The strategies `aril bench` compares, each real code selectable by name. A strategy sees a
//! [`Case`] (question + haystack) and returns ranked [`Unit`]s; it never sees gold.

mod aril;
mod aril_llm;
mod embeddings;
mod raw_session;
mod seci;
mod verbatim_chunks;

use crate::BenchError;
use crate::data::Case;

pub use aril::Aril;
pub use aril_llm::{Ablation, AriLlm, BenchModels, EncodeProgress};
pub use embeddings::Embeddings;
pub use raw_session::SessionDocs;
pub use seci::{SeciHybrid, seci_extract};
pub use verbatim_chunks::VerbatimChunks;

/// One retrieved unit: the session it belongs to, the turns it contains or links to, its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub session: String,
    pub turns: Vec<String>,
    pub text: String,
}

/// A retrieval strategy.
pub trait Strategy {
    fn name(&self) -> &'static str;
    /// Prepares a haystack; called once per distinct `haystack_key`, before its questions.
    fn index(&mut self, case: &Case) -> Result<(), BenchError>;
    /// The best units for the case's question, best first (at most `k` for strategies that rank
    /// sessions; unit strategies return up to `k` units).
    fn rank(&mut self, case: &Case, k: usize) -> Result<Vec<Unit>, BenchError>;
    /// Units for a benchmark whose gold is sessions: a session ranks where its first unit
    /// does. By default the units of [`Strategy::rank`], so a session ranks by its best unit
    /// (max); a strategy with a session ranking of its own returns one unit per session.
    fn rank_sessions(&mut self, case: &Case, k: usize) -> Result<Vec<Unit>, BenchError> {
        self.rank(case, k)
    }
    /// Texts this strategy sent through the model (cache misses).
    fn embedded_texts(&self) -> usize;
    /// The model's forward passes and word pieces, against the turns stored, for a strategy
    /// that counts them.
    fn model_work(&self) -> Option<crate::report::ModelCost> {
        None
    }
    /// Language-model calls and tokens (none for the LLM-free strategies).
    fn llm_cost(&self) -> aril_engine::CallCost {
        aril_engine::CallCost::default()
    }
    /// What the strategy wants the report to say about its run (models, counts), or null.
    fn details(&mut self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// Every strategy name, for `--strategy` and error messages.
pub const NAMES: &[&str] = &[
    "raw-session-all",
    "raw-session-user",
    "seci-extract",
    "seci-hybrid",
    "verbatim-chunks",
    "aril",
    "aril-llm",
];

/// Builds a strategy by name.
pub fn by_name(
    name: &str,
    embeddings: Embeddings,
    aril_dir: &std::path::Path,
    store: &aril_engine::StoreAt,
    engine: aril_engine::Config,
    models: &BenchModels,
) -> Result<Box<dyn Strategy>, BenchError> {
    if *store != aril_engine::StoreAt::Embedded && name != "aril" {
        return Err(BenchError::Unsupported {
            strategy: name.to_string(),
            benchmark: "any".into(),
            why: "only the `aril` strategy can keep its store in PostgreSQL (--store)".into(),
        });
    }
    Ok(match name {
        "raw-session-all" => Box::new(SessionDocs::raw_all(embeddings)),
        "raw-session-user" => Box::new(SessionDocs::raw_user(embeddings)),
        "seci-extract" => Box::new(seci_extract(embeddings)),
        "seci-hybrid" => Box::new(SeciHybrid::new(embeddings)),
        "verbatim-chunks" => Box::new(VerbatimChunks::new(embeddings)?),
        "aril" => Box::new(Aril::open(aril_dir, store, embeddings, engine)?),
        "aril-llm" => Box::new(AriLlm::open(aril_dir, embeddings, engine, models)?),
        other => {
            return Err(BenchError::UnknownStrategy(
                other.to_string(),
                NAMES.join(", "),
            ));
        }
    })
}

/// Sessions ranked by cosine to the query, each session scored by its document's vector.
pub(crate) fn rank_by_cosine(query: &[f32], docs: &[(String, Vec<f32>)]) -> Vec<(String, f32)> {
    let mut scored: Vec<(String, f32)> = docs
        .iter()
        .map(|(id, v)| (id.clone(), aril_embed::dot(query, v)))
        .collect();
    // Stable: equal scores keep haystack order.
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored
}
