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
    /// The model's passes and pieces for those texts, for strategies that count them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelCost>,
    /// o200k tokens of the top 10 units, averaged over questions.
    pub context_tokens_per_query: f64,
    /// Seconds spent indexing haystacks.
    pub ingest_s: f64,
    pub query_ms_p50: f64,
    pub query_ms_p99: f64,
    /// The answerer's calls (`--answer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<QaCost>,
    /// The judge's calls (`--judge`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge: Option<QaCost>,
}

/// The embedding model's work for a run's writes, and the turns it stored.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ModelCost {
    /// Forward passes: one per chunk or sentence run of a text.
    pub passes: u64,
    /// Word pieces of the texts embedded.
    pub pieces: u64,
    /// Turns the run stored (none when a warm run found them all stored).
    pub turns_stored: usize,
}

/// What answering or judging cost, in total and per question.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QaCost {
    pub llm_calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt + reply in o200k tokens, comparable with the paper's tokens per question.
    pub o200k_tokens: u64,
    pub o200k_tokens_per_question: f64,
    /// Context the answerer read, o200k tokens per question (answers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_tokens_per_question: Option<f64>,
}

impl QaCost {
    /// The cost of calls spread over `answers` (empty for the judge: per question then means per
    /// call).
    pub fn new(cost: aril_engine::CallCost, answers: &[crate::qa::Answer]) -> Self {
        let n = if answers.is_empty() {
            cost.llm_calls.max(1) as f64
        } else {
            answers.len() as f64
        };
        Self {
            llm_calls: cost.llm_calls,
            prompt_tokens: cost.prompt_tokens,
            completion_tokens: cost.completion_tokens,
            o200k_tokens: cost.o200k_tokens,
            o200k_tokens_per_question: cost.o200k_tokens as f64 / n,
            context_tokens_per_question: (!answers.is_empty())
                .then(|| answers.iter().map(|a| a.context_tokens).sum::<usize>() as f64 / n),
        }
    }
}

/// One benchmark run of one strategy.
#[derive(Debug, Clone)]
pub struct BenchReport {
    pub benchmark: String,
    pub data: String,
    pub strategy: String,
    pub embedder: String,
    pub n_questions: usize,
    pub metrics: Value,
    /// Per question type (LongMemEval: JSON `by_type`) or category (LoCoMo: `by_category`).
    pub by_group: Value,
    pub notes: Value,
    pub cost: Cost,
    /// Each question's top 10 sessions, for question-by-question comparison (`--rankings`).
    pub rankings: Vec<QuestionRanking>,
}

/// Where a metric's cell goes in the table: `n` first, then by name, each name's cut-offs in
/// increasing order (`recall@5`, `recall@10`, `recall@1k_tokens`, `recall@2k_tokens`).
fn reading_order(key: &str) -> (bool, String, u64, String) {
    let (name, cut) = key.split_once('@').unwrap_or((key, ""));
    let digits: String = cut.chars().take_while(char::is_ascii_digit).collect();
    let rest = &cut[digits.len()..];
    let mut n: u64 = digits.parse().unwrap_or(0);
    if rest.starts_with('k') {
        n = n.saturating_mul(1000);
    }
    (key != "n", name.to_string(), n, rest.to_string())
}

/// The report as JSON: the groups under `by_category` for LoCoMo, `by_type` otherwise.
#[derive(Serialize)]
struct ReportJson<'a> {
    benchmark: &'a str,
    data: &'a str,
    strategy: &'a str,
    embedder: &'a str,
    n_questions: usize,
    metrics: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    by_type: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    by_category: Option<&'a Value>,
    notes: &'a Value,
    cost: &'a Cost,
}

impl Serialize for BenchReport {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let locomo = self.benchmark == crate::Benchmark::Locomo.name();
        ReportJson {
            benchmark: &self.benchmark,
            data: &self.data,
            strategy: &self.strategy,
            embedder: &self.embedder,
            n_questions: self.n_questions,
            metrics: &self.metrics,
            by_type: (!locomo).then_some(&self.by_group),
            by_category: locomo.then_some(&self.by_group),
            notes: &self.notes,
            cost: &self.cost,
        }
        .serialize(serializer)
    }
}

/// One question's retrieved sessions, best first.
#[derive(Debug, Clone, Serialize)]
pub struct QuestionRanking {
    pub question_id: String,
    pub retrieved_ids: Vec<String>,
    /// LoCoMo: the source turn ids of the top units, a list per unit in rank order (up to
    /// [`crate::run::UNITS_SHOWN`]), so a question's evidence can be found in its ranking.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retrieved_turns: Vec<Vec<String>>,
    /// The answer and its scores (`--answer`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub qa: Option<crate::qa::QuestionQa>,
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
                            let mut m: Vec<(&String, &Value)> = m.iter().collect();
                            m.sort_by_key(|(k, _)| reading_order(k));
                            m.into_iter()
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
        if let Some(a) = self.notes.get("audit") {
            out.push_str(&format!(
                "  audit: {} of its {} entries are questions scored here, {} of them with other evidence\n",
                a["matched"], a["entries"], a["evidence_changed"]
            ));
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
        if let Some(m) = c.model.filter(|m| m.turns_stored > 0) {
            let per = |x: f64| x / m.turns_stored as f64;
            out.push_str(&format!(
                "  model: {} passes, {} word pieces for {} turns stored: {:.2} texts, {:.2} \
                 passes, {:.1} pieces per stored turn\n",
                m.passes,
                m.pieces,
                m.turns_stored,
                per(c.embedded_texts as f64),
                per(m.passes as f64),
                per(m.pieces as f64),
            ));
        }
        let strategy = self.notes.get("strategy");
        if let Some(per) = strategy.and_then(|s| s["turns_per_segment"].as_f64()) {
            out.push_str(&format!(
                "  segments: {} closed (an encoder call each when cards are written), {per:.2} \
                 turns and {:.0} o200k tokens each\n",
                strategy.map_or(serde_json::Value::Null, |s| s["segments"].clone()),
                strategy
                    .and_then(|s| s["tokens_per_segment"].as_f64())
                    .unwrap_or(0.0),
            ));
        }
        for (what, cost) in [("answer", &c.answer), ("judge", &c.judge)] {
            if let Some(q) = cost {
                out.push_str(&format!(
                    "  {what}: {} calls, {:.0} o200k tokens per question{}\n",
                    q.llm_calls,
                    q.o200k_tokens_per_question,
                    q.context_tokens_per_question
                        .map(|t| format!(" ({t:.0} of context)"))
                        .unwrap_or_default()
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(benchmark: &str) -> serde_json::Value {
        let r = BenchReport {
            benchmark: benchmark.into(),
            data: "f.json".into(),
            strategy: "aril".into(),
            embedder: "m".into(),
            n_questions: 1,
            metrics: serde_json::json!({}),
            by_group: serde_json::json!({"4 single-hop": {}}),
            notes: serde_json::json!({}),
            cost: Cost::default(),
            rankings: Vec::new(),
        };
        serde_json::to_value(&r).unwrap()
    }

    #[test]
    fn table_cells_read_in_cut_off_order() {
        let mut keys = vec![
            "recall@2k_tokens",
            "recall@10",
            "ndcg@5",
            "recall@1k_tokens",
            "n",
            "recall@5",
        ];
        keys.sort_by_key(|k| reading_order(k));
        assert_eq!(
            keys,
            vec![
                "n",
                "ndcg@5",
                "recall@5",
                "recall@10",
                "recall@1k_tokens",
                "recall@2k_tokens"
            ]
        );
    }

    #[test]
    fn locomo_groups_are_by_category_and_longmemeval_groups_by_type() {
        let locomo = report("locomo");
        assert!(locomo["by_category"]["4 single-hop"].is_object());
        assert!(locomo.get("by_type").is_none());
        let lme = report("longmemeval");
        assert!(lme["by_type"]["4 single-hop"].is_object());
        assert!(lme.get("by_category").is_none());
        assert!(lme.get("rankings").is_none());
    }
}
