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

/// Scores `answers` (one per case) against the gold; with `judge`, asks it about each headline
/// question, calling `progress(done, total)` and stopping early when `cancel` is raised.
pub fn score(
    benchmark: Benchmark,
    cases: &[Case],
    answers: &[Answer],
    gold: &HashMap<String, Gold>,
    judge_model: Option<&dyn ChatModel>,
    progress: &mut dyn FnMut(usize, usize),
    cancel: &AtomicBool,
) -> QaScores {
    let mut out = QaScores::default();
    let (mut qa_all, mut judge_all) = (Mean::default(), Mean::default());
    let mut qa_groups: BTreeMap<String, Mean> = BTreeMap::new();
    let mut judge_groups: BTreeMap<String, Mean> = BTreeMap::new();
    let failed = answers.iter().filter(|a| a.error.is_some()).count();
    let total = cases.len().min(answers.len());
    for (done, (case, answer)) in cases.iter().zip(answers).enumerate() {
        let Some(g) = gold.get(&case.id) else {
            out.per_question.push(QuestionQa::default());
            continue;
        };
        let mut q = QuestionQa {
            answer: answer.text.clone(),
            answer_error: answer.error.clone(),
            f1: mem0_f1(&answer.text, &g.answer),
            bleu1: mem0_bleu1(&answer.text, &g.answer),
            locomo_f1: (benchmark == Benchmark::Locomo)
                .then(|| locomo_f1(&answer.text, &g.answer, g.category)),
            correct: None,
        };
        let mut values = vec![("f1".to_string(), q.f1), ("bleu1".to_string(), q.bleu1)];
        if let Some(f) = q.locomo_f1 {
            values.push(("locomo_f1".to_string(), f));
        }
        let key = group_key(benchmark, g);
        if let Some(k) = &key {
            qa_groups.entry(k.clone()).or_default().add(&values);
        }
        let headline = in_headline(benchmark, g);
        if headline {
            qa_all.add(&values);
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
            match judge(model, rubric, &case.question, &g.answer, said) {
                Ok(v) => {
                    out.judge_cost.add(v.cost);
                    q.correct = Some(v.correct);
                    let j = [("j".to_string(), f64::from(u8::from(v.correct)))];
                    judge_all.add(&j);
                    if let Some(k) = &key {
                        judge_groups.entry(k.clone()).or_default().add(&j);
                    }
                }
                Err(e) => out.judge_failures.push(format!("{}: {e}", case.id)),
            }
            progress(done + 1, total);
        }
        out.per_question.push(q);
    }
    let mut qa = qa_all.json();
    if let Some(m) = qa.as_object_mut() {
        m.insert("answer_failed".into(), json!(failed));
    }
    out.metrics.insert("qa".into(), qa);
    if judge_model.is_some() {
        let mut j = judge_all.json();
        if let Some(m) = j.as_object_mut() {
            m.insert("judge_failed".into(), json!(out.judge_failures.len()));
        }
        out.metrics.insert("judge".into(), j);
    }
    for (k, mean) in qa_groups {
        out.by_group
            .entry(k)
            .or_default()
            .insert("qa".into(), mean.json());
    }
    for (k, mean) in judge_groups {
        out.by_group
            .entry(k)
            .or_default()
            .insert("judge".into(), mean.json());
    }
    out
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
