//! The command line, parsed in one place into plain structs.

use std::path::PathBuf;

use aril_engine::{Scope, ScopeFilter};
use clap::{Args, Parser, Subcommand, ValueEnum};

/// aril: long-term memory for LLM agents. Keeps every turn verbatim, cuts conversations into topic
/// segments and recalls what is relevant to a question, offline.
#[derive(Parser, Debug)]
#[command(name = "aril", version, about)]
pub struct Cli {
    /// Data directory. The commands that write (import, add, migrate, serve, mcp, keys) create
    /// it if missing; the others need a memory there. One process at a time may own it.
    #[arg(
        long,
        global = true,
        env = "ARIL_DATA_DIR",
        default_value = "aril-data"
    )]
    pub data_dir: PathBuf,
    /// Where the memory lives: a directory (the same as --data-dir), or a PostgreSQL database
    /// (`postgres://USER@HOST:PORT/DB`, pgvector installed; see docs/postgres.md), which several
    /// aril processes may share. With PostgreSQL, nothing is kept in --data-dir.
    #[arg(long, global = true, env = "ARIL_STORE")]
    pub store: Option<String>,
    /// Configuration file (TOML); see docs/configuration.md.
    #[arg(long, global = true, env = "ARIL_CONFIG")]
    pub config: Option<PathBuf>,
    /// Directory of the all-MiniLM-L6-v2 model (default: $ARIL_MODEL_DIR, else
    /// models/all-MiniLM-L6-v2 under $ARIL_CACHE or ~/.cache/aril, filled by scripts/fetch-model).
    #[arg(long, global = true)]
    pub model_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Import a conversation file (LoCoMo or LongMemEval format). Idempotent.
    Import(ImportCmd),
    /// Append one turn (TEXT), or JSON lines from stdin when TEXT is absent or `-`.
    Add(AddCmd),
    /// Recall what is relevant to a question, within a scope.
    Search(SearchCmd),
    /// List the closed segments of a scope, a page at a time, in store order.
    Segments(SegmentsCmd),
    /// The user profile of a scope: its current preference cards and stable traits, newest first.
    Profile(ProfileCmd),
    /// Counts of the data directory.
    Stats(StatsCmd),
    /// Write a scope's memories as they stand now as JSON lines on stdout, the form `aril add`
    /// reads: `aril export --user U | aril --data-dir OTHER add --user U --flush` copies them,
    /// ids included (older versions of updated memories stay behind; `migrate-store` copies
    /// everything).
    Export(ExportCmd),
    /// Delete everything of a scope (turns, segments, cards, index entries, cached vectors), or
    /// one session of a conversation.
    Delete(DeleteCmd),
    /// Mark one memory as no longer true from a time on, without deleting it: recall asked from
    /// then on leaves it out, its history keeps it with the interval it held. --restore undoes it.
    Forget(ForgetCmd),
    /// Rebuild the lexical index from the store and embed units lacking vectors.
    Reindex,
    /// Check the store's integrity.
    Check,
    /// Bring the store's schema up to this aril's (PostgreSQL: run once before serving; the
    /// embedded store upgrades itself whenever it is opened).
    Migrate,
    /// Copy the whole memory from one store to another (a data directory or a PostgreSQL URL,
    /// either way), then compare both table by table (row counts and content hashes).
    /// Resumable: run it again after an interruption. Stop every writer of the source first.
    MigrateStore(MigrateStoreCmd),
    /// Ingest a sample conversation, show its segments and answer questions from it.
    Demo(DemoCmd),
    /// Measure retrieval on a benchmark file with one strategy (see docs/benchmarks.md).
    Bench(BenchCmd),
    /// Serve the native and Mem0-compatible HTTP API over the data directory (and the memory
    /// inspector at /ui).
    Serve(ServeCmd),
    /// Open the memory inspector on loopback for the local memory: browse users, segments and
    /// cards, try recalls, see costs, edit and delete (the whole API is served beside it, without
    /// keys, to this machine only).
    Ui(UiCmd),
    /// Serve an OpenAI-compatible chat endpoint in front of a model (and the whole HTTP API):
    /// every chat completion gets recalled memory in its system prompt, and its exchange is
    /// stored. Point any OpenAI SDK's base URL at it.
    Proxy(ProxyCmd),
    /// Serve the memory tools over MCP on stdin/stdout (for Claude Desktop, Cursor and the like).
    Mcp,
    /// Manage API keys for `aril serve`.
    #[command(subcommand)]
    Keys(KeysCmd),
    /// Write queued segments into memory cards with the encoder LLM (ARIL_LLM_* settings).
    Consolidate(ConsolidateCmd),
    /// Answer a question from memory: one planner call, multi-path recall over cards and turns,
    /// one answer call (models from ARIL_LLM_*). --context-only stops before the answer.
    Ask(AskCmd),
}

#[derive(Args, Debug)]
pub struct ForgetCmd {
    /// The memory's id (a turn id as `aril search --json` shows it, or a card id `c_…`).
    pub id: String,
    /// From when it no longer holds: RFC 3339, or YYYY-MM-DD (from that day's start, UTC).
    /// Default: now.
    #[arg(long, conflicts_with = "restore")]
    pub at: Option<String>,
    /// Undo a forgetting: the memory holds again.
    #[arg(long)]
    pub restore: bool,
    /// Print the memory as it now stands as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct MigrateStoreCmd {
    /// The store to copy: a data directory, or `postgres://…`.
    #[arg(long)]
    pub from: String,
    /// Where to copy it: a data directory (created if missing), or `postgres://…` (migrated
    /// first). It should be empty, or hold an earlier run of the same move.
    #[arg(long)]
    pub to: String,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct AskCmd {
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Units of context at most (default 12).
    #[arg(long)]
    pub k: Option<usize>,
    /// o200k tokens of context at most (default 2000).
    #[arg(long)]
    pub budget: Option<usize>,
    /// When the question is asked (RFC 3339, or YYYY-MM-DD for that day's end, UTC; default
    /// now): relative dates in it resolve against this.
    #[arg(long)]
    pub at: Option<String>,
    /// Recall and show the context without calling the answerer.
    #[arg(long)]
    pub context_only: bool,
    /// Print the plan, the context items and the cost as JSON.
    #[arg(long)]
    pub json: bool,
    /// The question, as the agent would ask it.
    pub question: String,
}

#[derive(Args, Debug)]
pub struct ConsolidateCmd {
    /// Encode at most this many segments.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Also retry segments whose encoding failed before.
    #[arg(long)]
    pub retry_failed: bool,
    #[command(flatten)]
    pub encode: EncodeArgs,
}

#[derive(Args, Debug)]
pub struct ServeCmd {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8420", env = "ARIL_BIND")]
    pub bind: std::net::SocketAddr,
    /// Accept requests without an API key, each acting as an admin. Loopback addresses only.
    #[arg(long)]
    pub no_auth: bool,
    /// Do not write closed segments into cards in the background, even with an encoder
    /// configured (ARIL_LLM_*); `aril consolidate` does it by hand.
    #[arg(long)]
    pub no_consolidate: bool,
    #[command(flatten)]
    pub encode: EncodeArgs,
}

#[derive(Args, Debug)]
pub struct UiCmd {
    /// Loopback address to listen on.
    #[arg(long, default_value = "127.0.0.1:8421")]
    pub bind: std::net::SocketAddr,
    /// Do not write closed segments into cards in the background, even with an encoder
    /// configured (ARIL_LLM_*); `aril consolidate` does it by hand.
    #[arg(long)]
    pub no_consolidate: bool,
}

#[derive(Args, Debug)]
pub struct ProxyCmd {
    /// The model server's OpenAI base URL, e.g. `https://api.openai.com/v1` or
    /// `http://127.0.0.1:8080/v1` (llama-server, vLLM, Ollama).
    #[arg(long, env = "ARIL_UPSTREAM_URL")]
    pub upstream: String,
    /// The upstream's API key. Without it, a proxy without keys (--no-auth) forwards the
    /// caller's own `Authorization` header; a proxy with keys sends none.
    #[arg(long, env = "ARIL_UPSTREAM_API_KEY", hide_env_values = true)]
    pub upstream_key: Option<String>,
    /// o200k tokens the memory added to the system prompt may take.
    #[arg(long, default_value_t = aril_server::proxy::DEFAULT_BUDGET)]
    pub budget: usize,
    /// Whose memory requests use when they come with an admin key (or without keys, under
    /// --no-auth) and name no `user`. A user's key always means that user.
    #[arg(long)]
    pub user: Option<String>,
    #[command(flatten)]
    pub serve: ServeCmd,
}

#[derive(Subcommand, Debug)]
pub enum KeysCmd {
    /// Create a key and print it alone on stdout (it is stored only as a hash: keep it).
    Create(KeyCreateCmd),
    /// List the stored keys (ids and grants; never the keys).
    List,
}

#[derive(Args, Debug)]
#[group(required = true, multiple = false)]
pub struct KeyCreateCmd {
    /// The user the key is bound to: it reaches this user's memories only.
    #[arg(long)]
    pub user: Option<String>,
    /// An admin key: any user's memories, and store-wide stats and reset.
    #[arg(long)]
    pub admin: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchName {
    Longmemeval,
    Locomo,
    Hotpotqa,
    /// The read path as one scope grows: stores of --sizes turns built from a LongMemEval
    /// file's sessions, each measured (ingest, bytes, open, search p50/p99, RSS, recall).
    Scale,
    /// Draw a report made with --json (given as --data) as an SVG beside it: recall against the
    /// context budget (or k), per category. Every `aril bench --json` run draws its own.
    Plot,
}

#[derive(Args, Debug)]
pub struct BenchCmd {
    /// The benchmark the file is of.
    #[arg(value_enum)]
    pub benchmark: BenchName,
    /// A file of the benchmark's official format.
    #[arg(long)]
    pub data: PathBuf,
    /// raw-session-all, raw-session-user, seci-extract, seci-hybrid, verbatim-chunks, aril or
    /// aril-llm (every benchmark but scale, which measures the engine itself).
    #[arg(long)]
    pub strategy: Option<String>,
    /// scale only: turns per store, comma-separated, with k or m (default 10k,100k,1m). Each
    /// store is kept under the cache directory; an interrupted build goes on where it stopped.
    #[arg(long, value_delimiter = ',', num_args = 1.., value_parser = aril_bench::scale::parse_size)]
    pub sizes: Option<Vec<usize>>,
    /// scale only: searches timed per size, cycling through the file's questions.
    #[arg(long)]
    pub searches: Option<usize>,
    /// scale only: measure the built store of this size in this process and print its JSON
    /// (what `aril bench scale` runs once per size, so each is measured by a fresh process).
    #[arg(long, hide = true)]
    pub measure_size: Option<usize>,
    /// Answer each question from the units the strategy ranked (needs an answerer model:
    /// ARIL_LLM_ANSWERER_* or ARIL_LLM_*) and report token F1 and BLEU-1 (LoCoMo: also its
    /// official F1).
    #[arg(long)]
    pub answer: bool,
    /// Grade the answers with a judge model too (ARIL_LLM_JUDGE_* or ARIL_LLM_*); implies
    /// --answer.
    #[arg(long)]
    pub judge: bool,
    /// aril-llm only: run one of the paper's ablations (per-turn, fixed-windows, summaries,
    /// no-state, single-list); see docs/benchmarks.md.
    #[arg(long)]
    pub ablation: Option<String>,
    /// o200k tokens of ranked units the answerer reads.
    #[arg(long, default_value_t = aril_bench::qa::DEFAULT_CONTEXT_BUDGET)]
    pub answer_budget: usize,
    /// Only the first N questions.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Cut-offs of the @k metrics, comma-separated, 1 to 300 (default: LongMemEval 5,10; LoCoMo
    /// units 5,10,20 and sessions 5,10; HotpotQA 2,5,10). The token budgets stay 1k, 2k, 4k.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub k: Option<Vec<usize>>,
    /// Write the report as JSON here too.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write each question's top 10 sessions (and, with --answer, its answer and scores) here as
    /// JSON lines, to compare question by question.
    #[arg(long)]
    pub rankings: Option<PathBuf>,
    /// Embedding cache and bench data directories (default bench/ under $ARIL_CACHE, else
    /// ~/.cache/aril/bench).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// LoCoMo only: an audit of its answer key (the format of locomo-audit's errors.json, e.g.
    /// ../shared/data/locomo/locomo_audit_errors.json). Adds the group evidence_audited: the
    /// same rankings scored against the audit's corrected evidence (with --answer / --judge also
    /// qa_audited / judge_audited, against its corrected answers). The headline stays official.
    #[arg(long)]
    pub audit: Option<PathBuf>,
    #[command(flatten)]
    pub encode: EncodeArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportFormat {
    /// A LoCoMo benchmark file (each conversation under its own user).
    Locomo,
    /// A LongMemEval file (each question's haystack under its own user).
    Longmemeval,
    /// ChatGPT's data export, `conversations.json` (the branch each conversation shows).
    Chatgpt,
    /// Claude.ai's data export, `conversations.json`.
    Claude,
    /// Claude Code's session files: one `.jsonl`, or a directory of them (~/.claude/projects).
    ClaudeCode,
    /// JSON lines of turns, `{"role", "content", "at", "session"}` (any field `aril add` takes).
    Jsonl,
}

#[derive(Args, Debug)]
pub struct ImportCmd {
    /// The file's format.
    #[arg(value_enum)]
    pub format: ImportFormat,
    /// The file (for claude-code, a session file or a directory of them).
    pub file: PathBuf,
    /// LoCoMo only: import just this conversation (sample_id); repeatable.
    #[arg(long = "conversation")]
    pub conversations: Vec<String>,
    /// Whose memory the chat exports and JSON lines go into (required for them; the benchmark
    /// files name their own users).
    #[arg(long = "user")]
    pub user: Option<String>,
    /// Narrows the scope to one agent of the user.
    #[arg(long = "agent", requires = "user")]
    pub agent: Option<String>,
    /// Narrows the scope to one run of the user.
    #[arg(long = "run", requires = "user")]
    pub run: Option<String>,
}

/// The scope flags shared by commands.
#[derive(Args, Debug, Clone)]
pub struct ScopeArgs {
    /// The user whose memory this is (every command works inside one user's scope).
    #[arg(long = "user")]
    pub user: String,
    /// Narrows the scope to one agent of the user.
    #[arg(long = "agent")]
    pub agent: Option<String>,
    /// Narrows the scope to one run (a task, an episode) of the agent or user.
    #[arg(long = "run")]
    pub run: Option<String>,
}

/// The time a question's `--at` option gives: RFC 3339, or YYYY-MM-DD for the end of that day
/// (UTC), as [`aril_engine::parse_asked_at`] reads it.
pub fn parse_at(at: Option<&str>) -> anyhow::Result<Option<chrono::DateTime<chrono::Utc>>> {
    Ok(at.map(aril_engine::parse_asked_at).transpose()?)
}

impl ScopeArgs {
    pub fn scope(&self) -> anyhow::Result<Scope> {
        Ok(Scope::new(
            self.user.clone(),
            self.agent.clone(),
            self.run.clone(),
        )?)
    }

    pub fn filter(&self) -> anyhow::Result<ScopeFilter> {
        Ok(self.scope()?.as_filter())
    }

    pub fn describe(&self) -> String {
        self.scope()
            .map(|s| s.to_string())
            .unwrap_or_else(|_| self.user.clone())
    }
}

#[derive(Args, Debug)]
pub struct AddCmd {
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Conversation the turn belongs to.
    #[arg(long, default_value = "main")]
    pub conversation: String,
    /// Session the turn belongs to inside the conversation (a chat window, a day).
    #[arg(long)]
    pub session: Option<String>,
    /// user, assistant, system or tool.
    #[arg(long, default_value = "user")]
    pub role: String,
    /// The speaker's name, when it matters more than the role.
    #[arg(long)]
    pub speaker: Option<String>,
    /// When the turn was said (RFC 3339, e.g. 2024-03-01T10:00:00Z). Default: now.
    #[arg(long)]
    pub at: Option<String>,
    /// A JSON object kept with the turn (with stdin: with each line that has none of its own),
    /// e.g. '{"source": "email"}'; returned by search, list and export.
    #[arg(long, value_name = "JSON")]
    pub metadata: Option<String>,
    /// When the memory expires: a date (2025-12-31: it lasts through that day, UTC) or RFC 3339.
    /// From then on it is never recalled or listed, and the next open or server sweep deletes it.
    #[arg(long, value_name = "WHEN")]
    pub expires: Option<String>,
    /// Make the memory immutable: an update is refused (a deletion is not).
    #[arg(long)]
    pub immutable: bool,
    /// Close the conversation's open segment after adding.
    #[arg(long)]
    pub flush: bool,
    /// The turn's verbatim text. Absent or `-`: JSON lines from stdin, one turn each, with
    /// `text` (or `content`) and any other field of a turn (an unknown one is refused with the
    /// list of known fields); the flags fill what a line leaves out.
    pub text: Option<String>,
}

#[derive(Args, Debug)]
pub struct SearchCmd {
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Units to return at most.
    #[arg(long)]
    pub k: Option<usize>,
    /// o200k tokens the results may use together.
    #[arg(long)]
    pub budget: Option<usize>,
    /// When the question is asked (RFC 3339, or YYYY-MM-DD for that day's end, UTC; default
    /// now): relative dates in it ("last week", "two days ago") focus on the turns said around
    /// then.
    #[arg(long)]
    pub at: Option<String>,
    /// Rank sessions instead of units: one result per session (its best unit), sessions that
    /// speak of the question in several turns lifted (`recall.w_sessions`).
    #[arg(long)]
    pub sessions: bool,
    /// Keep only memories that meet this filter (JSON, Mem0's language): e.g.
    /// `{"topic": "food"}`, `{"stars": {"gte": 4}}`, `{"created_at": {"gte": "2024-05-01"}}`,
    /// combined with AND / OR / NOT; operators eq, ne, in, nin, gt, gte, lt, lte, contains,
    /// icontains, and "*" for any value.
    #[arg(long, value_name = "JSON")]
    pub filter: Option<String>,
    /// Keep only turns at least this similar to the question (cosine of their own vector, 0–1;
    /// a turn of a role that is not embedded never is).
    #[arg(long)]
    pub threshold: Option<f32>,
    /// Print the results as JSON (ids, kinds, source turns, times, scores, tokens).
    #[arg(long)]
    pub json: bool,
    /// The question, as the agent would ask it.
    pub query: String,
}

#[derive(Args, Debug)]
pub struct SegmentsCmd {
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Segments to skip (the first one listed is number OFFSET + 1).
    #[arg(long, default_value_t = 0)]
    pub offset: u64,
    /// Segments to list at most (1 or more).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,
    /// Print the page as JSON: `{"total", "offset", "segments"}`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ProfileCmd {
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Print the profile as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct StatsCmd {
    /// Print the counts as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ExportCmd {
    #[command(flatten)]
    pub scope: ScopeArgs,
}

#[derive(Args, Debug)]
pub struct DeleteCmd {
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// With --session: delete only that session of this conversation (every memory said in it,
    /// with all its versions), not the whole scope.
    #[arg(long, requires = "session")]
    pub conversation: Option<String>,
    /// The session to delete (its name as stored with its turns; the inspector's timeline shows
    /// it). Needs --conversation.
    #[arg(long, requires = "conversation")]
    pub session: Option<String>,
}

#[derive(Args, Debug)]
pub struct DemoCmd {
    /// Run the demo on a LoCoMo file's first conversation instead of the built-in sample.
    #[arg(long)]
    pub locomo: Option<PathBuf>,
    /// With --locomo: the conversation (sample_id) to use.
    #[arg(long)]
    pub conversation: Option<String>,
    /// Questions to answer.
    #[arg(long, default_value_t = 5)]
    pub questions: usize,
}

/// Bounds of the encoder's reply (small local models fill whatever room they get).
#[derive(Args, Debug, Clone, Default)]
pub struct EncodeArgs {
    /// Cards per segment at most (default 12).
    #[arg(long)]
    pub max_cards: Option<usize>,
    /// Encoder reply tokens per segment at most (default 2048).
    #[arg(long)]
    pub max_tokens: Option<u32>,
}
