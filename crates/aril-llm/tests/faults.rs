//! The client against a local HTTP server that plays the faults real endpoints show: 429 with
//! Retry-After, 5xx, slow replies, malformed, empty and cut-off replies, and a server without
//! `json_schema` support. It is a fault injector, not a stand-in for a model: the real model runs
//! in `tests/llama_server.rs`.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aril_llm::{
    ClientOptions, Endpoint, JsonSpec, Ledger, LlmError, Message, OpenAiClient, Purpose,
    complete_json,
};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Clone)]
struct Play {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Value,
    delay: Duration,
}

fn reply(content: &str, finish: &str, usage: bool) -> Play {
    let mut body = json!({
        "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": finish}]
    });
    if usage {
        body["usage"] = json!({"prompt_tokens": 11, "completion_tokens": 7});
    }
    Play {
        status: 200,
        headers: vec![],
        body,
        delay: Duration::ZERO,
    }
}

fn status(code: u16, body: Value) -> Play {
    Play {
        status: code,
        headers: vec![],
        body,
        delay: Duration::ZERO,
    }
}

#[derive(Clone, Default)]
struct Script {
    plays: Arc<Mutex<VecDeque<Play>>>,
    /// Every request body received, in order.
    seen: Arc<Mutex<Vec<Value>>>,
    /// Requests being answered now, and the most there ever were at once.
    in_flight: Arc<Mutex<usize>>,
    most_in_flight: Arc<Mutex<usize>>,
}

async fn play(State(script): State<Script>, body: axum::Json<Value>) -> Response {
    script.seen.lock().unwrap().push(body.0);
    let next = script.plays.lock().unwrap().pop_front();
    let Some(p) = next else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "script exhausted").into_response();
    };
    {
        let mut now = script.in_flight.lock().unwrap();
        *now += 1;
        let mut most = script.most_in_flight.lock().unwrap();
        *most = (*most).max(*now);
    }
    tokio::time::sleep(p.delay).await;
    *script.in_flight.lock().unwrap() -= 1;
    let mut headers = HeaderMap::new();
    for (k, v) in p.headers {
        headers.insert(k, v.parse().unwrap());
    }
    (
        StatusCode::from_u16(p.status).unwrap(),
        headers,
        axum::Json(p.body),
    )
        .into_response()
}

/// Serves `plays` on a loopback port from a thread of its own; returns the script and base URL.
fn serve(plays: Vec<Play>) -> (Script, String) {
    let script = Script {
        plays: Arc::new(Mutex::new(plays.into())),
        ..Default::default()
    };
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(play))
        .with_state(script.clone());
    let addr = common::serve_on_loopback(app);
    (script, format!("http://{addr}/v1"))
}

fn client(base_url: String, options: ClientOptions) -> OpenAiClient {
    OpenAiClient::new(
        Endpoint {
            base_url,
            model: "m".into(),
            api_key: Some("k".into()),
        },
        options,
        Ledger::default(),
    )
    .unwrap()
}

fn quick() -> ClientOptions {
    ClientOptions {
        timeout: Duration::from_secs(5),
        max_retries: 2,
        backoff: Duration::from_millis(10),
        max_wait: Duration::from_secs(5),
        max_concurrency: 4,
    }
}

#[derive(Debug, Deserialize, PartialEq)]
struct Answer {
    n: i64,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"n": {"type": "integer", "maximum": 100}},
        "required": ["n"],
        "additionalProperties": false
    })
}

fn ask(c: &OpenAiClient) -> Result<aril_llm::Structured<Answer>, LlmError> {
    let s = schema();
    complete_json(
        c,
        Purpose::Encode,
        vec![Message::user("give me a number")],
        JsonSpec {
            name: "answer",
            schema: &s,
        },
        64,
        |a: &Answer| {
            if a.n % 2 == 0 {
                Ok(())
            } else {
                Err(format!("{} is odd; the number must be even", a.n))
            }
        },
    )
}

#[test]
fn a_valid_reply_is_accepted_and_accounted_with_the_servers_usage() {
    let (script, url) = serve(vec![reply("{\"n\": 4}", "stop", true)]);
    let c = client(url, quick());
    let got = ask(&c).unwrap();
    assert_eq!((got.value, got.calls), (Answer { n: 4 }, 1));
    let seen = script.seen.lock().unwrap();
    assert_eq!(seen[0]["response_format"]["type"], "json_schema");
    assert_eq!(seen[0]["response_format"]["json_schema"]["strict"], true);
    let calls = c.ledger().calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].prompt_tokens, calls[0].completion_tokens),
        (11, 7)
    );
    assert!(!calls[0].counted_locally);
    // The o200k counts are the prompt and reply as this side sees them, not the server's figures.
    assert!(calls[0].prompt_o200k > 0 && calls[0].completion_o200k > 0);
    assert_ne!(calls[0].prompt_o200k, 11);
}

#[test]
fn without_usage_tokens_are_counted_locally() {
    let (_, url) = serve(vec![reply("{\"n\": 2}", "stop", false)]);
    let c = client(url, quick());
    ask(&c).unwrap();
    let call = &c.ledger().calls()[0];
    assert!(call.counted_locally);
    assert!(
        call.prompt_tokens > 0 && call.completion_tokens > 0,
        "{call:?}"
    );
    assert_eq!(
        (call.prompt_tokens, call.completion_tokens),
        (call.prompt_o200k, call.completion_o200k)
    );
}

#[test]
fn a_429_waits_for_retry_after_then_succeeds() {
    let mut limited = status(429, json!({"error": "slow down"}));
    limited.headers.push(("retry-after", "1".into()));
    let (_, url) = serve(vec![limited, reply("{\"n\": 6}", "stop", true)]);
    let c = client(url, quick());
    let started = Instant::now();
    assert_eq!(ask(&c).unwrap().value, Answer { n: 6 });
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After was not honoured"
    );
    assert_eq!(c.ledger().calls()[0].attempts, 2);
}

#[test]
fn server_errors_are_retried_then_reported() {
    let (script, url) = serve(vec![
        status(503, json!({"error": "busy"})),
        status(500, json!({"error": "boom"})),
        status(502, json!({"error": "bad gateway"})),
    ]);
    let c = client(url, quick());
    match ask(&c) {
        Err(LlmError::Status {
            status, attempts, ..
        }) => assert_eq!((status, attempts), (502, 3)),
        other => panic!("expected a status error, got {other:?}"),
    }
    assert_eq!(script.seen.lock().unwrap().len(), 3);
    assert!(
        c.ledger().calls().is_empty(),
        "a failed call is not a paid success"
    );
}

#[test]
fn a_slow_server_times_out_after_the_retries() {
    let mut slow = reply("{\"n\": 2}", "stop", true);
    slow.delay = Duration::from_secs(3);
    let (_, url) = serve(vec![slow.clone(), slow]);
    let c = client(
        url,
        ClientOptions {
            timeout: Duration::from_millis(300),
            max_retries: 1,
            ..quick()
        },
    );
    match ask(&c) {
        Err(LlmError::Timeout { attempts, .. }) => assert_eq!(attempts, 2),
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[test]
fn a_malformed_reply_is_repaired_once_with_the_error_shown() {
    let (script, url) = serve(vec![
        reply("sure! here is a number: 4", "stop", true),
        reply("{\"n\": 8}", "stop", true),
    ]);
    let c = client(url, quick());
    let got = ask(&c).unwrap();
    assert_eq!((got.value, got.calls), (Answer { n: 8 }, 2));
    let seen = script.seen.lock().unwrap();
    let repair = seen[1]["messages"].as_array().unwrap();
    assert_eq!(repair[1]["content"], "sure! here is a number: 4");
    assert!(
        repair[2]["content"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
}

#[test]
fn a_cut_off_reply_is_asked_again_with_twice_the_budget_and_without_the_cut_off_text() {
    let (script, url) = serve(vec![
        reply("{\"n\": 4", "length", true),
        reply("{\"n\": 4}", "stop", true),
    ]);
    let c = client(url, quick());
    let got = ask(&c).unwrap();
    assert_eq!((got.value, got.calls), (Answer { n: 4 }, 2));
    let seen = script.seen.lock().unwrap();
    assert_eq!(seen[0]["max_tokens"], 64);
    assert_eq!(seen[1]["max_tokens"], 128);
    let again = seen[1]["messages"].as_array().unwrap();
    assert_eq!(
        again.len(),
        2,
        "the question and the note, not the cut-off reply"
    );
    assert_eq!(again[0]["content"], "give me a number");
    assert!(
        again[1]["content"]
            .as_str()
            .unwrap()
            .contains("cut off at 64 tokens")
    );
}

#[test]
fn the_callers_check_is_part_of_validation() {
    let (script, url) = serve(vec![
        reply("{\"n\": 3}", "stop", true),
        reply("{\"n\": 5}", "stop", true),
    ]);
    let c = client(url, quick());
    match ask(&c) {
        Err(LlmError::InvalidReply { reason }) => assert!(reason.contains("odd"), "{reason}"),
        other => panic!("an odd number must be refused, got {other:?}"),
    }
    let seen = script.seen.lock().unwrap();
    assert!(
        seen[1]["messages"][2]["content"]
            .as_str()
            .unwrap()
            .contains("3 is odd")
    );
}

#[test]
fn empty_truncated_and_off_schema_replies_never_succeed() {
    for (first, second, expect) in [
        ("", "", "empty"),
        ("{\"n\": 4", "{\"n\": 4", "cut off"),
        ("{\"n\": 400}", "{\"n\": \"four\"}", "schema"),
    ] {
        let finish = if expect == "cut off" {
            "length"
        } else {
            "stop"
        };
        let (_, url) = serve(vec![
            reply(first, finish, true),
            reply(second, finish, true),
        ]);
        let c = client(url, quick());
        match ask(&c) {
            Err(LlmError::InvalidReply { reason }) => {
                assert!(reason.contains(expect), "{expect}: {reason}")
            }
            other => panic!("{expect}: expected an invalid reply, got {other:?}"),
        }
    }
}

#[test]
fn a_server_without_json_schema_gets_json_object_and_the_schema_in_the_prompt() {
    let refuse = status(
        400,
        json!({"error": {"message": "response_format type json_schema is not supported"}}),
    );
    let (script, url) = serve(vec![
        refuse,
        reply("{\"n\": 10}", "stop", true),
        reply("{\"n\": 12}", "stop", true),
    ]);
    let c = client(url, quick());
    assert_eq!(ask(&c).unwrap().value, Answer { n: 10 });
    assert_eq!(ask(&c).unwrap().value, Answer { n: 12 });
    let seen = script.seen.lock().unwrap();
    assert_eq!(seen[0]["response_format"]["type"], "json_schema");
    for later in &seen[1..] {
        assert_eq!(
            later["response_format"]["type"], "json_object",
            "remembered"
        );
        let system = later["messages"][0]["content"].as_str().unwrap();
        assert!(
            system.contains("JSON schema") && system.contains("\"n\""),
            "{system}"
        );
    }
}

#[test]
fn an_unreachable_endpoint_says_where_it_looked() {
    let c = client(
        "http://127.0.0.1:9/v1".into(),
        ClientOptions {
            max_retries: 0,
            ..quick()
        },
    );
    match ask(&c) {
        Err(e @ LlmError::Unreachable { .. }) => {
            assert!(e.to_string().contains("127.0.0.1:9"), "{e}")
        }
        other => panic!("expected unreachable, got {other:?}"),
    }
}

#[test]
fn endpoints_come_from_the_environment_per_role_with_a_shared_fallback() {
    use aril_llm::Role;
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        }
    };
    let none = Endpoint::from_lookup(Role::Encoder, vars(&[])).unwrap();
    assert!(none.is_none());
    let env = vars(&[
        ("ARIL_LLM_BASE_URL", "http://shared:8080/v1/"),
        ("ARIL_LLM_MODEL", "small"),
        ("ARIL_LLM_JUDGE_MODEL", "big"),
    ]);
    let encoder = Endpoint::from_lookup(Role::Encoder, env).unwrap().unwrap();
    assert_eq!(
        (encoder.base_url.as_str(), encoder.model.as_str()),
        ("http://shared:8080/v1", "small")
    );
    let judge = Endpoint::from_lookup(Role::Judge, env).unwrap().unwrap();
    assert_eq!(judge.model, "big");
    // A chat endpoint is no reranker: the reranker never takes the shared settings.
    assert!(
        Endpoint::from_lookup(Role::Reranker, env)
            .unwrap()
            .is_none()
    );
    assert!(
        Endpoint::from_lookup(Role::Embedder, env)
            .unwrap()
            .is_none(),
        "a chat endpoint is no embedder either"
    );
    // The configuration file's [llm] table: the most specific source wins, the environment
    // before the file at the same level; the key comes from the variable the file names.
    let file = aril_llm::LlmSettings {
        base_url: Some("http://file-shared/v1".into()),
        model: Some("file-model".into()),
        api_key_env: Some("MY_KEY".into()),
        judge: aril_llm::EndpointSettings {
            model: Some("file-judge".into()),
            ..Default::default()
        },
        reranker: aril_llm::EndpointSettings {
            base_url: Some("http://rerank/v1".into()),
            model: Some("bge".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let env_with_key = vars(&[("MY_KEY", "sk-1"), ("ARIL_LLM_MODEL", "env-model")]);
    let planner = Endpoint::from_sources(Role::Planner, &env_with_key, &file)
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            planner.base_url.as_str(),
            planner.model.as_str(),
            planner.api_key.as_deref()
        ),
        ("http://file-shared/v1", "env-model", Some("sk-1"))
    );
    let judge = Endpoint::from_sources(Role::Judge, &env_with_key, &file)
        .unwrap()
        .unwrap();
    assert_eq!(
        judge.model, "file-judge",
        "[llm.judge] is more specific than ARIL_LLM_MODEL"
    );
    let reranker = Endpoint::from_sources(Role::Reranker, &env_with_key, &file)
        .unwrap()
        .unwrap();
    assert_eq!((reranker.model.as_str(), reranker.api_key), ("bge", None));
    let no_model =
        Endpoint::from_lookup(Role::Planner, vars(&[("ARIL_LLM_BASE_URL", "http://x/v1")]));
    assert!(matches!(no_model, Err(LlmError::Config(m)) if m.contains("ARIL_LLM_MODEL")));
    let bad = Endpoint::from_lookup(
        Role::Planner,
        vars(&[("ARIL_LLM_BASE_URL", "x:1"), ("ARIL_LLM_MODEL", "m")]),
    );
    assert!(matches!(bad, Err(LlmError::Config(_))));
    // Client options: timeout and concurrency from the environment, bad values named.
    let options = ClientOptions::from_lookup(vars(&[
        ("ARIL_LLM_MAX_CONCURRENCY", "2"),
        ("ARIL_LLM_TIMEOUT_S", "7.5"),
    ]))
    .unwrap();
    assert_eq!(
        (options.max_concurrency, options.timeout),
        (2, Duration::from_millis(7500))
    );
    for bad in [
        ("ARIL_LLM_MAX_CONCURRENCY", "0"),
        ("ARIL_LLM_TIMEOUT_S", "soon"),
    ] {
        let err = ClientOptions::from_lookup(vars(Box::leak(Box::new([bad])))).unwrap_err();
        assert!(err.to_string().contains(bad.0), "{err}");
    }
}

#[test]
fn no_more_calls_are_in_flight_than_the_concurrency_limit() {
    let slow = |n: u32| {
        let mut p = reply(&format!("{{\"n\": {}}}", 2 * n), "stop", true);
        p.delay = Duration::from_millis(150);
        p
    };
    let (script, url) = serve((0..6).map(slow).collect());
    let c = Arc::new(client(
        url,
        ClientOptions {
            max_concurrency: 2,
            ..quick()
        },
    ));
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let c = c.clone();
            std::thread::spawn(move || ask(&c).unwrap())
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(script.seen.lock().unwrap().len(), 6);
    let most = *script.most_in_flight.lock().unwrap();
    assert!(
        (1..=2).contains(&most),
        "{most} requests were in flight at once"
    );
}
