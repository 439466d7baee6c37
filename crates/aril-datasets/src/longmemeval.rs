//! LongMemEval (`longmemeval_s*.json` format): an array of questions, each with its own haystack
//! of dated sessions. Imported as one scope per question (`user_id = question_id`), one
//! conversation, one session per haystack session (event time from `haystack_dates`). A session id
//! repeated inside one haystack gets a `__dupN` suffix so its turns are not taken for the first's.
//!
//! Only `question_id`, `question`, `question_date` and the haystack are read here.

use std::collections::HashMap;
use std::path::Path;

use aril_core::{NewTurn, Role, Scope};
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::{Conversation, DatasetError, parse_longmemeval_time, read_json};

#[derive(Deserialize)]
struct RawQuestion {
    question_id: String,
    question: String,
    question_date: Option<String>,
    haystack_dates: Vec<String>,
    haystack_session_ids: Vec<String>,
    haystack_sessions: Vec<Vec<RawMessage>>,
}

#[derive(Deserialize)]
struct RawMessage {
    role: String,
    content: String,
}

/// A question with its haystack, as a strategy may see it.
#[derive(Debug, Clone)]
pub struct Question {
    pub question_id: String,
    pub question: String,
    pub question_date: Option<DateTime<Utc>>,
    pub haystack: Conversation,
    /// Session ids in haystack order, after `__dupN` renaming.
    pub session_ids: Vec<String>,
    /// Each session's date exactly as the file writes it (same order as `session_ids`).
    pub session_dates: Vec<String>,
}

/// Reads every question of a LongMemEval file.
pub fn read(path: &Path) -> Result<Vec<Question>, DatasetError> {
    let raw: Vec<RawQuestion> = read_json(path, "LongMemEval")?;
    let invalid = |message: String| DatasetError::Invalid {
        path: path.display().to_string(),
        message,
    };
    let mut out = Vec::with_capacity(raw.len());
    for q in raw {
        let n = q.haystack_sessions.len();
        if q.haystack_dates.len() != n || q.haystack_session_ids.len() != n {
            return Err(invalid(format!(
                "question {}: {} sessions but {} dates and {} session ids",
                q.question_id,
                n,
                q.haystack_dates.len(),
                q.haystack_session_ids.len()
            )));
        }
        let scope =
            Scope::user(q.question_id.clone()).map_err(|e| invalid(format!("question_id: {e}")))?;
        let question_date = q
            .question_date
            .as_deref()
            .map(parse_longmemeval_time)
            .transpose()
            .map_err(|e| invalid(format!("question {}: {e}", q.question_id)))?;
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut session_ids = Vec::with_capacity(n);
        let mut turns = Vec::new();
        for ((sid, date), session) in q
            .haystack_session_ids
            .iter()
            .zip(&q.haystack_dates)
            .zip(q.haystack_sessions)
        {
            let count = seen.entry(sid.as_str()).or_insert(0);
            let session_id = if *count == 0 {
                sid.clone()
            } else {
                format!("{sid}__dup{count}")
            };
            *count += 1;
            let when = parse_longmemeval_time(date)
                .map_err(|e| invalid(format!("question {}: {e}", q.question_id)))?;
            for (i, m) in session.into_iter().enumerate() {
                if m.content.trim().is_empty() {
                    continue;
                }
                let role = Role::parse(&m.role).map_err(|e| {
                    invalid(format!("question {} session {sid}: {e}", q.question_id))
                })?;
                turns.push(NewTurn {
                    scope: scope.clone(),
                    conversation: q.question_id.clone(),
                    session: Some(session_id.clone()),
                    role,
                    speaker: None,
                    text: m.content,
                    event_time: Some(when),
                    source_id: Some(format!("{session_id}:{i}")),
                    metadata: None,
                    lifecycle: Default::default(),
                });
            }
            session_ids.push(session_id);
        }
        out.push(Question {
            question_id: q.question_id.clone(),
            question: q.question,
            question_date,
            haystack: Conversation {
                scope,
                id: q.question_id,
                turns,
            },
            session_ids,
            session_dates: q.haystack_dates.clone(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn haystack_without_gold_and_duplicate_sessions_renamed() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(
            br#"[{"question_id": "q1", "question_type": "SECRET-TYPE", "question": "Where?",
            "question_date": "2023/05/30 (Tue) 20:36", "answer": "SECRET-ANSWER",
            "answer_session_ids": ["s1"],
            "haystack_dates": ["2023/05/20 (Sat) 03:29", "2023/05/21 (Sun) 03:29"],
            "haystack_session_ids": ["s1", "s1"],
            "haystack_sessions": [[{"role": "user", "content": "hi", "has_answer": true}],
                                  [{"role": "assistant", "content": "yo"}]]}]"#,
        )
        .unwrap();
        let qs = read(f.path()).unwrap();
        assert_eq!(qs[0].session_ids, vec!["s1", "s1__dup1"]);
        assert_eq!(
            qs[0].haystack.turns[1].source_id.as_deref(),
            Some("s1__dup1:0")
        );
        assert_eq!(qs[0].haystack.turns[1].role, Role::Assistant);
        let dump = format!("{qs:?}");
        assert!(!dump.contains("SECRET"), "gold leaked into the haystack");
    }
}
