//! Claude Code's session files: one JSON object per line (`~/.claude/projects/<project>/
//! <session>.jsonl`). Lines of `type` `user` or `assistant` carry a `message` whose `content` is
//! a string or a list of blocks; the import keeps their `text` blocks (what the user typed and the
//! assistant wrote) and leaves tool calls, tool results, thinking, sidechains (sub-agents) and
//! meta lines out. A directory is read whole: every `.jsonl` file under it, in name order.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use aril_core::{Role, Scope};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::{ExportTurn, conversation, none_found};
use crate::{Conversation, DatasetError};

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    uuid: Option<String>,
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
    timestamp: Option<DateTime<Utc>>,
    message: Option<Message>,
    #[serde(default, rename = "isSidechain")]
    sidechain: bool,
    #[serde(default, rename = "isMeta")]
    meta: bool,
}

#[derive(Deserialize)]
struct Message {
    content: Value,
}

/// The sessions in a file, or in every `.jsonl` file under a directory, each under `scope`, as
/// `claude-code:<session id>`.
pub fn read(path: &Path, scope: &Scope) -> Result<Vec<Conversation>, DatasetError> {
    let files = if path.is_dir() {
        let mut files = Vec::new();
        jsonl_files(path, &mut files)?;
        files.sort();
        files
    } else {
        vec![path.to_path_buf()]
    };
    // Sessions by id, in the order first seen; a session resumed in another file continues.
    let mut sessions: BTreeMap<(usize, String), Vec<ExportTurn>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for file in &files {
        read_file(file, &mut |session, turn| {
            let n = match order.iter().position(|s| *s == session) {
                Some(n) => n,
                None => {
                    order.push(session.clone());
                    order.len() - 1
                }
            };
            sessions.entry((n, session)).or_default().push(turn);
        })?;
    }
    let out: Vec<Conversation> = sessions
        .into_iter()
        .filter_map(|((_, id), turns)| conversation(scope, format!("claude-code:{id}"), turns))
        .collect();
    if out.is_empty() {
        return Err(none_found(path, "Claude Code session"));
    }
    Ok(out)
}

fn jsonl_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), DatasetError> {
    let io = |e| DatasetError::Io {
        path: dir.display().to_string(),
        source: e,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.is_dir() {
            jsonl_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
    Ok(())
}

fn read_file(path: &Path, add: &mut dyn FnMut(String, ExportTurn)) -> Result<(), DatasetError> {
    let io = |e| DatasetError::Io {
        path: path.display().to_string(),
        source: e,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io)?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Line = serde_json::from_str(&line).map_err(|e| DatasetError::Format {
            path: path.display().to_string(),
            format: "Claude Code session (JSON lines)",
            line: n + 1,
            column: e.column(),
            message: e.to_string(),
        })?;
        let role = match parsed.kind.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            _ => continue,
        };
        if parsed.sidechain || parsed.meta {
            continue;
        }
        let (Some(uuid), Some(session), Some(message)) =
            (parsed.uuid, parsed.session_id, parsed.message)
        else {
            continue;
        };
        add(
            session,
            ExportTurn {
                role,
                text: text_of(&message.content),
                at: parsed.timestamp,
                source_id: uuid,
            },
        );
    }
    Ok(())
}

/// A message's text: the string, or its `text` blocks joined (tool blocks left out).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
