//! The client against a real model: llama.cpp's `llama-server` serving SmolLM2-135M-Instruct, both
//! fetched and built by `scripts/fetch-llm` ([`LocalServer::from_cache`]). The tiny model's content
//! is nonsense: this checks the plumbing (schema enforcement, validation, accounting), never answer
//! quality.

use aril_llm::{
    ChatModel, ChatRequest, ClientOptions, JsonSpec, Ledger, LocalServer, Message, OpenAiClient,
    Purpose, ResponseFormat, complete_json,
};
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, Deserialize)]
struct Card {
    kind: String,
    text: String,
    entities: Vec<String>,
}

#[test]
fn a_real_server_enforces_the_schema_and_reports_usage() {
    let server = LocalServer::from_cache().unwrap_or_else(|e| panic!("{e}"));
    let client = OpenAiClient::new(
        server.endpoint().clone(),
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
        // o200k counts are kept beside the server's own, whatever its tokenizer.
        assert!(c.prompt_o200k > 0 && c.completion_o200k > 0, "{c:?}");
    }
    assert_eq!(client.ledger().totals(Some(Purpose::Answer)).calls, 1);
}
