//! Speaker focus: a question that names one of the people speaking in a scope ("What does
//! Melanie paint?") is most often answered by what that person said. The names are the scope's
//! own (the `speaker` of its turns), matched as whole words of the question; when exactly one
//! speaker is named, recall adds its turn lists again restricted to that speaker's turns, a
//! second RRF vote for them (the unrestricted lists stay, so what others said about the person
//! is still found). No LLM, no list of names: a scope without named speakers (an assistant chat,
//! roles only) is never focused.

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

#[cfg(test)]
mod tests {
    use super::named_speaker;

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
