//! seed 004's SECI strategies (Rankfor, `seci_vs_mempalace.py`), rule-based, no LLM.
//!
//! - `seci-extract`: one ~500-character digest per session (header, date, the first 500 characters
//!   of the user turns, and key points: first user message, last user message when there are two
//!   or more, last assistant message), embedded ChromaDB-style and ranked by cosine.
//! - `seci-hybrid`: the top 2k (the script's k = 10) of the raw-all ranking and of the digest
//!   ranking fused with RRF (k = 60, ranks from 1), times `1 + 0.3 * min(overlap / |q|, 1)`,
//!   where `q` is the set of lowercased words of 3+ word characters of the question and `overlap`
//!   counts those found as substrings of the lowercased raw session text. (The script's temporal
//!   boost never fired on LongMemEval because of a date-format mismatch, so it is left out.)

use std::collections::{HashMap, HashSet};

use aril_core::Role;

use super::raw_session::{SessionDocs, render_all, whole_session_unit};
use super::{Embeddings, Strategy, Unit, rank_by_cosine};

/// `seci-extract`: the digest of each session as its document. The digest is the session's key,
/// not what the reader gets: a retrieved session hands over its transcript.
pub fn seci_extract(embeddings: Embeddings) -> SessionDocs {
    SessionDocs::new(
        "seci-extract",
        digest,
        |session, _digest| whole_session_unit(session, render_all(session)),
        embeddings,
    )
}
use crate::BenchError;
use crate::data::{Case, HSession};

fn first_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The digest of one session.
pub(crate) fn digest(session: &HSession) -> String {
    let users: Vec<&str> = session
        .turns
        .iter()
        .filter(|t| t.role == Role::User)
        .map(|t| t.text.as_str())
        .collect();
    let last_assistant = session
        .turns
        .iter()
        .rev()
        .find(|t| t.role == Role::Assistant)
        .map(|t| t.text.as_str());
    let mut out = format!("# Session {}\n", session.id);
    out.push_str(&format!(
        "**Date**: {}\n",
        session.date.as_deref().unwrap_or("")
    ));
    out.push_str("## User Context\n");
    out.push_str(first_chars(&users.join(" "), 500));
    out.push_str("\n## Key Points\n");
    if let Some(first) = users.first() {
        out.push_str(&format!("- Topic: {}\n", first_chars(first, 200)));
    }
    if users.len() >= 2
        && let Some(last) = users.last()
    {
        out.push_str(&format!("- Follow-up: {}\n", first_chars(last, 200)));
    }
    if let Some(a) = last_assistant {
        out.push_str(&format!("- Resolution: {}\n", first_chars(a, 200)));
    }
    out
}

/// The `k` of seed 004's script: the hybrid fuses the top `2 * STUDY_K` of each ranking.
const STUDY_K: usize = 10;

pub struct SeciHybrid {
    embeddings: Embeddings,
    raw: Vec<(String, Vec<f32>)>,
    digests: Vec<(String, Vec<f32>)>,
    raw_lower: HashMap<String, String>,
    units: Vec<Unit>,
}

impl SeciHybrid {
    pub fn new(embeddings: Embeddings) -> Self {
        Self {
            embeddings,
            raw: Vec::new(),
            digests: Vec::new(),
            raw_lower: HashMap::new(),
            units: Vec::new(),
        }
    }
}

/// Lowercased words of three or more word characters (`\w{3,}`).
pub(crate) fn query_words(q: &str) -> HashSet<String> {
    q.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_string)
        .collect()
}

/// The hybrid's ranking from the full raw-all and digest rankings: the top `2 * STUDY_K` of each
/// fused with RRF (k = 60), each session's score times the keyword boost, best first. The pool is
/// the study's whatever depth is asked for: a deeper one would give every session both lists'
/// votes and rank differently.
fn hybrid_scores(
    raw: &[String],
    digests: &[String],
    question: &str,
    raw_lower: &HashMap<String, String>,
) -> Vec<(String, f32)> {
    let pool = 2 * STUDY_K;
    let raw = &raw[..raw.len().min(pool)];
    let digests = &digests[..digests.len().min(pool)];
    let mut fused = aril_recall::rrf(&[(raw, 1.0), (digests, 1.0)], 60.0);
    let words = query_words(question);
    for (id, score) in fused.iter_mut() {
        let text = raw_lower.get(id).map(String::as_str).unwrap_or("");
        let overlap = words.iter().filter(|w| text.contains(w.as_str())).count();
        let ratio = if words.is_empty() {
            0.0
        } else {
            overlap as f32 / words.len() as f32
        };
        *score *= 1.0 + 0.3 * ratio.min(1.0);
    }
    fused.sort_by(|a, b| b.1.total_cmp(&a.1));
    fused
}

impl Strategy for SeciHybrid {
    fn name(&self) -> &'static str {
        "seci-hybrid"
    }

    fn index(&mut self, case: &Case) -> Result<(), BenchError> {
        let raw_texts: Vec<String> = case.sessions.iter().map(render_all).collect();
        let digest_texts: Vec<String> = case.sessions.iter().map(digest).collect();
        let raw_vectors = self.embeddings.truncated(&raw_texts)?;
        let digest_vectors = self.embeddings.truncated(&digest_texts)?;
        let ids: Vec<String> = case.sessions.iter().map(|s| s.id.clone()).collect();
        self.raw = ids.iter().cloned().zip(raw_vectors).collect();
        self.digests = ids.iter().cloned().zip(digest_vectors).collect();
        self.raw_lower = ids
            .iter()
            .cloned()
            .zip(raw_texts.iter().map(|t| t.to_lowercase()))
            .collect();
        self.units = case
            .sessions
            .iter()
            .zip(raw_texts)
            .map(|(s, t)| whole_session_unit(s, t))
            .collect();
        Ok(())
    }

    fn rank(&mut self, case: &Case, k: usize) -> Result<Vec<Unit>, BenchError> {
        let q = self
            .embeddings
            .truncated(std::slice::from_ref(&case.question))?;
        let raw: Vec<String> = rank_by_cosine(&q[0], &self.raw)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let dig: Vec<String> = rank_by_cosine(&q[0], &self.digests)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let fused = hybrid_scores(&raw, &dig, &case.question, &self.raw_lower);
        Ok(fused
            .into_iter()
            .take(k)
            .filter_map(|(id, _)| self.units.iter().find(|u| u.session == id).cloned())
            .collect())
    }

    fn embedded_texts(&self) -> usize {
        self.embeddings.misses()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::HTurn;

    fn t(role: Role, text: &str) -> HTurn {
        HTurn {
            id: String::new(),
            role,
            speaker: None,
            text: text.into(),
        }
    }

    #[test]
    fn digest_follows_the_published_layout() {
        let s = HSession {
            id: "s1".into(),
            date: Some("2023/05/20 (Sat) 03:29".into()),
            turns: vec![
                t(Role::User, "first question"),
                t(Role::Assistant, "an answer"),
                t(Role::User, "thanks"),
            ],
        };
        assert_eq!(
            digest(&s),
            "# Session s1\n**Date**: 2023/05/20 (Sat) 03:29\n## User Context\nfirst question thanks\n\
             ## Key Points\n- Topic: first question\n- Follow-up: thanks\n- Resolution: an answer\n"
        );
        let one = HSession {
            turns: vec![t(Role::User, &"x".repeat(600))],
            ..s
        };
        let d = digest(&one);
        assert!(!d.contains("Follow-up"));
        assert!(d.contains(&format!("{}\n## Key Points", "x".repeat(500))));
    }

    #[test]
    fn the_hybrid_fuses_the_top_twenty_of_each_ranking_only() {
        let ids: Vec<String> = (0..30).map(|i| format!("s{i}")).collect();
        let digests: Vec<String> = ids.iter().rev().cloned().collect();
        let text: HashMap<String, String> = ids
            .iter()
            .map(|id| (id.clone(), "nothing in common".to_string()))
            .collect();
        let fused: HashMap<String, f32> = hybrid_scores(&ids, &digests, "which shoes?", &text)
            .into_iter()
            .collect();
        // s25 is 26th in the raw ranking and 5th in the digest one: one vote, not two.
        assert_eq!(fused["s25"], 1.0 / 65.0);
        // s12 is 13th in the raw ranking and 18th in the digest one: both vote.
        assert_eq!(fused["s12"], 1.0 / 73.0 + 1.0 / 78.0);
        // s10 is 11th and 20th, in both pools; nothing is outside both.
        assert!(fused.contains_key("s10"));
        assert_eq!(fused.len(), 30);
    }

    #[test]
    fn the_keyword_boost_multiplies_by_the_share_of_question_words_found() {
        let raw = vec!["a".to_string(), "b".to_string()];
        let text: HashMap<String, String> = [
            ("a".to_string(), "nothing".to_string()),
            ("b".to_string(), "my running shoes".to_string()),
        ]
        .into();
        let fused = hybrid_scores(&raw, &raw, "which running shoes?", &text);
        assert_eq!(fused[0].0, "b");
        let b = 2.0 / 62.0 * (1.0 + 0.3 * 2.0 / 3.0);
        assert!((fused[0].1 - b).abs() < 1e-6);
    }

    #[test]
    fn query_words_are_three_plus_word_characters() {
        let w = query_words("How long is my daily commute to work?");
        assert!(w.contains("daily") && w.contains("how") && !w.contains("is") && !w.contains("my"));
    }
}
