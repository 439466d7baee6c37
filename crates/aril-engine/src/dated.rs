//! Date focus: a question that names a calendar day, month or year ("What did Maria donate in
//! December 2023?", "… on 7 July, 2023?", "… in 2022?") is most often answered by what was said
//! then. Recall adds three more turn lists restricted to the turns whose time falls in that
//! period, a second RRF vote for them (the unrestricted lists stay, so a later mention of the
//! event is still found), searched with the question [`DatedQuestion::asked`], the date left out:
//! turns carry their time as data, not as words. No LLM: English month names and a four-digit
//! year, matched by rule. A period opened or closed by a word such as "before", "since" or
//! "until", or a question naming two periods, is not focused (the period it means is not the
//! one it names).

use chrono::{DateTime, NaiveDate, Utc};

/// A half-open span of time, `[from, to)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Period {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

impl Period {
    /// From the start of day `first` to the start of day `end` (not included).
    fn between(first: NaiveDate, end: NaiveDate) -> Self {
        Self {
            from: midnight(first),
            to: midnight(end),
        }
    }

    pub(crate) fn contains(&self, t: DateTime<Utc>) -> bool {
        self.from <= t && t < self.to
    }
}

/// A question that names one period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DatedQuestion {
    pub period: Period,
    /// The question without the date and the preposition before it.
    pub asked: String,
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Words before a date that make it a bound, not the period meant.
const BOUNDS: [&str; 9] = [
    "before", "after", "since", "until", "till", "by", "prior", "between", "from",
];

/// Prepositions left out with the date.
const PREPOSITIONS: [&str; 4] = ["in", "on", "during", "of"];

/// A word without the punctuation around it, lower-cased.
fn bare(word: &str) -> String {
    word.trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase()
}

/// The month a word names (1-12): its full name or an abbreviation of three letters or more
/// ("Dec", "Sept").
fn month(word: &str) -> Option<u32> {
    let w = bare(word);
    if w.len() < 3 {
        return None;
    }
    MONTHS
        .iter()
        .position(|m| *m == w || (w.len() <= 4 && m.starts_with(&w)))
        .map(|i| i as u32 + 1)
}

/// A day of the month, with or without its ordinal ending ("7", "13th").
fn day(word: &str) -> Option<u32> {
    let w = bare(word);
    let digits = w.trim_end_matches(|c: char| c.is_alphabetic());
    let ending = &w[digits.len()..];
    if !matches!(ending, "" | "st" | "nd" | "rd" | "th") {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

/// A four-digit year from 1900 to 2099.
fn year(word: &str) -> Option<i32> {
    let w = bare(word);
    (w.len() == 4)
        .then(|| w.parse().ok())
        .flatten()
        .filter(|y| (1900..2100).contains(y))
}

fn midnight(date: NaiveDate) -> DateTime<Utc> {
    date.and_time(chrono::NaiveTime::MIN).and_utc()
}

/// The day or month a run of words starting at `i` names, with the number of words; the period
/// is `None` when the words have a date's form but name no real day (31 June).
fn period_at(words: &[&str], i: usize) -> Option<(Option<Period>, usize)> {
    let at = |j: usize| words.get(j).copied();
    let day_period = |y: i32, m: u32, d: u32| -> Option<Period> {
        let start = NaiveDate::from_ymd_opt(y, m, d)?;
        Some(Period::between(start, start.succ_opt()?))
    };
    // 7 July, 2023
    if let (Some(d), Some(m), Some(y)) = (
        at(i).and_then(day),
        at(i + 1).and_then(month),
        at(i + 2).and_then(year),
    ) {
        return Some((day_period(y, m, d), 3));
    }
    let m = at(i).and_then(month)?;
    // July 7th, 2023
    if let (Some(d), Some(y)) = (at(i + 1).and_then(day), at(i + 2).and_then(year)) {
        return Some((day_period(y, m, d), 3));
    }
    // July 2023
    let y = at(i + 1).and_then(year)?;
    let month_period = || -> Option<Period> {
        let start = NaiveDate::from_ymd_opt(y, m, 1)?;
        Some(Period::between(
            start,
            start.checked_add_months(chrono::Months::new(1))?,
        ))
    };
    Some((month_period(), 2))
}

/// The one period `question` names, if it names exactly one, as a real date and not as a bound.
pub(crate) fn dated_question(question: &str) -> Option<DatedQuestion> {
    let words: Vec<&str> = question.split_whitespace().collect();
    let mut found: Vec<(usize, usize, Period)> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if let Some((period, len)) = period_at(&words, i) {
            // A date that is no real day names nothing to focus on.
            found.push((i, len, period?));
            i += len;
            continue;
        }
        // in 2022, during 2022: a year alone counts only after these words.
        let after_in = i > 0 && matches!(bare(words[i - 1]).as_str(), "in" | "during");
        if let (true, Some(y)) = (after_in, year(words[i])) {
            let first = NaiveDate::from_ymd_opt(y, 1, 1)?;
            let end = NaiveDate::from_ymd_opt(y + 1, 1, 1)?;
            found.push((i, 1, Period::between(first, end)));
        }
        i += 1;
    }
    let [(start, len, period)] = found.as_slice() else {
        return None;
    };
    let (start, len, period) = (*start, *len, *period);
    let before = start.checked_sub(1).map(|j| bare(words[j]));
    if before.as_deref().is_some_and(|w| BOUNDS.contains(&w)) {
        return None;
    }
    let cut_from = match before.as_deref() {
        Some(w) if PREPOSITIONS.contains(&w) => start - 1,
        _ => start,
    };
    let kept: Vec<&str> = words[..cut_from]
        .iter()
        .chain(&words[start + len..])
        .copied()
        .collect();
    let asked = if kept.iter().any(|w| w.chars().any(char::is_alphabetic)) {
        kept.join(" ")
    } else {
        question.to_string()
    };
    Some(DatedQuestion { period, asked })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day_of(y: i32, m: u32, d: u32) -> DateTime<Utc> {
        midnight(NaiveDate::from_ymd_opt(y, m, d).unwrap())
    }

    #[test]
    fn a_month_and_year_is_that_month_and_leaves_the_question() {
        let q = dated_question("What did Maria donate to a shelter in December 2023?").unwrap();
        assert_eq!(q.period.from, day_of(2023, 12, 1));
        assert_eq!(q.period.to, day_of(2024, 1, 1));
        assert_eq!(q.asked, "What did Maria donate to a shelter");
        let q = dated_question("What setback did she face in Feb 2024 ?").unwrap();
        assert_eq!(
            (q.period.from, q.period.to),
            (day_of(2024, 2, 1), day_of(2024, 3, 1))
        );
        assert_eq!(q.asked, "What setback did she face ?");
    }

    #[test]
    fn a_day_in_either_order_is_that_day() {
        for text in [
            "What natural disaster struck on 7 July, 2023?",
            "What natural disaster struck on July 7th, 2023?",
            "What natural disaster struck on july 7 2023?",
        ] {
            let q = dated_question(text).unwrap();
            assert_eq!(q.period.from, day_of(2023, 7, 7), "{text}");
            assert_eq!(q.period.to, day_of(2023, 7, 8), "{text}");
            assert_eq!(q.asked, "What natural disaster struck", "{text}");
        }
        // A day that does not exist names nothing.
        assert_eq!(dated_question("What happened on 31 June, 2023?"), None);
    }

    #[test]
    fn a_year_counts_after_in_or_during_only() {
        let q = dated_question("How many times has Melanie gone to the beach in 2023?").unwrap();
        assert_eq!(
            (q.period.from, q.period.to),
            (day_of(2023, 1, 1), day_of(2024, 1, 1))
        );
        assert_eq!(q.asked, "How many times has Melanie gone to the beach");
        assert_eq!(dated_question("I spent 2000 dollars on a bike"), None);
        assert_eq!(dated_question("What did 2023 bring?"), None);
    }

    #[test]
    fn bounds_two_periods_and_plain_words_name_no_period() {
        assert_eq!(
            dated_question("What did she do last weekend before April 10, 2023?"),
            None
        );
        assert_eq!(dated_question("What has he done since March 2023?"), None);
        assert_eq!(
            dated_question("Did it change between March 2023 and May 2023?"),
            None
        );
        assert_eq!(dated_question("May I ask what you did in March?"), None);
        assert_eq!(
            dated_question("When did Caroline go to the support group?"),
            None
        );
        assert_eq!(dated_question("What did we march for in 15 2023?"), None);
    }

    #[test]
    fn a_question_that_is_only_a_date_stays_as_asked() {
        let q = dated_question("In May 2023?").unwrap();
        assert_eq!(q.asked, "In May 2023?");
    }

    #[test]
    fn the_period_is_half_open() {
        let p = dated_question("What happened on 7 July 2023?")
            .unwrap()
            .period;
        assert!(p.contains(day_of(2023, 7, 7)));
        assert!(p.contains(day_of(2023, 7, 8) - chrono::Duration::seconds(1)));
        assert!(!p.contains(day_of(2023, 7, 8)));
        assert!(!p.contains(day_of(2023, 7, 7) - chrono::Duration::seconds(1)));
    }
}
