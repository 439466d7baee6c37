//! Date focus: a question that names a calendar day, month or year ("What did Maria donate in
//! December 2023?", "… on 7 July, 2023?", "… in 2022?") is most often answered by what was said
//! then. So is one that names a past time relative to when it is asked ("… last week?", "… two
//! weeks ago?", "… yesterday?"), given that time: its period runs from twice as far back as the
//! time named up to the day asked, because a turn carries the time it was told, after the event
//! (and often only roughly). Recall adds three more turn lists restricted to the turns whose
//! time falls in that period, a second RRF vote for them (the unrestricted lists stay, so a later
//! mention of the event is still found), searched with the question [`DatedQuestion::asked`],
//! the date left out: turns carry their time as data, not as words. No LLM: English month names,
//! a four-digit year and a few relative phrases, matched by rule. A period opened or closed by a
//! word such as "before", "since" or "until", or a question naming two periods, is not focused
//! (the period it means is not the one it names).

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

/// Number words of relative dates ("two weeks ago", "a month ago").
const NUMBERS: [&str; 13] = [
    "a", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve",
];

/// Weekday names ("last Saturday").
const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
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

/// A count of days, weeks or months: digits or a number word up to twelve.
fn count(word: &str) -> Option<i64> {
    let w = bare(word);
    NUMBERS
        .iter()
        .position(|n| *n == w)
        .map(|i| (i as i64).max(1))
        .or_else(|| w.parse().ok().filter(|n| (1..=400).contains(n)))
}

/// The period a time relative to `asked` that starts at word `i` names ("yesterday", "last
/// week", "two months ago"), with its number of words: from twice as many days back as the time
/// names (two at least) to the end of the day asked. Only times past: "today", "tonight" and
/// "this week" mostly ask about what is to come ("any ideas for tonight?").
fn relative_at(words: &[&str], i: usize, asked: DateTime<Utc>) -> Option<(Period, usize)> {
    let at = |j: usize| words.get(j).map(|w| bare(w));
    let first = at(i)?;
    let (days, len) = match (first.as_str(), at(i + 1).as_deref()) {
        ("yesterday", _) => (1, 1),
        ("last", Some("night")) => (1, 2),
        ("last" | "past", Some("week" | "weekend")) => (7, 2),
        ("last", Some(w)) if WEEKDAYS.contains(&w) => (7, 2),
        ("last" | "past", Some("month")) => (31, 2),
        ("last" | "past", Some("year")) => (365, 2),
        _ => {
            // N days / weeks / months ago
            let n = count(&first)?;
            let unit = match at(i + 1)?.trim_end_matches('s') {
                "day" => 1,
                "week" => 7,
                "month" => 31,
                _ => return None,
            };
            (at(i + 2)? == "ago").then_some(())?;
            (n * unit, 3)
        }
    };
    let today = asked.date_naive();
    let first = today.checked_sub_signed(chrono::Duration::days(days + days.max(2)))?;
    Some((Period::between(first, today.succ_opt()?), len))
}

/// The one period `question`, asked at `asked`, names, if it names exactly one, and not as a
/// bound: a real date, or else a time relative to `asked` (none when `asked` is unknown). A date
/// outranks a relative time ("last Friday, on 23 January 2022" is that day), which is then left
/// in the question.
pub(crate) fn dated_question(
    question: &str,
    asked: Option<DateTime<Utc>>,
) -> Option<DatedQuestion> {
    let words: Vec<&str> = question.split_whitespace().collect();
    let mut found: Vec<(usize, usize, Period)> = Vec::new();
    let mut relative: Vec<(usize, usize, Period)> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if let Some((period, len)) = asked.and_then(|asked| relative_at(&words, i, asked)) {
            relative.push((i, len, period));
            i += len;
            continue;
        }
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
    if found.is_empty() {
        found = relative;
    }
    let [(start, len, period)] = found.as_slice() else {
        return None;
    };
    let (start, len, period) = (*start, *len, *period);
    let before = start.checked_sub(1).map(|j| bare(words[j]));
    if before.as_deref().is_some_and(|w| BOUNDS.contains(&w)) {
        return None;
    }
    // "in May 2023", "in the past week": the preposition (and article) goes with the date.
    let word = |j: Option<usize>| j.map(|j| bare(words[j]));
    let cut_from = match (before.as_deref(), word(start.checked_sub(2)).as_deref()) {
        (Some("the"), Some(p)) if PREPOSITIONS.contains(&p) => start - 2,
        (Some(p), _) if PREPOSITIONS.contains(&p) => start - 1,
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

    /// Asked on Monday 10 April 2023 at noon.
    fn asked() -> DateTime<Utc> {
        day_of(2023, 4, 10) + chrono::Duration::hours(12)
    }

    fn dated(question: &str) -> Option<DatedQuestion> {
        dated_question(question, Some(asked()))
    }

    #[test]
    fn a_relative_time_runs_from_twice_as_far_back_to_the_day_asked() {
        let end = day_of(2023, 4, 11);
        for (text, from, asked_as) in [
            (
                "Where did I attend the religious activity last week?",
                day_of(2023, 3, 27),
                "Where did I attend the religious activity",
            ),
            (
                "What gardening-related activity did I do two weeks ago?",
                day_of(2023, 3, 13),
                "What gardening-related activity did I do",
            ),
            (
                "What did I cook yesterday?",
                day_of(2023, 4, 7),
                "What did I cook",
            ),
            (
                "How much cashback did I earn at SaveMart last Thursday?",
                day_of(2023, 3, 27),
                "How much cashback did I earn at SaveMart",
            ),
            (
                "What did I buy in the past month?",
                day_of(2023, 2, 7),
                "What did I buy",
            ),
            (
                "What did I read 3 days ago?",
                day_of(2023, 4, 4),
                "What did I read",
            ),
        ] {
            let q = dated(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!((q.period.from, q.period.to), (from, end), "{text}");
            assert_eq!(q.asked, asked_as, "{text}");
        }
    }

    #[test]
    fn a_question_about_how_long_ago_or_a_bounded_time_names_no_period() {
        assert_eq!(
            dated("How many days ago did I attend a networking event?"),
            None
        );
        assert_eq!(
            dated("How many weeks ago did I meet up with my aunt?"),
            None
        );
        assert_eq!(dated("Which airlines did I fly before today?"), None);
        assert_eq!(dated("When was the last time I went hiking?"), None);
        assert_eq!(dated("Any documentary recommendations for tonight?"), None);
        assert_eq!(dated("What should I cook this week?"), None);
        assert_eq!(dated("What did I do last week and two months ago?"), None);
    }

    #[test]
    fn a_relative_time_asked_at_no_known_time_names_nothing() {
        assert_eq!(dated_question("What did I cook last week?", None), None);
        assert!(dated_question("What did I cook in May 2023?", None).is_some());
    }

    #[test]
    fn a_date_outranks_a_relative_time() {
        let q = dated("What did Joanna just finish last Friday on 23 January, 2022?").unwrap();
        assert_eq!(
            (q.period.from, q.period.to),
            (day_of(2022, 1, 23), day_of(2022, 1, 24))
        );
        assert_eq!(q.asked, "What did Joanna just finish last Friday");
    }

    #[test]
    fn a_month_and_year_is_that_month_and_leaves_the_question() {
        let q = dated("What did Maria donate to a shelter in December 2023?").unwrap();
        assert_eq!(q.period.from, day_of(2023, 12, 1));
        assert_eq!(q.period.to, day_of(2024, 1, 1));
        assert_eq!(q.asked, "What did Maria donate to a shelter");
        let q = dated("What setback did she face in Feb 2024 ?").unwrap();
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
            let q = dated(text).unwrap();
            assert_eq!(q.period.from, day_of(2023, 7, 7), "{text}");
            assert_eq!(q.period.to, day_of(2023, 7, 8), "{text}");
            assert_eq!(q.asked, "What natural disaster struck", "{text}");
        }
        // A day that does not exist names nothing.
        assert_eq!(dated("What happened on 31 June, 2023?"), None);
    }

    #[test]
    fn a_year_counts_after_in_or_during_only() {
        let q = dated("How many times has Melanie gone to the beach in 2023?").unwrap();
        assert_eq!(
            (q.period.from, q.period.to),
            (day_of(2023, 1, 1), day_of(2024, 1, 1))
        );
        assert_eq!(q.asked, "How many times has Melanie gone to the beach");
        assert_eq!(dated("I spent 2000 dollars on a bike"), None);
        assert_eq!(dated("What did 2023 bring?"), None);
    }

    #[test]
    fn bounds_two_periods_and_plain_words_name_no_period() {
        assert_eq!(
            dated("What did she do last weekend before April 10, 2023?"),
            None
        );
        assert_eq!(dated("What has he done since March 2023?"), None);
        assert_eq!(
            dated("Did it change between March 2023 and May 2023?"),
            None
        );
        assert_eq!(dated("May I ask what you did in March?"), None);
        assert_eq!(dated("When did Caroline go to the support group?"), None);
        assert_eq!(dated("What did we march for in 15 2023?"), None);
    }

    #[test]
    fn a_question_that_is_only_a_date_stays_as_asked() {
        let q = dated("In May 2023?").unwrap();
        assert_eq!(q.asked, "In May 2023?");
    }

    #[test]
    fn the_period_is_half_open() {
        let p = dated("What happened on 7 July 2023?").unwrap().period;
        assert!(p.contains(day_of(2023, 7, 7)));
        assert!(p.contains(day_of(2023, 7, 8) - chrono::Duration::seconds(1)));
        assert!(!p.contains(day_of(2023, 7, 8)));
        assert!(!p.contains(day_of(2023, 7, 7) - chrono::Duration::seconds(1)));
    }
}
