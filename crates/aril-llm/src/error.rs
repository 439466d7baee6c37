//! Errors of the language-model stage, each saying what to check.

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error(
        "cannot reach the LLM endpoint {url}: {reason}; check the base URL (ARIL_LLM_BASE_URL) and \
         that the server runs"
    )]
    Unreachable { url: String, reason: String },
    #[error(
        "the LLM endpoint {url} did not answer within {secs} s, {attempts} times; raise the \
         timeout or use a faster model"
    )]
    Timeout {
        url: String,
        secs: f64,
        attempts: u32,
    },
    #[error("the LLM endpoint {url} answered HTTP {status} (after {attempts} attempts): {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
        attempts: u32,
    },
    #[error("the model's reply is unusable, even after a repair round: {reason}")]
    InvalidReply { reason: String },
    #[error("invalid LLM configuration: {0}")]
    Config(String),
    #[error(
        "no {role} model configured: set ARIL_LLM_BASE_URL (e.g. http://127.0.0.1:8080/v1) and \
         ARIL_LLM_MODEL, or ARIL_LLM_{upper}_BASE_URL and ARIL_LLM_{upper}_MODEL (or base_url and \
         model under [llm] or [llm.{role}] in the configuration file)",
        role = .0.as_str(),
        upper = .0.as_str().to_ascii_uppercase()
    )]
    NotConfigured(crate::Role),
    #[error(
        "the local model server {server} {status} before it was ready; its last lines:\n{last_lines}\n\
         If scripts/fetch-llm built it, run scripts/fetch-llm again: it smoke-checks the cached \
         build and rebuilds one that fails"
    )]
    ServerDied {
        server: String,
        /// How it ended, e.g. "died of signal: 11 (SIGSEGV)" or "exited with exit status: 1".
        status: String,
        last_lines: String,
    },
}
