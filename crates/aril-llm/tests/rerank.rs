//! The rerank client against a local server that speaks the `/rerank` protocols (Jina/Cohere/
//! llama.cpp, and TEI). It plays the protocol with a word-overlap score: no registry package
//! carries cross-encoder weights, so the real model cannot run here.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use aril_llm::{ClientOptions, Endpoint, LlmError, RerankClient, Reranker};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Cohere,
    Tei,
    /// Scores only the first document.
    Short,
}

#[derive(Clone)]
struct Server {
    shape: Shape,
    seen: Arc<Mutex<Vec<Value>>>,
}

fn overlap(query: &str, doc: &str) -> f32 {
    let q: HashSet<String> = query.split_whitespace().map(str::to_lowercase).collect();
    doc.split_whitespace()
        .filter(|w| q.contains(&w.to_lowercase()))
        .count() as f32
}

async fn rerank(State(s): State<Server>, body: axum::Json<Value>) -> Response {
    s.seen.lock().unwrap().push(body.0.clone());
    let query = body["query"].as_str().unwrap_or_default();
    let key = if s.shape == Shape::Tei {
        "texts"
    } else {
        "documents"
    };
    let Some(docs) = body.get(key).and_then(|d| d.as_array()) else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("missing field `{key}`"),
        )
            .into_response();
    };
    let scores: Vec<Value> = docs
        .iter()
        .enumerate()
        .take(if s.shape == Shape::Short {
            1
        } else {
            docs.len()
        })
        .map(|(i, d)| (i, overlap(query, d.as_str().unwrap_or_default())))
        .map(|(i, score)| match s.shape {
            Shape::Tei => json!({"index": i, "score": score}),
            _ => json!({"index": i, "relevance_score": score}),
        })
        .collect();
    match s.shape {
        Shape::Tei => axum::Json(json!(scores)).into_response(),
        _ => axum::Json(json!({"results": scores})).into_response(),
    }
}

fn serve(shape: Shape) -> (Server, String) {
    let server = Server {
        shape,
        seen: Arc::default(),
    };
    let app = axum::Router::new()
        .route("/v1/rerank", axum::routing::post(rerank))
        .with_state(server.clone());
    let addr = common::serve_on_loopback(app);
    (server, format!("http://{addr}/v1"))
}

fn client(base_url: String) -> RerankClient {
    RerankClient::new(
        Endpoint {
            base_url,
            model: "bge-reranker".into(),
            api_key: None,
        },
        ClientOptions::default(),
    )
    .unwrap()
}

fn docs() -> Vec<String> {
    [
        "my dog Pimenta howls",
        "the Lisbon marathon",
        "Pimenta the dog sleeps",
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn scores_come_back_in_document_order_in_both_protocols() {
    for shape in [Shape::Cohere, Shape::Tei] {
        let (server, url) = serve(shape);
        let c = client(url);
        let scores = c.rerank("how is the dog Pimenta", &docs()).unwrap();
        assert_eq!(scores, vec![2.0, 1.0, 3.0]);
        // The TEI server refused the first shape once; the client remembers the one it took.
        c.rerank("dog", &docs()).unwrap();
        let seen = server.seen.lock().unwrap();
        let expected = if shape == Shape::Tei { 3 } else { 2 };
        assert_eq!(seen.len(), expected);
        if shape == Shape::Cohere {
            assert_eq!(seen[0]["model"], "bge-reranker");
            assert_eq!(seen[0]["top_n"], 3);
        } else {
            assert!(seen[2].get("texts").is_some());
        }
    }
}

#[test]
fn a_reply_that_leaves_documents_unscored_is_an_error() {
    let (_, url) = serve(Shape::Short);
    let err = client(url).rerank("dog", &docs()).unwrap_err();
    assert!(
        matches!(&err, LlmError::InvalidReply { reason } if reason.contains("2 of 3")),
        "{err}"
    );
}
