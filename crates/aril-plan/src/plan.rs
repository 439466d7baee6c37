//! One question to a plan: the prompt, one call through `complete_json` (one repair round inside),
//! the checks the schema cannot make (real dates, a window that does not end before it starts, a
//! non-empty search text), and the typed plan.

use aril_core::parse_calendar_date;
use aril_llm::{ChatModel, JsonSpec, LlmError, Message, Purpose, complete_json};
use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use crate::schema::{PathOut, Reply, reply_schema};

/// The unit kinds a path searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Want {
    Cards,
    Turns,
}

/// An absolute time window, `[from, to)`; an open side is unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimeWindow {
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
}

/// One retrieval path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanPath {
    /// What this path looks for, in a few words.
    pub goal: String,
    /// The text searched (dense and BM25).
    pub query: String,
    pub entities: Vec<String>,
    pub topics: Vec<String>,
    pub window: Option<TimeWindow>,
    pub wants: Vec<Want>,
}

/// A question's retrieval paths.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub paths: Vec<PlanPath>,
}

impl Plan {
    /// The plan without a planner: the question itself over cards and turns, no window.
    pub fn single(question: &str) -> Self {
        Self {
            paths: vec![as_asked(question)],
        }
    }

    /// The plan with the question as asked for its last path (cards and turns, no window), unless
    /// a path searches it so already: a planner's paths add to what the question itself finds
    /// and never lose it. A small or confused model's plan ("query": a date, cards only, a window
    /// of the wrong day) otherwise leaves the evidence outside every path.
    pub fn with_question(mut self, question: &str) -> Self {
        let asked = as_asked(question);
        let searched = self.paths.iter().any(|p| {
            p.query.eq_ignore_ascii_case(&asked.query)
                && p.window.is_none()
                && asked.wants.iter().all(|w| p.wants.contains(w))
        });
        if !searched {
            self.paths.push(asked);
        }
        self
    }
}

/// The question itself over cards and turns, no window.
fn as_asked(question: &str) -> PlanPath {
    PlanPath {
        goal: "the question as asked".into(),
        query: question.trim().to_string(),
        entities: Vec::new(),
        topics: Vec::new(),
        window: None,
        wants: vec![Want::Cards, Want::Turns],
    }
}

/// Bounds of one planning call.
#[derive(Debug, Clone)]
pub struct PlanConfig {
    pub max_paths: usize,
    /// The reply's token cap. The default leaves room for the largest reply the schema admits
    /// for `max_paths` paths (a test holds it there): a reply cut off by the cap is not a plan,
    /// and costs a repair call.
    pub max_tokens: u32,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            max_paths: 4,
            max_tokens: 1024,
        }
    }
}

/// A plan and the calls it took (1, or 2 after a repair).
#[derive(Debug, Clone)]
pub struct Planned {
    pub plan: Plan,
    pub calls: u32,
}

const INSTRUCTIONS: &str = "You plan retrieval from a long-term memory of conversations. Split the \
question into 1 to 4 search paths, one per thing that must be found (a comparison or a question \
about two events needs two paths). For each path give: goal (what it finds), query (a short search \
text with the key words), entities (names of people, places, things), topics (short subjects), \
from and to (YYYY-MM-DD, inclusive; only when the question names or implies a time: resolve \
\"last week\", \"in May\", \"two years ago\" against today's date; otherwise null), and units: \
\"cards\" for extracted facts, \"turns\" for the exact words said (use both when unsure). Reply with \
JSON only.";

fn messages(question: &str, asked_at: DateTime<Utc>) -> Vec<Message> {
    vec![
        Message::system(INSTRUCTIONS),
        Message::user(format!(
            "Today is {} ({}).\nQuestion: {}",
            asked_at.format("%Y-%m-%d"),
            asked_at.format("%A"),
            question.trim()
        )),
    ]
}

/// A day's bounds: `from` is its first instant, `to` (inclusive in the reply) the next day's.
fn window(p: &PathOut) -> Result<Option<TimeWindow>, String> {
    let day = |s: &Option<String>, what: &str| -> Result<Option<DateTime<Utc>>, String> {
        match s {
            None => Ok(None),
            Some(s) => parse_calendar_date(s)
                .map(Some)
                .ok_or_else(|| format!("{what} {s:?} is not a real date (YYYY-MM-DD)")),
        }
    };
    let from = day(&p.from, "from")?;
    let to = day(&p.to, "to")?.map(|t| t + TimeDelta::days(1));
    if let (Some(f), Some(t)) = (from, to)
        && t <= f
    {
        return Err(format!(
            "the window ends ({}) before it starts ({})",
            p.to.as_deref().unwrap_or_default(),
            p.from.as_deref().unwrap_or_default()
        ));
    }
    Ok((from.is_some() || to.is_some()).then_some(TimeWindow { from, to }))
}

fn check(reply: &Reply) -> Result<(), String> {
    if reply.paths.is_empty() {
        return Err("the plan has no path".into());
    }
    for (i, p) in reply.paths.iter().enumerate() {
        if p.query.trim().is_empty() {
            return Err(format!("path {} has an empty query", i + 1));
        }
        window(p).map_err(|e| format!("path {}: {e}", i + 1))?;
    }
    Ok(())
}

fn wants(units: &[String]) -> Vec<Want> {
    let mut out = Vec::new();
    for (name, want) in [("cards", Want::Cards), ("turns", Want::Turns)] {
        if units.iter().any(|u| u == name) {
            out.push(want);
        }
    }
    if out.is_empty() {
        out = vec![Want::Cards, Want::Turns];
    }
    out
}

/// Plans a question asked at `asked_at` with one model call (two after a repair). Fails with
/// [`LlmError::InvalidReply`] when the reply stays unusable; the caller decides whether to fall
/// back to [`Plan::single`] (and says so).
pub fn plan_question(
    model: &dyn ChatModel,
    question: &str,
    asked_at: DateTime<Utc>,
    config: &PlanConfig,
) -> Result<Planned, LlmError> {
    if question.trim().is_empty() {
        return Err(LlmError::Config("the question is empty".into()));
    }
    let schema = reply_schema(config.max_paths.max(1));
    let reply = complete_json::<Reply>(
        model,
        Purpose::Plan,
        messages(question, asked_at),
        JsonSpec {
            name: "retrieval_plan",
            schema: &schema,
        },
        config.max_tokens,
        check,
    )?;
    let paths = reply
        .value
        .paths
        .iter()
        .map(|p| {
            Ok(PlanPath {
                goal: p.goal.trim().to_string(),
                query: p.query.trim().to_string(),
                entities: p.entities.iter().map(|e| e.trim().to_string()).collect(),
                topics: p.topics.iter().map(|t| t.trim().to_string()).collect(),
                window: window(p)?,
                wants: wants(&p.units),
            })
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(|reason| LlmError::InvalidReply { reason })?;
    Ok(Planned {
        plan: Plan { paths },
        calls: reply.calls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(query: &str, window: Option<TimeWindow>, wants: Vec<Want>) -> PlanPath {
        PlanPath {
            goal: "g".into(),
            query: query.into(),
            entities: Vec::new(),
            topics: Vec::new(),
            window,
            wants,
        }
    }

    #[test]
    fn the_question_joins_a_plan_that_does_not_search_it_as_asked() {
        let question = "Where did I adopt the beagle?";
        let day = TimeWindow {
            from: Some(Utc::now()),
            to: None,
        };
        for paths in [
            vec![path("2023-10-01", None, vec![Want::Cards])],
            vec![path(question, Some(day), vec![Want::Cards, Want::Turns])],
            vec![path(question, None, vec![Want::Cards])],
        ] {
            let plan = Plan {
                paths: paths.clone(),
            }
            .with_question(question);
            assert_eq!(plan.paths.len(), paths.len() + 1);
            assert_eq!(plan.paths.last(), Plan::single(question).paths.first());
        }
        // A path that searches the question as asked already (any case) is not repeated.
        let plan = Plan {
            paths: vec![path(
                "where did I adopt the beagle?",
                None,
                vec![Want::Turns, Want::Cards],
            )],
        };
        assert_eq!(plan.clone().with_question(question), plan);
    }

    /// The largest instance `schema` admits (every array at its most items, every string at its
    /// longest, of English words), for the reply schemas aril writes.
    fn largest(schema: &serde_json::Value) -> serde_json::Value {
        use serde_json::{Value, json};
        let longest = |values: Vec<Value>| {
            values
                .into_iter()
                .max_by_key(|v| v.to_string().len())
                .unwrap_or(Value::Null)
        };
        if let Some(options) = schema["anyOf"].as_array() {
            return longest(options.iter().map(largest).collect());
        }
        if let Some(options) = schema["enum"].as_array() {
            return longest(options.clone());
        }
        match schema["type"].as_str() {
            Some("object") => Value::Object(
                schema["properties"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), largest(v)))
                    .collect(),
            ),
            Some("array") => {
                let n = schema["maxItems"].as_u64().unwrap_or(1) as usize;
                Value::Array(vec![largest(&schema["items"]); n])
            }
            Some("string") => {
                // Unbounded strings here are the dates (`YYYY-MM-DD`, 10 characters).
                let len = schema["maxLength"].as_u64().unwrap_or(10) as usize;
                let words = "the book my sister recommended before our trip to Lisbon in May ";
                json!(words.repeat(len / words.len() + 1)[..len].to_string())
            }
            _ => Value::Null,
        }
    }

    #[test]
    fn the_default_token_cap_holds_the_largest_reply_the_schema_admits() {
        let config = PlanConfig::default();
        let reply = largest(&reply_schema(config.max_paths)).to_string();
        let parsed: crate::schema::Reply = serde_json::from_str(&reply).expect("a reply");
        assert_eq!(parsed.paths.len(), config.max_paths);
        // o200k tokens, with a quarter more for a model whose vocabulary is smaller.
        let tokens = aril_core::tokens::count(&reply);
        assert!(
            tokens * 5 / 4 <= config.max_tokens as usize,
            "{tokens} tokens ({} chars) against a cap of {}",
            reply.len(),
            config.max_tokens
        );
    }
}
