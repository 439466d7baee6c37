//! A local OpenAI-compatible server: llama.cpp's `llama-server` on a loopback port, serving a GGUF
//! model, stopped when dropped. `scripts/fetch-llm` builds the server and fetches SmolLM2 into
//! the cache this module looks in; `ARIL_LLAMA_SERVER` and `ARIL_LLAMA_MODEL` point elsewhere.
//!
//! Two servers on one small machine slow each other down many times over (their threads spin), so
//! tests that start one run one at a time: `.config/nextest.toml` groups them by name.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{ClientOptions, Endpoint, Ledger, LlmError, OpenAiClient};

/// The llama-cpp-python release whose llama.cpp `scripts/fetch-llm` builds.
const LLAMA_BUILD: &str = "llama-server-0.3.36";
const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// A running `llama-server`.
pub struct LocalServer {
    child: Child,
    endpoint: Endpoint,
}

fn cache_dir() -> PathBuf {
    std::env::var_os("ARIL_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/aril")))
        .unwrap_or_else(|| PathBuf::from(".cache/aril"))
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
        let cache = cache_dir();
        let server = located(
            "ARIL_LLAMA_SERVER",
            cache.join(LLAMA_BUILD).join("llama-server"),
        )?;
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
        let child = Command::new(server)
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
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| LlmError::Config(format!("cannot start {}: {e}", server.display())))?;
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
                return Err(LlmError::Config(format!(
                    "{} exited ({status}) before it was ready",
                    server.display()
                )));
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

impl Drop for LocalServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
