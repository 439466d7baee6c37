//! Speaker focus: a question that names one of the people speaking in a scope ("What does
//! Melanie paint?") is most often answered by what that person said. The names are the scope's
//! own (the `speaker` of its turns), matched as whole words of the question; when exactly one
//! speaker is named, recall adds three more turn lists restricted to that speaker's turns, a
//! second RRF vote for them (the unrestricted lists stay, so what others said about the person
//! is still found). The restricted lists are searched with the question [`without_name`]: every
//! turn of theirs is embedded as `Melanie: …`, and the others' turns around them call them by
//! name, so within their own turns the name only pulls the ranking toward the way they are
//! addressed, not toward what they said. No LLM, no list of names: a scope without named
//! speakers (an assistant chat, roles only) is never focused.

use std::collections::HashSet;

/// The words of a text, lower-cased: runs of letters and digits.
fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The one speaker among `speakers` the question names (by any word of the name of two letters
/// or more), if exactly one is named.
pub(crate) fn named_speaker<'a>(
    question: &str,
    speakers: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
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
    match named.as_slice() {
        [one] => Some(one),
        _ => None,
    }
}

/// The question with the words of `name` left out, a possessive (`Melanie's`) included; the
/// question as asked if nothing else would be left.
pub(crate) fn without_name(question: &str, name: &str) -> String {
    let name = words(name);
    let kept: Vec<&str> = question
        .split_whitespace()
        .filter(|w| {
            let bare = w
                .trim_matches(|c: char| !c.is_alphanumeric())
                .trim_end_matches("'s")
                .trim_end_matches("\u{2019}s")
                .to_lowercase();
            !name.contains(&bare)
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
    use super::{named_speaker, without_name};

    #[test]
    fn the_name_is_left_out_with_its_possessive() {
        assert_eq!(
            without_name("What is Joanna allergic to?", "Joanna"),
            "What is allergic to?"
        );
        assert_eq!(
            without_name("What did Caroline's mentor say?", "Caroline"),
            "What did mentor say?"
        );
        assert_eq!(
            without_name("When did Melanie\u{2019}s kids visit, melanie?", "Melanie"),
            "When did kids visit,"
        );
        // Every word of a two-word name, and nothing that merely contains it.
        assert_eq!(
            without_name("Where does Ana Lima meet Anabel?", "Ana Lima"),
            "Where does meet Anabel?"
        );
        // A question that is nothing but the name stays as asked.
        assert_eq!(without_name("Joanna?", "Joanna"), "Joanna?");
    }

    #[test]
    fn one_named_speaker_is_found_as_a_whole_word() {
        let speakers = ["Caroline", "Melanie"];
        assert_eq!(
            named_speaker("What does Melanie paint?", speakers),
            Some("Melanie")
        );
        assert_eq!(
            named_speaker("what did caroline's mentor say", speakers),
            Some("Caroline")
        );
        // Both named, none named, or a name inside another word: no focus.
        assert_eq!(
            named_speaker("Did Caroline and Melanie both paint?", speakers),
            None
        );
        assert_eq!(named_speaker("What did they paint?", speakers), None);
        assert_eq!(named_speaker("Any news from Melaniethe?", speakers), None);
        assert_eq!(
            named_speaker("Where does Ana live?", ["Ana Lima", "Rui"]),
            Some("Ana Lima")
        );
        assert_eq!(named_speaker("Where do I live?", std::iter::empty()), None);
    }
}
