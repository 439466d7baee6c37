//! Speaker focus: a question that names people speaking in a scope ("What does Melanie
//! paint?") is most often answered by what they said. The names are the scope's own (the
//! `speaker` of its turns), matched as whole words of the question; when one or more speakers
//! are named, recall adds three more turn lists restricted to their turns, a second RRF vote for
//! them (the unrestricted lists stay, so what others said about a person is still found). The
//! restricted lists are searched with the question [`without_names`]: every turn of theirs is
//! embedded as `Melanie: …`, and the others' turns around them call them by name, so within
//! their own turns a name only pulls the ranking toward the way they are addressed, not toward
//! what they said. A question naming both speakers of a two-person conversation keeps every
//! turn: its lists are the question without the names. No LLM, no list of names: a scope
//! without named speakers (an assistant chat, roles only) is never focused.

use std::collections::HashSet;

/// The words of a text, lower-cased: runs of letters and digits.
fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The speakers among `speakers` the question names (by any word of the name of two letters or
/// more), each once, in name order.
pub(crate) fn named_speakers<'a>(
    question: &str,
    speakers: impl IntoIterator<Item = &'a str>,
) -> Vec<&'a str> {
    let asked = words(question);
    let mut named: Vec<&str> = speakers
        .into_iter()
        .filter(|s| {
            words(s)
                .iter()
                .any(|w| w.chars().count() >= 2 && asked.contains(w))
        })
        .collect();
    named.sort_unstable();
    named.dedup();
    named
}

/// The question with the words of `names` left out, possessives (`Melanie's`) included; the
/// question as asked if nothing else would be left.
pub(crate) fn without_names(question: &str, names: &[&str]) -> String {
    let name_words: HashSet<String> = names.iter().flat_map(|n| words(n)).collect();
    let kept: Vec<&str> = question
        .split_whitespace()
        .filter(|w| {
            let bare = w
                .trim_matches(|c: char| !c.is_alphanumeric())
                .trim_end_matches("'s")
                .trim_end_matches("\u{2019}s")
                .to_lowercase();
            !name_words.contains(&bare)
        })
        .collect();
    if kept.iter().any(|w| w.chars().any(char::is_alphanumeric)) {
        kept.join(" ")
    } else {
        question.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::{named_speakers, without_names};

    #[test]
    fn the_names_are_left_out_with_their_possessives() {
        assert_eq!(
            without_names("What is Joanna allergic to?", &["Joanna"]),
            "What is allergic to?"
        );
        assert_eq!(
            without_names("What did Caroline's mentor say?", &["Caroline"]),
            "What did mentor say?"
        );
        assert_eq!(
            without_names(
                "When did Melanie\u{2019}s kids visit, melanie?",
                &["Melanie"]
            ),
            "When did kids visit,"
        );
        // Every word of a two-word name, and nothing that merely contains it.
        assert_eq!(
            without_names("Where does Ana Lima meet Anabel?", &["Ana Lima"]),
            "Where does meet Anabel?"
        );
        assert_eq!(
            without_names(
                "What do Caroline and Melanie's kids share?",
                &["Caroline", "Melanie"]
            ),
            "What do and kids share?"
        );
        // A question that is nothing but names stays as asked.
        assert_eq!(without_names("Joanna?", &["Joanna"]), "Joanna?");
        assert_eq!(without_names("Jon, Gina?", &["Gina", "Jon"]), "Jon, Gina?");
    }

    #[test]
    fn named_speakers_are_found_as_whole_words() {
        let speakers = ["Melanie", "Caroline", "Melanie"];
        assert_eq!(
            named_speakers("What does Melanie paint?", speakers),
            ["Melanie"]
        );
        assert_eq!(
            named_speakers("what did caroline's mentor say", speakers),
            ["Caroline"]
        );
        assert_eq!(
            named_speakers("Did Melanie and Caroline both paint?", speakers),
            ["Caroline", "Melanie"]
        );
        // None named, or a name inside another word: no focus.
        assert!(named_speakers("What did they paint?", speakers).is_empty());
        assert!(named_speakers("Any news from Melaniethe?", speakers).is_empty());
        assert_eq!(
            named_speakers("Where does Ana live?", ["Ana Lima", "Rui"]),
            ["Ana Lima"]
        );
        assert!(named_speakers("Where do I live?", std::iter::empty()).is_empty());
    }
}
