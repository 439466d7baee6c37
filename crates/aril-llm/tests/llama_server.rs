//! The client against a real model: llama.cpp's `llama-server` serving SmolLM2-135M-Instruct, both
//! fetched and built by `scripts/fetch-llm` (paths from `ARIL_LLAMA_SERVER` and
//! `ARIL_LLAMA_MODEL`, or the cache it fills). The tiny model's content is nonsense: this checks the
//! plumbing (schema enforcement, validation, accounting), never answer quality.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aril_llm::{
    ChatModel, ChatRequest, ClientOptions, Endpoint, JsonSpec, Ledger, Message, OpenAiClient,
    Purpose, ResponseFormat, complete_json,
};
use serde::Deserialize;
use serde_json::json;

fn cached(var: &str, relative: &str) -> PathBuf {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        home.join(".cache/aril").join(relative)
    });
    assert!(
        path.exists(),
        "{} not found: run scripts/fetch-llm (or set {var})",
        path.display()
    );
    path
}

/// A running `llama-server`, stopped when dropped.
struct LlamaServer {
    child: Child,
    base_url: String,
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> LlamaServer {
    let server = cached("ARIL_LLAMA_SERVER", "llama-server-0.3.36/llama-server");
    let model = cached("ARIL_LLAMA_MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf");
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let child = Command::new(server)
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--threads",
            "2",
        ])
        .args(["--ctx-size", "2048", "--parallel", "1", "-m"])
        .arg(model)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("llama-server starts");
    let running = LlamaServer {
        child,
        base_url: format!("http://127.0.0.1:{port}/v1"),
    };
    let health = format!("http://127.0.0.1:{port}/health");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(120) {
        if reqwest::blocking::get(&health).is_ok_and(|r| r.status().is_success()) {
            return running;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("llama-server did not become healthy within 120 s");
}

#[derive(Debug, Deserialize)]
struct Card {
    kind: String,
    text: String,
    entities: Vec<String>,
}

#[test]
fn a_real_server_enforces_the_schema_and_reports_usage() {
    let server = start();
    let client = OpenAiClient::new(
        Endpoint {
            base_url: server.base_url.clone(),
            model: "smollm2-135m".into(),
            api_key: None,
        },
        ClientOptions::default(),
        Ledger::default(),
    )
    .unwrap();
    // Bounded strings and arrays: without bounds a tiny model repeats until max_tokens.
    let schema = json!({
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": ["fact", "preference", "event"]},
            "text": {"type": "string", "minLength": 1, "maxLength": 80},
            "entities": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3}
        },
        "required": ["kind", "text", "entities"],
        "additionalProperties": false
    });
    let card = complete_json::<Card>(
        &client,
        Purpose::Encode,
        vec![
            Message::system("You write memory cards as JSON."),
            Message::user("Alice: I adopted a beagle called Pimenta last week."),
        ],
        JsonSpec {
            name: "card",
            schema: &schema,
        },
        200,
        |_| Ok(()),
    )
    .unwrap();
    assert!(["fact", "preference", "event"].contains(&card.value.kind.as_str()));
    assert!(!card.value.text.is_empty() && card.value.text.chars().count() <= 80);
    assert!(card.value.entities.len() <= 3);

    let plain = client
        .chat(
            Purpose::Answer,
            &ChatRequest {
                messages: vec![Message::user("Say hello.")],
                max_tokens: 16,
                temperature: 0.0,
                format: ResponseFormat::Text,
            },
        )
        .unwrap();
    assert!(!plain.content.is_empty());
    let calls = client.ledger().calls();
    assert_eq!(calls.len() as u32, card.calls + 1);
    for c in &calls {
        assert!(!c.counted_locally, "llama-server reports usage");
        assert!(c.prompt_tokens > 0 && c.completion_tokens > 0, "{c:?}");
    }
    assert_eq!(client.ledger().totals(Some(Purpose::Answer)).calls, 1);
}
