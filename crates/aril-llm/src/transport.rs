//! One endpoint, patiently: POSTs JSON with a timeout, retries timeouts, 429 and 5xx with
//! exponential backoff or the server's `Retry-After` (capped), and lets at most
//! `max_concurrency` requests be in flight at once. Shared by the chat and rerank clients.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::{ClientOptions, LlmError};

/// A final HTTP answer (after retries): status, body text and the attempts it took.
pub(crate) struct HttpReply {
    pub status: u16,
    pub text: String,
    pub attempts: u32,
}

impl HttpReply {
    /// The body of a 200 reply parsed as `T`; any other status, or a body that is not a `T`
    /// (`what` names it in the error), is an error.
    pub(crate) fn json<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        what: &str,
    ) -> Result<T, LlmError> {
        if self.status != 200 {
            return Err(LlmError::Status {
                url: url.to_string(),
                status: self.status,
                body: truncate(&self.text),
                attempts: self.attempts,
            });
        }
        serde_json::from_str(&self.text).map_err(|e| LlmError::InvalidReply {
            reason: format!("the reply is not {what} ({e}): {}", truncate(&self.text)),
        })
    }
}

/// What one HTTP attempt came to.
enum Attempt {
    Done(HttpReply),
    Retry { wait: Duration, why: RetryCause },
}

enum RetryCause {
    Timeout,
    Unreachable(String),
    Status(u16, String),
}

/// A counting gate: at most `limit` holders at once, the others wait.
struct Gate {
    in_flight: Mutex<usize>,
    freed: Condvar,
    limit: usize,
}

struct Pass<'a>(&'a Gate);

impl Gate {
    fn enter(&self) -> Pass<'_> {
        let mut n = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        while *n >= self.limit {
            n = self.freed.wait(n).unwrap_or_else(|p| p.into_inner());
        }
        *n += 1;
        Pass(self)
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        let mut n = self.0.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_sub(1);
        self.0.freed.notify_one();
    }
}

pub(crate) struct Transport {
    http: reqwest::blocking::Client,
    api_key: Option<String>,
    options: ClientOptions,
    gate: Gate,
}

/// Error bodies are shown, not dumped.
pub(crate) fn truncate(text: &str) -> String {
    let mut t: String = text.chars().take(500).collect();
    if t.len() < text.len() {
        t.push('…');
    }
    t
}

impl Transport {
    pub(crate) fn new(api_key: Option<String>, options: ClientOptions) -> Result<Self, LlmError> {
        if options.max_concurrency == 0 {
            return Err(LlmError::Config(
                "max_concurrency must be at least 1".into(),
            ));
        }
        let http = reqwest::blocking::Client::builder()
            .timeout(options.timeout)
            .build()
            .map_err(|e| LlmError::Config(format!("HTTP client: {e}")))?;
        Ok(Self {
            http,
            api_key,
            gate: Gate {
                in_flight: Mutex::new(0),
                freed: Condvar::new(),
                limit: options.max_concurrency,
            },
            options,
        })
    }

    /// The wait before retry `attempt` (from 1): the server's `Retry-After` if it sent one,
    /// else exponential backoff; never above `max_wait`.
    fn wait(&self, attempt: u32, retry_after: Option<&str>) -> Duration {
        let asked = retry_after
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        let backoff = self
            .options
            .backoff
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        asked.unwrap_or(backoff).min(self.options.max_wait)
    }

    fn attempt(&self, url: &str, body: &Value, attempt: u32) -> Attempt {
        let mut req = self.http.post(url).json(body);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let sent = {
            let _pass = self.gate.enter();
            req.send().and_then(|resp| {
                let status = resp.status().as_u16();
                let retry_after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                resp.text().map(|text| (status, retry_after, text))
            })
        };
        match sent {
            Ok((status, retry_after, text)) if status == 429 || status >= 500 => Attempt::Retry {
                wait: self.wait(attempt, retry_after.as_deref()),
                why: RetryCause::Status(status, text),
            },
            Ok((status, _, text)) => Attempt::Done(HttpReply {
                status,
                text,
                attempts: attempt,
            }),
            Err(e) if e.is_timeout() => Attempt::Retry {
                wait: self.wait(attempt, None),
                why: RetryCause::Timeout,
            },
            Err(e) => Attempt::Retry {
                wait: self.wait(attempt, None),
                why: RetryCause::Unreachable(e.to_string()),
            },
        }
    }

    /// POSTs `body` to `url`, retrying what is worth retrying; the final answer or why none came.
    pub(crate) fn post(&self, url: &str, body: &Value) -> Result<HttpReply, LlmError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self.attempt(url, body, attempts) {
                Attempt::Done(reply) => return Ok(reply),
                Attempt::Retry { wait, why } => {
                    if attempts > self.options.max_retries {
                        return Err(match why {
                            RetryCause::Timeout => LlmError::Timeout {
                                url: url.to_string(),
                                secs: self.options.timeout.as_secs_f64(),
                                attempts,
                            },
                            RetryCause::Unreachable(reason) => LlmError::Unreachable {
                                url: url.to_string(),
                                reason,
                            },
                            RetryCause::Status(status, body) => LlmError::Status {
                                url: url.to_string(),
                                status,
                                body: truncate(&body),
                                attempts,
                            },
                        });
                    }
                    tracing::warn!(
                        attempt = attempts,
                        wait_ms = wait.as_millis() as u64,
                        "model call will be retried"
                    );
                    std::thread::sleep(wait);
                }
            }
        }
    }
}
