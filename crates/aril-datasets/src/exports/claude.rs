//! Claude.ai's data export (`conversations.json`): a list of conversations, each with its
//! `chat_messages` in order, `sender` `human` or `assistant`, `created_at` in RFC 3339. A
//! message's text is its `text`, else its content blocks of type `text`; attachments, files and
//! tool blocks are not imported.

use std::path::Path;

use aril_core::{Role, Scope};
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::{ExportTurn, conversation, none_found};
use crate::{Conversation, DatasetError, read_json};

#[derive(Deserialize)]
struct Export {
    uuid: String,
    #[serde(default)]
    chat_messages: Vec<ChatMessage>,
}

#[derive(Deserialize)]
struct ChatMessage {
    uuid: String,
    sender: String,
    #[serde(default)]
    text: String,
    #[serde(default)]
    content: Vec<Block>,
    created_at: Option<DateTime<Utc>>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

/// The conversations of a Claude.ai export, each under `scope`, as `claude:<uuid>`.
pub fn read(path: &Path, scope: &Scope) -> Result<Vec<Conversation>, DatasetError> {
    let exports: Vec<Export> = read_json(path, "Claude conversations.json")?;
    let mut out = Vec::new();
    for export in exports {
        let mut turns = Vec::with_capacity(export.chat_messages.len());
        for m in export.chat_messages {
            let role = match m.sender.as_str() {
                "human" => Role::User,
                "assistant" => Role::Assistant,
                other => {
                    return Err(DatasetError::Invalid {
                        path: path.display().to_string(),
                        message: format!(
                            "conversation {}, message {}: unknown sender {other:?} (human or \
                             assistant)",
                            export.uuid, m.uuid
                        ),
                    });
                }
            };
            let text = if m.text.trim().is_empty() {
                m.content
                    .iter()
                    .filter(|b| b.kind == "text")
                    .filter_map(|b| b.text.as_deref())
                    .collect::<Vec<_>>()
                    .join("\n")
            } else {
                m.text
            };
            turns.push(ExportTurn {
                role,
                text,
                at: m.created_at,
                source_id: m.uuid,
            });
        }
        out.extend(conversation(
            scope,
            format!("claude:{}", export.uuid),
            turns,
        ));
    }
    if out.is_empty() {
        return Err(none_found(path, "Claude conversation"));
    }
    Ok(out)
}
