//! ChatGPT's data export (`conversations.json`): a list of conversations, each a tree of
//! messages (`mapping`: node id → message, parent, children) whose `current_node` is the last
//! message of the branch the user sees. Edits and regenerations leave other branches in the
//! tree; the import follows the current branch from its root, as ChatGPT shows it. Text parts of
//! user and assistant messages are kept; system and tool messages, hidden messages and non-text
//! parts (images, code-interpreter payloads) are not.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use aril_core::{Role, Scope};
use serde::Deserialize;
use serde_json::Value;

use super::{ExportTurn, conversation, none_found, unix_seconds};
use crate::{Conversation, DatasetError, read_json};

#[derive(Deserialize)]
struct Export {
    id: Option<String>,
    conversation_id: Option<String>,
    create_time: Option<f64>,
    mapping: HashMap<String, Node>,
    current_node: Option<String>,
}

#[derive(Deserialize)]
struct Node {
    message: Option<Message>,
    parent: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    id: String,
    author: Author,
    create_time: Option<f64>,
    content: Option<Content>,
    #[serde(default)]
    metadata: Value,
}

#[derive(Deserialize)]
struct Author {
    role: String,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    parts: Vec<Value>,
    /// Some content types (e.g. `code`) carry `text` instead of parts.
    text: Option<String>,
}

/// The conversations of a ChatGPT export, each under `scope`, as `chatgpt:<conversation id>`.
pub fn read(path: &Path, scope: &Scope) -> Result<Vec<Conversation>, DatasetError> {
    let exports: Vec<Export> = read_json(path, "ChatGPT conversations.json")?;
    let mut out = Vec::new();
    for (n, export) in exports.into_iter().enumerate() {
        let id = export
            .conversation_id
            .clone()
            .or_else(|| export.id.clone())
            .unwrap_or_else(|| format!("conversation-{n}"));
        let branch = current_branch(&export).map_err(|message| DatasetError::Invalid {
            path: path.display().to_string(),
            message: format!("conversation {id}: {message}"),
        })?;
        let turns = branch
            .into_iter()
            .filter_map(|m| turn(m, export.create_time))
            .collect();
        out.extend(conversation(scope, format!("chatgpt:{id}"), turns));
    }
    if out.is_empty() {
        return Err(none_found(path, "ChatGPT conversation"));
    }
    Ok(out)
}

/// The messages from the root to `current_node`, in order (the last node when none is named).
fn current_branch(export: &Export) -> Result<Vec<&Message>, String> {
    let Some(mut at) = export.current_node.clone().or_else(|| leaf(export)) else {
        return Ok(Vec::new());
    };
    let mut seen = HashSet::new();
    let mut branch = Vec::new();
    loop {
        if !seen.insert(at.clone()) {
            return Err(format!("the message tree loops at node {at}"));
        }
        let node = export
            .mapping
            .get(&at)
            .ok_or_else(|| format!("node {at} is named but not in the mapping"))?;
        branch.extend(node.message.as_ref());
        match &node.parent {
            Some(parent) => at = parent.clone(),
            None => break,
        }
    }
    branch.reverse();
    Ok(branch)
}

/// Without `current_node`: the node no other node names as parent (the one such, else none).
fn leaf(export: &Export) -> Option<String> {
    let parents: HashSet<&String> = export
        .mapping
        .values()
        .filter_map(|n| n.parent.as_ref())
        .collect();
    let mut leaves = export.mapping.keys().filter(|k| !parents.contains(k));
    match (leaves.next(), leaves.next()) {
        (Some(only), None) => Some(only.clone()),
        _ => None,
    }
}

fn turn(m: &Message, conversation_time: Option<f64>) -> Option<ExportTurn> {
    let role = match m.author.role.as_str() {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        _ => return None,
    };
    if m.metadata.get("is_visually_hidden_from_conversation") == Some(&Value::Bool(true)) {
        return None;
    }
    let content = m.content.as_ref()?;
    let mut texts: Vec<&str> = content.parts.iter().filter_map(Value::as_str).collect();
    if texts.is_empty() {
        texts.extend(content.text.as_deref());
    }
    Some(ExportTurn {
        role,
        text: texts.join("\n"),
        at: m.create_time.or(conversation_time).and_then(unix_seconds),
        source_id: m.id.clone(),
    })
}
