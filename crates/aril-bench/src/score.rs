//! Scoring: the only place gold labels meet rankings. Each benchmark's metric groups, averaged over
//! the questions each definition admits, overall and per question type / category.

use std::collections::{BTreeMap, HashMap, HashSet};

use aril_core::tokens;
use serde_json::{Value, json};

use crate::CutOffs;
use crate::data::Case;
use crate::gold::{AuditedGold, Gold};
use crate::metrics::*;
use crate::strategy::Unit;

/// Averages of named metrics over the questions fed to it.
#[derive(Debug, Default, Clone)]
pub(crate) struct Mean {
    sums: BTreeMap<String, f64>,
    n: usize,
}

impl Mean {
    pub(crate) fn add(&mut self, values: &[(String, f64)]) {
        self.n += 1;
        for (k, v) in values {
            *self.sums.entry(k.clone()).or_default() += v;
        }
    }

    pub(crate) fn json(&self) -> Value {
        let mut m = serde_json::Map::new();
        for (k, v) in &self.sums {
            m.insert(k.clone(), json!(v / self.n.max(1) as f64));
        }
        m.insert("n".into(), json!(self.n));
        Value::Object(m)
    }
}

/// A benchmark's scores: headline groups, groups per question type, and remarks.
pub struct Scores {
    pub metrics: Value,
    pub by_group: Value,
    pub notes: Value,
}

/// Sessions in the order their best unit ranks, duplicates (`__dupN`) matched to gold without
/// their suffix.
pub fn session_ranking(units: &[Unit]) -> Vec<String> {
    let mut seen = HashSet::new();
    units
        .iter()
        .map(|u| match u.session.find("__dup") {
            Some(i) => u.session[..i].to_string(),
            None => u.session.clone(),
        })
        .filter(|s| seen.insert(s.clone()))
        .collect()
}

fn groups_json(groups: &BTreeMap<String, BTreeMap<&'static str, Mean>>) -> Value {
    let mut out = serde_json::Map::new();
    for (name, g) in groups {
        let mut m = serde_json::Map::new();
        for (group, mean) in g {
            m.insert(group.to_string(), mean.json());
        }
        out.insert(name.clone(), Value::Object(m));
    }
    Value::Object(out)
}

/// LongMemEval, session level: `official`, `rankfor` and `mempalace` groups (see
/// docs/benchmarks.md), each at the cut-offs `ks`.
pub fn longmemeval(
    cases: &[Case],
    rankings: &[Vec<Unit>],
    gold: &HashMap<String, Gold>,
    ks: &[usize],
) -> Scores {
    // The study scored its top 10 retrieved sessions; a larger cut-off needs a deeper list.
    let rankfor_depth = ks.iter().copied().max().unwrap_or(10).max(10);
    let mut all: BTreeMap<&'static str, Mean> = BTreeMap::new();
    let mut by_type: BTreeMap<String, BTreeMap<&'static str, Mean>> = BTreeMap::new();
    let mut missing_gold = 0;
    for (case, units) in cases.iter().zip(rankings) {
        let Some(g) = gold.get(&case.id) else {
            missing_gold += 1;
            continue;
        };
        let ranked = session_ranking(units);
        let mut add = |group: &'static str, values: Vec<(String, f64)>| {
            all.entry(group).or_default().add(&values);
            by_type
                .entry(g.group.clone())
                .or_default()
                .entry(group)
                .or_default()
                .add(&values);
        };
        if !g.abstention && !g.official_sessions.is_empty() {
            let mut v = Vec::new();
            for &k in ks {
                let (any, all_) = official_recall(&ranked, &g.official_sessions, k);
                v.push((format!("recall_any@{k}"), any));
                v.push((format!("recall_all@{k}"), all_));
                v.push((
                    format!("ndcg_any@{k}"),
                    official_ndcg(&ranked, &g.official_sessions, k),
                ));
            }
            add("official", v);
        }
        if !g.abstention {
            let top: Vec<String> = ranked.iter().take(rankfor_depth).cloned().collect();
            let mut v = Vec::new();
            for &k in ks {
                v.push((
                    format!("recall@{k}"),
                    fractional_recall(&top, &g.answer_sessions, k),
                ));
                v.push((
                    format!("ndcg@{k}"),
                    rankfor_ndcg(&top, &g.answer_sessions, k),
                ));
            }
            add("rankfor", v);
        }
        if let Some(newest) = newest_first(case, &ranked, &g.answer_sessions, ks) {
            add("newest", newest);
        }
        let mut v = Vec::new();
        for &k in ks {
            v.push((
                format!("recall_any@{k}"),
                recall_any(&ranked, &g.answer_sessions, k),
            ));
            v.push((
                format!("ndcg@{k}"),
                mempalace_ndcg(&ranked, &g.answer_sessions, k),
            ));
        }
        add("mempalace", v);
    }
    let mut metrics = serde_json::Map::new();
    for (group, mean) in &all {
        metrics.insert(group.to_string(), mean.json());
    }
    Scores {
        metrics: Value::Object(metrics),
        by_group: groups_json(&by_type),
        notes: json!({
            "mempalace_ndcg": "optimistic: ideal DCG over the retrieved top k, as MemPalace computes it",
            "newest": "questions whose answer sessions have more than one date (knowledge updates): the newest ranked above every older one within the top k",
            "questions_without_gold": missing_gold,
        }),
    }
}

/// For a question with answer sessions of more than one date (LongMemEval's knowledge updates:
/// the statement and its update): at each cut-off, 1 when the newest answer session is in the
/// top `k` above every older one (an older one not retrieved counts as below), else 0. `None`
/// when the question has fewer than two dated answer sessions or the newest date is shared.
fn newest_first(
    case: &Case,
    ranked: &[String],
    answer_sessions: &[String],
    ks: &[usize],
) -> Option<Vec<(String, f64)>> {
    let date_of = |id: &String| {
        let session = case.sessions.iter().find(|s| &s.id == id)?;
        aril_engine::datasets::parse_longmemeval_time(session.date.as_deref()?).ok()
    };
    let mut dated: Vec<(chrono::DateTime<chrono::Utc>, &String)> = answer_sessions
        .iter()
        .filter_map(|id| Some((date_of(id)?, id)))
        .collect();
    dated.sort();
    let [.., (older, _), (newest_date, newest)] = dated.as_slice() else {
        return None;
    };
    if older == newest_date {
        return None;
    }
    let rank = |id: &String| ranked.iter().position(|r| r == id);
    let newest_rank = rank(newest);
    let older_best = dated[..dated.len() - 1]
        .iter()
        .filter_map(|(_, id)| rank(id))
        .min();
    Some(
        ks.iter()
            .map(|&k| {
                let first = newest_rank.is_some_and(|n| n < k && older_best.is_none_or(|o| n < o));
                (format!("newest_first@{k}"), f64::from(u8::from(first)))
            })
            .collect(),
    )
}

/// LoCoMo's context budgets, in o200k tokens.
const BUDGETS: [(&str, usize); 3] = [("1k", 1000), ("2k", 2000), ("4k", 4000)];

/// The turns a ranking hands the reader at each LoCoMo cut-off: the first `k` units, and the
/// units that fit each token budget in rank order (cut before the first unit that overflows).
struct Coverage<'a> {
    cut_offs: Vec<(String, HashSet<&'a String>)>,
}

impl<'a> Coverage<'a> {
    fn of(units: &'a [Unit], ks: &[usize]) -> Self {
        let mut cut_offs = Vec::new();
        for &k in ks {
            let covered = units.iter().take(k).flat_map(|u| &u.turns).collect();
            cut_offs.push((format!("recall@{k}"), covered));
        }
        // Running token totals, each unit counted once, as far as the largest budget reaches.
        let largest = BUDGETS.iter().map(|(_, b)| *b).max().unwrap_or(0);
        let mut used = 0;
        let totals: Vec<usize> = units
            .iter()
            .map(|u| {
                used += tokens::count(&u.text);
                used
            })
            .take_while(|&total| total <= largest)
            .collect();
        for (label, budget) in BUDGETS {
            let fit = totals.iter().take_while(|&&t| t <= budget).count();
            let covered = units[..fit].iter().flat_map(|u| &u.turns).collect();
            cut_offs.push((format!("recall@{label}_tokens"), covered));
        }
        Coverage { cut_offs }
    }

    /// Fraction of `evidence` (not empty) covered at each cut-off.
    fn recall(&self, evidence: &[String]) -> Vec<(String, f64)> {
        let evidence: HashSet<&String> = evidence.iter().collect();
        self.cut_offs
            .iter()
            .map(|(name, covered)| {
                let hit = evidence.iter().filter(|e| covered.contains(**e)).count();
                (name.clone(), hit as f64 / evidence.len() as f64)
            })
            .collect()
    }
}

/// LoCoMo: evidence recall at `ks.units` units and at token budgets, session recall at
/// `ks.sessions`, per category. With an `audit`, the group `evidence_audited` scores the same
/// rankings against the audit's corrected evidence where it has an entry (the official evidence
/// elsewhere).
pub fn locomo(
    cases: &[Case],
    rankings: &[Vec<Unit>],
    gold: &HashMap<String, Gold>,
    ks: &CutOffs,
    audit: Option<&AuditedGold>,
) -> Scores {
    let mut headline: BTreeMap<&'static str, Mean> = BTreeMap::new();
    let mut by_cat: BTreeMap<String, BTreeMap<&'static str, Mean>> = BTreeMap::new();
    let (mut unresolvable, mut no_evidence) = (0usize, 0usize);
    let mut audit_changed = 0usize;
    for (case, units) in cases.iter().zip(rankings) {
        let Some(g) = gold.get(&case.id) else {
            continue;
        };
        unresolvable += g.unresolvable;
        // With an audit: the evidence it scores this question against (its own or the
        // official), none when that is empty.
        let audited = audit
            .map(|a| {
                let corrected = a.evidence.get(&case.id);
                if corrected.is_some_and(|c| sorted(c) != sorted(&g.evidence)) {
                    audit_changed += 1;
                }
                corrected.unwrap_or(&g.evidence)
            })
            .filter(|e| !e.is_empty());
        if g.evidence.is_empty() {
            no_evidence += 1;
            if audited.is_none() {
                continue;
            }
        }
        let cat = by_cat
            .entry(format!("{} {}", g.category, g.group))
            .or_default();
        let mut add = |group: &'static str, values: &[(String, f64)]| {
            cat.entry(group).or_default().add(values);
            if (1..=4).contains(&g.category) {
                headline.entry(group).or_default().add(values);
            }
        };
        let coverage = Coverage::of(units, &ks.units);
        if let Some(evidence) = audited {
            add("evidence_audited", &coverage.recall(evidence));
        }
        if g.evidence.is_empty() {
            continue;
        }
        add("evidence", &coverage.recall(&g.evidence));
        let gold_sessions: Vec<String> = g
            .evidence
            .iter()
            .filter_map(|e| {
                e.strip_prefix('D')?
                    .split(':')
                    .next()
                    .map(|s| format!("session_{s}"))
            })
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let sessions = session_ranking(units);
        let s: Vec<(String, f64)> = ks
            .sessions
            .iter()
            .map(|&k| {
                (
                    format!("recall@{k}"),
                    fractional_recall(&sessions, &gold_sessions, k),
                )
            })
            .collect();
        add("session", &s);
    }
    let mut metrics = serde_json::Map::new();
    for (group, mean) in &headline {
        metrics.insert(group.to_string(), mean.json());
    }
    let mut notes = json!({
        "headline": "categories 1-4; category 5 (adversarial) only under by_category",
        "unresolvable_evidence_ids": unresolvable,
        "questions_without_evidence": no_evidence,
        "budget": "units in rank order, o200k tokens, cut before the first unit that overflows",
    });
    if let (Some(a), Some(n)) = (audit, notes.as_object_mut()) {
        n.insert(
            "audit".into(),
            json!({
                "evidence_audited": "the same rankings scored against the audit's correct_evidence where it has an entry, the official evidence elsewhere",
                "entries": a.entries,
                "matched": a.evidence.len(),
                "unmatched": a.unmatched,
                "evidence_changed": audit_changed,
                "answers": a.answers.len(),
                "unresolvable_evidence_ids": a.unresolvable,
            }),
        );
    }
    Scores {
        metrics: Value::Object(metrics),
        by_group: groups_json(&by_cat),
        notes,
    }
}

/// `ids` in sorted order, to compare evidence lists whatever order they were written in.
fn sorted(ids: &[String]) -> Vec<&String> {
    let mut v: Vec<&String> = ids.iter().collect();
    v.sort();
    v
}

/// HotpotQA: supporting-paragraph recall at the cut-offs `ks`.
pub fn hotpotqa(
    cases: &[Case],
    rankings: &[Vec<Unit>],
    gold: &HashMap<String, Gold>,
    ks: &[usize],
) -> Scores {
    let mut mean = Mean::default();
    for (case, units) in cases.iter().zip(rankings) {
        let Some(g) = gold.get(&case.id) else {
            continue;
        };
        let ranked = session_ranking(units);
        let v: Vec<(String, f64)> = ks
            .iter()
            .map(|&k| {
                (
                    format!("recall@{k}"),
                    fractional_recall(&ranked, &g.answer_sessions, k),
                )
            })
            .collect();
        mean.add(&v);
    }
    Scores {
        metrics: json!({ "supporting": mean.json() }),
        by_group: json!({}),
        notes: json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(session: &str) -> Unit {
        Unit {
            session: session.into(),
            turns: vec![format!("{session}:1")],
            text: "a few words".into(),
        }
    }

    fn gold(answer_sessions: &[&str]) -> Gold {
        let sessions: Vec<String> = answer_sessions.iter().map(|s| s.to_string()).collect();
        Gold {
            group: "t".into(),
            answer_sessions: sessions.clone(),
            official_sessions: sessions,
            ..Gold::default()
        }
    }

    #[test]
    fn longmemeval_scores_at_the_cut_offs_asked_for_and_rankfor_reads_deep_enough() {
        // The gold session ranks 15th.
        let units: Vec<Unit> = (1..=20).map(|i| unit(&format!("s{i}"))).collect();
        let g: HashMap<String, Gold> = [("q1".to_string(), gold(&["s15"]))].into();
        let s = longmemeval(&[Case::empty("q1")], &[units], &g, &[1, 20]);
        for group in ["official", "rankfor", "mempalace"] {
            let m = s.metrics[group].as_object().unwrap();
            assert!(!m.keys().any(|k| k.ends_with("@5") || k.ends_with("@10")));
        }
        assert_eq!(s.metrics["rankfor"]["recall@1"], 0.0);
        // Rankfor's list is the top 10 unless a cut-off asks for more.
        assert_eq!(s.metrics["rankfor"]["recall@20"], 1.0);
        assert_eq!(s.metrics["official"]["recall_any@20"], 1.0);
        assert_eq!(s.metrics["mempalace"]["recall_any@20"], 1.0);
    }

    #[test]
    fn newest_first_asks_the_latest_answer_session_above_the_older_ones() {
        let session = |id: &str, date: &str| crate::data::HSession {
            id: id.into(),
            date: Some(date.into()),
            turns: Vec::new(),
        };
        let mut case = Case::empty("q1");
        case.sessions = std::sync::Arc::new(vec![
            session("old", "2023/01/05 (Thu) 10:00"),
            session("new", "2023/06/01 (Thu) 09:00"),
            session("other", "2023/07/01 (Sat) 09:00"),
        ]);
        let g: HashMap<String, Gold> = [("q1".to_string(), gold(&["old", "new"]))].into();
        let score = |order: &[&str]| {
            let units: Vec<Unit> = order.iter().map(|s| unit(s)).collect();
            let s = longmemeval(std::slice::from_ref(&case), &[units], &g, &[1, 3]);
            (
                s.metrics["newest"]["newest_first@1"].as_f64().unwrap(),
                s.metrics["newest"]["newest_first@3"].as_f64().unwrap(),
            )
        };
        assert_eq!(score(&["new", "old", "other"]), (1.0, 1.0));
        assert_eq!(score(&["old", "new", "other"]), (0.0, 0.0));
        // The older one not retrieved counts as below; the newest must be inside the cut-off.
        assert_eq!(score(&["other", "new"]), (0.0, 1.0));
        // A question with one answer session has no such figure.
        let one: HashMap<String, Gold> = [("q1".to_string(), gold(&["new"]))].into();
        let s = longmemeval(&[case], &[vec![unit("new")]], &one, &[1]);
        assert!(s.metrics.get("newest").is_none());
    }

    #[test]
    fn audited_evidence_rescores_the_same_ranking_where_the_audit_has_an_entry() {
        // Ten units, one turn each: session_1:1 .. session_10:1.
        let units: Vec<Unit> = (1..=10).map(|i| unit(&format!("session_{i}"))).collect();
        let evidence = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut gold = HashMap::new();
        for (id, ev) in [
            // cited a turn outside the top 5; the audit cites one inside
            ("q1", &["session_9:1"][..]),
            // not audited: the official evidence counts in both groups
            ("q2", &["session_2:1"]),
            // the audit finds no turn for it: left out of the audited group
            ("q3", &["session_3:1"]),
        ] {
            let g = Gold {
                group: "multi-hop".into(),
                category: 1,
                evidence: evidence(ev),
                ..Gold::default()
            };
            gold.insert(id.to_string(), g);
        }
        let audit = AuditedGold {
            evidence: [
                ("q1".to_string(), evidence(&["session_4:1", "session_8:1"])),
                ("q3".to_string(), Vec::new()),
            ]
            .into(),
            entries: 3,
            unmatched: 1,
            unresolvable: 1,
            ..AuditedGold::default()
        };
        let cases = [Case::empty("q1"), Case::empty("q2"), Case::empty("q3")];
        let ks = CutOffs {
            units: vec![5],
            sessions: vec![5],
        };
        let rankings = vec![units.clone(), units.clone(), units];
        let s = locomo(&cases, &rankings, &gold, &ks, Some(&audit));
        // Official: q1 0, q2 1, q3 1 at 5 units.
        assert_eq!(s.metrics["evidence"]["n"], 3);
        assert!((s.metrics["evidence"]["recall@5"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-12);
        // Audited: q1 1/2 (session_4 in, session_8 out), q2 1, q3 left out.
        assert_eq!(s.metrics["evidence_audited"]["n"], 2);
        assert_eq!(s.metrics["evidence_audited"]["recall@5"], 0.75);
        assert_eq!(s.by_group["1 multi-hop"]["evidence_audited"]["n"], 2);
        let notes = &s.notes["audit"];
        assert_eq!(notes["matched"], 2);
        assert_eq!(notes["evidence_changed"], 2);
        assert_eq!(notes["unmatched"], 1);
        // Without an audit there is no such group.
        let plain = locomo(&cases, &rankings, &gold, &ks, None);
        assert!(plain.metrics.get("evidence_audited").is_none());
        assert!(plain.notes.get("audit").is_none());
        assert_eq!(plain.metrics["evidence"], s.metrics["evidence"]);
    }

    #[test]
    fn locomo_units_and_sessions_have_cut_offs_of_their_own() {
        let units: Vec<Unit> = (1..=30).map(|i| unit(&format!("session_{i}"))).collect();
        let mut g = gold(&[]);
        g.category = 4;
        g.evidence = vec!["session_12:1".into()];
        let gold: HashMap<String, Gold> = [("q1".to_string(), g)].into();
        let ks = CutOffs {
            units: vec![10, 20],
            sessions: vec![5],
        };
        let s = locomo(&[Case::empty("q1")], &[units], &gold, &ks, None);
        assert_eq!(s.metrics["evidence"]["recall@10"], 0.0);
        assert_eq!(s.metrics["evidence"]["recall@20"], 1.0);
        let sessions = s.metrics["session"].as_object().unwrap();
        assert_eq!(
            sessions.keys().map(String::as_str).collect::<Vec<_>>(),
            vec!["n", "recall@5"]
        );
    }
}
