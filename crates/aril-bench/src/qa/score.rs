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

/// Token metrics of an answer against a gold answer: Mem0's F1 and BLEU-1, and on LoCoMo its
/// official F1.
#[derive(Debug, Clone, Copy)]
struct TokenScores {
    f1: f64,
    bleu1: f64,
    locomo_f1: Option<f64>,
}

impl TokenScores {
    fn of(benchmark: Benchmark, said: &str, gold: &str, category: u8) -> Self {
        Self {
            f1: mem0_f1(said, gold),
            bleu1: mem0_bleu1(said, gold),
            locomo_f1: (benchmark == Benchmark::Locomo).then(|| locomo_f1(said, gold, category)),
        }
    }

    /// The named values a [`Mean`] averages.
    fn values(self) -> Vec<(String, f64)> {
        let mut v = vec![
            ("f1".to_string(), self.f1),
            ("bleu1".to_string(), self.bleu1),
        ];
        if let Some(f) = self.locomo_f1 {
            v.push(("locomo_f1".to_string(), f));
        }
        v
    }
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
    // Judged questions left without a verdict, against the official and the audited answer.
    let (mut judge_failed, mut judge_audited_failed) = (0usize, 0usize);
    let failed = answers.iter().filter(|a| a.error.is_some()).count();
    let total = cases.len().min(answers.len());
    for (done, (case, answer)) in cases.iter().zip(answers).enumerate() {
        let Some(g) = gold.get(&case.id) else {
            out.per_question.push(QuestionQa::default());
            continue;
        };
        let scores = TokenScores::of(benchmark, &answer.text, &g.answer, g.category);
        let mut q = QuestionQa {
            answer: answer.text.clone(),
            answer_error: answer.error.clone(),
            f1: scores.f1,
            bleu1: scores.bleu1,
            locomo_f1: scores.locomo_f1,
            correct: None,
            corrected_answer: None,
            correct_audited: None,
        };
        let key = group_key(benchmark, g);
        let headline = in_headline(benchmark, g);
        tally.add("qa", key.as_ref(), headline, &scores.values());
        // The audit's answer where it differs from the official one.
        let corrected = audited
            .and_then(|a| a.get(&case.id))
            .filter(|c| c.trim() != g.answer.trim());
        if audited.is_some() {
            let audited_scores = match corrected {
                Some(c) => TokenScores::of(benchmark, &answer.text, c, g.category),
                None => scores,
            };
            tally.add(
                "qa_audited",
                key.as_ref(),
                headline,
                &audited_scores.values(),
            );
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
            match q.correct {
                Some(c) => tally.add("judge", key.as_ref(), true, &[verdict(c)]),
                None => judge_failed += 1,
            }
            if audited.is_some() {
                q.correct_audited = match corrected {
                    Some(c) => ask(c, " (audited answer)"),
                    None => q.correct,
                };
                match q.correct_audited {
                    Some(c) => tally.add("judge_audited", key.as_ref(), true, &[verdict(c)]),
                    None => judge_audited_failed += 1,
                }
            }
            progress(done + 1, total);
        }
        out.per_question.push(q);
    }
    let judged = judge_model.is_some();
    let audit = audited.is_some();
    // Each headline group when it applies, with the count of what it had to leave out.
    for (metric, applies, left_out) in [
        ("qa", true, ("answer_failed", failed)),
        ("qa_audited", audit, ("answer_failed", failed)),
        ("judge", judged, ("judge_failed", judge_failed)),
        (
            "judge_audited",
            judged && audit,
            ("judge_failed", judge_audited_failed),
        ),
    ] {
        if !applies {
            continue;
        }
        let mut m = tally.headline.remove(metric).unwrap_or_default().json();
        if let Some(o) = m.as_object_mut() {
            o.insert(left_out.0.into(), json!(left_out.1));
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
        // A verdict the judge cannot give against the audited answer counts against the audited
        // group only: q1's second verdict is off-schema twice (a repair round, then failure).
        let judge = Scripted::from_texts(vec![
            json!({"label": "WRONG"}).to_string(),
            "maybe".into(),
            "still maybe".into(),
            json!({"label": "CORRECT"}).to_string(),
        ]);
        let failing = run(Some(&audited), &judge);
        assert_eq!(failing.metrics["judge"]["judge_failed"], 0);
        assert_eq!(failing.metrics["judge"]["n"], 2);
        assert_eq!(failing.metrics["judge_audited"]["judge_failed"], 1);
        assert_eq!(failing.metrics["judge_audited"]["n"], 1);
        assert_eq!(failing.judge_failures.len(), 1);
        assert!(
            failing.judge_failures[0].contains("audited"),
            "{:?}",
            failing.judge_failures
        );
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
