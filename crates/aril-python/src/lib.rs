//! The native module of the Python package (`aril._native`): an aril engine opened in process
//! over one memory (a data directory, or a PostgreSQL store), no server. Each method takes plain
//! arguments and returns JSON text, which the pure-Python layer (`python/aril/`) turns into typed
//! objects; this module adds no behaviour of its own beyond the locking below.
//!
//! Engine work runs with the interpreter detached, so Python threads really run in parallel:
//! reads (search, get, list, stats) share the engine, writes take it alone — the rule `aril
//! serve` keeps — and a write of turns holds it alone only to segment and store them (the model's
//! work and the indexing run beside reads).

mod errors;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};

use aril_engine::llm::{ChatModel, LlmError, OpenAiClient, Role};
use aril_engine::{
    AskRequest, Condition, Config, ConsolidateOptions, Engine as Inner, EngineError, MemoryEdit,
    ScopeFilter, SearchRequest, SharedEngine, StoreAt, TurnDefaults, TurnIn, ask_shared,
    consolidate_shared, parse_expiry, parse_time, parse_valid_to, recall_planned_shared,
};
use pyo3::prelude::*;
use serde::Serialize;

use errors::{ArilError, BusyError, ImmutableError, InvalidInputError, NotFoundError, invalid};

/// Every caller of the in-process engine may read every user: access control belongs to the
/// process that opened the memory.
fn everyone(_: &str) -> bool {
    true
}

/// JSON text of a result (the Python layer reads it back).
fn json<T: Serialize>(value: &T) -> PyResult<String> {
    serde_json::to_string(value).map_err(|e| ArilError::new_err(format!("encoding a result: {e}")))
}

/// When a question is asked: the RFC 3339 time given, or a date's end (UTC) as `aril ask --at`
/// reads it, else now.
fn asked(at: Option<&str>) -> PyResult<chrono::DateTime<chrono::Utc>> {
    match at {
        Some(at) => aril_engine::parse_asked_at(at).map_err(errors::to_py),
        None => Ok(chrono::Utc::now()),
    }
}

/// The condition of a `filters` argument (Mem0's filter language, as JSON text); the scope is
/// given by the arguments, so scope keys in it are refused.
fn condition(filters_json: Option<&str>) -> PyResult<Option<Condition>> {
    let Some(text) = filters_json else {
        return Ok(None);
    };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| invalid(format!("filters: {e}")))?;
    Condition::unscoped(&value).map_err(|e| invalid(format!("filters: {}", e.0)))
}

/// The scope a read or a deletion names.
fn scope(
    user_id: String,
    agent_id: Option<String>,
    run_id: Option<String>,
) -> PyResult<ScopeFilter> {
    if user_id.trim().is_empty() {
        return Err(invalid("user_id must not be empty"));
    }
    Ok(ScopeFilter {
        user_id,
        agent_id,
        run_id,
    })
}

/// The memory's engine as `consolidate` and `ask` share it: reads beside other calls, stores
/// alone, and a model called holding neither.
struct Shared<'a>(&'a RwLock<Option<Inner>>);

impl SharedEngine for Shared<'_> {
    fn read<T>(&self, f: impl FnOnce(&Inner) -> Result<T, EngineError>) -> Result<T, EngineError> {
        let guard = self
            .0
            .read()
            .map_err(|_| EngineError::Unavailable(POISONED.into()))?;
        f(guard
            .as_ref()
            .ok_or_else(|| EngineError::Unavailable(CLOSED.into()))?)
    }

    fn write<T>(
        &self,
        f: impl FnOnce(&mut Inner) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let mut guard = self
            .0
            .write()
            .map_err(|_| EngineError::Unavailable(POISONED.into()))?;
        f(guard
            .as_mut()
            .ok_or_else(|| EngineError::Unavailable(CLOSED.into()))?)
    }
}

/// An aril memory opened in this process.
#[pyclass(frozen, module = "aril._native")]
struct Engine {
    /// `None` once closed. Poisoned only by a panic inside a write (a bug): the store rolled that
    /// write back, and the memory must be opened again to rebuild what is derived from it.
    inner: RwLock<Option<Inner>>,
}

const CLOSED: &str = "this memory is closed: open it again with aril.Memory(path)";
const POISONED: &str = "an earlier call failed inside aril (a bug; the store rolled its write \
                        back): close this memory and open it again";

impl Engine {
    /// The engine behind its lock (closed or poisoned: an error that says so).
    fn shared(&self) -> Shared<'_> {
        Shared(&self.inner)
    }

    /// Runs `f` on the engine beside other reads, with the interpreter detached.
    fn read<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Inner) -> Result<T, EngineError> + Send,
    ) -> PyResult<T> {
        py.detach(|| self.shared().read(f).map_err(errors::to_py))
    }

    /// A page of a scope's list (`limit` after `offset`, at most 1,000) as JSON, with the total.
    #[allow(clippy::too_many_arguments)]
    fn page<T: Serialize + Send>(
        &self,
        py: Python<'_>,
        user_id: String,
        agent_id: Option<String>,
        run_id: Option<String>,
        offset: u64,
        limit: u64,
        list: impl FnOnce(&Inner, &ScopeFilter, u64, u64) -> Result<(Vec<T>, u64), EngineError> + Send,
    ) -> PyResult<String> {
        let filter = scope(user_id, agent_id, run_id)?;
        let (items, total) = self.read(py, |engine| {
            list(engine, &filter, offset, limit.clamp(1, 1000))
        })?;
        json(&Page { total, items })
    }

    /// Runs `f` on the engine alone, with the interpreter detached.
    fn write<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> Result<T, EngineError> + Send,
    ) -> PyResult<T> {
        py.detach(|| self.shared().write(f).map_err(errors::to_py))
    }
}

/// A page of a list, with how many there are in all.
#[derive(Serialize)]
struct Page<T> {
    total: u64,
    items: Vec<T>,
}

#[pymethods]
impl Engine {
    /// Opens (creating if needed) the memory in the data directory `path`, or in the PostgreSQL
    /// database `store` (a `postgres://` URL, migrated), with the configuration file's settings
    /// given as JSON (the keys of `aril --config FILE`).
    #[new]
    #[pyo3(signature = (path, config_json=None, store=None))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        config_json: Option<String>,
        store: Option<String>,
    ) -> PyResult<Self> {
        let config: Config = match config_json.as_deref() {
            Some(text) => serde_json::from_str(text)
                .map_err(|e| invalid(format!("invalid configuration: {e}")))?,
            None => Config::default(),
        };
        if aril_engine::llm::Endpoint::from_env_and(aril_engine::llm::Role::Embedder, &config.llm)
            .map_err(|e| invalid(e.to_string()))?
            .is_some()
        {
            return Err(invalid(
                "an embedding endpoint is configured (ARIL_LLM_EMBEDDER_* or [llm.embedder]); the \
                 Python package embeds with the local model only: unset it, or use aril serve \
                 with aril.Client",
            ));
        }
        let at = match store.as_deref() {
            None => StoreAt::Embedded,
            Some(url) => StoreAt::postgres(url).ok_or_else(|| {
                invalid(format!(
                    "store {url:?} is not a postgres:// URL (a data directory is the path)"
                ))
            })?,
        };
        let reranker = aril_engine::llm::RerankClient::from_settings(&config.llm)
            .map_err(|e| invalid(e.to_string()))?;
        let mut engine = py
            .detach(|| Inner::open_at(&path, &at, config, None))
            .map_err(errors::to_py)?;
        engine.set_reranker(reranker.map(|r| Arc::new(r) as Arc<dyn aril_engine::llm::Reranker>));
        Ok(Self {
            inner: RwLock::new(Some(engine)),
        })
    }

    /// Stores turns given as a JSON list of turn objects (the fields of `POST /v1/turns`):
    /// checked first (nothing is stored when one is bad), kept verbatim, embedded, segmented and
    /// indexed before it returns. Re-sending a turn is safe (stable ids).
    #[pyo3(signature = (turns_json, flush=false))]
    fn add(&self, py: Python<'_>, turns_json: String, flush: bool) -> PyResult<String> {
        let turns: Vec<TurnIn> = serde_json::from_str(&turns_json)
            .map_err(|e| invalid(format!("invalid turns: {e}")))?;
        if turns.is_empty() {
            return Err(invalid("no messages given"));
        }
        let now = chrono::Utc::now();
        let defaults = TurnDefaults::default();
        let mut checked = Vec::with_capacity(turns.len());
        for (i, t) in turns.into_iter().enumerate() {
            checked.push(
                t.into_turn(&defaults, now)
                    .map_err(|e| invalid(format!("message {i}: {e}")))?,
            );
        }
        let mut users: Vec<String> = checked.iter().map(|t| t.scope.user_id.clone()).collect();
        users.sort_unstable();
        users.dedup();
        // The model's work beside other reads; only the commit holds the engine alone.
        let ahead = self.read(py, |engine| engine.prepare(&checked))?;
        let stored = self.write(py, |engine| engine.store_prepared(checked, &ahead, flush))?;
        let users: Vec<&str> = users.iter().map(String::as_str).collect();
        self.read(py, |engine| engine.index_committed(&users))?;
        json(&stored)
    }

    /// Recalls what is relevant to `query` inside a scope, within `k` units and `budget` o200k
    /// tokens; `asked_at` (RFC 3339, default now) is when relative dates in it count from;
    /// `sessions` ranks sessions, one result each.
    #[pyo3(signature = (query, user_id, agent_id=None, run_id=None, k=None, budget=None, asked_at=None, sessions=false, filters_json=None, threshold=None))]
    #[allow(clippy::too_many_arguments)]
    fn search(
        &self,
        py: Python<'_>,
        query: String,
        user_id: String,
        agent_id: Option<String>,
        run_id: Option<String>,
        k: Option<usize>,
        budget: Option<usize>,
        asked_at: Option<String>,
        sessions: bool,
        filters_json: Option<String>,
        threshold: Option<f32>,
    ) -> PyResult<String> {
        if query.trim().is_empty() {
            return Err(invalid("query must not be empty"));
        }
        if let Some(k) = k.filter(|k| !(1..=1000).contains(k)) {
            return Err(invalid(format!("k must be between 1 and 1000, got {k}")));
        }
        let request = SearchRequest {
            filter: scope(user_id, agent_id, run_id)?,
            query,
            k,
            budget,
            asked_at: Some(asked(asked_at.as_deref())?),
            condition: condition(filters_json.as_deref())?,
            threshold,
        };
        let response = self.read(py, |engine| {
            if sessions {
                engine.search_sessions(&request)
            } else {
                engine.search(&request)
            }
        })?;
        json(&response)
    }

    /// One memory by id, as it stands now.
    fn get(&self, py: Python<'_>, id: String) -> PyResult<String> {
        json(&self.read(py, |engine| engine.record(&id, &everyone))?)
    }

    /// A page of a scope's memories as they stand now, oldest first, with the total; with
    /// `filters_json`, of those that meet it.
    #[pyo3(signature = (user_id, agent_id=None, run_id=None, offset=0, limit=100, filters_json=None))]
    #[allow(clippy::too_many_arguments)]
    fn get_all(
        &self,
        py: Python<'_>,
        user_id: String,
        agent_id: Option<String>,
        run_id: Option<String>,
        offset: u64,
        limit: u64,
        filters_json: Option<String>,
    ) -> PyResult<String> {
        let condition = condition(filters_json.as_deref())?;
        self.page(
            py,
            user_id,
            agent_id,
            run_id,
            offset,
            limit,
            |engine, filter, offset, limit| {
                engine.record_page(filter, condition.as_ref(), offset, limit)
            },
        )
    }

    /// Writes a memory's next version: new text and/or metadata (a JSON object replacing the
    /// current one's) and/or expiry (`clear_expiry` removes it); `at` is when it changed.
    #[pyo3(signature = (id, text=None, metadata_json=None, expires_at=None, clear_expiry=false, at=None))]
    #[allow(clippy::too_many_arguments)]
    fn update(
        &self,
        py: Python<'_>,
        id: String,
        text: Option<String>,
        metadata_json: Option<String>,
        expires_at: Option<String>,
        clear_expiry: bool,
        at: Option<String>,
    ) -> PyResult<String> {
        let metadata = metadata_json
            .map(|m| serde_json::from_str(&m).map_err(|e| invalid(format!("metadata: {e}"))))
            .transpose()?;
        let expires_at = match (expires_at, clear_expiry) {
            (Some(_), true) => {
                return Err(invalid("give expires_at or clear it, not both"));
            }
            (Some(at), false) => Some(Some(parse_expiry(&at).map_err(errors::to_py)?)),
            (None, true) => Some(None),
            (None, false) => None,
        };
        let edit = MemoryEdit {
            text,
            metadata,
            expires_at,
            valid_to: None,
            at: at
                .map(|a| parse_time(&a))
                .transpose()
                .map_err(errors::to_py)?,
        };
        json(&self.write(py, |engine| engine.update_record(&id, &edit, &everyone))?)
    }

    /// Marks a memory as no longer holding from `at` (RFC 3339 or a date; default now), or
    /// with `restore` as holding again; returns the memory as it now stands.
    #[pyo3(signature = (id, at=None, restore=false))]
    fn forget(
        &self,
        py: Python<'_>,
        id: String,
        at: Option<String>,
        restore: bool,
    ) -> PyResult<String> {
        let valid_to = match (at, restore) {
            (Some(_), true) => return Err(invalid("give at or restore, not both")),
            (Some(at), false) => Some(parse_valid_to(&at).map_err(errors::to_py)?),
            (None, false) => Some(chrono::Utc::now()),
            (None, true) => None,
        };
        json(&self.write(py, |engine| {
            engine.set_record_validity(&id, valid_to, &everyone)
        })?)
    }

    /// Deletes a memory with every version, from every file.
    fn delete(&self, py: Python<'_>, id: String) -> PyResult<String> {
        json(&self.write(py, |engine| engine.delete_record(&id, &everyone))?)
    }

    /// Deletes everything a scope holds, from every file.
    #[pyo3(signature = (user_id, agent_id=None, run_id=None))]
    fn delete_all(
        &self,
        py: Python<'_>,
        user_id: String,
        agent_id: Option<String>,
        run_id: Option<String>,
    ) -> PyResult<String> {
        let filter = scope(user_id, agent_id, run_id)?;
        json(&self.write(py, |engine| engine.delete(&filter))?)
    }

    /// Every version of a memory, first to newest.
    fn history(&self, py: Python<'_>, id: String) -> PyResult<String> {
        json(&self.read(py, |engine| engine.record_history(&id, &everyone))?)
    }

    /// A page of a scope's closed segments in store order, with the total.
    #[pyo3(signature = (user_id, agent_id=None, run_id=None, offset=0, limit=100))]
    fn segments(
        &self,
        py: Python<'_>,
        user_id: String,
        agent_id: Option<String>,
        run_id: Option<String>,
        offset: u64,
        limit: u64,
    ) -> PyResult<String> {
        self.page(
            py,
            user_id,
            agent_id,
            run_id,
            offset,
            limit,
            Inner::segments,
        )
    }

    /// The scope's stable preferences and traits (from cards; empty without them).
    #[pyo3(signature = (user_id, agent_id=None, run_id=None))]
    fn profile(
        &self,
        py: Python<'_>,
        user_id: String,
        agent_id: Option<String>,
        run_id: Option<String>,
    ) -> PyResult<String> {
        let filter = scope(user_id, agent_id, run_id)?;
        json(&self.read(py, |engine| engine.profile(&filter))?)
    }

    /// Answers a question from the memory with the language models the `ARIL_LLM_*` environment
    /// and the configuration's `[llm]` table name: one planner call (when a planner is
    /// configured; else the question is searched as asked), multi-path recall over cards and
    /// turns, one answer call. `context_only` stops before the answer (no answerer needed).
    /// Every call's tokens are recorded (`stats`). Other calls go on while a model is called.
    #[pyo3(signature = (question, user_id, agent_id=None, run_id=None, k=None, budget=None, asked_at=None, context_only=false))]
    #[allow(clippy::too_many_arguments)]
    fn ask(
        &self,
        py: Python<'_>,
        question: String,
        user_id: String,
        agent_id: Option<String>,
        run_id: Option<String>,
        k: Option<usize>,
        budget: Option<usize>,
        asked_at: Option<String>,
        context_only: bool,
    ) -> PyResult<String> {
        let request = AskRequest {
            filter: scope(user_id, agent_id, run_id)?,
            question,
            asked_at: Some(asked(asked_at.as_deref())?),
            k,
            budget,
            single_list: false,
            known_texts: Vec::new(),
        };
        let settings = self.read(py, |engine| Ok(engine.config().llm.clone()))?;
        let llm = |e: LlmError| errors::to_py(e.into());
        let planner = OpenAiClient::for_role(Role::Planner, &settings).map_err(llm)?;
        let planner = planner.as_ref().map(|p| p as &dyn ChatModel);
        let shared = self.shared();
        if context_only {
            let recalled = py.detach(|| {
                recall_planned_shared(&shared, &request, planner).map_err(errors::to_py)
            })?;
            return json(&recalled);
        }
        let answerer = OpenAiClient::required(Role::Answerer, &settings).map_err(llm)?;
        let answered =
            py.detach(|| ask_shared(&shared, &request, planner, &answerer).map_err(errors::to_py))?;
        json(&answered)
    }

    /// Writes queued segments into cards with the encoder model (`ARIL_LLM_ENCODER_*`, else
    /// `ARIL_LLM_*`): one call per segment, at most `limit` segments (default all), each reply
    /// at most `max_tokens` tokens and `max_cards` cards. Other calls go on while the encoder
    /// runs: only storing a segment's cards holds the memory alone.
    #[pyo3(signature = (limit=None, retry_failed=false, max_cards=None, max_tokens=None))]
    fn consolidate(
        &self,
        py: Python<'_>,
        limit: Option<usize>,
        retry_failed: bool,
        max_cards: Option<usize>,
        max_tokens: Option<u32>,
    ) -> PyResult<String> {
        let mut encode = aril_engine::EncodeConfig::default();
        match max_cards {
            Some(0) => return Err(invalid("max_cards must be at least 1")),
            Some(n) => encode.max_cards = n,
            None => {}
        }
        match max_tokens {
            Some(n) if n < 64 => return Err(invalid("max_tokens must be at least 64")),
            Some(n) => encode.max_tokens = n,
            None => {}
        }
        let options = ConsolidateOptions {
            limit: limit.unwrap_or(usize::MAX),
            retry_failed,
            encode,
        };
        let settings = self.read(py, |engine| Ok(engine.config().llm.clone()))?;
        let model = OpenAiClient::required(Role::Encoder, &settings)
            .map_err(|e| errors::to_py(e.into()))?;
        let report = py.detach(|| {
            consolidate_shared(
                &self.shared(),
                &model,
                &options,
                &mut |_| {},
                &AtomicBool::new(false),
            )
            .map_err(errors::to_py)
        })?;
        json(&report)
    }

    /// Store and index counts, and every language-model call's tokens.
    fn stats(&self, py: Python<'_>) -> PyResult<String> {
        json(&self.read(py, Inner::stats)?)
    }

    /// Every user with stored turns.
    fn users(&self, py: Python<'_>) -> PyResult<String> {
        json(&self.read(py, Inner::users)?)
    }

    /// Closes the memory now (releasing the data directory for other processes); later calls
    /// fail with an error that says so. Closing twice is harmless.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let mut guard = self
                .inner
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            guard.take();
        });
        Ok(())
    }
}

/// The stable id aril gives the message with this source id in this scope, conversation and
/// session: the id of the memory it starts, known before (and whether or not) it is stored.
#[pyfunction]
#[pyo3(signature = (user_id, source_id, conversation=None, session=None, agent_id=None, run_id=None))]
fn memory_id(
    user_id: String,
    source_id: String,
    conversation: Option<String>,
    session: Option<String>,
    agent_id: Option<String>,
    run_id: Option<String>,
) -> PyResult<String> {
    let turn = TurnIn {
        user_id: Some(user_id),
        agent_id,
        run_id,
        conversation,
        session,
        source_id: Some(source_id),
        // The id of a turn with a source id depends on neither its text nor its time.
        text: "-".into(),
        ..TurnIn::default()
    };
    let turn = turn
        .into_turn(&TurnDefaults::default(), chrono::Utc::now())
        .map_err(errors::to_py)?;
    Ok(turn.id().0)
}

/// The module `aril._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Engine>()?;
    m.add_function(wrap_pyfunction!(memory_id, m)?)?;
    m.add("ArilError", py.get_type::<ArilError>())?;
    m.add("InvalidInputError", py.get_type::<InvalidInputError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("ImmutableError", py.get_type::<ImmutableError>())?;
    m.add("BusyError", py.get_type::<BusyError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
