//! Readers for the chat exports people already have: ChatGPT's and Claude.ai's data exports
//! (`conversations.json`) and Claude Code's session files (JSON lines). Each turns a file into
//! [`Conversation`]s of verbatim turns under the scope the caller names, with the source's own
//! message ids as source ids (so a second import of the same file stores nothing new) and the
//! source's times. Only the conversation itself is read: text the user and the assistant
//! exchanged, never tool payloads or attachments.

pub mod chatgpt;
pub mod claude;
pub mod claude_code;

use aril_core::{NewTurn, Role, Scope};
use chrono::{DateTime, Utc};

use crate::{Conversation, DatasetError};

/// A turn of an export.
pub(crate) struct ExportTurn {
    pub role: Role,
    pub text: String,
    pub at: Option<DateTime<Utc>>,
    pub source_id: String,
}

/// A conversation of an export, its turns in order; conversations without text are left out.
pub(crate) fn conversation(
    scope: &Scope,
    id: String,
    turns: Vec<ExportTurn>,
) -> Option<Conversation> {
    let turns: Vec<NewTurn> = turns
        .into_iter()
        .filter(|t| !t.text.trim().is_empty())
        .map(|t| NewTurn {
            scope: scope.clone(),
            conversation: id.clone(),
            session: Some(id.clone()),
            role: t.role,
            speaker: None,
            text: t.text,
            event_time: t.at,
            source_id: Some(t.source_id),
            metadata: None,
            lifecycle: Default::default(),
        })
        .collect();
    (!turns.is_empty()).then(|| Conversation {
        scope: scope.clone(),
        id,
        turns,
    })
}

/// A file that parsed but holds nothing to import: an error, not an empty success.
pub(crate) fn none_found(path: &std::path::Path, what: &str) -> DatasetError {
    DatasetError::Invalid {
        path: path.display().to_string(),
        message: format!("no {what} with text found: is this the right file?"),
    }
}

/// Unix seconds (as ChatGPT writes them, with a fraction) as a time.
pub(crate) fn unix_seconds(seconds: f64) -> Option<DateTime<Utc>> {
    if !seconds.is_finite() {
        return None;
    }
    let whole = seconds.floor();
    let nanos = ((seconds - whole) * 1e9).round().clamp(0.0, 999_999_999.0) as u32;
    DateTime::from_timestamp(whole as i64, nanos)
}
