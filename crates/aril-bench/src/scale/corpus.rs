//! The turn stream `aril bench scale` builds its stores from: every haystack session of a
//! LongMemEval file once (deduplicated by session id, in date order), then the same sessions again
//! under new session ids and later dates, as often as a size needs. Turn `i` of the stream is
//! always the same turn, so a build can stop anywhere and go on from its count.

use std::collections::HashSet;
use std::path::Path;

use aril_core::{NewTurn, Scope};
use aril_engine::datasets::parse_longmemeval_time;
use chrono::{DateTime, Duration, Utc};

use crate::BenchError;
use crate::data::{Case, HSession};

/// Marks a repeated session's id: `<original>~<pass>`.
const PASS_MARK: char = '~';

/// One conversation holds the whole stream.
pub const CONVERSATION: &str = "scale";

/// A session of the stream's first pass.
struct Dated {
    session: HSession,
    date: DateTime<Utc>,
    /// Stream position of its first turn within a pass.
    start: usize,
}

/// Every session of a file once, in date order.
pub struct Corpus {
    sessions: Vec<Dated>,
    /// Turns in one pass.
    per_pass: usize,
    /// How far each pass is moved after the previous one: the first pass's span plus a day.
    shift: Duration,
}

impl Corpus {
    /// The sessions of every case's haystack (the cases of `path`, a LongMemEval file), each
    /// once. Turns with no text are left out, as every import leaves them out.
    pub fn from_cases(path: &Path, cases: &[Case]) -> Result<Self, BenchError> {
        let mut seen = HashSet::new();
        let mut sessions = Vec::new();
        for case in cases {
            for s in case.sessions.iter() {
                if !seen.insert(s.id.clone()) {
                    continue;
                }
                let raw = s.date.as_deref().unwrap_or_default();
                let date = parse_longmemeval_time(raw).map_err(|e| {
                    BenchError::data(path, format!("session {}: date {raw:?}: {e}", s.id))
                })?;
                let mut session = s.clone();
                session.turns.retain(|t| !t.text.trim().is_empty());
                if !session.turns.is_empty() {
                    sessions.push(Dated {
                        session,
                        date,
                        start: 0,
                    });
                }
            }
        }
        if sessions.is_empty() {
            return Err(BenchError::data(path, "no session with any text"));
        }
        sessions.sort_by(|a, b| a.date.cmp(&b.date).then(a.session.id.cmp(&b.session.id)));
        let mut per_pass = 0;
        for s in &mut sessions {
            s.start = per_pass;
            per_pass += s.session.turns.len();
        }
        let first = sessions.first().map(|s| s.date).unwrap_or_default();
        let last = sessions.last().map(|s| s.date).unwrap_or_default();
        Ok(Self {
            sessions,
            per_pass,
            shift: (last - first) + Duration::days(1),
        })
    }

    /// Distinct sessions in one pass.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Turns in one pass (a size above this repeats sessions).
    pub fn turns_per_pass(&self) -> usize {
        self.per_pass
    }

    /// Turns `from..to` of the stream, in order, in `scope`.
    pub fn turns(&self, scope: &Scope, from: usize, to: usize) -> Vec<NewTurn> {
        let mut out = Vec::with_capacity(to.saturating_sub(from));
        let mut i = from;
        while i < to {
            let (pass, at) = (i / self.per_pass, i % self.per_pass);
            let s = self.sessions.partition_point(|s| s.start <= at) - 1;
            let dated = &self.sessions[s];
            let session = session_id(&dated.session.id, pass);
            let when = dated.date + self.shift * pass as i32;
            for (n, t) in dated
                .session
                .turns
                .iter()
                .enumerate()
                .skip(at - dated.start)
            {
                if i >= to {
                    break;
                }
                out.push(NewTurn {
                    scope: scope.clone(),
                    conversation: CONVERSATION.into(),
                    session: Some(session.clone()),
                    role: t.role,
                    speaker: t.speaker.clone(),
                    text: t.text.clone(),
                    event_time: Some(when),
                    source_id: Some(format!("{session}:{n}")),
                    metadata: None,
                    lifecycle: Default::default(),
                });
                i += 1;
            }
        }
        out
    }

    /// Whether every session of `ids` is whole among the stream's first `turns` turns.
    pub fn holds_all(&self, ids: &[String], turns: usize) -> bool {
        !ids.is_empty()
            && ids.iter().all(|id| {
                self.sessions
                    .iter()
                    .any(|s| s.session.id == *id && s.start + s.session.turns.len() <= turns)
            })
    }
}

/// A session's id in a pass: the original in the first, marked after.
fn session_id(original: &str, pass: usize) -> String {
    if pass == 0 {
        original.to_string()
    } else {
        format!("{original}{PASS_MARK}{pass}")
    }
}

/// The original session a stream session repeats (itself in the first pass).
pub fn original_session(id: &str) -> &str {
    id.rsplit_once(PASS_MARK)
        .map_or(id, |(original, _)| original)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Corpus {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/longmemeval/longmemeval_s_dev.json");
        Corpus::from_cases(&path, &crate::data::longmemeval(&path).unwrap()).unwrap()
    }

    #[test]
    fn the_stream_is_the_same_wherever_it_is_cut_and_repeats_later() {
        let c = corpus();
        let scope = Scope::user("s").unwrap();
        let n = c.turns_per_pass();
        let whole = c.turns(&scope, n - 50, n + 50);
        let mut pieces = c.turns(&scope, n - 50, n - 7);
        pieces.extend(c.turns(&scope, n - 7, n + 50));
        assert_eq!(whole.len(), 100);
        assert_eq!(
            whole.iter().map(NewTurn::rendered).collect::<Vec<_>>(),
            pieces.iter().map(NewTurn::rendered).collect::<Vec<_>>()
        );
        let ids: HashSet<_> = whole.iter().map(|t| t.source_id.clone()).collect();
        assert_eq!(ids.len(), 100, "no turn id repeats across passes");
        // The second pass starts with the first pass's first turn, later and under a new id.
        let (first, again) = (&c.turns(&scope, 0, 1)[0], &whole[50]);
        assert_eq!(first.text, again.text);
        assert!(again.event_time > whole[49].event_time);
        let session = again.session.as_deref().unwrap();
        assert_ne!(Some(session), first.session.as_deref());
        assert_eq!(Some(original_session(session)), first.session.as_deref());
        // Dates never go back.
        let times: Vec<_> = c
            .turns(&scope, 0, 3000)
            .iter()
            .map(|t| t.event_time)
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
    }
}
