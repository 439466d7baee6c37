//! Gold labels, read only by the scorer after the strategy has ranked. Nothing in `data` or
//! `strategy` may use this module.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::Deserialize;

use crate::BenchError;
use crate::data::{Case, HotpotFile};

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
    let qs: Vec<Q> = crate::read_json(path)?;
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

/// The ids one LoCoMo evidence entry names: entries may join several with `;` or `,`
/// (`D8:6; D9:17`), or with spaces when every word is a whole id (`D9:1 D4:4`); a piece whose
/// words are not all ids (`D 9:1`) stays one malformed id for [`resolve_evidence`].
fn evidence_entry_ids(entry: &str) -> Vec<&str> {
    let whole_id = |w: &str| {
        w.strip_prefix('D')
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(s, t)| {
                [s, t]
                    .iter()
                    .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
    };
    entry
        .split([';', ','])
        .flat_map(|piece| {
            let words: Vec<&str> = piece.split_whitespace().collect();
            if words.len() > 1 && words.iter().all(|w| whole_id(w)) {
                words
            } else {
                vec![piece]
            }
        })
        .collect()
}

/// A LoCoMo evidence list resolved by [`resolve_evidence`], entry by entry
/// ([`evidence_entry_ids`]); each id is kept once, in order. Returns the ids and how many could
/// not be resolved.
fn resolve_evidence_list(raw: &[String], turns: &HashSet<String>) -> (Vec<String>, usize) {
    let mut evidence = Vec::new();
    let mut unresolvable = 0;
    for id in raw.iter().flat_map(|e| evidence_entry_ids(e)) {
        match resolve_evidence(id, turns) {
            Some(id) if !evidence.contains(&id) => evidence.push(id),
            Some(_) => {}
            None => unresolvable += 1,
        }
    }
    (evidence, unresolvable)
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
    let samples: Vec<Sample> = crate::read_json(path)?;
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
            let (evidence, unresolvable) = resolve_evidence_list(&q.evidence, &turns);
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

/// Corrected LoCoMo evidence and answers from an audit of its answer key, for second views of
/// evidence recall and answer scores beside the official ones (the headline stays official).
///
/// The format is that of `errors.json` in the public LoCoMo audit (dial481/locomo-audit, CC
/// BY-NC 4.0; shipped here as `shared/data/locomo/locomo_audit_errors.json`): a list of entries
/// with `question_id` (`locomo_<conversation>_qa<index>`, the index 0-based in the
/// conversation's `qa` list), `question`, `correct_evidence` and, optionally, `correct_answer`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditedGold {
    /// Corrected evidence by case id, resolved like the official evidence; empty when none of
    /// the entry's ids names a turn of the conversation.
    pub evidence: HashMap<String, Vec<String>>,
    /// Corrected answers by case id (entries with a non-empty `correct_answer`).
    pub answers: HashMap<String, String>,
    /// Entries in the audit file.
    pub entries: usize,
    /// Entries whose question is not in the cases scored (another conversation, or cut by
    /// `--limit`), or that match more than one.
    pub unmatched: usize,
    /// Corrected evidence ids that name no turn.
    pub unresolvable: usize,
}

/// The entries of an audit file, read before any question is ranked (a malformed file fails the
/// run at once) and matched to the cases only when scoring.
#[derive(Debug, Clone)]
pub struct LocomoAudit {
    entries: Vec<AuditEntry>,
}

#[derive(Debug, Clone)]
struct AuditEntry {
    /// The 0-based position in its conversation's `qa` list.
    index: usize,
    question: String,
    correct_evidence: Vec<String>,
    correct_answer: Option<String>,
}

impl LocomoAudit {
    /// Reads an audit file of the format above.
    pub fn read(path: &Path) -> Result<Self, BenchError> {
        #[derive(Deserialize)]
        struct Entry {
            question_id: String,
            question: String,
            correct_evidence: Vec<String>,
            #[serde(default)]
            correct_answer: Option<String>,
        }
        let raw: Vec<Entry> = crate::read_json(path)?;
        let mut entries = Vec::with_capacity(raw.len());
        for e in raw {
            let index = e
                .question_id
                .rsplit_once("_qa")
                .and_then(|(_, i)| i.parse::<usize>().ok())
                .ok_or_else(|| {
                    BenchError::data(
                        path,
                        format!(
                            "question_id {:?} is not of the form locomo_<conversation>_qa<index>",
                            e.question_id
                        ),
                    )
                })?;
            entries.push(AuditEntry {
                index,
                question: e.question,
                correct_evidence: e.correct_evidence,
                correct_answer: e.correct_answer.filter(|a| !a.trim().is_empty()),
            });
        }
        Ok(LocomoAudit { entries })
    }

    /// Matches each entry to the case at the entry's `qa` index whose question is the entry's,
    /// word for word, and resolves its evidence against that conversation's turns. The
    /// conversation number of the entry's id is not used: it counts the full ten-conversation
    /// file, and a file of the official format may hold any of them in any order.
    pub fn resolve(&self, cases: &[Case]) -> AuditedGold {
        let mut audit = AuditedGold {
            entries: self.entries.len(),
            ..AuditedGold::default()
        };
        for e in &self.entries {
            let suffix = format!("#{}", e.index);
            let mut hits = cases
                .iter()
                .filter(|c| c.id.ends_with(&suffix) && c.question.trim() == e.question.trim());
            let (Some(case), None) = (hits.next(), hits.next()) else {
                audit.unmatched += 1;
                continue;
            };
            let turns: HashSet<String> = case
                .sessions
                .iter()
                .flat_map(|s| s.turns.iter().map(|t| t.id.clone()))
                .collect();
            let (evidence, unresolvable) = resolve_evidence_list(&e.correct_evidence, &turns);
            audit.unresolvable += unresolvable;
            audit.evidence.insert(case.id.clone(), evidence);
            if let Some(answer) = &e.correct_answer {
                audit.answers.insert(case.id.clone(), answer.clone());
            }
        }
        audit
    }
}

/// HotpotQA gold: supporting paragraph ids by question id, from either form
/// [`crate::data::hotpotqa`] reads (in HotpotQA's own, the paragraphs whose titles
/// `supporting_facts` names, by position in `context`).
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
    #[derive(Deserialize)]
    struct Question {
        #[serde(rename = "_id")]
        id: String,
        #[serde(default)]
        answer: String,
        context: Vec<(String, serde::de::IgnoredAny)>,
        supporting_facts: Vec<(String, serde::de::IgnoredAny)>,
    }
    let gold = |supporting: Vec<String>, answer: String| Gold {
        answer_sessions: supporting,
        answer,
        ..Gold::default()
    };
    Ok(match crate::data::read_hotpotqa::<Line, Question>(path)? {
        HotpotFile::Lines(lines) => lines
            .into_iter()
            .map(|l| {
                let supporting = l
                    .contexts
                    .into_iter()
                    .filter(|p| p.is_supporting)
                    .map(|p| p.id)
                    .collect();
                let answer = l
                    .answers_objects
                    .iter()
                    .flat_map(|a| a.spans.iter())
                    .next()
                    .cloned()
                    .unwrap_or_default();
                (l.question_id, gold(supporting, answer))
            })
            .collect(),
        HotpotFile::Original(questions) => questions
            .into_iter()
            .map(|q| {
                let titles: HashSet<&String> = q.supporting_facts.iter().map(|(t, _)| t).collect();
                let supporting = q
                    .context
                    .iter()
                    .enumerate()
                    .filter(|(_, (title, _))| titles.contains(title))
                    .map(|(i, _)| i.to_string())
                    .collect();
                (q.id, gold(supporting, q.answer))
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{HSession, HTurn};

    /// A LoCoMo case `conv#index` asking `question`, its conversation holding `turns`.
    fn case(conv: &str, index: usize, question: &str, turns: &[&str]) -> Case {
        let turns = turns
            .iter()
            .map(|id| HTurn {
                id: id.to_string(),
                role: aril_core::Role::User,
                speaker: None,
                text: String::new(),
            })
            .collect();
        Case {
            id: format!("{conv}#{index}"),
            question: question.into(),
            question_date: None,
            haystack_key: conv.into(),
            sessions: std::sync::Arc::new(vec![HSession {
                id: "session_1".into(),
                date: None,
                turns,
            }]),
        }
    }

    fn audit_file(dir: &Path, entries: serde_json::Value) -> std::path::PathBuf {
        let path = dir.join("audit.json");
        std::fs::write(&path, entries.to_string()).unwrap();
        path
    }

    #[test]
    fn audit_entries_match_by_position_and_question_whatever_the_conversation_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = audit_file(
            dir.path(),
            serde_json::json!([
                // conversation 7 of the full file is the first one here: the number is not used
                {"question_id": "locomo_7_qa1", "question": "Where did Ann go?",
                 "correct_evidence": ["D1:2", "D:1:3", "D9:9"], "error_type": "WRONG_CITATION",
                 "correct_answer": "To Rome"},
                // the same position in the other conversation asks something else
                {"question_id": "locomo_0_qa0", "question": "Not asked anywhere?",
                 "correct_evidence": ["D1:1"]},
            ]),
        );
        let cases = [
            case("a", 0, "When did Ann leave?", &["D1:1", "D1:2", "D1:3"]),
            case("a", 1, "Where did Ann go?", &["D1:1", "D1:2", "D1:3"]),
            case("b", 1, "Who is Ben?", &["D1:1"]),
        ];
        let audit = LocomoAudit::read(&path).unwrap().resolve(&cases);
        assert_eq!(audit.entries, 2);
        assert_eq!(audit.unmatched, 1);
        // `D:1:3` is resolved as the official evidence is; `D9:9` names no turn.
        assert_eq!(
            audit.evidence,
            [(
                "a#1".to_string(),
                vec!["D1:2".to_string(), "D1:3".to_string()]
            )]
            .into()
        );
        assert_eq!(audit.unresolvable, 1);
        assert_eq!(
            audit.answers,
            [("a#1".to_string(), "To Rome".to_string())].into()
        );
    }

    #[test]
    fn a_malformed_audit_file_is_refused_with_its_path_and_the_entry() {
        let dir = tempfile::tempdir().unwrap();
        let bad_id = audit_file(
            dir.path(),
            serde_json::json!([{"question_id": "q12", "question": "?", "correct_evidence": []}]),
        );
        let e = LocomoAudit::read(&bad_id).unwrap_err().to_string();
        assert!(e.contains("audit.json") && e.contains("\"q12\""), "{e}");
        let missing_field = audit_file(
            dir.path(),
            serde_json::json!([{"question_id": "locomo_0_qa1", "question": "?"}]),
        );
        let e = LocomoAudit::read(&missing_field).unwrap_err().to_string();
        assert!(e.contains("correct_evidence"), "{e}");
        let e = LocomoAudit::read(&dir.path().join("none.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none.json"), "{e}");
    }

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

    #[test]
    fn an_evidence_entry_joining_several_ids_counts_each() {
        let turns: HashSet<String> = ["D1:3", "D11:26", "D3:5", "D9:17"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let list = |entries: &[&str]| {
            let raw: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
            resolve_evidence_list(&raw, &turns)
        };
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(list(&["D1:3; D9:17"]), (ids(&["D1:3", "D9:17"]), 0));
        assert_eq!(list(&["D1:3, D3:5"]), (ids(&["D1:3", "D3:5"]), 0));
        assert_eq!(
            list(&["D1:3 D3:5 D9:17"]),
            (ids(&["D1:3", "D3:5", "D9:17"]), 0)
        );
        // One of the joined ids names no turn: the others still count, it is unresolvable.
        assert_eq!(list(&["D1:3 D7:7"]), (ids(&["D1:3"]), 1));
        // Words that are not all whole ids stay one malformed id, resolved by its numbers.
        assert_eq!(list(&["D 3:5"]), (ids(&["D3:5"]), 0));
        assert_eq!(list(&["D:11:26"]), (ids(&["D11:26"]), 0));
        // An id named twice is kept once.
        assert_eq!(list(&["D1:3", "D1:3; D3:5"]), (ids(&["D1:3", "D3:5"]), 0));
    }

    #[test]
    fn hotpotqa_reads_its_original_json_as_it_reads_the_line_form() {
        let dir = tempfile::tempdir().unwrap();
        let original = serde_json::json!([{
            "_id": "q1", "question": "Which city?", "answer": "Paris", "type": "bridge",
            "level": "hard",
            "supporting_facts": [["B", 0], ["C", 1], ["C", 0]],
            "context": [
                ["A", ["A one.", " A two."]],
                ["B", ["B one."]],
                ["C", ["C one.", " C two."]]
            ]
        }]);
        let lines = serde_json::json!({
            "question_id": "q1", "question_text": "Which city?",
            "answers_objects": [{"spans": ["Paris"]}],
            "contexts": [
                {"id": "0", "title": "A", "paragraph_text": "A one. A two.", "is_supporting": false},
                {"id": "1", "title": "B", "paragraph_text": "B one.", "is_supporting": true},
                {"id": "2", "title": "C", "paragraph_text": "C one. C two.", "is_supporting": true}
            ]
        });
        let write = |name: &str, text: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let a = write("hotpot.json", original.to_string());
        let b = write("hotpot.jsonl", format!("{lines}\n"));
        let (cases_a, cases_b) = (
            crate::data::hotpotqa(&a).unwrap(),
            crate::data::hotpotqa(&b).unwrap(),
        );
        assert_eq!(format!("{cases_a:?}"), format!("{cases_b:?}"));
        assert_eq!(cases_a[0].sessions[2].turns[0].text, "C: C one. C two.");
        let (gold_a, gold_b) = (hotpotqa(&a).unwrap(), hotpotqa(&b).unwrap());
        assert_eq!(gold_a["q1"].answer_sessions, ["1", "2"]);
        assert_eq!(gold_a["q1"].answer_sessions, gold_b["q1"].answer_sessions);
        assert_eq!(gold_a["q1"].answer, "Paris");
        // The strategies' view holds no gold: without it the cases are the same.
        let mut stripped = original.clone();
        for key in ["answer", "supporting_facts", "type", "level"] {
            stripped[0].as_object_mut().unwrap().remove(key);
        }
        let c = write("stripped.json", stripped.to_string());
        let cases_c = crate::data::hotpotqa(&c).unwrap();
        assert_eq!(format!("{cases_a:?}"), format!("{cases_c:?}"));
        // A malformed file is an error naming it.
        let bad = write(
            "bad.json",
            r#"[{"_id": "q1", "question": "?", "context": [["A"]]}]"#.into(),
        );
        let e = crate::data::hotpotqa(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.json"), "{e}");
    }
}
