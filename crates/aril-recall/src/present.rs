//! Questions about the present ("Where does Sam work now?"): the memory may hold an older and a
//! newer statement of the same thing, and the newer one is the answer. When a question carries a
//! cue of the present ("now", "currently", "still", "these days", "latest", "so far", ...), one
//! more RRF list ranks the fused candidates newest first (weight `recall.w_present`), so among
//! candidates of about equal relevance the most recent statement rises; relevance still decides
//! between a relevant old turn and an unrelated new one. Without a cue nothing changes.
//!
//! With `recall.present_tense`, a question whose first auxiliary is a present one ("How many
//! coins do I have?") counts as well: on LongMemEval's knowledge updates the newest statement
//! then comes first far more often, at a cost to questions that gather every statement
//! (docs/benchmarks-history.md), so it is off by default.
//!
//! What it deliberately does not do: decide that two statements are about the same thing (that
//! takes a model; cards carry supersessions for it), or parse a sentence (the tense option looks
//! at the first auxiliary only).

use crate::hybrid::Candidate;

/// Words and phrases that ask about the present, matched on whole words of the lower-cased
/// question.
const CUES: &[&str] = &[
    "now",
    "nowadays",
    "currently",
    "current",
    "still",
    "these days",
    "at the moment",
    "at present",
    "latest",
    "most recent",
    "most recently",
    "so far",
    "anymore",
    "any more",
    "up to date",
    "recent",
    "recently",
];

/// The auxiliaries whose first appearance puts a question in the present ("How many coins do I
/// have?", "What time do I wake up?", "How many films have I watched?": the latest statement
/// holds the answer) ...
const PRESENT: &[&str] = &["do", "does", "am", "is", "are", "have", "has"];
/// ... or in the past ("Where did I get it serviced?": any statement may).
const PAST: &[&str] = &["did", "was", "were", "had"];

/// Whether `question` asks about the present: one of [`CUES`], or (with `by_tense`) its first
/// auxiliary is a present one.
pub fn asks_about_present(question: &str, by_tense: bool) -> bool {
    let words = crate::cues::words(question);
    let cued = crate::cues::holds_any(&words, CUES);
    let tense = words
        .iter()
        .find(|w| PRESENT.contains(&w.as_str()) || PAST.contains(&w.as_str()));
    cued || (by_tense && tense.is_some_and(|w| PRESENT.contains(&w.as_str())))
}

/// Adds the newest-first list to `candidates` (fused, best first) and sorts them again: the
/// `depth` best, ordered by when they were said (newest first; a candidate without a time
/// last), each gain `weight / (rrf_k + rank)`. Stable: equal scores keep their order.
pub fn newest_first(candidates: &mut [Candidate], depth: usize, weight: f32, rrf_k: f32) {
    let n = depth.min(candidates.len());
    let mut by_time: Vec<usize> = (0..n).collect();
    // Stable: candidates said at the same time keep their fused order.
    by_time.sort_by_key(|&i| std::cmp::Reverse(said_at(&candidates[i])));
    for (rank, i) in (1..).zip(by_time) {
        candidates[i].score += weight / (rrf_k + rank as f32);
    }
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
}

/// When a candidate was said: its latest turn's time.
fn said_at(c: &Candidate) -> Option<chrono::DateTime<chrono::Utc>> {
    c.turns.iter().filter_map(|t| t.turn.event_time).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn present_cues_are_whole_words_and_phrases() {
        for q in [
            "Where does Sam work now?",
            "What is my current job?",
            "Do I still live in Alfama?",
            "How many pages have I read so far?",
            "What car do I drive these days?",
            "What's the latest on the knee?",
        ] {
            assert!(asks_about_present(q, false), "{q}");
        }
        for q in [
            "Where did Sam work in January?",
            "What is the name of Sam's dog?",
            "Did I know him then?",
            "What is the current's direction?", // not the word "current"
        ] {
            assert!(!asks_about_present(q, false), "{q}");
        }
    }

    #[test]
    fn by_tense_the_first_auxiliary_decides() {
        for q in [
            "How many coins do I have?",
            "How many films have I watched?",
        ] {
            assert!(asks_about_present(q, true), "{q}");
            assert!(!asks_about_present(q, false), "{q}");
        }
        // The first auxiliary is past: "is" later does not count.
        assert!(!asks_about_present(
            "Where did I buy the bike that is red?",
            true
        ));
        // A cue counts whatever the tense.
        assert!(asks_about_present("Where did I say I work now?", true));
    }
}
