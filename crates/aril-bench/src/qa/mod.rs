//! Answers and their scores (`aril bench --answer [--judge]`): the answerer reads the units a
//! strategy ranked (cut at a token budget, each with its session's date) and writes a short
//! answer; after every answer is fixed, the scorer compares it with the gold answer by token
//! metrics and, with a judge model, by the benchmark's judge prompt.

pub mod metrics;
mod prompts;
mod score;

pub use score::{QaScores, QuestionQa, score};

use std::collections::HashSet;
use std::sync::Arc;

use aril_core::tokens;
use aril_engine::CallCost;
use aril_engine::llm::{
    ChatModel, ChatRequest, JsonSpec, LlmError, Message, Metered, Purpose, ResponseFormat,
    complete_json,
};
use serde::Serialize;
use serde_json::json;

use crate::data::Case;
use crate::run::Benchmark;
use crate::strategy::Unit;

/// What `--answer` and `--judge` use.
#[derive(Clone)]
pub struct QaOptions {
    pub answerer: Arc<dyn ChatModel>,
    /// Grades answers; without it only the token metrics are reported.
    pub judge: Option<Arc<dyn ChatModel>>,
    /// o200k tokens of ranked units the answerer reads.
    pub context_budget: usize,
}

/// Default context the answerer reads: between the paper's per-question budget and ours at 2k.
pub const DEFAULT_CONTEXT_BUDGET: usize = 2000;

/// One question's answer (or why there is none) and what it cost.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Answer {
    pub text: String,
    /// The answerer's error when it gave no usable answer; the question then scores 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub context_tokens: usize,
    #[serde(skip)]
    pub cost: CallCost,
}

/// The units in rank order, each under its session's id and date, cut at `budget` o200k tokens
/// (a unit that does not fit is passed over; a later, smaller one may still fit).
pub fn answer_context(case: &Case, units: &[Unit], budget: usize) -> (String, usize) {
    let mut seen = HashSet::new();
    let mut out = String::new();
    let mut used = 0;
    for u in units {
        if !seen.insert(u.text.as_str()) {
            continue;
        }
        let date = case
            .sessions
            .iter()
            .find(|s| s.id == u.session)
            .and_then(|s| s.date.as_deref())
            .unwrap_or("date unknown");
        let block = format!("[{date}] (session {})\n{}\n\n", u.session, u.text.trim());
        let n = tokens::count(&block);
        if used + n > budget {
            continue;
        }
        used += n;
        out.push_str(&block);
    }
    (out, used)
}

/// Asks `model` the case's question over the context. A transport failure or an empty reply is
/// kept as the answer's error, not raised: one bad call must not end a long run, and the report
/// counts them.
pub fn answer(model: &dyn ChatModel, case: &Case, context: &str, context_tokens: usize) -> Answer {
    let asked = case.question_date.as_deref().unwrap_or("unknown");
    let request = ChatRequest {
        messages: vec![
            Message::system(prompts::ANSWER),
            Message::user(format!(
                "Memories:\n{}\nThe question is asked on {asked}.\nQuestion: {}\nShort answer:",
                if context.is_empty() {
                    "(none found)\n"
                } else {
                    context
                },
                case.question.trim()
            )),
        ],
        max_tokens: 120,
        temperature: 0.0,
        format: ResponseFormat::Text,
    };
    match model.chat(Purpose::Answer, &request) {
        Ok(reply) => {
            let cost = CallCost::of(std::slice::from_ref(&reply.record));
            let text = reply.content.trim().to_string();
            Answer {
                error: text.is_empty().then(|| "the answer was empty".to_string()),
                text,
                context_tokens,
                cost,
            }
        }
        Err(e) => Answer {
            error: Some(e.to_string()),
            context_tokens,
            ..Answer::default()
        },
    }
}

/// Which judge prompt grades a question: LoCoMo's (Mem0's J), or LongMemEval's by question type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JudgeRubric {
    Locomo,
    Standard,
    Temporal,
    KnowledgeUpdate,
    Preference,
    Abstention,
}

impl JudgeRubric {
    /// The rubric for a question of this benchmark, group (type or category) and abstention flag.
    pub fn for_question(benchmark: Benchmark, group: &str, abstention: bool) -> Self {
        match benchmark {
            Benchmark::Locomo => JudgeRubric::Locomo,
            _ if abstention => JudgeRubric::Abstention,
            _ => match group {
                "temporal-reasoning" => JudgeRubric::Temporal,
                "knowledge-update" => JudgeRubric::KnowledgeUpdate,
                "single-session-preference" => JudgeRubric::Preference,
                _ => JudgeRubric::Standard,
            },
        }
    }
}

/// A judge's verdict and what it cost.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub correct: bool,
    pub cost: CallCost,
}

/// Grades `answer` against `gold` with the rubric's prompt; the judge replies in a JSON schema
/// with one label, validated (one repair round) like every structured reply.
pub fn judge(
    model: &dyn ChatModel,
    rubric: JudgeRubric,
    question: &str,
    gold: &str,
    answer: &str,
) -> Result<Verdict, LlmError> {
    let (prompt, labels) = prompts::judge(rubric, question, gold, answer);
    let schema = json!({
        "type": "object",
        "properties": {"label": {"enum": labels}},
        "required": ["label"],
        "additionalProperties": false
    });
    #[derive(serde::Deserialize)]
    struct Label {
        label: String,
    }
    let metered = Metered::new(model);
    let reply = complete_json::<Label>(
        &metered,
        Purpose::Judge,
        vec![Message::user(prompt)],
        JsonSpec {
            name: "verdict",
            schema: &schema,
        },
        40,
        |_| Ok(()),
    );
    let cost = CallCost::of(&metered.take());
    let label = reply?.value.label;
    Ok(Verdict {
        correct: label == labels[0],
        cost,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{HSession, HTurn};

    #[test]
    fn the_context_dates_each_unit_by_its_session_and_keeps_to_the_budget() {
        let case = Case {
            id: "q".into(),
            question: "Where did I go?".into(),
            question_date: None,
            haystack_key: "h".into(),
            sessions: Arc::new(vec![HSession {
                id: "s1".into(),
                date: Some("8 May 2023".into()),
                turns: Vec::<HTurn>::new(),
            }]),
        };
        let unit = |session: &str, text: &str| Unit {
            session: session.into(),
            turns: vec![],
            text: text.into(),
        };
        let long = "word ".repeat(400);
        let units = [
            unit("s1", "I went to Lisbon."),
            unit("s1", "I went to Lisbon."),
            unit("s2", &long),
            unit("s2", "A short one still fits."),
        ];
        let (context, used) = answer_context(&case, &units, 60);
        assert!(context.starts_with("[8 May 2023] (session s1)\nI went to Lisbon."));
        assert_eq!(context.matches("Lisbon").count(), 1, "{context}");
        assert!(!context.contains("word word"));
        assert!(context.contains("[date unknown] (session s2)\nA short one still fits."));
        assert_eq!(used, tokens::count(&context));
    }

    #[test]
    fn longmemeval_types_pick_their_rubric_and_locomo_has_one() {
        use JudgeRubric::*;
        let lme = Benchmark::LongMemEval;
        assert_eq!(
            JudgeRubric::for_question(lme, "temporal-reasoning", false),
            Temporal
        );
        assert_eq!(
            JudgeRubric::for_question(lme, "knowledge-update", false),
            KnowledgeUpdate
        );
        assert_eq!(
            JudgeRubric::for_question(lme, "single-session-preference", false),
            Preference
        );
        assert_eq!(
            JudgeRubric::for_question(lme, "temporal-reasoning", true),
            Abstention
        );
        assert_eq!(
            JudgeRubric::for_question(lme, "multi-session", false),
            Standard
        );
        assert_eq!(
            JudgeRubric::for_question(Benchmark::Locomo, "temporal", false),
            Locomo
        );
    }
}
