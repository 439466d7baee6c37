//! A turn: one message of a conversation, kept verbatim forever. Turns are aril's ground state;
//! everything else is derived from them and can be rebuilt.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{InvalidInput, Metadata, Scope, short_hash};

/// Stable id of a turn, derived from its scope, place and content (see [`NewTurn::id`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TurnId(pub String);

impl std::fmt::Display for TurnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who spoke. Conversations between two people (LoCoMo) keep the person's name in `speaker`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    System,
    Tool,
}

impl Role {
    /// Every role, in declaration order.
    pub const ALL: [Role; 4] = [Role::User, Role::Assistant, Role::System, Role::Tool];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::Tool => "tool",
        }
    }

    /// Parses a role name case-insensitively; the error lists the accepted names.
    pub fn parse(s: &str) -> Result<Self, InvalidInput> {
        match s.to_ascii_lowercase().as_str() {
            "user" | "human" => Ok(Role::User),
            "assistant" | "ai" | "bot" => Ok(Role::Assistant),
            "system" => Ok(Role::System),
            "tool" | "function" => Ok(Role::Tool),
            _ => Err(InvalidInput(format!(
                "unknown role {s:?}: use user, assistant, system or tool"
            ))),
        }
    }
}

/// A turn as it arrives, before the store has taken it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewTurn {
    pub scope: Scope,
    /// The conversation the turn belongs to (a LoCoMo `sample_id`, a chat thread id...).
    pub conversation: String,
    /// The session inside the conversation, when the source has sessions.
    pub session: Option<String>,
    pub role: Role,
    /// The speaker's name when the source has one (LoCoMo: "Caroline").
    pub speaker: Option<String>,
    /// The verbatim text. Never rewritten.
    pub text: String,
    /// When the turn was said, from the source; not when aril received it.
    pub event_time: Option<DateTime<Utc>>,
    /// The id the source gives the turn (LoCoMo `D1:3`), unique inside the conversation.
    pub source_id: Option<String>,
    /// What the client attached to it (Mem0's `metadata`), kept verbatim; not part of the id,
    /// never read to rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// How long the memory it holds lives, and whether it may change; not part of the id.
    #[serde(flatten)]
    pub lifecycle: Lifecycle,
}

/// A memory's lifecycle as its client set it (Mem0's `expiration_date` and `immutable`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lifecycle {
    /// From this time on the memory is never recalled or listed, and the next sweep deletes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// An update of the memory is refused (a deletion is not).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub immutable: bool,
    /// From this time on what the memory says no longer holds (it was forgotten, `aril forget`):
    /// recall asked at or after it leaves the memory out; listings and its history keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<DateTime<Utc>>,
}

impl Lifecycle {
    /// Whether the memory has expired at `now`.
    pub fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// Whether what the memory says no longer holds at `at`.
    pub fn invalid_at(&self, at: DateTime<Utc>) -> bool {
        self.valid_to.is_some_and(|to| to <= at)
    }
}

impl NewTurn {
    /// Rejects turns that must not be stored: empty text, empty conversation id.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        if self.text.trim().is_empty() {
            return Err(InvalidInput(format!(
                "turn {} of conversation {:?} has empty text",
                self.source_id.as_deref().unwrap_or("(no source id)"),
                self.conversation
            )));
        }
        if self.conversation.trim().is_empty() {
            return Err(InvalidInput("conversation id must not be empty".into()));
        }
        Ok(())
    }

    /// The stable id: scope + conversation + session + source id when the source names its turns,
    /// otherwise scope + conversation + session + role + speaker + event time + text.
    pub fn id(&self) -> TurnId {
        let scope = self.scope.key();
        let session = self.session.as_deref().unwrap_or("");
        let hash = match &self.source_id {
            Some(source) => short_hash(&["src", &scope, &self.conversation, session, source]),
            None => {
                let time = self.event_time.map(|t| t.to_rfc3339()).unwrap_or_default();
                short_hash(&[
                    "txt",
                    &scope,
                    &self.conversation,
                    session,
                    self.role.as_str(),
                    self.speaker.as_deref().unwrap_or(""),
                    &time,
                    &self.text,
                ])
            }
        };
        TurnId(format!("t_{hash}"))
    }

    /// `Speaker: text` (or `Role: text`), the form segments and contexts show.
    pub fn rendered(&self) -> String {
        render_line(self.role, self.speaker.as_deref(), &self.text)
    }
}

/// A stored turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    pub id: TurnId,
    /// Store-assigned, strictly increasing in arrival order.
    pub seq: i64,
    #[serde(flatten)]
    pub turn: NewTurn,
    pub ingest_time: DateTime<Utc>,
}

impl Turn {
    pub fn rendered(&self) -> String {
        self.turn.rendered()
    }
}

/// The text of a run of turns (a segment): each rendered `Speaker: text`, one per line.
pub fn render_turns(turns: &[Turn]) -> String {
    turns
        .iter()
        .map(Turn::rendered)
        .collect::<Vec<_>>()
        .join("\n")
}

/// `Speaker: text`, or `Role: text` (capitalised) when there is no speaker name.
pub fn render_line(role: Role, speaker: Option<&str>, text: &str) -> String {
    match speaker {
        Some(name) => format!("{name}: {text}"),
        None => {
            let r = role.as_str();
            let mut cap = r[..1].to_ascii_uppercase();
            cap.push_str(&r[1..]);
            format!("{cap}: {text}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(text: &str, source: Option<&str>) -> NewTurn {
        NewTurn {
            scope: Scope::user("u").unwrap(),
            conversation: "c".into(),
            session: Some("s1".into()),
            role: Role::User,
            speaker: None,
            text: text.into(),
            event_time: None,
            source_id: source.map(str::to_string),
            metadata: None,
            lifecycle: Default::default(),
        }
    }

    #[test]
    fn source_id_fixes_the_id_whatever_the_text() {
        assert_eq!(turn("a", Some("D1:1")).id(), turn("b", Some("D1:1")).id());
        assert_ne!(turn("a", Some("D1:1")).id(), turn("a", Some("D1:2")).id());
    }

    #[test]
    fn without_source_id_the_text_decides() {
        assert_eq!(turn("a", None).id(), turn("a", None).id());
        assert_ne!(turn("a", None).id(), turn("b", None).id());
    }

    #[test]
    fn empty_text_is_invalid() {
        assert!(turn("  \n", None).validate().is_err());
        assert!(turn("hi", None).validate().is_ok());
    }

    #[test]
    fn rendering_uses_speaker_or_capitalised_role() {
        let mut t = turn("hello", None);
        assert_eq!(t.rendered(), "User: hello");
        t.speaker = Some("Mel".into());
        assert_eq!(t.rendered(), "Mel: hello");
    }

    #[test]
    fn roles_parse_case_insensitively() {
        assert_eq!(Role::parse("Assistant").unwrap(), Role::Assistant);
        assert!(Role::parse("narrator").is_err());
    }
}
