//! The `aril-llm` strategy: the LycheeMemory path. Each haystack is ingested as by `aril`, then
//! every closed segment is written into cards with one encoder call; each question gets one
//! planner call (when a planner is configured) and the planned multi-path recall over cards and
//! verbatim turns. A card covers the turns it cites. The data directory is the `aril` one's with
//! the encoder's model in its name, so cards from different encoders never mix and a re-run makes
//! no encoder call; construction cost is read from the store's accounting, so it is the cost of
//! building the cards whichever run paid it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use aril_engine::Progress;

use aril_core::ScopeFilter;
use aril_engine::llm::ChatModel;
use aril_engine::{AskRequest, CallCost, ConsolidateOptions, EncodeConfig};
use serde_json::{Value, json};

use super::aril::{Aril, parse_date};
use super::{Embeddings, Strategy, Unit};
use crate::BenchError;
use crate::data::Case;

/// The paper's ablations (BRIEF §1.4), each a configuration of the same code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ablation {
    /// One encoder call per turn: every turn closes its own segment.
    PerTurn,
    /// Fixed windows of the mean segment's size (6 turns, or the 900-token cap), no topic cuts.
    FixedWindows,
    /// One summary per segment instead of typed cards.
    Summaries,
    /// No disambiguation state and no recent cards in the encoder's prompt.
    NoState,
    /// Recall from the first path's dense card list alone: no fusion, no diversity.
    SingleList,
}

impl Ablation {
    pub const NAMES: &[&str] = &[
        "per-turn",
        "fixed-windows",
        "summaries",
        "no-state",
        "single-list",
    ];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "per-turn" => Ablation::PerTurn,
            "fixed-windows" => Ablation::FixedWindows,
            "summaries" => Ablation::Summaries,
            "no-state" => Ablation::NoState,
            "single-list" => Ablation::SingleList,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        Ablation::NAMES[self as usize]
    }

    /// Applies the write-side switches to the engine and encoder configuration.
    fn configure(self, engine: &mut aril_engine::Config, encode: &mut EncodeConfig) {
        match self {
            Ablation::PerTurn => engine.segmenter.max_exchanges = 1,
            Ablation::FixedWindows => {
                let s = &mut engine.segmenter;
                (s.w_surprise, s.w_cohesion, s.w_length, s.w_count) = (0.0, 0.0, 0.0, 0.0);
                s.bias = -20.0;
                s.max_exchanges = 6;
            }
            Ablation::Summaries => encode.summaries = true,
            Ablation::NoState => (encode.state_budget, encode.recent_budget) = (0, 0),
            Ablation::SingleList => {}
        }
    }

    /// Whether the cards differ from the default run's (then they get their own directory).
    fn changes_cards(self) -> bool {
        self != Ablation::SingleList
    }
}

/// Called as segments are written into cards (done, total for the haystack being encoded).
pub type EncodeProgress = Arc<dyn Fn(Progress) + Send + Sync>;

/// The models of the LLM strategies, and how their long work reports and stops.
#[derive(Clone, Default)]
pub struct BenchModels {
    pub encoder: Option<Arc<dyn ChatModel>>,
    pub planner: Option<Arc<dyn ChatModel>>,
    pub encode: EncodeConfig,
    /// Progress of the card writing, if anyone watches it.
    pub encode_progress: Option<EncodeProgress>,
    /// Raised to stop card writing after the segment in flight ([`BenchError::Interrupted`]).
    pub cancel: Arc<AtomicBool>,
    /// Runs one of the paper's ablations instead of the full pipeline.
    pub ablation: Option<Ablation>,
    /// The cross-encoder each path is reranked with, if any.
    pub reranker: Option<Arc<dyn aril_engine::llm::Reranker>>,
}

/// Units recalled per question, and the context budget they may fill (above the scorer's 4k).
const RECALL_K: usize = 40;
const RECALL_BUDGET: usize = 6000;

pub struct AriLlm {
    aril: Aril,
    encoder: Arc<dyn ChatModel>,
    planner: Option<Arc<dyn ChatModel>>,
    encode: EncodeConfig,
    encode_progress: Option<EncodeProgress>,
    cancel: Arc<AtomicBool>,
    ablation: Option<Ablation>,
    query_cost: CallCost,
    haystacks: usize,
    segments_failed: usize,
    plan_fallbacks: usize,
}

impl AriLlm {
    pub fn open(
        dir: &Path,
        embeddings: Embeddings,
        mut config: aril_engine::Config,
        models: &BenchModels,
    ) -> Result<Self, BenchError> {
        let mut encode = models.encode.clone();
        if let Some(a) = models.ablation {
            a.configure(&mut config, &mut encode);
        }
        let encoder = models
            .encoder
            .clone()
            .ok_or_else(|| BenchError::Unsupported {
                strategy: "aril-llm".into(),
                benchmark: "any".into(),
                why: "no encoder model configured: set ARIL_LLM_BASE_URL and ARIL_LLM_MODEL (or \
                  ARIL_LLM_ENCODER_*), e.g. to a local llama-server"
                    .into(),
            })?;
        let model: String = encoder
            .model()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let ablated = models
            .ablation
            .filter(|a| a.changes_cards())
            .map(|a| format!("-{}", a.name()))
            .unwrap_or_default();
        let dir = dir.with_file_name(format!(
            "{name}-cards-{model}-{}x{}{ablated}",
            encode.max_cards, encode.max_tokens
        ));
        let mut aril = Aril::open(&dir, &aril_engine::StoreAt::Embedded, embeddings, config)?;
        aril.engine().set_reranker(models.reranker.clone());
        Ok(Self {
            aril,
            encoder,
            planner: models.planner.clone(),
            encode,
            encode_progress: models.encode_progress.clone(),
            cancel: models.cancel.clone(),
            ablation: models.ablation,
            query_cost: CallCost::default(),
            haystacks: 0,
            segments_failed: 0,
            plan_fallbacks: 0,
        })
    }
}

impl Strategy for AriLlm {
    fn name(&self) -> &'static str {
        "aril-llm"
    }

    fn index(&mut self, case: &Case) -> Result<(), BenchError> {
        self.aril.index(case)?;
        self.haystacks += 1;
        let options = ConsolidateOptions {
            encode: self.encode.clone(),
            ..Default::default()
        };
        let progress = self.encode_progress.clone();
        let report = self.aril.engine().consolidate(
            self.encoder.as_ref(),
            &options,
            &mut |p| {
                if let Some(f) = &progress {
                    f(p)
                }
            },
            &self.cancel,
        )?;
        self.segments_failed += report.segments_failed;
        if report.interrupted {
            return Err(BenchError::Interrupted);
        }
        Ok(())
    }

    fn rank(&mut self, case: &Case, _k: usize) -> Result<Vec<Unit>, BenchError> {
        let request = AskRequest {
            filter: ScopeFilter::user(case.haystack_key.clone()),
            question: case.question.clone(),
            asked_at: case.question_date.as_deref().and_then(parse_date),
            k: Some(RECALL_K),
            budget: Some(RECALL_BUDGET),
            single_list: self.ablation == Some(Ablation::SingleList),
            known_texts: Vec::new(),
        };
        let planner = self.planner.as_deref();
        let recalled = self.aril.engine().recall_planned(&request, planner)?;
        self.query_cost.add(recalled.cost);
        if planner.is_some() && recalled.plan_note.is_some() {
            self.plan_fallbacks += 1;
        }
        Ok(recalled
            .items
            .into_iter()
            .map(|i| Unit {
                session: i.session.unwrap_or_default(),
                turns: i.source_turns,
                text: i.text,
            })
            .collect())
    }

    fn embedded_texts(&self) -> usize {
        self.aril.embedded_texts()
    }

    fn model_work(&self) -> Option<crate::report::ModelCost> {
        self.aril.model_work()
    }

    fn llm_cost(&self) -> CallCost {
        let (mut cost, _) = self.construction().unwrap_or_default();
        cost.add(self.query_cost);
        cost
    }

    fn details(&mut self) -> Value {
        let engine = self.aril.engine();
        let stats = engine.stats().ok();
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        if let Ok(users) = engine.users() {
            for user in users {
                for card in engine
                    .cards(&ScopeFilter::user(user), false)
                    .unwrap_or_default()
                {
                    let kind = serde_json::to_value(card.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default();
                    *kinds.entry(kind).or_default() += 1;
                }
            }
        }
        let (construction, o200k_missing) = self.construction().unwrap_or_default();
        let per = |n: u64| n as f64 / self.haystacks.max(1) as f64;
        json!({
            "encoder": self.encoder.model(),
            "planner": self.planner.as_ref().map(|p| p.model().to_string()),
            "reranker": self.aril.engine_ref().reranker_name(),
            "ablation": self.ablation.map(Ablation::name),
            "encode_config": {"max_cards": self.encode.max_cards, "max_tokens": self.encode.max_tokens},
            "haystacks": self.haystacks,
            "segments": stats.as_ref().map(|s| s.store.segments),
            "turns": stats.as_ref().map(|s| s.store.turns),
            "turns_per_segment": stats.as_ref().map(|s| s.turns_per_segment),
            "tokens_per_segment": stats.as_ref().map(|s| s.tokens_per_segment),
            "cards": stats.as_ref().map(|s| s.store.cards),
            "cards_by_type": kinds,
            "segments_failed": stats.as_ref().map(|s| s.store.segments_failed),
            "construction": {
                "calls": construction.llm_calls,
                "prompt_tokens": construction.prompt_tokens,
                "completion_tokens": construction.completion_tokens,
                "calls_per_haystack": per(construction.llm_calls),
                "tokens_per_haystack": per(construction.prompt_tokens + construction.completion_tokens),
                "o200k_tokens": construction.o200k_tokens,
                "o200k_tokens_per_haystack": per(construction.o200k_tokens),
                "calls_without_o200k": o200k_missing,
            },
            "query": {
                "calls": self.query_cost.llm_calls,
                "prompt_tokens": self.query_cost.prompt_tokens,
                "completion_tokens": self.query_cost.completion_tokens,
                "o200k_tokens": self.query_cost.o200k_tokens,
                "plan_fallbacks": self.plan_fallbacks,
            },
        })
    }
}

impl AriLlm {
    /// Every encoder call the data directory has paid for, and how many of them were recorded
    /// without o200k counts (before schema 5).
    fn construction(&self) -> Option<(CallCost, u64)> {
        let usage = self.aril.engine_ref().llm_usage().ok()?;
        let mut cost = CallCost::default();
        let mut missing = 0;
        for u in usage.iter().filter(|u| u.purpose == "encode") {
            cost.add(CallCost {
                llm_calls: u.calls,
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
                o200k_tokens: u.prompt_o200k + u.completion_o200k,
            });
            missing += u.calls - u.o200k_calls;
        }
        Some((cost, missing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ablation_has_a_name_and_changes_what_it_says() {
        for name in Ablation::NAMES {
            let a = Ablation::parse(name).unwrap();
            assert_eq!(a.name(), *name);
            let (mut engine, mut encode) =
                (aril_engine::Config::default(), EncodeConfig::default());
            a.configure(&mut engine, &mut encode);
            let defaults = (aril_engine::Config::default(), EncodeConfig::default());
            let changed = engine.segmenter != defaults.0.segmenter
                || encode.summaries != defaults.1.summaries
                || encode.state_budget != defaults.1.state_budget;
            assert_eq!(changed, a.changes_cards(), "{name}");
            engine.segmenter.validate().unwrap();
        }
        assert_eq!(Ablation::parse("nonsense"), None);
    }
}
