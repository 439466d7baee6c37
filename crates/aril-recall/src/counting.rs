//! Questions that count or add up ("How many items of clothing do I need to return?", "How many
//! hours in total did I spend driving …", "What is the total number of siblings I have?"). Their
//! counting words name an operation, not what is counted, and they draw turns that count
//! something else ("help me calculate the total of my charity contributions", "block out some
//! hours in my calendar"). The counting focus searches the question again without them, so the
//! turns that speak of what is counted rank by that alone.
//!
//! What it deliberately does not do: drop the counted thing ("items of clothing", "magazine
//! subscriptions"); replace the question's own lists (the focus lists are fused beside them); or
//! take "how many days ago …", "how many months before …" for a count: those measure time
//! between events, the date rules' business, unless they also sum ("how many hours in total").

use crate::cues::{holds_any, phrase_len_at, words};

/// Units a "how many" question counts in rather than things it counts.
const UNITS: &[&str] = &[
    "hours", "hour", "minutes", "minute", "days", "day", "weeks", "week", "months", "month",
    "years", "year", "times",
];

/// Phrases that say a sum or a count, dropped wherever they stand (longest first).
const OPERATIONS: &[&str] = &[
    "the total number of",
    "the total amount of",
    "total number of",
    "total amount of",
    "how many",
    "how much",
    "in total",
    "in all",
    "altogether",
    "combined",
    "total",
];

/// Words that make a question a sum, whatever unit it counts in.
const SUMS: &[&str] = &["total", "in all", "altogether", "combined"];

/// The question without its counting words, lower-cased, when it counts or sums ("How many
/// hours in total did I spend driving …" → "did i spend driving …"); `None` for a question that
/// does not, or that only measures time ("How many days ago did I …").
pub fn without_counting(question: &str) -> Option<String> {
    let words = words(question);
    let measures_time = matches!(
        words.as_slice(),
        [how, many, unit, ..] if how == "how" && many == "many" && UNITS.contains(&unit.as_str())
    );
    if measures_time && !holds_any(&words, SUMS) {
        return None;
    }
    let mut kept: Vec<&str> = Vec::with_capacity(words.len());
    let mut dropped = false;
    let mut i = 0;
    while i < words.len() {
        let op = OPERATIONS
            .iter()
            .find_map(|op| phrase_len_at(&words[i..], op).map(|n| (*op, n)));
        let Some((op, n)) = op else {
            kept.push(&words[i]);
            i += 1;
            continue;
        };
        dropped = true;
        i += n;
        // "how many hours": the unit goes with the operation.
        if op == "how many" && words.get(i).is_some_and(|w| UNITS.contains(&w.as_str())) {
            i += 1;
        }
    }
    (dropped && !kept.is_empty()).then(|| kept.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_words_and_units_go_and_the_counted_thing_stays() {
        let cases = [
            (
                "How many hours in total did I spend driving to my three destinations combined?",
                "did i spend driving to my three destinations",
            ),
            (
                "How many items of clothing do I need to pick up?",
                "items of clothing do i need to pick up",
            ),
            (
                "What is the total number of siblings I have?",
                "what is siblings i have",
            ),
            ("How much did I spend on gifts?", "did i spend on gifts"),
        ];
        for (question, asked) in cases {
            assert_eq!(
                without_counting(question).as_deref(),
                Some(asked),
                "{question}"
            );
        }
    }

    #[test]
    fn a_question_that_does_not_count_or_only_measures_time_has_no_focus() {
        for question in [
            "Where did I buy my boots?",
            "How many days ago did I meet Emma?",
            "How many months before my anniversary did Rachel get engaged?",
            "My totally new bike",
            "How many?",
        ] {
            assert_eq!(without_counting(question), None, "{question}");
        }
    }
}
