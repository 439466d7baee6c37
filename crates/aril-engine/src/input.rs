//! The wire form of a turn, shared by every adapter that takes turns from outside (`aril add`
//! JSON lines, `aril serve`): scope fields and time as plain strings, checked here once.

use aril_core::{Lifecycle, Metadata, NewTurn, Role, Scope, Turn};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::EngineError;

/// One turn as a client sends it. Missing fields fall back to [`TurnDefaults`]. Written out
/// (`aril export`), it leaves out the fields it has no value for.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TurnIn {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The conversation (thread) the turn belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// `user`, `assistant`, `system` or `tool`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// The verbatim text (`content` is accepted too).
    #[serde(alias = "content")]
    pub text: String,
    /// When it was said, RFC 3339 (e.g. `2024-03-01T10:00:00Z`). Default: now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The id the source gives the turn, unique inside its conversation (makes re-sending safe).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    /// A JSON object kept with the turn and returned with it (at most 16 KiB).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<Metadata>,
    /// When the memory expires: RFC 3339, or a date `YYYY-MM-DD` (it lasts through that day,
    /// UTC). From then on it is never recalled or listed, and a sweep deletes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// True: an update of this memory is refused (a deletion is not).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub immutable: bool,
    /// From when what it says no longer holds, RFC 3339 (what `aril forget` writes): recall
    /// asked from then on leaves it out; listings and history keep it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<String>,
}

impl From<&Turn> for TurnIn {
    /// A stored turn in the wire form, every field it has given: read back by
    /// [`TurnIn::into_turn`], it is the same turn (the same id). A field the turn lacks (a
    /// session, a speaker, a time) stays absent, which the reader fills with its own default.
    fn from(stored: &Turn) -> Self {
        let t = &stored.turn;
        Self {
            user_id: Some(t.scope.user_id.clone()),
            agent_id: t.scope.agent_id.clone(),
            run_id: t.scope.run_id.clone(),
            conversation: Some(t.conversation.clone()),
            session: t.session.clone(),
            role: Some(t.role.as_str().to_string()),
            speaker: t.speaker.clone(),
            text: t.text.clone(),
            at: t.event_time.map(|at| at.to_rfc3339()),
            source_id: t.source_id.clone(),
            metadata: t.metadata.clone(),
            expires_at: t.lifecycle.expires_at.map(|at| at.to_rfc3339()),
            immutable: t.lifecycle.immutable,
            valid_to: t.lifecycle.valid_to.map(|at| at.to_rfc3339()),
        }
    }
}

/// What a [`TurnIn`] takes when it leaves a field out.
#[derive(Debug, Clone)]
pub struct TurnDefaults {
    pub scope: Option<Scope>,
    pub conversation: String,
    pub session: Option<String>,
    pub role: Role,
    pub speaker: Option<String>,
    pub at: Option<DateTime<Utc>>,
    /// Metadata for the turns that carry none of their own.
    pub metadata: Option<Metadata>,
    /// The expiry of the turns that name none, and immutability for all.
    pub lifecycle: Lifecycle,
}

impl Default for TurnDefaults {
    fn default() -> Self {
        Self {
            scope: None,
            conversation: "default".into(),
            session: None,
            role: Role::User,
            speaker: None,
            at: None,
            metadata: None,
            lifecycle: Lifecycle::default(),
        }
    }
}

/// Parses an RFC 3339 timestamp, with an error that shows the expected form.
pub fn parse_time(s: &str) -> Result<DateTime<Utc>, EngineError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| {
            EngineError::InvalidInput(aril_core::InvalidInput(format!(
                "bad timestamp {s:?}: use RFC 3339, e.g. 2024-03-01T10:00:00Z"
            )))
        })
}

/// Parses an expiry: RFC 3339, or a calendar date `YYYY-MM-DD`, which lasts through that day
/// (UTC): the memory expires at the next midnight.
pub fn parse_expiry(s: &str) -> Result<DateTime<Utc>, EngineError> {
    parse_day_or_time(s, 1, "expiry", "2025-12-31: it lasts through that day, UTC")
}

/// When a memory stops holding, as a forgetting gives it: RFC 3339, or a date `YYYY-MM-DD` (it
/// no longer holds from that day's start, UTC).
pub fn parse_valid_to(s: &str) -> Result<DateTime<Utc>, EngineError> {
    parse_day_or_time(s, 0, "time", "2025-06-30: from that day on, UTC")
}

/// When a question is asked: RFC 3339, or a date `YYYY-MM-DD`, taken as that day's last second
/// (UTC), so that what was said during the day was said before the question. One rule for every
/// front end (`aril ask --at`, `aril search --at`, the inspector's playground).
pub fn parse_asked_at(s: &str) -> Result<DateTime<Utc>, EngineError> {
    let s = s.trim();
    let at = parse_day_or_time(s, 1, "question time", "2024-05-03: at that day's end, UTC")?;
    let is_day = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok();
    Ok(if is_day {
        at - chrono::Duration::seconds(1)
    } else {
        at
    })
}

/// RFC 3339, or a date `YYYY-MM-DD` taken as the midnight (UTC) `days_on` days after it; the
/// error names `what` was bad and shows a date as `example` explains it.
fn parse_day_or_time(
    s: &str,
    days_on: u64,
    what: &str,
    example: &str,
) -> Result<DateTime<Utc>, EngineError> {
    let invalid = |message: String| EngineError::InvalidInput(aril_core::InvalidInput(message));
    if let Ok(day) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return day
            .checked_add_days(chrono::Days::new(days_on))
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|midnight| midnight.and_utc())
            .ok_or_else(|| invalid(format!("{what} {s:?} is out of range")));
    }
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| {
            invalid(format!(
                "bad {what} {s:?}: use a date ({example}) or RFC 3339 (2025-12-31T18:00:00Z)"
            ))
        })
}

/// A lifecycle from its wire fields: an expiry as [`parse_expiry`] reads it, and immutability.
pub fn parse_lifecycle(expires: Option<&str>, immutable: bool) -> Result<Lifecycle, EngineError> {
    Ok(Lifecycle {
        expires_at: expires.map(parse_expiry).transpose()?,
        immutable,
        valid_to: None,
    })
}

impl TurnIn {
    /// The validated turn. `now` stands in when neither the turn nor the defaults give a time.
    pub fn into_turn(
        self,
        defaults: &TurnDefaults,
        now: DateTime<Utc>,
    ) -> Result<NewTurn, EngineError> {
        let scope = match (self.user_id, &defaults.scope) {
            (Some(user), _) => Scope::new(
                user,
                self.agent_id
                    .or_else(|| defaults.scope.as_ref().and_then(|s| s.agent_id.clone())),
                self.run_id
                    .or_else(|| defaults.scope.as_ref().and_then(|s| s.run_id.clone())),
            )?,
            (None, Some(scope)) => Scope::new(
                scope.user_id.clone(),
                self.agent_id.or_else(|| scope.agent_id.clone()),
                self.run_id.or_else(|| scope.run_id.clone()),
            )?,
            (None, None) => {
                return Err(EngineError::InvalidInput(aril_core::InvalidInput(
                    "a turn needs a user_id".into(),
                )));
            }
        };
        let role = match self.role.as_deref() {
            Some(r) => Role::parse(r)?,
            None => defaults.role,
        };
        let at = match self.at.as_deref() {
            Some(at) => parse_time(at)?,
            None => defaults.at.unwrap_or(now),
        };
        let turn = NewTurn {
            scope,
            conversation: self
                .conversation
                .unwrap_or_else(|| defaults.conversation.clone()),
            session: self.session.or_else(|| defaults.session.clone()),
            role,
            speaker: self.speaker.or_else(|| defaults.speaker.clone()),
            text: self.text,
            event_time: Some(at),
            source_id: self.source_id,
            metadata: self.metadata.or_else(|| defaults.metadata.clone()),
            lifecycle: Lifecycle {
                expires_at: match self.expires_at.as_deref() {
                    Some(at) => Some(parse_expiry(at)?),
                    None => defaults.lifecycle.expires_at,
                },
                immutable: self.immutable || defaults.lifecycle.immutable,
                valid_to: self.valid_to.as_deref().map(parse_time).transpose()?,
            },
        };
        turn.validate()?;
        Ok(turn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        parse_time("2025-01-02T03:04:05Z").unwrap()
    }

    #[test]
    fn a_question_asked_on_a_day_is_asked_at_its_end() {
        assert_eq!(
            parse_asked_at(" 2024-05-03 ").unwrap(),
            parse_time("2024-05-03T23:59:59Z").unwrap()
        );
        assert_eq!(
            parse_asked_at("2024-05-03T08:00:00+02:00").unwrap(),
            parse_time("2024-05-03T06:00:00Z").unwrap()
        );
        let err = parse_asked_at("May 3rd").unwrap_err().to_string();
        assert!(
            err.contains("question time") && err.contains("2024-05-03"),
            "{err}"
        );
    }

    #[test]
    fn a_stored_turn_reads_back_as_itself() {
        let turn = NewTurn {
            scope: Scope::new("u".into(), Some("a".into()), Some("r".into())).unwrap(),
            conversation: "c".into(),
            session: Some("s2".into()),
            role: Role::Assistant,
            speaker: Some("Ana".into()),
            text: "It was on the 3rd, \"after lunch\".".into(),
            event_time: Some(parse_time("2024-03-01T10:00:00.123456789Z").unwrap()),
            source_id: None,
            metadata: Some(
                Metadata::try_from(serde_json::json!({"source": "email", "tags": [1, "a"]}))
                    .unwrap(),
            ),
            lifecycle: Lifecycle {
                expires_at: Some(parse_time("2030-01-01T00:00:00Z").unwrap()),
                immutable: true,
                valid_to: Some(parse_time("2029-06-01T12:00:00Z").unwrap()),
            },
        };
        let stored = Turn {
            id: turn.id(),
            seq: 7,
            turn: turn.clone(),
            ingest_time: now(),
        };
        let line = serde_json::to_string(&TurnIn::from(&stored)).unwrap();
        let back: TurnIn = serde_json::from_str(&line).unwrap();
        let back = back.into_turn(&TurnDefaults::default(), now()).unwrap();
        assert_eq!(back, turn, "{line}");
        assert_eq!(back.id(), stored.id);
    }

    #[test]
    fn fields_fall_back_to_the_defaults() {
        let tagged =
            |tag: &str| Some(Metadata::try_from(serde_json::json!({ "tag": tag })).unwrap());
        let defaults = TurnDefaults {
            scope: Some(Scope::new("u".into(), Some("a".into()), None).unwrap()),
            metadata: tagged("batch"),
            ..Default::default()
        };
        let own = TurnIn {
            text: "mine".into(),
            metadata: tagged("own"),
            ..Default::default()
        }
        .into_turn(&defaults, now())
        .unwrap();
        assert_eq!(own.metadata, tagged("own"));
        let t = TurnIn {
            text: "hello".into(),
            run_id: Some("r".into()),
            ..Default::default()
        }
        .into_turn(&defaults, now())
        .unwrap();
        assert_eq!(t.scope.user_id, "u");
        assert_eq!(t.scope.agent_id.as_deref(), Some("a"));
        assert_eq!(t.scope.run_id.as_deref(), Some("r"));
        assert_eq!(t.conversation, "default");
        assert_eq!(t.role, Role::User);
        assert_eq!(t.event_time, Some(now()));
        assert_eq!(t.metadata, tagged("batch"));
    }

    #[test]
    fn bad_fields_are_errors_that_name_the_fix() {
        let d = TurnDefaults::default();
        let no_user = TurnIn {
            text: "x".into(),
            ..Default::default()
        };
        assert!(
            no_user
                .into_turn(&d, now())
                .unwrap_err()
                .to_string()
                .contains("user_id")
        );
        let bad_time = TurnIn {
            user_id: Some("u".into()),
            text: "x".into(),
            at: Some("yesterday".into()),
            ..Default::default()
        };
        assert!(
            bad_time
                .into_turn(&d, now())
                .unwrap_err()
                .to_string()
                .contains("RFC 3339")
        );
        let empty = TurnIn {
            user_id: Some("u".into()),
            text: "  ".into(),
            ..Default::default()
        };
        assert!(
            empty
                .into_turn(&d, now())
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        let role = TurnIn {
            user_id: Some("u".into()),
            text: "x".into(),
            role: Some("robot".into()),
            ..Default::default()
        };
        assert!(role.into_turn(&d, now()).is_err());
    }
}
