//! Gold labels, read only by the scorer after the strategy has ranked. Nothing in `data` or
//! `strategy` may use this module.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::Deserialize;

use crate::BenchError;

/// What is known to be right for one case.
#[derive(Debug, Clone, Default)]
pub struct Gold {
    /// LongMemEval `question_type`, LoCoMo category name, or empty.
    pub group: String,
    /// LongMemEval `answer_session_ids` (HotpotQA: supporting paragraph ids).
    pub answer_sessions: Vec<String>,
    /// LongMemEval's official gold: answer sessions with a user turn marked `has_answer`.
    pub official_sessions: Vec<String>,
    /// Abstention question (`_abs`).
    pub abstention: bool,
    /// LoCoMo evidence turn ids, resolved against the conversation (`D1:3`).
    pub evidence: Vec<String>,
    /// LoCoMo evidence ids that could not be resolved.
    pub unresolvable: usize,
    /// LoCoMo category (1-5), 0 elsewhere.
    pub category: u8,
    /// The gold answer as text (a number becomes its digits; LoCoMo's adversarial questions,
    /// which have none, get an empty one). LongMemEval's preference questions hold a rubric.
    pub answer: String,
}

/// A gold answer field as text: strings as they are, numbers and other values as JSON.
fn answer_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, BenchError> {
    let text = crate::read_text(path)?;
    serde_json::from_str(&text).map_err(|e| BenchError::data(path, e.to_string()))
}

/// LongMemEval gold by question id.
pub fn longmemeval(path: &Path) -> Result<HashMap<String, Gold>, BenchError> {
    #[derive(Deserialize)]
    struct Q {
        question_id: String,
        question_type: String,
        #[serde(default)]
        answer: serde_json::Value,
        answer_session_ids: Vec<String>,
        haystack_session_ids: Vec<String>,
        haystack_sessions: Vec<Vec<M>>,
    }
    #[derive(Deserialize)]
    struct M {
        role: String,
        #[serde(default)]
        has_answer: bool,
    }
    let qs: Vec<Q> = read(path)?;
    Ok(qs
        .into_iter()
        .map(|q| {
            let with_user_evidence: HashSet<&String> = q
                .haystack_session_ids
                .iter()
                .zip(&q.haystack_sessions)
                .filter(|(_, s)| s.iter().any(|m| m.role == "user" && m.has_answer))
                .map(|(id, _)| id)
                .collect();
            let official = q
                .answer_session_ids
                .iter()
                .filter(|id| with_user_evidence.contains(id))
                .cloned()
                .collect();
            let gold = Gold {
                group: q.question_type,
                answer_sessions: q.answer_session_ids,
                official_sessions: official,
                abstention: q.question_id.ends_with("_abs"),
                answer: answer_text(&q.answer),
                ..Gold::default()
            };
            (q.question_id, gold)
        })
        .collect())
}

/// LoCoMo category names (the benchmark's numbering).
pub fn locomo_category(c: u8) -> &'static str {
    match c {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        5 => "adversarial",
        _ => "unknown",
    }
}

/// Resolves a LoCoMo evidence id against the conversation's turn ids: `D1:3` as is; malformed
/// forms such as `D:11:26` or `D30:05` by their numbers when that names an existing turn.
pub fn resolve_evidence(raw: &str, turns: &HashSet<String>) -> Option<String> {
    let raw = raw.trim();
    if turns.contains(raw) {
        return Some(raw.to_string());
    }
    let numbers: Vec<u32> = raw
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    match numbers.as_slice() {
        [s, t] => {
            let id = format!("D{s}:{t}");
            turns.contains(&id).then_some(id)
        }
        _ => None,
    }
}

/// LoCoMo gold by case id (`conversation#index`, matching [`crate::data::locomo`]).
pub fn locomo(path: &Path) -> Result<HashMap<String, Gold>, BenchError> {
    #[derive(Deserialize)]
    struct Sample {
        sample_id: String,
        qa: Vec<Qa>,
        conversation: HashMap<String, serde_json::Value>,
    }
    #[derive(Deserialize)]
    struct Qa {
        #[serde(default)]
        evidence: Vec<String>,
        category: u8,
        #[serde(default)]
        answer: serde_json::Value,
    }
    let samples: Vec<Sample> = read(path)?;
    let mut out = HashMap::new();
    for s in samples {
        let turns: HashSet<String> = s
            .conversation
            .values()
            .filter_map(|v| v.as_array())
            .flatten()
            .filter_map(|t| t.get("dia_id").and_then(|d| d.as_str()).map(str::to_string))
            .collect();
        for (i, q) in s.qa.into_iter().enumerate() {
            let mut evidence = Vec::new();
            let mut unresolvable = 0;
            for raw in q.evidence.iter().flat_map(|e| e.split(';')) {
                match resolve_evidence(raw, &turns) {
                    Some(id) if !evidence.contains(&id) => evidence.push(id),
                    Some(_) => {}
                    None => unresolvable += 1,
                }
            }
            out.insert(
                format!("{}#{}", s.sample_id, i),
                Gold {
                    group: locomo_category(q.category).to_string(),
                    category: q.category,
                    evidence,
                    unresolvable,
                    answer: answer_text(&q.answer),
                    ..Gold::default()
                },
            );
        }
    }
    Ok(out)
}

/// HotpotQA gold: supporting paragraph ids by question id.
pub fn hotpotqa(path: &Path) -> Result<HashMap<String, Gold>, BenchError> {
    #[derive(Deserialize)]
    struct Line {
        question_id: String,
        contexts: Vec<P>,
        #[serde(default)]
        answers_objects: Vec<AnswerObject>,
    }
    #[derive(Deserialize)]
    struct AnswerObject {
        #[serde(default)]
        spans: Vec<String>,
    }
    #[derive(Deserialize)]
    struct P {
        id: String,
        is_supporting: bool,
    }
    let text = crate::read_text(path)?;
    let mut out = HashMap::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let l: Line = serde_json::from_str(line)
            .map_err(|e| BenchError::data(path, format!("line {}: {e}", n + 1)))?;
        let supporting = l
            .contexts
            .into_iter()
            .filter(|p| p.is_supporting)
            .map(|p| p.id)
            .collect();
        out.insert(
            l.question_id,
            Gold {
                answer_sessions: supporting,
                answer: l
                    .answers_objects
                    .iter()
                    .flat_map(|a| a.spans.iter())
                    .next()
                    .cloned()
                    .unwrap_or_default(),
                ..Gold::default()
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_locomo_evidence_is_resolved_when_unambiguous() {
        let turns: HashSet<String> = ["D1:3", "D11:26", "D3:5"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(resolve_evidence("D1:3", &turns).as_deref(), Some("D1:3"));
        assert_eq!(
            resolve_evidence("D:11:26", &turns).as_deref(),
            Some("D11:26")
        );
        assert_eq!(resolve_evidence("D30:05", &turns), None);
        assert_eq!(resolve_evidence("D3:05", &turns).as_deref(), Some("D3:5"));
        assert_eq!(resolve_evidence("nonsense", &turns), None);
    }
}
