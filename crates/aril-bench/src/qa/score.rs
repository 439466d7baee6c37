//! Scoring answers: token metrics for every answered question and, with a judge, the judge's
//! verdict — run after every answer is fixed, the only place answers meet gold.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};

use aril_engine::CallCost;
use aril_engine::llm::ChatModel;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::metrics::{locomo_f1, mem0_bleu1, mem0_f1};
use super::{Answer, JudgeRubric, judge};
use crate::data::Case;
use crate::gold::Gold;
use crate::run::Benchmark;
use crate::score::Mean;

/// One question's answer and its scores, for `--rankings`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QuestionQa {
    pub answer: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer_error: Option<String>,
    pub f1: f64,
    pub bleu1: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locomo_f1: Option<f64>,
    /// The judge's verdict (absent when not judged or the judge failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correct: Option<bool>,
    /// With `--audit`: the audit's answer, where it differs from the official one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected_answer: Option<String>,
    /// With `--audit` and `--judge`: the verdict against the audit's answer (the official
    /// verdict where the answers agree).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correct_audited: Option<bool>,
}

/// Answer scores: headline and per-group `qa` and `judge` metric groups, per question, and the
/// judge's cost.
#[derive(Debug, Default)]
pub struct QaScores {
    pub metrics: Map<String, Value>,
    pub by_group: BTreeMap<String, Map<String, Value>>,
    pub per_question: Vec<QuestionQa>,
    pub judge_cost: CallCost,
    /// Judge calls that gave no usable verdict (those questions are left out of `j`).
    pub judge_failures: Vec<String>,
}

/// The group a question is reported under, as the retrieval scores name it.
fn group_key(benchmark: Benchmark, g: &Gold) -> Option<String> {
    match benchmark {
        Benchmark::Locomo => Some(format!("{} {}", g.category, g.group)),
        Benchmark::LongMemEval => Some(g.group.clone()),
        Benchmark::HotpotQa => None,
    }
}

/// Whether a question counts in the headline (LoCoMo: categories 1–4) and is judged (LoCoMo's
/// adversarial category is not, as in Mem0's evaluation).
fn in_headline(benchmark: Benchmark, g: &Gold) -> bool {
    benchmark != Benchmark::Locomo || (1..=4).contains(&g.category)
}

/// Token metrics of `said` against `gold`: Mem0's F1 and BLEU-1, and on LoCoMo its official F1.
fn token_scores(benchmark: Benchmark, said: &str, gold: &str, category: u8) -> Vec<(String, f64)> {
    let mut values = vec![
        ("f1".to_string(), mem0_f1(said, gold)),
        ("bleu1".to_string(), mem0_bleu1(said, gold)),
    ];
    if benchmark == Benchmark::Locomo {
        values.push(("locomo_f1".to_string(), locomo_f1(said, gold, category)));
    }
    values
}

/// The metric groups of the answer scores, overall (headline questions) and per question group.
#[derive(Default)]
struct Tally {
    headline: BTreeMap<&'static str, Mean>,
    by_group: BTreeMap<String, BTreeMap<&'static str, Mean>>,
}

impl Tally {
    fn add(
        &mut self,
        metric: &'static str,
        group: Option<&String>,
        headline: bool,
        v: &[(String, f64)],
    ) {
        if let Some(k) = group {
            self.by_group
                .entry(k.clone())
                .or_default()
                .entry(metric)
                .or_default()
                .add(v);
        }
        if headline {
            self.headline.entry(metric).or_default().add(v);
        }
    }
}

/// Scores `answers` (one per case) against the gold; with `judge`, asks it about each headline
/// question, calling `progress(done, total)` and stopping early when `cancel` is raised. With
/// `audited` answers (LoCoMo's audit, by case id), the groups `qa_audited` and `judge_audited`
/// score the same answers against the corrected answer where there is one (a second judge call
/// only where it differs from the official answer).
#[allow(clippy::too_many_arguments)]
pub fn score(
    benchmark: Benchmark,
    cases: &[Case],
    answers: &[Answer],
    gold: &HashMap<String, Gold>,
    audited: Option<&HashMap<String, String>>,
    judge_model: Option<&dyn ChatModel>,
    progress: &mut dyn FnMut(usize, usize),
    cancel: &AtomicBool,
) -> QaScores {
    let mut out = QaScores::default();
    let mut tally = Tally::default();
    let failed = answers.iter().filter(|a| a.error.is_some()).count();
    let total = cases.len().min(answers.len());
    for (done, (case, answer)) in cases.iter().zip(answers).enumerate() {
        let Some(g) = gold.get(&case.id) else {
            out.per_question.push(QuestionQa::default());
            continue;
        };
        let values = token_scores(benchmark, &answer.text, &g.answer, g.category);
        let at = |name: &str| values.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
        let mut q = QuestionQa {
            answer: answer.text.clone(),
            answer_error: answer.error.clone(),
            f1: at("f1").unwrap_or_default(),
            bleu1: at("bleu1").unwrap_or_default(),
            locomo_f1: at("locomo_f1"),
            correct: None,
            corrected_answer: None,
            correct_audited: None,
        };
        let key = group_key(benchmark, g);
        let headline = in_headline(benchmark, g);
        tally.add("qa", key.as_ref(), headline, &values);
        // The audit's answer where it differs from the official one.
        let corrected = audited
            .and_then(|a| a.get(&case.id))
            .filter(|c| c.trim() != g.answer.trim());
        if audited.is_some() {
            let audited_values = match corrected {
                Some(c) => token_scores(benchmark, &answer.text, c, g.category),
                None => values.clone(),
            };
            tally.add("qa_audited", key.as_ref(), headline, &audited_values);
            q.corrected_answer = corrected.cloned();
        }
        if let Some(model) = judge_model
            && headline
            && !cancel.load(Ordering::SeqCst)
        {
            let rubric = JudgeRubric::for_question(benchmark, &g.group, g.abstention);
            let said = if answer.text.is_empty() {
                "(no answer)"
            } else {
                &answer.text
            };
            let mut ask = |gold_answer: &str, label: &str| match judge(
                model,
                rubric,
                &case.question,
                gold_answer,
                said,
            ) {
                Ok(v) => {
                    out.judge_cost.add(v.cost);
                    Some(v.correct)
                }
                Err(e) => {
                    out.judge_failures.push(format!("{}{label}: {e}", case.id));
                    None
                }
            };
            q.correct = ask(&g.answer, "");
            if let Some(c) = q.correct {
                tally.add("judge", key.as_ref(), true, &[verdict(c)]);
            }
            if audited.is_some() {
                q.correct_audited = match corrected {
                    Some(c) => ask(c, " (audited answer)"),
                    None => q.correct,
                };
                if let Some(c) = q.correct_audited {
                    tally.add("judge_audited", key.as_ref(), true, &[verdict(c)]);
                }
            }
            progress(done + 1, total);
        }
        out.per_question.push(q);
    }
    let judged = judge_model.is_some();
    for metric in ["qa", "qa_audited", "judge", "judge_audited"] {
        let wanted = match metric {
            "qa" => true,
            "qa_audited" => audited.is_some(),
            "judge" => judged,
            _ => judged && audited.is_some(),
        };
        if !wanted {
            continue;
        }
        let mut m = tally
            .headline
            .get(metric)
            .map(Mean::json)
            .unwrap_or_else(|| Mean::default().json());
        if let Some(o) = m.as_object_mut() {
            match metric {
                "qa" => {
                    o.insert("answer_failed".into(), json!(failed));
                }
                "judge" => {
                    o.insert("judge_failed".into(), json!(out.judge_failures.len()));
                }
                _ => {}
            }
        }
        out.metrics.insert(metric.into(), m);
    }
    for (k, metrics) in tally.by_group {
        let entry = out.by_group.entry(k).or_default();
        for (metric, mean) in metrics {
            entry.insert(metric.into(), mean.json());
        }
    }
    out
}

/// A judge verdict as the `j` metric.
fn verdict(correct: bool) -> (String, f64) {
    ("j".to_string(), f64::from(u8::from(correct)))
}

#[cfg(test)]
mod tests {
    use aril_llm::Scripted;

    use super::*;

    fn said(text: &str) -> Answer {
        Answer {
            text: text.into(),
            ..Answer::default()
        }
    }

    #[test]
    fn adversarial_questions_are_scored_apart_and_not_judged() {
        let cases = [Case::empty("q1"), Case::empty("q5")];
        let gold: HashMap<String, Gold> = [
            ("q1", 2, "temporal", "7 May 2023"),
            ("q5", 5, "adversarial", ""),
        ]
        .into_iter()
        .map(|(id, category, group, answer)| {
            let g = Gold {
                group: group.into(),
                category,
                answer: answer.into(),
                ..Gold::default()
            };
            (id.to_string(), g)
        })
        .collect();
        let judge = Scripted::new(vec![json!({"label": "CORRECT"})]);
        let scores = score(
            Benchmark::Locomo,
            &cases,
            &[said("7 May, 2023."), said("That is not mentioned.")],
            &gold,
            None,
            Some(&judge),
            &mut |_, _| {},
            &AtomicBool::new(false),
        );
        // Only the category-2 question is judged; the headline holds it alone.
        assert_eq!(judge.asked().len(), 1);
        assert_eq!(scores.metrics["judge"]["j"], 1.0);
        assert_eq!(scores.metrics["qa"]["n"], 1);
        assert_eq!(scores.metrics["qa"]["locomo_f1"], 1.0);
        // The adversarial one is scored under its category by LoCoMo's refusal check.
        assert_eq!(scores.by_group["5 adversarial"]["qa"]["locomo_f1"], 1.0);
        assert!(!scores.by_group["5 adversarial"].contains_key("judge"));
        assert_eq!(scores.per_question[0].correct, Some(true));
        assert_eq!(scores.per_question[1].correct, None);
    }

    #[test]
    fn audited_answers_rescore_and_rejudge_only_where_the_audit_changes_the_answer() {
        let cases = [Case::empty("q1"), Case::empty("q2")];
        let gold: HashMap<String, Gold> =
            [("q1", "The sunday before 25 May 2023"), ("q2", "Paris")]
                .into_iter()
                .map(|(id, answer)| {
                    let g = Gold {
                        group: "temporal".into(),
                        category: 2,
                        answer: answer.into(),
                        ..Gold::default()
                    };
                    (id.to_string(), g)
                })
                .collect();
        // q1's answer is corrected; q2's audit entry repeats the official answer.
        let audited: HashMap<String, String> = [
            (
                "q1".to_string(),
                "The Saturday before 25 May 2023".to_string(),
            ),
            ("q2".to_string(), "Paris".to_string()),
        ]
        .into();
        let answers = [said("The Saturday before 25 May 2023"), said("Paris")];
        let run = |audited: Option<&HashMap<String, String>>, judge: &Scripted| {
            score(
                Benchmark::Locomo,
                &cases,
                &answers,
                &gold,
                audited,
                Some(judge),
                &mut |_, _| {},
                &AtomicBool::new(false),
            )
        };
        // Verdicts in the order asked: q1 official, q1 audited, q2 official.
        let judge = Scripted::new(vec![
            json!({"label": "WRONG"}),
            json!({"label": "CORRECT"}),
            json!({"label": "CORRECT"}),
        ]);
        let scores = run(Some(&audited), &judge);
        assert_eq!(judge.asked().len(), 3);
        assert!(
            judge.asked()[1].messages[0]
                .content
                .contains("The Saturday before")
        );
        assert_eq!(scores.metrics["judge"]["j"], 0.5);
        assert_eq!(scores.metrics["judge_audited"]["j"], 1.0);
        assert_eq!(scores.metrics["qa_audited"]["f1"], 1.0);
        assert!(scores.metrics["qa"]["f1"].as_f64().unwrap() < 1.0);
        assert_eq!(scores.by_group["2 temporal"]["judge_audited"]["n"], 2);
        let q1 = &scores.per_question[0];
        assert_eq!(
            q1.corrected_answer.as_deref(),
            Some("The Saturday before 25 May 2023")
        );
        assert_eq!((q1.correct, q1.correct_audited), (Some(false), Some(true)));
        assert_eq!(scores.per_question[1].corrected_answer, None);
        // Without the audit the groups are absent.
        let judge = Scripted::new(vec![json!({"label": "WRONG"}), json!({"label": "CORRECT"})]);
        let plain = run(None, &judge);
        assert!(
            plain.metrics.get("qa_audited").is_none()
                && plain.metrics.get("judge_audited").is_none()
        );
        assert_eq!(plain.metrics["qa"], scores.metrics["qa"]);
    }

    #[test]
    fn a_failed_answer_scores_zero_and_an_unusable_verdict_is_counted_not_guessed() {
        let cases = [Case::empty("a"), Case::empty("b")];
        let gold: HashMap<String, Gold> = ["a", "b"]
            .into_iter()
            .map(|id| {
                let g = Gold {
                    group: "multi-session".into(),
                    answer: "three".into(),
                    ..Gold::default()
                };
                (id.to_string(), g)
            })
            .collect();
        let failed = Answer {
            error: Some("the answer was empty".into()),
            ..Answer::default()
        };
        // The first verdict is off-schema twice (a repair round, then failure); the second says
        // the empty answer is wrong.
        let judge = Scripted::from_texts(vec![
            "maybe".into(),
            "still maybe".into(),
            json!({"label": "no"}).to_string(),
        ]);
        let scores = score(
            Benchmark::LongMemEval,
            &cases,
            &[said("three"), failed],
            &gold,
            None,
            Some(&judge),
            &mut |_, _| {},
            &AtomicBool::new(false),
        );
        assert_eq!(scores.metrics["qa"]["answer_failed"], 1);
        assert_eq!(scores.metrics["qa"]["f1"], 0.5);
        assert_eq!(scores.judge_failures.len(), 1);
        assert_eq!(scores.metrics["judge"]["n"], 1);
        assert_eq!(scores.metrics["judge"]["j"], 0.0);
        assert_eq!(judge.asked().len(), 3);
        // The judge saw that there was no answer.
        assert!(judge.asked()[2].messages[0].content.contains("(no answer)"));
    }
}
