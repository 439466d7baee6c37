//! The result of a bench run, as JSON (`--json`) and as a readable table.

use serde::Serialize;
use serde_json::Value;

/// What a run cost.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Cost {
    pub llm_calls: u64,
    pub llm_tokens_in: u64,
    pub llm_tokens_out: u64,
    /// The same calls' prompts and replies in o200k tokens, comparable across models.
    pub llm_tokens_o200k: u64,
    /// Texts sent through the embedding model (cache misses).
    pub embedded_texts: usize,
    /// o200k tokens of the top 10 units, averaged over questions.
    pub context_tokens_per_query: f64,
    /// Seconds spent indexing haystacks.
    pub ingest_s: f64,
    pub query_ms_p50: f64,
    pub query_ms_p99: f64,
}

/// One benchmark run of one strategy.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub benchmark: String,
    pub data: String,
    pub strategy: String,
    pub embedder: String,
    pub n_questions: usize,
    pub metrics: Value,
    /// Per question type (LongMemEval) or category (LoCoMo).
    #[serde(rename = "by_type")]
    pub by_group: Value,
    pub notes: Value,
    pub cost: Cost,
    /// Each question's top 10 sessions, for question-by-question comparison (`--rankings`).
    #[serde(skip)]
    pub rankings: Vec<QuestionRanking>,
}

/// One question's retrieved sessions, best first.
#[derive(Debug, Clone, Serialize)]
pub struct QuestionRanking {
    pub question_id: String,
    pub retrieved_ids: Vec<String>,
}

impl BenchReport {
    /// A plain-text table: one row per metric group, one column per metric.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{} on {} ({} questions), strategy {}, embedder {}\n",
            self.benchmark, self.data, self.n_questions, self.strategy, self.embedder
        );
        let rows = |v: &Value, indent: &str, out: &mut String| {
            if let Some(groups) = v.as_object() {
                for (group, metrics) in groups {
                    let cells: Vec<String> = metrics
                        .as_object()
                        .map(|m| {
                            m.iter()
                                .map(|(k, v)| match v.as_f64() {
                                    Some(x) if k != "n" => format!("{k} {:.3}", x),
                                    _ => format!("{k} {v}"),
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    out.push_str(&format!("{indent}{group:<10} {}\n", cells.join("  ")));
                }
            }
        };
        rows(&self.metrics, "  ", &mut out);
        if let Some(groups) = self.by_group.as_object() {
            for (name, v) in groups {
                out.push_str(&format!("  [{name}]\n"));
                rows(v, "    ", &mut out);
            }
        }
        let c = &self.cost;
        out.push_str(&format!(
            "  cost: embedded {} texts, ingest {:.1} s, query p50 {:.1} ms / p99 {:.1} ms, \
             {:.0} context tokens per query (top 10), {} LLM calls\n",
            c.embedded_texts,
            c.ingest_s,
            c.query_ms_p50,
            c.query_ms_p99,
            c.context_tokens_per_query,
            c.llm_calls
        ));
        out
    }
}
