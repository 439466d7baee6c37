//! The date formats of the benchmark files. Times without a zone are taken as UTC.

use chrono::{DateTime, NaiveDateTime, Utc};

/// LoCoMo's `session_N_date_time`, e.g. `1:56 pm on 8 May, 2023`.
pub fn parse_locomo_time(s: &str) -> Result<DateTime<Utc>, String> {
    NaiveDateTime::parse_from_str(s.trim(), "%I:%M %p on %d %B, %Y")
        .map(|t| t.and_utc())
        .map_err(|e| {
            format!("bad LoCoMo date {s:?} (expected like \"1:56 pm on 8 May, 2023\"): {e}")
        })
}

/// LongMemEval's `haystack_dates` / `question_date`, e.g. `2023/05/20 (Sat) 03:29`.
pub fn parse_longmemeval_time(s: &str) -> Result<DateTime<Utc>, String> {
    NaiveDateTime::parse_from_str(s.trim(), "%Y/%m/%d (%a) %H:%M")
        .map(|t| t.and_utc())
        .map_err(|e| {
            format!("bad LongMemEval date {s:?} (expected like \"2023/05/20 (Sat) 03:29\"): {e}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locomo_times_parse() {
        let t = parse_locomo_time("1:56 pm on 8 May, 2023").unwrap();
        assert_eq!(t.to_rfc3339(), "2023-05-08T13:56:00+00:00");
        let t = parse_locomo_time("10:37 am on 27 June, 2023").unwrap();
        assert_eq!(t.to_rfc3339(), "2023-06-27T10:37:00+00:00");
        assert!(parse_locomo_time("yesterday").is_err());
    }

    #[test]
    fn longmemeval_times_parse() {
        let t = parse_longmemeval_time("2023/05/20 (Sat) 03:29").unwrap();
        assert_eq!(t.to_rfc3339(), "2023-05-20T03:29:00+00:00");
        assert!(parse_longmemeval_time("2023-05-20").is_err());
    }
}
