//! Concurrent load on a real server: N clients (default 16) each write a turn and then search,
//! in a loop, for S seconds (default 60), against an in-process `aril serve` on a loopback port
//! over a fresh data directory. Reports write and search latency (p50/p99) and checks that every
//! acknowledged write is stored.
//!
//!     cargo run --release -p aril-server --example load -- [CLIENTS] [SECONDS]

use std::time::{Duration, Instant};

use aril_engine::{Config, Engine, ScopeFilter};
use aril_server::AppState;
use serde_json::{Value, json};

mod common;

use common::percentile;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let clients: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(16);
    let seconds: u64 = args.next().map(|a| a.parse()).transpose()?.unwrap_or(60);
    let dir = tempfile::tempdir()?;
    let mut engine = Engine::open(dir.path(), Config::default())?;
    let key = engine.create_api_key(None)?;
    let state = AppState::new(engine, true)?;
    let served = common::serve(state).await?;
    let base = served.base.clone();
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (base, key) = (base.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let (mut writes, mut searches, mut acked, mut errors) = (vec![], vec![], vec![], 0);
            let mut i = 0;
            while Instant::now() < until {
                let t = Instant::now();
                let r = http
                    .post(format!("{base}/v1/turns"))
                    .header("Authorization", format!("Token {key}"))
                    .json(&json!({"user_id": format!("client{c}"), "turns": [{
                        "text": format!("Client {c} note {i}: the meeting about project {} moved to room {}.", i % 7, i % 13)
                    }]}))
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status().is_success() => {
                        writes.push(t.elapsed().as_secs_f64() * 1e3);
                        let v: Value = r.json().await.unwrap_or_default();
                        acked.push(v["ids"][0].as_str().unwrap_or_default().to_string());
                    }
                    _ => errors += 1,
                }
                let t = Instant::now();
                let r = http
                    .post(format!("{base}/v1/search"))
                    .header("Authorization", format!("Token {key}"))
                    .json(&json!({"user_id": format!("client{c}"), "query": format!("where is the meeting about project {}", i % 7)}))
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status().is_success() => {
                        searches.push(t.elapsed().as_secs_f64() * 1e3)
                    }
                    _ => errors += 1,
                }
                i += 1;
            }
            (writes, searches, acked, errors)
        }));
    }
    let (mut writes, mut searches, mut acked, mut errors) = (vec![], vec![], vec![], 0);
    for t in tasks {
        let (w, s, a, e) = t.await?;
        writes.extend(w);
        searches.extend(s);
        acked.push(a);
        errors += e;
    }
    served.stop().await?;
    // Every acknowledged write is in the store.
    let engine = Engine::open(dir.path(), Config::default())?;
    let mut lost = 0;
    for (c, ids) in acked.iter().enumerate() {
        let filter = ScopeFilter {
            user_id: format!("client{c}"),
            agent_id: None,
            run_id: None,
        };
        let (turns, _) = engine.list_turns(&filter, 0, u64::MAX)?;
        lost += ids
            .iter()
            .filter(|id| !turns.iter().any(|t| &t.id.0 == *id))
            .count();
    }
    writes.sort_by(f64::total_cmp);
    searches.sort_by(f64::total_cmp);
    println!(
        "{clients} clients, {seconds} s: {} writes (p50 {:.0} ms, p99 {:.0} ms), {} searches (p50 {:.0} ms, p99 {:.0} ms), {errors} errors, {lost} acknowledged writes lost",
        writes.len(),
        percentile(&writes, 0.5),
        percentile(&writes, 0.99),
        searches.len(),
        percentile(&searches, 0.5),
        percentile(&searches, 0.99),
    );
    Ok(())
}
