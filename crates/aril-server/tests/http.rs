//! The HTTP API end to end: a real server on a loopback port over a real engine (SQLite, tantivy,
//! the MiniLM embedder fetched by `scripts/fetch-model`), driven with a real HTTP client.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use aril_engine::{Config, Engine, StoreAt};
use aril_server::AppState;
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};
use tokio::sync::oneshot;

struct Server {
    base: String,
    user_key: String,
    /// A key bound to another user (bob).
    bob_key: String,
    admin_key: String,
    dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
    http: Client,
}

impl Server {
    async fn start() -> Self {
        Self::start_with(Config::default()).await
    }

    async fn start_with(config: Config) -> Self {
        Self::start_full(config, |state| state).await
    }

    /// A server whose state goes through `prepare` first (to add an encoder or start a
    /// background worker).
    async fn start_full(config: Config, prepare: impl FnOnce(AppState) -> AppState) -> Self {
        Self::start_at(&StoreAt::Embedded, config, prepare).await
    }

    /// A server over the store at `at` (its data directory a fresh temporary one).
    async fn start_at(
        at: &StoreAt,
        config: Config,
        prepare: impl FnOnce(AppState) -> AppState,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Opening is blocking (a PostgreSQL store must not block inside the async runtime).
        let (path, at) = (dir.path().to_path_buf(), at.clone());
        let (engine, user_key, bob_key, admin_key) = std::thread::spawn(move || {
            let mut engine = Engine::open_at(&path, &at, config, None).unwrap();
            let user_key = engine.create_api_key(Some("alice")).unwrap();
            let bob_key = engine.create_api_key(Some("bob")).unwrap();
            let admin_key = engine.create_api_key(None).unwrap();
            let state = AppState::new(engine, true).unwrap();
            (state, user_key, bob_key, admin_key)
        })
        .join()
        .unwrap();
        let state = prepare(engine);
        let (stop, stopped) = oneshot::channel::<()>();
        let (ready_tx, ready_rx) = oneshot::channel::<SocketAddr>();
        let done = tokio::spawn(async move {
            aril_server::serve(
                state,
                "127.0.0.1:0".parse().unwrap(),
                move |addr| {
                    let _ = ready_tx.send(addr);
                },
                async {
                    let _ = stopped.await;
                },
            )
            .await
            .unwrap();
        });
        let addr = ready_rx.await.unwrap();
        Self {
            base: format!("http://{addr}"),
            user_key,
            bob_key,
            admin_key,
            dir,
            stop: Some(stop),
            done,
            http: Client::new(),
        }
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self
            .http
            .request(method.parse().unwrap(), format!("{}{path}", self.base))
            .header("Authorization", format!("Token {key}"));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{method} {path}: body is not JSON: {text:?}"));
        (status, value)
    }

    async fn stop(mut self) -> tempfile::TempDir {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.done.await.unwrap();
        self.dir
    }
}

/// The texts of a Mem0 page or result list, in order.
fn memories(page: &Value) -> Vec<String> {
    page["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["memory"].as_str().unwrap().to_string())
        .collect()
}

fn count_files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    hits.push(path);
                }
            }
        }
    }
    hits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_key_reaches_its_own_user_only() {
    let s = Server::start().await;
    let (st, _) = s
        .call(
            "POST",
            "/v1/turns",
            &s.admin_key,
            Some(json!({
                "user_id": "bob",
                "turns": [{"text": "Bob's locker code is 4417.", "role": "user"}]
            })),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    let (st, added) = s
        .call(
            "POST",
            "/v1/turns",
            &s.user_key,
            Some(json!({
                "turns": [{"text": "I keep my bike in the garage.", "at": "2024-05-01T10:00:00Z"}]
            })),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{added}");
    let alice_id = added["ids"][0].as_str().unwrap().to_string();

    // Alice's key cannot search, list or delete Bob.
    for (method, path, body) in [
        (
            "POST",
            "/v1/search",
            Some(json!({"query": "locker", "user_id": "bob"})),
        ),
        ("GET", "/v1/turns?user_id=bob", None),
        ("DELETE", "/v1/scopes?user_id=bob", None),
        (
            "POST",
            "/v3/memories/search/",
            Some(json!({"query": "locker", "filters": {"user_id": "bob"}})),
        ),
        ("DELETE", "/v1/memories/?user_id=bob", None),
    ] {
        let (st, err) = s.call(method, path, &s.user_key, body).await;
        assert_eq!(st, StatusCode::FORBIDDEN, "{method} {path}: {err}");
        assert_eq!(err["error"]["code"], "forbidden");
    }
    // Her own search never shows Bob's turn, even for Bob's words.
    let (st, found) = s
        .call(
            "POST",
            "/v1/search",
            &s.user_key,
            Some(json!({"query": "locker code"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    assert!(!found.to_string().contains("4417"), "{found}");
    // Bob's memory by id is "not found" for Alice, found for the admin.
    let (_, bob_page) = s
        .call("GET", "/v1/turns?user_id=bob", &s.admin_key, None)
        .await;
    let bob_id = bob_page["turns"][0]["id"].as_str().unwrap().to_string();
    let (st, _) = s
        .call("GET", &format!("/v1/memories/{bob_id}/"), &s.user_key, None)
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, m) = s
        .call(
            "GET",
            &format!("/v1/memories/{alice_id}/"),
            &s.user_key,
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(m["memory"], "I keep my bike in the garage.");
    assert_eq!(m["created_at"], "2024-05-01T10:00:00Z");
    // No key, a wrong key: 401.
    let (st, _) = s.call("GET", "/v1/ping/", "aril_not_a_key", None).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    // Stats span users: admin only.
    let (st, _) = s.call("GET", "/v1/stats", &s.user_key, None).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, stats) = s.call("GET", "/v1/stats", &s.admin_key, None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(stats["turns"], 2);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mem0_lists_page_by_the_query_string_or_the_body_alike() {
    let s = Server::start().await;
    let (st, added) = s
        .call(
            "POST",
            "/v1/turns",
            &s.user_key,
            Some(json!({"turns": [
                {"text": "I keep my bike in the garage."},
                {"text": "My sister lives in Porto."},
                {"text": "I am learning the cello."}
            ]})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{added}");
    let (st, by_query) = s
        .call(
            "POST",
            "/v2/memories/?page=2&page_size=1",
            &s.user_key,
            Some(json!({})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{by_query}");
    let (st, by_body) = s
        .call(
            "POST",
            "/v2/memories/",
            &s.user_key,
            Some(json!({"page": 2, "page_size": 1})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{by_body}");
    assert_eq!(by_body["count"], 3);
    assert_eq!(memories(&by_body).len(), 1);
    assert_eq!(memories(&by_body), memories(&by_query));
    let (_, all) = s
        .call("POST", "/v2/memories/", &s.user_key, Some(json!({})))
        .await;
    assert_eq!(memories(&all)[1..2], memories(&by_body)[..]);
    // Given twice, the two must agree; search does not page.
    let (st, err) = s
        .call(
            "POST",
            "/v2/memories/?page=1",
            &s.user_key,
            Some(json!({"page": 2})),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
    assert!(err.to_string().contains("give it once"), "{err}");
    let (st, err) = s
        .call(
            "POST",
            "/v2/memories/search/",
            &s.user_key,
            Some(json!({"query": "bike", "page": 2})),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scope_less_deletion_is_refused_and_reset_needs_admin_and_confirmation() {
    let s = Server::start().await;
    for user in ["alice", "carol"] {
        let (st, _) = s
            .call("POST", "/v3/memories/add/", &s.admin_key, Some(json!({
                "user_id": user, "messages": [{"role": "user", "content": format!("{user} likes tea")}]
            })))
            .await;
        assert_eq!(st, StatusCode::OK);
    }
    let (st, err) = s.call("DELETE", "/v1/memories/", &s.admin_key, None).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
    let (st, _) = s
        .call(
            "POST",
            "/v1/reset",
            &s.user_key,
            Some(json!({"confirm": "delete all memories"})),
        )
        .await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, _) = s
        .call("POST", "/v1/reset", &s.admin_key, Some(json!({})))
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let (_, stats) = s.call("GET", "/v1/stats", &s.admin_key, None).await;
    assert_eq!(
        stats["turns"], 2,
        "nothing was deleted by the refused calls"
    );
    let (st, _) = s
        .call(
            "POST",
            "/v1/reset",
            &s.admin_key,
            Some(json!({"confirm": "delete all memories"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    let (_, stats) = s.call("GET", "/v1/stats", &s.admin_key, None).await;
    assert_eq!(stats["turns"], 0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_are_listed_a_page_at_a_time_with_their_total() {
    let s = Server::start().await;
    // Each flushed batch closes its conversation's segment: four segments.
    for n in 0..4 {
        let (st, body) = s
            .call(
                "POST",
                "/v1/turns",
                &s.user_key,
                Some(json!({
                    "conversation": format!("c{n}"), "flush": true,
                    "turns": [{"text": format!("Batch {n}: I repaired the fence on day {n}.")}]
                })),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "{body}");
    }
    let ids = |page: &Value| -> Vec<String> {
        page["segments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|seg| seg["id"].as_str().unwrap().to_string())
            .collect()
    };
    let (st, all) = s.call("GET", "/v1/segments", &s.user_key, None).await;
    assert_eq!(st, StatusCode::OK, "{all}");
    assert_eq!(all["total"], 4);
    let every = ids(&all);
    assert_eq!(every.len(), 4);
    let mut paged = Vec::new();
    for offset in [0, 2] {
        let (st, page) = s
            .call(
                "GET",
                &format!("/v1/segments?offset={offset}&limit=2"),
                &s.user_key,
                None,
            )
            .await;
        assert_eq!(st, StatusCode::OK, "{page}");
        assert_eq!(page["total"], 4);
        paged.extend(ids(&page));
    }
    assert_eq!(paged, every, "the pages, in order, are the whole list");
    let (st, past) = s
        .call("GET", "/v1/segments?offset=4", &s.user_key, None)
        .await;
    assert_eq!((st, past["total"].clone()), (StatusCode::OK, json!(4)));
    assert!(ids(&past).is_empty());
    // Mem0's paging words are not this route's: refused, not ignored.
    let (st, _) = s
        .call("GET", "/v1/segments?page=2", &s.user_key, None)
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_scope_leaves_no_trace_in_any_file() {
    let s = Server::start().await;
    let token = "zqxjvorpal7731";
    let (st, _) = s
        .call(
            "POST",
            "/v1/turns",
            &s.user_key,
            Some(json!({
                "run_id": "r1", "flush": true,
                "turns": [
                    {"text": format!("My vault passphrase is {token}, remember it.")},
                    {"text": "Also I water the plants on Sundays."}
                ]
            })),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    let (st, found) = s
        .call(
            "POST",
            "/v1/search",
            &s.user_key,
            Some(json!({"query": "vault passphrase"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    assert!(
        found.to_string().contains(token),
        "stored and found before deletion"
    );
    // Session search: one result per session, found the same way.
    let (st, by_session) = s
        .call(
            "POST",
            "/v1/search",
            &s.user_key,
            Some(json!({"query": "vault passphrase", "sessions": true})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{by_session}");
    assert!(by_session.to_string().contains(token), "{by_session}");
    let mut sessions: Vec<(String, String)> = by_session["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let source = &r["source"];
            (
                source["conversation"].to_string(),
                source["session"].to_string(),
            )
        })
        .collect();
    let listed = sessions.len();
    sessions.sort();
    sessions.dedup();
    assert_eq!(sessions.len(), listed, "each session once: {by_session}");
    // The time a question is asked is RFC 3339 or a date; anything else is refused and says so.
    let (st, err) = s
        .call(
            "POST",
            "/v1/search",
            &s.user_key,
            Some(json!({"query": "vault passphrase last week", "asked_at": "last tuesday"})),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
    assert!(err.to_string().contains("RFC 3339"), "{err}");
    let (st, _) = s
        .call(
            "POST",
            "/v1/search",
            &s.user_key,
            Some(
                json!({"query": "vault passphrase last week", "asked_at": "2024-03-01T10:00:00Z"}),
            ),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    assert!(!count_files_containing(s.dir.path(), token.as_bytes()).is_empty());

    let (st, report) = s
        .call(
            "DELETE",
            "/v1/scopes?user_id=alice&run_id=r1",
            &s.user_key,
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{report}");
    assert_eq!(report["turns"], 2);
    let (_, found) = s
        .call(
            "POST",
            "/v1/search",
            &s.user_key,
            Some(json!({"query": "vault passphrase"})),
        )
        .await;
    assert!(!found.to_string().contains(token), "{found}");
    let dir = s.stop().await;
    let hits = count_files_containing(dir.path(), token.as_bytes());
    assert!(hits.is_empty(), "token still on disk in {hits:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_memory_leaves_no_trace_of_any_version_and_its_neighbours_stay() {
    let s = Server::start().await;
    let (old, new) = ("plorvexhum4410", "quindarbelt8852");
    let (st, added) = s
        .call(
            "POST",
            "/v1/turns",
            &s.user_key,
            Some(json!({
                "run_id": "r1", "flush": true,
                "turns": [
                    {"text": format!("My locker code is {old}.")},
                    {"text": "I water the plants on Sundays."},
                    {"text": "My bike is a green Brompton."}
                ]
            })),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{added}");
    let id = added["ids"][0].as_str().unwrap().to_string();
    let (st, updated) = s
        .call(
            "PUT",
            &format!("/v1/memories/{id}/"),
            &s.user_key,
            Some(json!({"text": format!("My locker code is now {new}.")})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{updated}");
    assert_eq!(updated["id"], id.as_str());
    let (_, history) = s
        .call(
            "GET",
            &format!("/v1/memories/{id}/history/"),
            &s.user_key,
            None,
        )
        .await;
    assert_eq!(history.as_array().map(Vec::len), Some(2), "{history}");
    for token in [old, new] {
        assert!(!count_files_containing(s.dir.path(), token.as_bytes()).is_empty());
    }

    let (st, deleted) = s
        .call("DELETE", &format!("/v1/memories/{id}/"), &s.user_key, None)
        .await;
    assert_eq!(st, StatusCode::OK, "{deleted}");
    let (st, _) = s
        .call(
            "GET",
            &format!("/v1/memories/{id}/history/"),
            &s.user_key,
            None,
        )
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (_, found) = s
        .call(
            "POST",
            "/v1/search",
            &s.user_key,
            Some(json!({"query": "locker code bike plants"})),
        )
        .await;
    let text = found.to_string();
    assert!(!text.contains(old) && !text.contains(new), "{found}");
    assert!(
        text.contains("Brompton") && text.contains("Sundays"),
        "{found}"
    );
    let dir = s.stop().await;
    for token in [old, new] {
        let hits = count_files_containing(dir.path(), token.as_bytes());
        assert!(hits.is_empty(), "{token} still on disk in {hits:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_json_4xx_and_stores_nothing() {
    let s = Server::start().await;
    let cases: Vec<(&str, &str, Value)> = vec![
        ("POST", "/v1/turns", json!({"turns": []})),
        ("POST", "/v1/turns", json!({"turns": [{"text": "   "}]})),
        (
            "POST",
            "/v1/turns",
            json!({"turns": [{"text": "hi", "at": "last tuesday"}]}),
        ),
        (
            "POST",
            "/v1/turns",
            json!({"turns": [{"text": "hi", "role": "robot"}]}),
        ),
        (
            "POST",
            "/v1/turns",
            json!({"turns": [{"text": "hi", "mood": "happy"}]}),
        ),
        (
            "POST",
            "/v1/turns",
            json!({"turns": [{"text": "ok"}, {"text": ""}]}),
        ),
        ("POST", "/v1/search", json!({"query": ""})),
        ("POST", "/v1/search", json!({"query": "x", "k": 0})),
        (
            "POST",
            "/v3/memories/add/",
            json!({"messages": [{"role": "user", "content": [{"type": "image"}]}]}),
        ),
        (
            "POST",
            "/v3/memories/add/",
            json!({"messages": [{"role": "user", "content": "x"}], "colour": "red"}),
        ),
        (
            "POST",
            "/v3/memories/add/",
            json!({"messages": [{"role": "user", "content": "x"}], "timestamp": i64::MAX}),
        ),
        (
            "POST",
            "/v3/memories/search/",
            json!({"query": "x", "filters": {"OR": [{"user_id": "alice"}]}}),
        ),
        ("POST", "/v3/memories/add/", json!({"messages": []})),
        ("PUT", "/v1/memories/t_unknown/", json!({"text": "x"})),
        ("PUT", "/v1/memories/t_unknown/", json!({"colour": "red"})),
    ];
    for (method, path, body) in cases {
        let (st, err) = s.call(method, path, &s.user_key, Some(body.clone())).await;
        assert!(st.is_client_error(), "{method} {path} {body}: {st} {err}");
        assert!(
            err["error"]["code"].is_string() && err["error"]["message"].is_string(),
            "{err}"
        );
    }
    // Not JSON, invalid UTF-8, too large, wrong content type.
    let raw = |body: Vec<u8>, ctype: &str| {
        s.http
            .post(format!("{}/v1/turns", s.base))
            .header("Authorization", format!("Token {}", s.user_key))
            .header("Content-Type", ctype.to_string())
            .body(body)
    };
    for (req, want) in [
        (
            raw(b"{not json".to_vec(), "application/json"),
            StatusCode::BAD_REQUEST,
        ),
        (
            raw(
                b"{\"turns\": [{\"text\": \"\xff\xfe\"}]}".to_vec(),
                "application/json",
            ),
            StatusCode::BAD_REQUEST,
        ),
        (
            raw(
                vec![b' '; aril_server::MAX_BODY_BYTES + 10],
                "application/json",
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        (
            raw(b"{}".to_vec(), "text/plain"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
    ] {
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), want);
        let v: Value = resp.json().await.unwrap();
        assert!(v["error"]["code"].is_string(), "{v}");
    }
    let (_, stats) = s.call("GET", "/v1/stats", &s.admin_key, None).await;
    assert_eq!(stats["turns"], 0, "no bad request stored anything");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_reports_a_missing_model_as_503() {
    let s = Server::start().await;
    let (st, v) = s.call("GET", "/ready", &s.user_key, None).await;
    assert_eq!((st, v["status"].as_str()), (StatusCode::OK, Some("ready")));
    s.stop().await;

    let config = Config {
        model_dir: Some(PathBuf::from("/nonexistent/aril-model")),
        ..Config::default()
    };
    let s = Server::start_with(config).await;
    let (st, v) = s.call("GET", "/ready", &s.user_key, None).await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["error"]["code"], "model_missing");
    let (st, _) = s.call("GET", "/health", &s.user_key, None).await;
    assert_eq!(st, StatusCode::OK, "alive even when not ready");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_is_served_and_matches_the_routes() {
    let s = Server::start().await;
    let doc: Value = s
        .http
        .get(format!("{}/openapi.json", s.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/v1/turns", "post"),
        ("/v1/search", "post"),
        ("/v3/memories/add/", "post"),
        ("/v1/memories/{id}/", "put"),
        ("/v1/memories/{id}/history/", "get"),
    ] {
        assert!(paths[path].get(method).is_some(), "{method} {path}");
    }
    assert!(doc["components"]["securitySchemes"]["token"].is_object());
    // Every documented operation is routed: none answers "no such route".
    for (path, ops) in paths {
        for method in ops.as_object().unwrap().keys() {
            let url = format!(
                "{}{}",
                s.base,
                path.replace("{id}", "t_x")
                    .replace("{kind}", "user")
                    .replace("{name}", "nobody")
            );
            let resp = s
                .http
                .request(method.to_uppercase().parse().unwrap(), url)
                .header("Authorization", format!("Token {}", s.user_key))
                .send()
                .await
                .unwrap();
            let body = resp.text().await.unwrap();
            assert!(!body.contains("no such route"), "{method} {path}: {body}");
        }
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_model_turns_closed_segments_into_cards_in_the_background_while_requests_are_served()
{
    use aril_engine::llm::LocalServer;
    use aril_server::Consolidator;
    use std::sync::{Arc, Mutex};
    // Both use blocking HTTP: they are made outside the async runtime.
    let (_llm, model) = std::thread::spawn(|| {
        let llm = LocalServer::from_cache().unwrap_or_else(|e| panic!("{e}"));
        let model = llm.client().unwrap();
        (llm, model)
    })
    .join()
    .unwrap();
    let worker: Arc<Mutex<Option<Consolidator>>> = Arc::default();
    let slot = worker.clone();
    let s = Server::start_full(Config::default(), move |state| {
        // Small bounds: the tiny model fills whatever room it gets, slowly.
        let config = aril_engine::EncodeConfig {
            max_cards: 1,
            max_tokens: 300,
            ..Default::default()
        };
        *slot.lock().unwrap() = Some(Consolidator::start(state.clone(), Arc::new(model), config));
        state
    })
    .await;
    let (st, _) = s
        .call(
            "POST",
            "/v1/turns",
            &s.user_key,
            Some(json!({
                "turns": [
                    {"text": "I adopted a beagle called Pimenta from the shelter.", "role": "user"},
                    {"text": "I signed up for the Lisbon marathon in October.", "role": "user"}
                ],
                "flush": true
            })),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    let stats = loop {
        // Requests are answered while the worker is calling the model.
        let (st, stats) = s.call("GET", "/v1/stats", &s.admin_key, None).await;
        assert_eq!(st, StatusCode::OK);
        if stats["segments"].as_u64().unwrap() > 0 && stats["segments_pending"].as_u64() == Some(0)
        {
            break stats;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still pending: {stats}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    let (st, found) = s
        .call(
            "POST",
            "/v1/search",
            &s.user_key,
            Some(json!({"query": "beagle"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{found}");
    let done = stats["segments"].as_u64().unwrap() - stats["segments_failed"].as_u64().unwrap();
    assert!(
        done == 0 || stats["cards"].as_u64().unwrap() > 0,
        "segments marked done have cards: {stats}"
    );
    let encode_calls: u64 = stats["llm"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["purpose"] == "encode")
        .map(|u| u["calls"].as_u64().unwrap())
        .sum();
    assert!(
        encode_calls >= stats["segments"].as_u64().unwrap(),
        "{stats}"
    );
    let taken = worker.lock().unwrap().take();
    if let Some(w) = taken {
        tokio::task::spawn_blocking(move || w.stop()).await.unwrap();
    }
    s.stop().await;
}

/// Mem0's `custom_instructions`, `includes`, `excludes` and `custom_categories` reach the
/// encoder's instructions for that `add` only; without an encoder, or with `infer: false`, they
/// are refused and nothing is stored.
#[tokio::test]
async fn mem0_encoder_guidance_reaches_the_encoder_of_that_add_only() {
    use aril_llm::{ChatModel, Scripted};
    use std::sync::Arc;
    let encoder = Arc::new(Scripted::from_texts(vec![
        card_reply("preference", "Alice likes green tea.", &[]).to_string(),
        card_reply("fact", "Alice lives in Porto.", &[]).to_string(),
    ]));
    let model: Arc<dyn ChatModel> = encoder.clone();
    let s = Server::start_full(Config::default(), move |state| {
        state.with_encoder(model, aril_engine::EncodeConfig::default())
    })
    .await;
    let guided = json!({"user_id": "alice",
        "messages": [{"role": "user", "content": "I love green tea."}],
        "custom_instructions": "Write every card in the third person.",
        "includes": "food and drink", "excludes": "health",
        "custom_categories": [{"beverages": "what Alice drinks"}, {"travel": "trips"}]});
    let (st, reply) = s
        .call(
            "POST",
            "/v3/memories/add/",
            &s.user_key,
            Some(guided.clone()),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{reply}");
    mem0_add(&s, ["I live in Porto.", "Nice."], None).await;
    let asked = encoder.asked();
    assert_eq!(asked.len(), 2);
    let system = |i: usize| asked[i].messages[0].content.clone();
    for said in [
        "Instructions: Write every card in the third person.",
        "Remember only: food and drink",
        "Never write a card about: health",
        "- beverages: what Alice drinks",
        "- travel: trips",
    ] {
        assert!(
            system(0).contains(said),
            "{said} missing from {}",
            system(0)
        );
    }
    assert!(!system(1).contains("third person"), "{}", system(1));

    let mut without_inference = guided.clone();
    without_inference["infer"] = json!(false);
    let (st, err) = s
        .call(
            "POST",
            "/v3/memories/add/",
            &s.user_key,
            Some(without_inference),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
    assert!(err["detail"].as_str().unwrap().contains("infer"), "{err}");
    let mut bad = guided.clone();
    bad["custom_categories"] = json!([7]);
    let (st, _) = s
        .call("POST", "/v3/memories/add/", &s.user_key, Some(bad))
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert_eq!(encoder.asked().len(), 2, "no call for a refused add");
    s.stop().await;

    let plain = Server::start().await;
    let (st, err) = plain
        .call("POST", "/v3/memories/add/", &plain.user_key, Some(guided))
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
    assert!(
        err["detail"].as_str().unwrap().contains("no encoder"),
        "{err}"
    );
    let (_, listed) = plain
        .call("POST", "/v2/memories/", &plain.user_key, Some(json!({})))
        .await;
    assert_eq!(listed["count"], 0, "nothing stored: {listed}");
    plain.stop().await;
}

/// One scripted encoder reply: a card citing the segment's first turn, superseding `supersedes`.
fn card_reply(kind: &str, text: &str, supersedes: &[&str]) -> Value {
    json!({"cards": [{
        "type": kind, "text": text, "entities": ["Alice"], "topics": ["drinks"], "time": null,
        "source_turns": ["T1"], "supersedes": supersedes
    }], "state": {"aliases": [], "open_references": []}})
}

/// Mem0's `add` of a user message and the assistant's reply as alice; asserts 200.
async fn mem0_add(s: &Server, texts: [&str; 2], infer: Option<bool>) -> Value {
    let mut body = json!({"user_id": "alice", "messages": [
        {"role": "user", "content": texts[0]}, {"role": "assistant", "content": texts[1]}
    ]});
    if let Some(i) = infer {
        body["infer"] = json!(i);
    }
    let (st, reply) = s
        .call("POST", "/v3/memories/add/", &s.user_key, Some(body))
        .await;
    assert_eq!(st, StatusCode::OK, "{reply}");
    reply
}

#[tokio::test]
async fn mem0_add_with_an_encoder_answers_with_cards_whose_ids_serve_get_update_history_and_delete()
{
    use aril_llm::{ChatModel, Scripted};
    use std::sync::Arc;
    let encoder = Arc::new(Scripted::from_texts(vec![
        card_reply("preference", "Alice likes green tea.", &[]).to_string(),
        card_reply("preference", "Alice now prefers black coffee.", &["C1"]).to_string(),
        "no JSON here".into(),
        "still no JSON".into(),
    ]));
    let model: Arc<dyn ChatModel> = encoder.clone();
    let s = Server::start_full(Config::default(), move |state| {
        state.with_encoder(model, aril_engine::EncodeConfig::default())
    })
    .await;
    let first = mem0_add(&s, ["I love green tea.", "Noted, green tea it is."], None).await;
    let results = first["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "one card, not the two turns: {first}");
    assert_eq!(results[0]["event"], "ADD");
    assert_eq!(results[0]["memory"], "Alice likes green tea.");
    assert!(first.get("note").is_none(), "{first}");
    let id = results[0]["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("c_"), "{id}");

    // A card that supersedes it is a new version of the same memory.
    let second = mem0_add(&s, ["These days I drink black coffee.", "Got it."], None).await;
    let update = &second["results"][0];
    assert_eq!(update["event"], "UPDATE", "{second}");
    assert_eq!(update["id"], id.as_str());
    assert_eq!(update["previous_memory"], "Alice likes green tea.");
    assert_eq!(encoder.asked().len(), 2, "one encoder call per add");

    let path = format!("/v1/memories/{id}/");
    let (st, got) = s.call("GET", &path, &s.user_key, None).await;
    assert_eq!(st, StatusCode::OK, "{got}");
    assert_eq!(got["memory"], "Alice now prefers black coffee.");
    assert_eq!(got["metadata"]["aril"]["type"], "preference");
    assert_eq!(got["user_id"], "alice");
    // A card's metadata is its turns': it is not edited on the card.
    let (st, err) = s
        .call(
            "PUT",
            &path,
            &s.user_key,
            Some(json!({"text": "x", "metadata": {"source": "chat"}})),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");

    let (st, edited) = s
        .call(
            "PUT",
            &path,
            &s.user_key,
            Some(json!({"text": "Alice drinks only water."})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{edited}");
    assert_eq!(
        (edited["id"].as_str(), edited["memory"].as_str()),
        (Some(id.as_str()), Some("Alice drinks only water."))
    );
    let (st, history) = s
        .call(
            "GET",
            &format!("/v1/memories/{id}/history/"),
            &s.user_key,
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{history}");
    let events: Vec<(&str, &str)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["event"].as_str().unwrap(),
                h["new_memory"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        events,
        vec![
            ("ADD", "Alice likes green tea."),
            ("UPDATE", "Alice now prefers black coffee."),
            ("UPDATE", "Alice drinks only water."),
        ]
    );
    // Another user's key does not see it.
    let (st, _) = s.call("GET", &path, &s.bob_key, None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);

    // Without inference the turns come back and no call is made.
    let raw = mem0_add(&s, ["My locker code is 4417.", "Saved."], Some(false)).await;
    assert_eq!(raw["results"].as_array().unwrap().len(), 2, "{raw}");
    assert_eq!(raw["results"][0]["memory"], "My locker code is 4417.");
    assert_eq!(encoder.asked().len(), 2);

    // An unusable reply (after its repair) keeps the turns, returns them, and says why.
    let failed = mem0_add(&s, ["I moved to Porto.", "Nice city."], None).await;
    assert!(
        failed["note"].as_str().unwrap().contains("unusable"),
        "{failed}"
    );
    assert_eq!(failed["results"][0]["memory"], "I moved to Porto.");

    // Deleting the card memory removes every version and leaves the turns.
    let (st, deleted) = s.call("DELETE", &path, &s.user_key, None).await;
    assert_eq!(st, StatusCode::OK, "{deleted}");
    assert!(
        deleted["message"].as_str().unwrap().contains("3 versions"),
        "{deleted}"
    );
    let (st, _) = s.call("GET", &path, &s.user_key, None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, all) = s
        .call(
            "POST",
            "/v3/memories/",
            &s.user_key,
            Some(json!({"filters": {"user_id": "alice"}})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{all}");
    assert_eq!(all["count"], 8, "the eight turns stay: {all}");
    s.stop().await;
}

#[tokio::test]
async fn a_server_on_postgres_keeps_its_memory_in_the_database_and_stops_cleanly() {
    let db = aril_store::scratch::ScratchDatabase::new().unwrap_or_else(|e| panic!("{e}"));
    let at = StoreAt::Postgres(db.url().to_string());
    let s = Server::start_at(&at, Config::default(), |state| state).await;
    let (st, added) = s
        .call(
            "POST",
            "/v1/turns",
            &s.user_key,
            Some(json!({"turns": [{"text": "My bike is in the garage.", "role": "user"}], "flush": true})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{added}");
    let (st, stats) = s.call("GET", "/v1/stats", &s.admin_key, None).await;
    assert_eq!(st, StatusCode::OK, "{stats}");
    assert_eq!(stats["turns"], 1);
    assert!(
        stats["backend"]
            .as_str()
            .unwrap()
            .starts_with("postgres://"),
        "{stats}"
    );
    // Stopping drops the engine inside the runtime: the PostgreSQL client must not panic there.
    s.stop().await;
    // A new server (another data directory) over the same database finds the turn.
    let again = Server::start_at(&at, Config::default(), |state| state).await;
    let (st, found) = again
        .call(
            "POST",
            "/v1/search",
            &again.admin_key,
            Some(json!({"user_id": "alice", "query": "where is the bike"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{found}");
    assert_eq!(
        found["results"][0]["text"],
        "User: My bike is in the garage."
    );
    again.stop().await;
}

/// Metadata sent with Mem0's `add` comes back from get, get_all, search and history; an update
/// can replace it alone; bad metadata is a 400 that stores nothing.
async fn metadata_round_trips_through_the_mem0_routes(s: &Server) {
    let tags = json!({"source": "email", "tags": ["café", 2], "nested": {"ok": true}});
    let (st, added) = s
        .call(
            "POST",
            "/v3/memories/add/",
            &s.user_key,
            Some(json!({
                "messages": [
                    {"role": "user", "content": "My bike is kept in the garage."},
                    {"role": "user", "content": "My sister lives in Porto."}
                ],
                "user_id": "alice",
                "metadata": tags,
            })),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{added}");
    let id = added["results"][0]["id"].as_str().unwrap().to_string();
    let (st, one) = s
        .call("GET", &format!("/v1/memories/{id}/"), &s.user_key, None)
        .await;
    assert_eq!(st, StatusCode::OK, "{one}");
    assert_eq!(one["metadata"], tags);
    let (_, all) = s
        .call("POST", "/v2/memories/", &s.user_key, Some(json!({})))
        .await;
    let listed = all["results"].as_array().unwrap();
    assert_eq!(listed.len(), 2, "{all}");
    assert!(listed.iter().all(|m| m["metadata"] == tags), "{all}");
    let (_, found) = s
        .call(
            "POST",
            "/v3/memories/search/",
            &s.user_key,
            Some(json!({"query": "where is the bike kept?", "user_id": "alice"})),
        )
        .await;
    let hit = &found["results"][0];
    assert_eq!(hit["id"], id.as_str(), "{found}");
    assert_eq!(hit["metadata"], tags, "{found}");

    // Metadata alone: a new version with the same text.
    let (st, updated) = s
        .call(
            "PUT",
            &format!("/v1/memories/{id}/"),
            &s.user_key,
            Some(json!({"metadata": {"source": "chat"}})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{updated}");
    assert_eq!(updated["memory"], "My bike is kept in the garage.");
    assert_eq!(updated["metadata"], json!({"source": "chat"}));
    let (_, history) = s
        .call(
            "GET",
            &format!("/v1/memories/{id}/history/"),
            &s.user_key,
            None,
        )
        .await;
    let metadata: Vec<&Value> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["metadata"])
        .collect();
    assert_eq!(metadata, [&tags, &json!({"source": "chat"})], "{history}");

    // Bad metadata changes nothing.
    for (bad, says) in [
        (json!("email"), "must be a JSON object"),
        (json!({"aril": 1}), "reserved"),
    ] {
        let (st, err) = s
            .call(
                "POST",
                "/v3/memories/add/",
                &s.user_key,
                Some(
                    json!({"messages": [{"role": "user", "content": "Not kept."}],
                            "user_id": "alice", "metadata": bad}),
                ),
            )
            .await;
        assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
    let (_, turns) = s
        .call("GET", "/v1/turns?user_id=alice", &s.user_key, None)
        .await;
    assert_eq!(turns["total"], 3, "two turns and one update: {turns}");
    assert_eq!(turns["turns"][0]["metadata"], tags, "{turns}");
}

/// `expiration_date` and `immutable` on Mem0's `add` and `update`: an expired memory is neither
/// listed nor recalled, an immutable one refuses updates with a 409.
async fn expiry_and_immutability_hold_through_the_mem0_routes(s: &Server) {
    let add = |content: &str, options: Value| {
        let mut body =
            json!({"messages": [{"role": "user", "content": content}], "user_id": "carol"});
        body.as_object_mut()
            .unwrap()
            .extend(options.as_object().unwrap().clone());
        body
    };
    let (st, past) = s
        .call(
            "POST",
            "/v3/memories/add/",
            &s.admin_key,
            Some(add(
                "My gate code was 1234.",
                json!({"expiration_date": "2020-01-01"}),
            )),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{past}");
    let (_, kept) = s
        .call(
            "POST",
            "/v3/memories/add/",
            &s.admin_key,
            Some(add(
                "My blood type is O negative.",
                json!({"immutable": true, "expiration_date": "2999-12-31"}),
            )),
        )
        .await;
    let kept_id = kept["results"][0]["id"].as_str().unwrap().to_string();
    let (_, all) = s
        .call(
            "POST",
            "/v2/memories/",
            &s.admin_key,
            Some(json!({"user_id": "carol"})),
        )
        .await;
    assert_eq!(memories(&all), ["My blood type is O negative."], "{all}");
    let (_, found) = s
        .call(
            "POST",
            "/v3/memories/search/",
            &s.admin_key,
            Some(json!({"query": "what is the gate code?", "user_id": "carol"})),
        )
        .await;
    assert!(!found.to_string().contains("1234"), "{found}");
    let path = format!("/v1/memories/{kept_id}/");
    let (st, err) = s
        .call(
            "PUT",
            &path,
            &s.admin_key,
            Some(json!({"text": "My blood type is A."})),
        )
        .await;
    assert_eq!(st, StatusCode::CONFLICT, "{err}");
    assert!(err.to_string().contains("immutable"), "{err}");
    let (st, err) = s
        .call(
            "POST",
            "/v3/memories/add/",
            &s.admin_key,
            Some(add("x", json!({"expiration_date": "next week"}))),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
    assert!(err.to_string().contains("bad expiry"), "{err}");
    let (st, _) = s.call("DELETE", &path, &s.admin_key, None).await;
    assert_eq!(st, StatusCode::OK, "an immutable memory can be deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mem0_options_hold_on_the_embedded_store() {
    let s = Server::start().await;
    metadata_round_trips_through_the_mem0_routes(&s).await;
    expiry_and_immutability_hold_through_the_mem0_routes(&s).await;
    filters_select_by_metadata_and_time_in_search_and_get_all(&s).await;
    a_forgotten_memory_is_recalled_only_before_its_end(&s).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mem0_options_hold_on_postgres() {
    let db = aril_store::scratch::ScratchDatabase::new().unwrap_or_else(|e| panic!("{e}"));
    let at = StoreAt::Postgres(db.url().to_string());
    let s = Server::start_at(&at, Config::default(), |state| state).await;
    metadata_round_trips_through_the_mem0_routes(&s).await;
    expiry_and_immutability_hold_through_the_mem0_routes(&s).await;
    filters_select_by_metadata_and_time_in_search_and_get_all(&s).await;
    a_forgotten_memory_is_recalled_only_before_its_end(&s).await;
    s.stop().await;
}

/// Mem0 filters on metadata keys and times, in search (Mem0 and native) and get_all: only
/// memories that meet them, counted as such; an unknown operator, or a condition where only a
/// scope is taken, is a 400.
async fn filters_select_by_metadata_and_time_in_search_and_get_all(s: &Server) {
    let add = |text: &str, metadata: Value, timestamp: i64| {
        json!({"user_id": "carol", "messages": [{"role": "user", "content": text}],
               "metadata": metadata, "timestamp": timestamp})
    };
    for body in [
        add(
            "I love Thai green curry.",
            json!({"topic": "food", "stars": 5}),
            1_704_067_200,
        ),
        add(
            "Sushi on Fridays is our ritual.",
            json!({"topic": "food", "stars": 3}),
            1_714_521_600,
        ),
        add(
            "We hiked the Lousa mountains.",
            json!({"topic": "travel", "stars": 4}),
            1_714_521_600,
        ),
        add(
            "My curry recipe uses lemongrass.",
            json!({"topic": "cooking"}),
            1_717_200_000,
        ),
    ] {
        let (st, reply) = s
            .call("POST", "/v1/memories/", &s.admin_key, Some(body))
            .await;
        assert_eq!(st, StatusCode::OK, "{reply}");
    }
    let texts = |page: &Value| -> Vec<String> {
        let mut t: Vec<String> = page["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["memory"].as_str().unwrap().to_string())
            .collect();
        t.sort();
        t
    };
    let search =
        |filters: Value| json!({"query": "What food do I like?", "filters": filters, "top_k": 10});
    let food = json!({"AND": [{"user_id": "carol"}, {"topic": "food"}]});
    let (st, found) = s
        .call(
            "POST",
            "/v3/memories/search/",
            &s.admin_key,
            Some(search(food.clone())),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{found}");
    assert_eq!(
        texts(&found),
        vec![
            "I love Thai green curry.",
            "Sushi on Fridays is our ritual."
        ]
    );
    let cases = [
        (
            json!({"user_id": "carol", "stars": {"gte": 4}}),
            vec!["I love Thai green curry.", "We hiked the Lousa mountains."],
        ),
        (
            json!({"user_id": "carol", "NOT": {"topic": {"in": ["food", "travel"]}}}),
            vec!["My curry recipe uses lemongrass."],
        ),
        (
            json!({"user_id": "carol", "OR": [{"topic": "travel"}, {"stars": {"lt": 4}}]}),
            vec![
                "Sushi on Fridays is our ritual.",
                "We hiked the Lousa mountains.",
            ],
        ),
        (
            json!({"user_id": "carol", "created_at": {"gte": "2024-05-01", "lt": "2024-06-01"}}),
            vec![
                "Sushi on Fridays is our ritual.",
                "We hiked the Lousa mountains.",
            ],
        ),
        (
            json!({"user_id": "carol", "stars": "*", "topic": {"icontains": "FOO"}}),
            vec![
                "I love Thai green curry.",
                "Sushi on Fridays is our ritual.",
            ],
        ),
    ];
    for (filters, expected) in cases {
        let (st, page) = s
            .call(
                "POST",
                "/v2/memories/",
                &s.admin_key,
                Some(json!({"filters": filters})),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "{page}");
        assert_eq!(texts(&page), expected, "get_all {filters}");
        assert_eq!(page["count"], expected.len(), "{filters}");
        let (_, found) = s
            .call(
                "POST",
                "/v3/memories/search/",
                &s.admin_key,
                Some(search(filters.clone())),
            )
            .await;
        assert_eq!(texts(&found), expected, "search {filters}");
    }
    // A threshold on the similarity: none is that close; out of 0–1 is refused.
    let mut close = search(json!({"user_id": "carol"}));
    close["threshold"] = json!(0.99);
    let (st, none) = s
        .call(
            "POST",
            "/v3/memories/search/",
            &s.admin_key,
            Some(close.clone()),
        )
        .await;
    assert_eq!((st, texts(&none).len()), (StatusCode::OK, 0), "{none}");
    close["threshold"] = json!(0.1);
    let (_, some) = s
        .call(
            "POST",
            "/v3/memories/search/",
            &s.admin_key,
            Some(close.clone()),
        )
        .await;
    assert!(!texts(&some).is_empty(), "{some}");
    close["threshold"] = json!(2);
    let (st, err) = s
        .call("POST", "/v3/memories/search/", &s.admin_key, Some(close))
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
    // A page of the filtered list counts what meets the filter.
    let (_, page) = s
        .call(
            "POST",
            "/v2/memories/?page=2&page_size=1",
            &s.admin_key,
            Some(json!({"filters": food})),
        )
        .await;
    assert_eq!(
        (page["count"].as_u64(), texts(&page).len()),
        (Some(2), 1),
        "{page}"
    );
    // The native search takes the same filters.
    let (st, native) = s
        .call(
            "POST",
            "/v1/search",
            &s.admin_key,
            Some(json!({"query": "mountains", "user_id": "carol",
            "filters": {"topic": "travel"}})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{native}");
    let hits = native["results"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{native}");
    assert!(
        hits[0]["text"].as_str().unwrap().contains("Lousa"),
        "{native}"
    );
    // Refused: an unknown operator; a condition on add, which takes a scope only.
    let (st, err) = s
        .call(
            "POST",
            "/v3/memories/search/",
            &s.admin_key,
            Some(search(
                json!({"user_id": "carol", "stars": {"between": [1, 3]}}),
            )),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
    assert!(
        err["detail"]
            .as_str()
            .unwrap()
            .contains("unknown filter operator"),
        "{err}"
    );
    let (st, err) = s
        .call(
            "POST",
            "/v3/memories/add/",
            &s.admin_key,
            Some(json!({
            "messages": [{"role": "user", "content": "x"}],
            "filters": {"user_id": "carol", "topic": "food"}})),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
    let (st, err) = s
        .call(
            "POST",
            "/v2/memories/",
            &s.admin_key,
            Some(json!({"filters": {"OR": [{"user_id": "carol"}, {"user_id": "bob"}]}})),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
}

/// Each Mem0 option does what Mem0 documents, or has no meaning here and passes, or asks for
/// what aril does not do and is refused with what it does instead.
#[tokio::test]
async fn mem0_options_act_pass_or_are_refused_with_a_reason() {
    let s = Server::start().await;
    let (st, added) = s
        .call(
            "POST",
            "/v1/memories/",
            &s.user_key,
            Some(
                json!({"messages": [{"role": "user", "content": "I keep bees in Lisbon."}],
                "user_id": "alice", "org_id": "o", "project_id": "p", "version": "v2",
                "async_mode": true, "enable_graph": false, "output_format": "v1.1"}),
            ),
        )
        .await;
    assert_eq!(
        st,
        StatusCode::OK,
        "options without meaning here pass: {added}"
    );
    let search = |extra: Value| {
        let mut body = json!({"query": "bees", "filters": {"user_id": "alice"}});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let (st, picked) = s
        .call(
            "POST",
            "/v3/memories/search/",
            &s.user_key,
            Some(search(
                json!({"fields": ["id", "memory"], "rerank": false, "keyword_search": true}),
            )),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{picked}");
    let keys: Vec<&String> = picked["results"][0].as_object().unwrap().keys().collect();
    assert_eq!(keys, vec!["id", "memory"], "{picked}");
    let (st, page) = s
        .call(
            "POST",
            "/v2/memories/",
            &s.user_key,
            Some(json!({"filters": {"user_id": "alice"}, "fields": ["memory"]})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{page}");
    assert_eq!(
        page["results"][0],
        json!({"memory": "I keep bees in Lisbon."}),
        "{page}"
    );
    assert_eq!(page["count"], 1);
    for (extra, said) in [
        (
            json!({"fields": ["memory", "colour"]}),
            "not a field of a memory",
        ),
        (json!({"rerank": true}), "reranks nothing"),
        (json!({"keyword_search": false}), "always includes"),
        (json!({"filter_memories": true}), "not with a model"),
        (json!({"enable_graph": true}), "no graph"),
        (json!({"output_format": "v1.0"}), "v1.1"),
        (json!({"app_id": "shop"}), "not a scope"),
        (
            json!({"memory_type": "procedural_memory"}),
            "one kind of memory",
        ),
        (json!({"prompt": "Extract facts"}), "custom_instructions"),
        (json!({"colour": "red"}), "unknown field"),
    ] {
        let (st, err) = s
            .call(
                "POST",
                "/v3/memories/search/",
                &s.user_key,
                Some(search(extra.clone())),
            )
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{extra}: {err}");
        assert!(
            err["detail"].as_str().unwrap().contains(said),
            "{extra}: {err}"
        );
    }
    s.stop().await;
}

/// `POST /v1/memories/{id}/forget` and `/restore`: a memory said on 2024-01-01 and forgotten from
/// 2024-06-01 is not recalled now, is recalled when asked in May 2024, stays listed with its
/// `valid_to` and shows the interval in its history; a user key cannot forget another user's
/// memory; bad times and fields are 400s; a Mem0 update gives the memory a new text that holds.
async fn a_forgotten_memory_is_recalled_only_before_its_end(s: &Server) {
    let body = json!({"user_id": "dave", "messages": [{"role": "user", "content": "I live in Porto, by the river."}],
                      "timestamp": 1_704_067_200});
    let (st, added) = s
        .call("POST", "/v1/memories/", &s.admin_key, Some(body))
        .await;
    assert_eq!(st, StatusCode::OK, "{added}");
    let id = added["results"][0]["id"].as_str().unwrap().to_string();
    let forget = format!("/v1/memories/{id}/forget");
    let restore = format!("/v1/memories/{id}/restore");
    let (st, _) = s
        .call(
            "POST",
            &forget,
            &s.user_key,
            Some(json!({"at": "2024-06-01"})),
        )
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND, "alice's key does not reach dave");
    for (bad, says) in [
        (json!({"at": "soon"}), "bad time"),
        (json!({"when": "2024-06-01"}), "unknown field"),
    ] {
        let (st, err) = s.call("POST", &forget, &s.admin_key, Some(bad)).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
    let (st, forgotten) = s
        .call(
            "POST",
            &forget,
            &s.admin_key,
            Some(json!({"at": "2024-06-01"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{forgotten}");
    assert_eq!(forgotten["id"], id.as_str());
    assert_eq!(forgotten["valid_to"], "2024-06-01T00:00:00Z");
    let search = |asked_at: Option<&str>| {
        let mut body = json!({"query": "Where do I live?", "user_id": "dave"});
        if let Some(at) = asked_at {
            body["asked_at"] = json!(at);
        }
        s.call("POST", "/v1/search", &s.admin_key, Some(body))
    };
    let (_, now) = search(None).await;
    assert!(!now.to_string().contains("Porto"), "{now}");
    let (_, in_may) = search(Some("2024-05-01T00:00:00Z")).await;
    assert!(in_may.to_string().contains("Porto"), "{in_may}");
    // A date is asked at its end (UTC): the last day it held finds it, the day it ended not.
    let (st, may_31) = search(Some("2024-05-31")).await;
    assert_eq!(st, StatusCode::OK, "{may_31}");
    assert!(may_31.to_string().contains("Porto"), "{may_31}");
    let (_, june_1) = search(Some("2024-06-01")).await;
    assert!(!june_1.to_string().contains("Porto"), "{june_1}");
    let (_, listed) = s
        .call("GET", "/v1/memories/?user_id=dave", &s.admin_key, None)
        .await;
    assert_eq!(
        listed["results"][0]["valid_to"], "2024-06-01T00:00:00Z",
        "{listed}"
    );
    let (_, history) = s
        .call(
            "GET",
            &format!("/v1/memories/{id}/history/"),
            &s.admin_key,
            None,
        )
        .await;
    let events: Vec<(&str, &str, Option<&str>)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap(),
                e["valid_from"].as_str().unwrap(),
                e["valid_to"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("ADD", "2024-01-01T00:00:00Z", None),
            (
                "FORGET",
                "2024-01-01T00:00:00Z",
                Some("2024-06-01T00:00:00Z")
            )
        ]
    );
    // Restored it holds again; restoring what holds is a 400; no body forgets from now.
    let (st, restored) = s.call("POST", &restore, &s.admin_key, None).await;
    assert_eq!(st, StatusCode::OK, "{restored}");
    assert!(restored.get("valid_to").is_none(), "{restored}");
    let (st, err) = s.call("POST", &restore, &s.admin_key, None).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{err}");
    assert!(err.to_string().contains("nothing to restore"), "{err}");
    let (st, again) = s.call("POST", &forget, &s.admin_key, None).await;
    assert_eq!(st, StatusCode::OK, "{again}");
    assert!(again["valid_to"].is_string(), "{again}");
    // A Mem0 update states the new fact: it holds, and is what search finds.
    let (st, moved) = s
        .call(
            "PUT",
            &format!("/v1/memories/{id}/"),
            &s.admin_key,
            Some(json!({"text": "I live in Braga now."})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{moved}");
    assert!(moved.get("valid_to").is_none(), "{moved}");
    let (_, now) = search(None).await;
    assert!(now.to_string().contains("Braga"), "{now}");
}
