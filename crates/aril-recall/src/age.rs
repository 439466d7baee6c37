//! Questions about the user's own age ("How old was I when Alex was born?", "How many years will
//! I be when my friend Rachel gets married?", "How much older am I than …"). Their answer takes
//! a second fact the question does not word: the user's age, said once in passing in some other
//! session ("I just turned 32 last month", "I'm 32, so I'm in my 30s"), a turn that shares no
//! word with the question. The age focus lists the user's turns that state an age (their own,
//! most often), found by three searches for how people state one; a statement any of them finds
//! gets the focus's whole vote, since the filter, not the search, says what it is.
//!
//! What it deliberately does not do: compute an age or read the ages of others ("my mom is 55":
//! a question that names them finds them by their names); look at a question that does not speak
//! of the asker's own age ("How old is the house?"); or stand in for the question's own lists
//! (the focus lists are fused beside them).

use crate::cues::{holds_any, phrase_len_at, words};

/// What the age focus searches for (dense and BM25): how people state their age in passing,
/// without a number, so that no age is preferred to another.
pub const AGE_STATEMENT: &str = "how old I am: I am years old, I just turned, someone my age";

/// The ages [`states_an_age`] accepts.
const AGES: std::ops::RangeInclusive<u32> = 10..=110;

/// Phrases that ask about the asker's own age.
const ASKS_OWN_AGE: &[&str] = &[
    "my age",
    "age of me",
    "older am i",
    "younger am i",
    "older than me",
    "younger than me",
    "older than i",
    "younger than i",
    "years will i be",
];

/// Words that make "how old" ask about the asker ("How old was I …", not "How old is my mom?").
const ASKER: &[&str] = &["i", "me", "i'm", "i'll", "i'd"];

/// Words before a number that make it the speaker's age ("I'm 32", "I am currently 32", "I just
/// turned 32", "when I was 25").
const BEFORE_AGE: &[&str] = &[
    "i'm currently",
    "i am currently",
    "i'm now",
    "i am now",
    "i'll be",
    "i will be",
    "i turned",
    "just turned",
    "i was",
    "i'm",
    "i am",
];

/// Words after a number that make it a quantity, not an age ("I'm 5 minutes away").
const NOT_AN_AGE: &[&str] = &[
    "minutes", "minute", "hours", "hour", "days", "day", "weeks", "week", "months", "month",
    "percent", "miles", "mile", "km", "pounds", "pound", "lbs", "kg", "dollars", "feet", "inches",
    "times", "pages", "steps", "people", "of",
];

/// Whether `question` asks about the asker's own age.
pub fn asks_own_age(question: &str) -> bool {
    let words = words(question);
    holds_any(&words, ASKS_OWN_AGE)
        || (holds_any(&words, &["how old"]) && words.iter().any(|w| ASKER.contains(&w.as_str())))
}

/// Whether `text` (a turn of the user's) states an age: a number from 10 to 110 said as "I'm
/// 32" or "I just turned 32" (not "I'm 5 minutes away"), or before "years old", which may be
/// someone else's ("my son is 12 years old" passes too; "my mom is 55" does not).
pub fn states_an_age(text: &str) -> bool {
    let words = words(text);
    (0..words.len()).any(|i| {
        let Some(n) = words[i].parse::<u32>().ok() else {
            return false;
        };
        if !AGES.contains(&n) {
            return false;
        }
        let after = &words[i + 1..];
        if phrase_len_at(after, "years old").is_some() || phrase_len_at(after, "year old").is_some()
        {
            return true;
        }
        let said_of_me = BEFORE_AGE.iter().any(|p| {
            let len = p.split(' ').count();
            i >= len && phrase_len_at(&words[i - len..i], p) == Some(len)
        });
        said_of_me
            && after
                .first()
                .is_none_or(|w| !NOT_AN_AGE.contains(&w.as_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_about_the_askers_age_are_told_from_others() {
        for question in [
            "How old was I when Alex was born?",
            "How many years will I be when my friend Rachel gets married?",
            "How much older am I than the average age of employees in my department?",
            "What is the average age of me, my parents, and my grandparents?",
        ] {
            assert!(asks_own_age(question), "{question}");
        }
        for question in [
            "How old is the Eiffel Tower?",
            "How old is my mom?",
            "Where did I buy my boots?",
            "How many years did I spend in school?",
        ] {
            assert!(!asks_own_age(question), "{question}");
        }
    }

    #[test]
    fn an_age_said_in_passing_is_found_and_quantities_are_not() {
        for text in [
            "By the way, I just turned 32 last month, so I'm still relatively young.",
            "I'm 32, so I'm in my 30s. I'd say my skin type is normal.",
            "I'm currently 32 years old, so I want products suited to my skin.",
            "Being a 45-year-old runner is hard.",
        ] {
            assert!(states_an_age(text), "{text}");
        }
        for text in [
            "I'm 5 minutes away from the station.",
            "I'm 20 minutes late, sorry.",
            "I am 30 percent done with the book.",
            "My mom is 55 and my dad is 58.",
            "I bought 32 plants in 2023.",
        ] {
            assert!(!states_an_age(text), "{text}");
        }
    }
}
