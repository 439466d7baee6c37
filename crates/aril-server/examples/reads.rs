//! Concurrent reads on a real server over a copy of an existing memory: for 1, 2, 4 and 16
//! clients in turn, every client searches (k 10, budget 2,000) with questions taken round-robin
//! from a file, one request after another, for S seconds; with `--writer`, one more client adds
//! 100-message batches to another user meanwhile. Reports reads/s and search p50/p99 per client
//! count, and the write latency when there is a writer.
//!
//!     cargo run --release -p aril-server --example reads -- DATA_DIR USER QUESTIONS [SECONDS] [--writer]
//!
//! QUESTIONS holds one question per line. The data directory is copied to a temporary one first
//! (the server owns its directory, and the writer must not change the original).

use std::path::Path;
use std::time::{Duration, Instant};

use aril_engine::{Config, Engine};
use aril_server::AppState;
use serde_json::json;

mod common;

use common::percentile;

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if entry.file_name() != "aril.lock" {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let writer = args.iter().any(|a| a == "--writer");
    let args: Vec<&String> = args.iter().filter(|a| *a != "--writer").collect();
    let [source, user, questions, rest @ ..] = args.as_slice() else {
        return Err("usage: reads DATA_DIR USER QUESTIONS [SECONDS] [--writer]".into());
    };
    let seconds: u64 = rest.first().map(|a| a.parse()).transpose()?.unwrap_or(20);
    let questions: Vec<String> = std::fs::read_to_string(questions)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    if questions.is_empty() {
        return Err("the questions file has no question".into());
    }
    let dir = tempfile::tempdir()?;
    copy_dir(Path::new(source.as_str()), dir.path())?;
    let mut engine = Engine::open_existing_at(
        dir.path(),
        &aril_engine::StoreAt::Embedded,
        // As `aril serve` configures it: writes embed on every core but one.
        Config {
            embed_threads: Some(Config::cores_but_one()),
            ..Config::default()
        },
        None,
    )?;
    let key = engine.create_api_key(None)?;
    engine.load_model()?;
    let state = AppState::new(engine, true)?;
    let served = common::serve(state).await?;
    let base = served.base.clone();
    let http = reqwest::Client::new();
    let user_name = user.to_string();
    let user = user_name.clone();
    let search = move |http: reqwest::Client, base: String, key: String, query: String| {
        let user = user.clone();
        async move {
            let t = Instant::now();
            let r = http
                .post(format!("{base}/v1/search"))
                .header("Authorization", format!("Token {key}"))
                .json(&json!({"user_id": user, "query": query, "k": 10, "budget": 2000}))
                .send()
                .await?;
            if !r.status().is_success() {
                return Err(format!("search answered {}: {}", r.status(), r.text().await?).into());
            }
            Ok::<f64, Box<dyn std::error::Error + Send + Sync>>(t.elapsed().as_secs_f64() * 1e3)
        }
    };
    // One search first: the user's vectors are loaded once, outside the measurement. It must
    // find something: searching a user the directory does not hold measures nothing.
    let found: serde_json::Value = http
        .post(format!("{base}/v1/search"))
        .header("Authorization", format!("Token {key}"))
        .json(&json!({"user_id": user_name, "query": questions[0], "k": 10}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    if found["results"].as_array().is_none_or(|r| r.is_empty()) {
        return Err(
            format!("user {user_name:?} has no memory in {source}: nothing to search").into(),
        );
    }
    for clients in [1usize, 2, 4, 16] {
        let until = Instant::now() + Duration::from_secs(seconds);
        let started = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..clients {
            let (http, base, key) = (http.clone(), base.clone(), key.clone());
            let questions = questions.clone();
            let search = search.clone();
            tasks.push(tokio::spawn(async move {
                let mut took = Vec::new();
                let mut i = c;
                while Instant::now() < until {
                    let q = questions[i % questions.len()].clone();
                    took.push(search(http.clone(), base.clone(), key.clone(), q).await?);
                    i += clients;
                }
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(took)
            }));
        }
        let writes = writer.then(|| {
            let (http, base, key) = (http.clone(), base.clone(), key.clone());
            tokio::spawn(async move {
                let mut took = Vec::new();
                let mut batch = 0;
                while Instant::now() < until {
                    let turns: Vec<_> = (0..100)
                        .map(|n| json!({"role": if n % 2 == 0 { "user" } else { "assistant" },
                            "text": format!("Batch {batch} message {n}: the shipment for order {} left the warehouse in {}.", n * 7 + batch, ["Lisbon", "Porto", "Faro"][n % 3])}))
                        .collect();
                    let t = Instant::now();
                    let r = http
                        .post(format!("{base}/v1/turns"))
                        .header("Authorization", format!("Token {key}"))
                        .json(&json!({"user_id": "load-writer", "turns": turns}))
                        .send()
                        .await?;
                    if !r.status().is_success() {
                        return Err(format!("add answered {}", r.status()).into());
                    }
                    took.push(t.elapsed().as_secs_f64() * 1e3);
                    batch += 1;
                }
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(took)
            })
        });
        let mut took = Vec::new();
        for t in tasks {
            took.extend(t.await?.map_err(|e| e.to_string())?);
        }
        let elapsed = started.elapsed().as_secs_f64();
        took.sort_by(f64::total_cmp);
        let mut line = format!(
            "{clients:>2} clients: {:.1} reads/s, search p50 {:.1} ms, p99 {:.1} ms ({} searches)",
            took.len() as f64 / elapsed,
            percentile(&took, 0.5),
            percentile(&took, 0.99),
            took.len()
        );
        if let Some(w) = writes {
            let mut w = w.await?.map_err(|e| e.to_string())?;
            w.sort_by(f64::total_cmp);
            line += &format!(
                "; writer: {} batches of 100, p50 {:.0} ms",
                w.len(),
                percentile(&w, 0.5)
            );
        }
        println!("{line}");
    }
    served.stop().await?;
    Ok(())
}
