//! Cue matching shared by the rules that read a question's wording (`present.rs`,
//! `replies.rs`): the question as lower-cased words, and whether it holds one of a list of words
//! or phrases, whole.

/// The question's words, lower-cased: runs of letters, digits and apostrophes.
pub(crate) fn words(question: &str) -> Vec<String> {
    question
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether `words` hold one of `cues` (each a word, or words separated by single spaces) as
/// consecutive whole words.
pub(crate) fn holds_any(words: &[String], cues: &[&str]) -> bool {
    cues.iter()
        .any(|cue| (0..words.len()).any(|i| phrase_len_at(&words[i..], cue).is_some()))
}

/// How many words `phrase` (a word, or words separated by single spaces) takes when `words`
/// begin with it, whole; `None` when they do not.
pub(crate) fn phrase_len_at(words: &[String], phrase: &str) -> Option<usize> {
    let mut n = 0;
    for part in phrase.split(' ') {
        if words.get(n)? != part {
            return None;
        }
        n += 1;
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_match_whole_consecutive_words_only() {
        let w = words("What did you tell me, in our previous chat?");
        assert!(holds_any(&w, &["previous chat"]));
        assert!(holds_any(&w, &["nothing", "you"]));
        assert!(!holds_any(&w, &["our chat"]), "not consecutive");
        assert!(!holds_any(&w, &["pre"]), "not a whole word");
    }
}
