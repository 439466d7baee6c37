//! Moving a store between backends (the embedded SQLite file and PostgreSQL, either way) with
//! nothing lost: [`copy`] reads the source table by table in pages ([`Store::export`]) and writes
//! each page in one transaction of the target ([`Store::import`], which leaves rows it already
//! has alone), so an interrupted move finishes when run again; [`fingerprint`] then counts and
//! hashes every table of both stores in the same canonical form, and the two must be equal.
//!
//! What a move keeps: turns (with their ingest times, to the microsecond, PostgreSQL's
//! precision), segments and where each stands in the consolidation queue (a claim in flight is
//! not moved), open segments, the embedding cache, memory versions, cards with their links,
//! structured indexes and vectors, the encoders' states, the token accounting and the API key
//! hashes. What is derived is rebuilt by the target: its store order, its lexical and vector
//! indexes.

use std::sync::atomic::{AtomicBool, Ordering};

use aril_core::{Card, Scope};
use chrono::{DateTime, SubsecRound, Utc};
use serde::Serialize;

use crate::{
    ApiKeyRecord, CardVectors, Embedding, LlmCall, OpenSegmentRecord, RevisionRecord,
    SegmentRecord, Store, StoreError, TurnRecord,
};

/// The tables a move carries, in the order it carries them (what a row refers to comes first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    /// First: a PostgreSQL target indexes each turn and segment with its cached vectors.
    Embeddings,
    Turns,
    Segments,
    OpenSegments,
    Revisions,
    Cards,
    EncoderStates,
    LlmCalls,
    ApiKeys,
}

impl Table {
    pub const ALL: [Table; 9] = [
        Table::Embeddings,
        Table::Turns,
        Table::Segments,
        Table::OpenSegments,
        Table::Revisions,
        Table::Cards,
        Table::EncoderStates,
        Table::LlmCalls,
        Table::ApiKeys,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Table::Turns => "turns",
            Table::Segments => "segments",
            Table::OpenSegments => "open_segments",
            Table::Embeddings => "embeddings",
            Table::Revisions => "revisions",
            Table::Cards => "cards",
            Table::EncoderStates => "encoder_states",
            Table::LlmCalls => "llm_calls",
            Table::ApiKeys => "api_keys",
        }
    }

    /// Tables exported whole, in one page: small, or without a natural key to resume by
    /// (`llm_calls`, whose rows the target must not hold twice).
    fn whole(self) -> bool {
        matches!(
            self,
            Table::OpenSegments | Table::EncoderStates | Table::LlmCalls | Table::ApiKeys
        )
    }
}

/// Where an export page starts: after this position in the table's own order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cursor {
    Start,
    /// After a store order (`seq`).
    Seq(i64),
    /// After a key (`(model, text_hash)` of an embedding, a revision's turn id).
    Key(String, String),
}

impl Cursor {
    /// The store order a page starts after (0 from the start).
    pub(crate) fn seq(&self) -> i64 {
        match self {
            Cursor::Seq(s) => *s,
            _ => 0,
        }
    }

    /// The key a page starts after (empty from the start).
    pub(crate) fn key(&self) -> (String, String) {
        match self {
            Cursor::Key(a, b) => (a.clone(), b.clone()),
            _ => (String::new(), String::new()),
        }
    }
}

/// A page of turns as rows: the turns read from the store, with their `(id, text hash)` as the
/// page listed them (both backends list, then read through [`Store::turns`]).
pub(crate) fn turn_rows(
    store: &dyn Store,
    keys: Vec<(String, String)>,
) -> Result<Vec<Row>, StoreError> {
    let ids: Vec<aril_core::TurnId> = keys
        .iter()
        .map(|(id, _)| aril_core::TurnId(id.clone()))
        .collect();
    let hashes: std::collections::HashMap<String, String> = keys.into_iter().collect();
    Ok(store
        .turns(&ids)?
        .into_iter()
        .map(|turn| {
            let text_hash = hashes.get(&turn.id.0).cloned().unwrap_or_default();
            Row::Turn(TurnRecord { turn, text_hash })
        })
        .collect())
}

/// A listed segment: id, store order, text hash, place in the queue.
pub(crate) type SegmentMeta = (String, i64, String, Option<QueueState>);

/// A page of segments as rows, read through [`Store::segments`].
pub(crate) fn segment_rows(
    store: &dyn Store,
    meta: Vec<SegmentMeta>,
) -> Result<Vec<Row>, StoreError> {
    let ids: Vec<aril_core::SegmentId> = meta
        .iter()
        .map(|m| aril_core::SegmentId(m.0.clone()))
        .collect();
    let mut by_id: std::collections::HashMap<String, aril_core::Segment> = store
        .segments(&ids)?
        .into_iter()
        .map(|s| (s.id.0.clone(), s))
        .collect();
    Ok(meta
        .into_iter()
        .filter_map(|(id, seq, text_hash, queue)| {
            by_id.remove(&id).map(|segment| Row::Segment {
                seq,
                record: SegmentRecord { segment, text_hash },
                queue,
            })
        })
        .collect())
}

/// A page of cards as rows, read through [`Store::cards_by_id`], with their vectors.
pub(crate) fn card_rows(
    store: &dyn Store,
    keys: Vec<(String, i64)>,
    mut vectors: std::collections::HashMap<String, Vec<CardVectors>>,
) -> Result<Vec<Row>, StoreError> {
    let ids: Vec<aril_core::CardId> = keys
        .iter()
        .map(|(id, _)| aril_core::CardId(id.clone()))
        .collect();
    let seqs: std::collections::HashMap<String, i64> = keys.into_iter().collect();
    Ok(store
        .cards_by_id(&ids)?
        .into_iter()
        .map(|card| Row::Card {
            seq: seqs.get(&card.id.0).copied().unwrap_or_default(),
            vectors: vectors.remove(&card.id.0).unwrap_or_default(),
            card,
        })
        .collect())
}

/// What an import writes through the ingest writer (turns, segments, cache entries, memory
/// versions), and the queue places to restore after it.
pub(crate) fn ingest_part(
    rows: &[Row],
) -> (crate::WriteBatch, Vec<(&aril_core::SegmentId, &QueueState)>) {
    let mut batch = crate::WriteBatch::default();
    let mut queues = Vec::new();
    for row in rows {
        match row {
            Row::Turn(t) => batch.turns.push(t.clone()),
            Row::Segment { record, queue, .. } => {
                batch.segments.push(record.clone());
                if let Some(q) = queue {
                    queues.push((&record.segment.id, q));
                }
            }
            Row::Embedding(e) => batch.embeddings.push(e.clone()),
            Row::Revision(r) => batch.revisions.push(r.clone()),
            _ => {}
        }
    }
    (batch, queues)
}

/// Where a segment stands in the consolidation queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueState {
    /// `pending`, `done` or `failed`.
    pub status: String,
    pub reason: Option<String>,
    pub attempts: i64,
}

/// One row of a store as a move carries it.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    /// `turn.seq` is the source's store order (the target assigns its own, in the same order).
    Turn(TurnRecord),
    Segment {
        seq: i64,
        record: SegmentRecord,
        queue: Option<QueueState>,
    },
    /// `read_version` is the source's version.
    OpenSegment(OpenSegmentRecord),
    Embedding(Embedding),
    Revision(RevisionRecord),
    Card {
        seq: i64,
        card: Card,
        vectors: Vec<CardVectors>,
    },
    EncoderState {
        scope: Scope,
        conversation: String,
        state: serde_json::Value,
    },
    /// `o200k` is false for calls recorded before o200k counts were kept (their counts are 0
    /// here and stay absent in the target).
    LlmCall {
        call: LlmCall,
        o200k: bool,
    },
    ApiKey(ApiKeyRecord),
}

impl Row {
    /// Where the next page starts after this row.
    fn cursor(&self) -> Cursor {
        match self {
            Row::Turn(t) => Cursor::Seq(t.turn.seq),
            Row::Segment { seq, .. } | Row::Card { seq, .. } => Cursor::Seq(*seq),
            Row::Embedding(e) => Cursor::Key(e.model.clone(), e.text_hash.clone()),
            Row::Revision(r) => Cursor::Key(r.turn.0.clone(), String::new()),
            _ => Cursor::Start,
        }
    }

    /// The row in canonical form for hashing: what the target must hold the same, without what
    /// each store assigns itself (store order, open-segment versions), times to the microsecond
    /// and JSON with sorted keys.
    fn canonical(&self) -> Result<String, StoreError> {
        let micros = |t: &DateTime<Utc>| t.trunc_subsecs(6).to_rfc3339();
        let json = |v: &serde_json::Value| canonical_json(v).to_string();
        let text = match self {
            Row::Turn(r) => {
                let t = &r.turn;
                let mut t2 = t.turn.clone();
                t2.event_time = t2.event_time.map(|e| e.trunc_subsecs(6));
                format!(
                    "{}|{}|{}|{}",
                    t.id,
                    serde_json::to_string(&t2).map_err(corrupt)?,
                    micros(&t.ingest_time),
                    r.text_hash
                )
            }
            Row::Segment { record, queue, .. } => {
                let mut s = record.segment.clone();
                s.start_time = s.start_time.map(|t| t.trunc_subsecs(6));
                s.end_time = s.end_time.map(|t| t.trunc_subsecs(6));
                format!(
                    "{}|{}|{}",
                    serde_json::to_string(&s).map_err(corrupt)?,
                    record.text_hash,
                    serde_json::to_string(queue).map_err(corrupt)?
                )
            }
            Row::OpenSegment(o) => format!(
                "{}|{}|{}",
                o.scope.key(),
                o.conversation,
                json(&serde_json::to_value(&o.state).map_err(corrupt)?)
            ),
            Row::Embedding(e) => format!(
                "{}|{}|{}|{}",
                e.model,
                e.text_hash,
                e.pieces,
                blake3::hash(&crate::codec::encode(&e.chunks)).to_hex()
            ),
            Row::Revision(r) => format!("{}|{}|{}", r.turn, r.memory, r.version),
            Row::Card { card, vectors, .. } => {
                let mut c = card.clone();
                if let Some(t) = &mut c.time {
                    t.start = t.start.map(|s| s.trunc_subsecs(6));
                    t.end = t.end.map(|e| e.trunc_subsecs(6));
                }
                let mut vs: Vec<String> = vectors
                    .iter()
                    .map(|v| {
                        format!(
                            "{}:{}",
                            v.model,
                            blake3::hash(&crate::codec::encode(&v.chunks)).to_hex()
                        )
                    })
                    .collect();
                vs.sort();
                format!(
                    "{}|{}",
                    serde_json::to_string(&c).map_err(corrupt)?,
                    vs.join(",")
                )
            }
            Row::EncoderState {
                scope,
                conversation,
                state,
            } => format!("{}|{}|{}", scope.key(), conversation, json(state)),
            Row::LlmCall { call: c, o200k } => format!(
                "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
                o200k,
                micros(&c.at),
                c.purpose,
                c.model,
                c.prompt_tokens,
                c.completion_tokens,
                c.counted_locally,
                c.prompt_o200k,
                c.completion_o200k,
                c.latency_ms,
                c.attempts
            ),
            Row::ApiKey(k) => format!(
                "{}|{}|{:?}|{}|{}",
                k.id,
                k.key_hash,
                k.user_id,
                k.admin,
                micros(&k.created)
            ),
        };
        Ok(text)
    }
}

fn corrupt(e: serde_json::Error) -> StoreError {
    StoreError::Corrupt(format!("a row does not serialise: {e}"))
}

/// JSON with every object's keys sorted (PostgreSQL's `jsonb` keeps its own order).
fn canonical_json(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for k in keys {
                out.insert(k.clone(), canonical_json(&map[k]));
            }
            serde_json::Value::Object(out)
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(canonical_json).collect())
        }
        other => other.clone(),
    }
}

/// Rows per page of a move (one target transaction each).
pub const PAGE: usize = 500;

/// A table's rows counted and hashed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableSum {
    pub table: Table,
    pub rows: u64,
    /// BLAKE3 over the rows' canonical forms in the table's order.
    pub hash: String,
}

/// Every table of a store counted and hashed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fingerprint {
    pub tables: Vec<TableSum>,
}

/// Where a move stands, for progress bars.
#[derive(Debug, Clone, Copy)]
pub struct MoveProgress {
    pub table: Table,
    /// Rows of this table read so far.
    pub rows: u64,
}

/// What a move did.
#[derive(Debug, Clone, Serialize)]
pub struct MoveReport {
    /// Rows read from the source, per table.
    pub read: Vec<(Table, u64)>,
    pub interrupted: bool,
}

/// Every row of `table` in its order, page by page.
fn for_each_page(
    store: &dyn Store,
    table: Table,
    mut f: impl FnMut(Vec<Row>) -> Result<bool, StoreError>,
) -> Result<bool, StoreError> {
    let mut cursor = Cursor::Start;
    loop {
        let limit = if table.whole() { usize::MAX } else { PAGE };
        let page = store.export(table, &cursor, limit)?;
        let Some(last) = page.last() else {
            return Ok(true);
        };
        let next = last.cursor();
        let done = table.whole() || page.len() < PAGE;
        if !f(page)? {
            return Ok(false);
        }
        if done {
            return Ok(true);
        }
        cursor = next;
    }
}

/// Copies every row of `from` that `to` lacks, table by table, one transaction per page. Checks
/// `cancel` between pages; what was committed stays and the next run goes on from there. The
/// token accounting is copied in one transaction, and only into a target that holds none.
pub fn copy(
    from: &dyn Store,
    to: &mut dyn Store,
    progress: &mut dyn FnMut(MoveProgress),
    cancel: &AtomicBool,
) -> Result<MoveReport, StoreError> {
    let mut report = MoveReport {
        read: Vec::new(),
        interrupted: false,
    };
    for table in Table::ALL {
        let mut rows = 0u64;
        if table == Table::LlmCalls {
            let mut held = 0u64;
            for_each_page(to, Table::LlmCalls, |page| {
                held += page.len() as u64;
                Ok(true)
            })?;
            if held > 0 {
                // Either a finished earlier move, or calls of the target's own: the fingerprint
                // tells which.
                report.read.push((table, 0));
                continue;
            }
        }
        let finished = for_each_page(from, table, |page| {
            if cancel.load(Ordering::SeqCst) {
                return Ok(false);
            }
            rows += page.len() as u64;
            to.import(&page)?;
            progress(MoveProgress { table, rows });
            Ok(true)
        })?;
        report.read.push((table, rows));
        if !finished {
            report.interrupted = true;
            return Ok(report);
        }
    }
    Ok(report)
}

/// Counts and hashes every table of a store (see [`Row::canonical`]); two stores that hold the
/// same memory have the same fingerprint, whatever their backends.
pub fn fingerprint(store: &dyn Store) -> Result<Fingerprint, StoreError> {
    let mut tables = Vec::with_capacity(Table::ALL.len());
    for table in Table::ALL {
        let mut hasher = blake3::Hasher::new();
        let mut rows = 0u64;
        let mut canon: Vec<String> = Vec::new();
        for_each_page(store, table, |page| {
            for row in &page {
                canon.push(row.canonical()?);
            }
            rows += page.len() as u64;
            Ok(true)
        })?;
        // Tables without a store order of their own are hashed in canonical order.
        if table.whole() {
            canon.sort();
        }
        for c in &canon {
            hasher.update(c.as_bytes());
            hasher.update(b"\n");
        }
        tables.push(TableSum {
            table,
            rows,
            hash: hasher.finalize().to_hex().to_string(),
        });
    }
    Ok(Fingerprint { tables })
}
