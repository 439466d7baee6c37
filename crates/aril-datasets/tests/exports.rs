//! The chat-export readers on fixture files written in each export's real format.

use std::path::{Path, PathBuf};

use aril_core::{Role, Scope};
use aril_datasets::exports::{chatgpt, claude, claude_code};
use aril_datasets::{Conversation, DatasetError};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn sam() -> Scope {
    Scope::new("sam".into(), None, None).unwrap()
}

/// (role, text, source id) of each turn.
fn turns(c: &Conversation) -> Vec<(Role, &str, &str)> {
    c.turns
        .iter()
        .map(|t| (t.role, t.text.as_str(), t.source_id.as_deref().unwrap()))
        .collect()
}

#[test]
fn chatgpt_follows_the_current_branch_and_keeps_text_only() {
    let conversations = chatgpt::read(&fixture("chatgpt-conversations.json"), &sam()).unwrap();
    // The draft without messages is left out.
    assert_eq!(conversations.len(), 1);
    let c = &conversations[0];
    assert_eq!(c.id, "chatgpt:6634f1c2-0a1b-4c2d-9e3f-000000000001");
    assert_eq!(
        turns(c),
        [
            (
                Role::User,
                "I'm flying to Lisbon on June 12th with my sister Ana.",
                "m-1"
            ),
            (Role::Assistant, "Lovely! How long will you stay?", "m-2"),
            (Role::User, "Ten days. Here is our hotel booking.", "m-3"),
            (
                Role::Assistant,
                "Ten days in Lisbon: try the Alfama walking tour.",
                "m-4b"
            ),
        ]
    );
    let first = &c.turns[0];
    assert_eq!(
        first.event_time.unwrap().to_rfc3339(),
        "2024-05-03T09:53:30.500+00:00"
    );
    assert!(
        c.turns
            .iter()
            .all(|t| t.scope == sam() && t.session.as_deref() == Some(c.id.as_str()))
    );
}

#[test]
fn claude_reads_text_and_text_blocks() {
    let conversations = claude::read(&fixture("claude-conversations.json"), &sam()).unwrap();
    assert_eq!(conversations.len(), 1);
    assert_eq!(
        turns(&conversations[0]),
        [
            (
                Role::User,
                "I signed up for the Porto marathon in November.",
                "cm-1"
            ),
            (
                Role::Assistant,
                "Great goal. Start with three runs a week.",
                "cm-2"
            ),
        ]
    );
    assert_eq!(
        conversations[0].turns[1].event_time.unwrap().to_rfc3339(),
        "2024-03-08T09:00:30+00:00"
    );
}

#[test]
fn claude_code_keeps_the_conversation_not_the_tools() {
    for path in [
        fixture("claude-code"),
        fixture("claude-code/-home-sam-shop/0d6f3c1e-aaaa-4bbb-8ccc-000000000001.jsonl"),
    ] {
        let conversations = claude_code::read(&path, &sam()).unwrap();
        assert_eq!(conversations.len(), 1, "{}", path.display());
        let c = &conversations[0];
        assert_eq!(c.id, "claude-code:0d6f3c1e-aaaa-4bbb-8ccc-000000000001");
        assert_eq!(
            turns(c),
            [
                (
                    Role::User,
                    "The checkout total is off by a cent when a coupon applies; we always round \
                     half up in this project.",
                    "cc-1"
                ),
                (
                    Role::Assistant,
                    "I'll look at the coupon code path.",
                    "cc-2"
                ),
                (
                    Role::Assistant,
                    "Fixed: the coupon discount now rounds half up before the tax.",
                    "cc-4"
                ),
            ]
        );
    }
}

#[test]
fn a_file_of_another_format_is_an_error_that_names_it() {
    let err = chatgpt::read(&fixture("claude-conversations.json"), &sam()).unwrap_err();
    assert!(matches!(err, DatasetError::Format { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("not a ChatGPT conversations.json file"),
        "{err}"
    );
    let err = claude::read(&fixture("chatgpt-conversations.json"), &sam()).unwrap_err();
    assert!(
        err.to_string().contains("Claude conversations.json"),
        "{err}"
    );
    let err = claude_code::read(&fixture("turns.jsonl"), &sam()).unwrap_err();
    assert!(err.to_string().contains("turns.jsonl:1:"), "{err}");
    assert!(
        err.to_string().contains("not a Claude Code session"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let only_summary = dir.path().join("s.jsonl");
    std::fs::write(&only_summary, "{\"type\":\"summary\",\"summary\":\"x\"}\n").unwrap();
    let err = claude_code::read(dir.path(), &sam()).unwrap_err();
    assert!(
        err.to_string().contains("no Claude Code session with text"),
        "{err}"
    );
    let missing = claude::read(&fixture("nothing-here.json"), &sam()).unwrap_err();
    assert!(matches!(missing, DatasetError::Io { .. }), "{missing}");
}
