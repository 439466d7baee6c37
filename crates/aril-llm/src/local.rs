//! A local OpenAI-compatible server: llama.cpp's `llama-server` on a loopback port, serving a GGUF
//! model, stopped when dropped. `scripts/fetch-llm` builds the server and fetches SmolLM2 into
//! the cache this module looks in; `ARIL_LLAMA_SERVER` and `ARIL_LLAMA_MODEL` point elsewhere.
//!
//! Two servers on one small machine slow each other down many times over (their threads spin), so
//! tests that start one run one at a time: `.config/nextest.toml` groups them by name, and under
//! nextest [`LocalServer::from_cache`] refuses a test outside that group.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{ClientOptions, Endpoint, Ledger, LlmError, OpenAiClient};

/// Where `scripts/fetch-llm` puts the `llama-server` it built and smoke-checked, in the cache.
const LLAMA_SERVER: &str = "llama-server/llama-server";
const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// How many of the server's last stderr lines an error shows.
const LAST_LINES: usize = 15;
/// The nextest test group (`.config/nextest.toml`) whose tests may start a cached server.
const TEST_GROUP: &str = "local-llm";

/// A running `llama-server`.
pub struct LocalServer {
    child: Child,
    endpoint: Endpoint,
}

fn located(var: &str, default: PathBuf) -> Result<PathBuf, LlmError> {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or(default);
    if path.exists() {
        Ok(path)
    } else {
        Err(LlmError::Config(format!(
            "{} not found: run scripts/fetch-llm, or set {var}",
            path.display()
        )))
    }
}

/// Under nextest (which names each test's group in `NEXTEST_TEST_GROUP`), a test outside the
/// local-model group would run beside another test's server: it is refused by name instead of
/// slowing both down many times over. Outside nextest there is no group to check.
fn in_the_test_group(group: Option<&str>) -> Result<(), LlmError> {
    match group {
        Some(group) if group != TEST_GROUP => Err(LlmError::Config(format!(
            "this test starts a llama-server but runs in nextest's test group `{group}`, not \
             `{TEST_GROUP}`: put real_model, real_server or local_model in its name \
             (.config/nextest.toml)"
        ))),
        _ => Ok(()),
    }
}

impl LocalServer {
    /// A client for this server with default options and a ledger of its own.
    pub fn client(&self) -> Result<OpenAiClient, LlmError> {
        OpenAiClient::new(
            self.endpoint.clone(),
            ClientOptions::default(),
            Ledger::default(),
        )
    }

    /// Starts the cached `llama-server` with the cached SmolLM2 (or the ones the environment
    /// names) and waits until it answers.
    pub fn from_cache() -> Result<Self, LlmError> {
        Self::cached(&[])
    }

    /// As [`LocalServer::from_cache`], serving `/v1/embeddings` (mean-pooled) instead of chat.
    pub fn embeddings_from_cache() -> Result<Self, LlmError> {
        Self::cached(&["--embeddings", "--pooling", "mean"])
    }

    fn cached(extra: &[&str]) -> Result<Self, LlmError> {
        in_the_test_group(std::env::var("NEXTEST_TEST_GROUP").ok().as_deref())?;
        let cache = aril_core::cache_root();
        let server = located("ARIL_LLAMA_SERVER", cache.join(LLAMA_SERVER))?;
        let model = located("ARIL_LLAMA_MODEL", cache.join("models").join(SMOLLM2))?;
        Self::start_with(&server, &model, 2, extra)
    }

    /// Starts `server` serving `model` on a free loopback port with `threads` threads and waits
    /// (up to two minutes) until its health check passes.
    pub fn start(server: &Path, model: &Path, threads: usize) -> Result<Self, LlmError> {
        Self::start_with(server, model, threads, &[])
    }

    /// As [`LocalServer::start`], with extra `llama-server` arguments.
    pub fn start_with(
        server: &Path,
        model: &Path,
        threads: usize,
        extra: &[&str],
    ) -> Result<Self, LlmError> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| LlmError::Config(format!("no free loopback port: {e}")))?;
        let mut child = Command::new(server)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--threads",
                &threads.to_string(),
                "--ctx-size",
                "4096",
                "--parallel",
                "1",
            ])
            .args(extra)
            .arg("-m")
            .arg(model)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| LlmError::Config(format!("cannot start {}: {e}", server.display())))?;
        let last_lines = LastLines::drain(&mut child);
        let mut running = Self {
            child,
            endpoint: Endpoint {
                base_url: format!("http://127.0.0.1:{port}/v1"),
                model: model
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "local".into()),
                api_key: None,
            },
        };
        let health = format!("http://127.0.0.1:{port}/health");
        let http = reqwest::blocking::Client::new();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(120) {
            if http
                .get(&health)
                .send()
                .is_ok_and(|r| r.status().is_success())
            {
                return Ok(running);
            }
            if let Ok(Some(status)) = running.child.try_wait() {
                return Err(LlmError::ServerDied {
                    server: server.display().to_string(),
                    status: ended(status),
                    last_lines: last_lines.after_exit(),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(LlmError::Timeout {
            url: health,
            secs: 120.0,
            attempts: 1,
        })
    }

    /// Where to send requests.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }
}

/// How a process ended, in words.
fn ended(status: ExitStatus) -> String {
    if status.signal().is_some() {
        format!("died of {status}")
    } else {
        format!("exited with {status}")
    }
}

/// The last [`LAST_LINES`] lines a child wrote to stderr, read by a thread of their own so the
/// pipe never fills (the thread ends when the child closes it, at the latest when it dies).
struct LastLines {
    lines: Arc<Mutex<VecDeque<String>>>,
    reader: Option<JoinHandle<()>>,
}

impl LastLines {
    fn drain(child: &mut Child) -> Self {
        let lines = Arc::new(Mutex::new(VecDeque::with_capacity(LAST_LINES)));
        let reader = child.stderr.take().map(|stderr| {
            let sink = Arc::clone(&lines);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let Ok(mut kept) = sink.lock() else { return };
                    if kept.len() == LAST_LINES {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
            })
        });
        Self { lines, reader }
    }

    /// Every line up to the child's end, indented; call once the child has exited.
    fn after_exit(mut self) -> String {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        match self.lines.lock() {
            Ok(lines) if !lines.is_empty() => lines
                .iter()
                .map(|l| format!("    {l}"))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => "    (nothing)".to_owned(),
        }
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_local_model_group_may_start_the_cached_server() {
        assert!(in_the_test_group(Some(TEST_GROUP)).is_ok());
        assert!(in_the_test_group(None).is_ok(), "cargo test names no group");
        let refused = in_the_test_group(Some("@global")).unwrap_err().to_string();
        assert!(
            refused.contains("@global") && refused.contains("real_model"),
            "{refused}"
        );
    }
}
