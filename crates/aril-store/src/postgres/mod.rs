//! The PostgreSQL store: the same tables and the same guarantees as the embedded SQLite store, in
//! a database that several aril processes can share. Every write method is one transaction, and
//! PostgreSQL's commit is durable when it returns (`synchronous_commit` on, its default).
//!
//! The schema is versioned by refinery migrations (`migrations/postgres/`). [`PgStore::migrate`]
//! applies them (`aril --store postgres://… migrate`); [`PgStore::open`] refuses a database whose
//! schema is missing, older or newer than this build, with what to do.
//!
//! Deletion: rows are deleted in the transaction, then the touched tables are vacuumed, so the
//! deleted text leaves the tables' pages; what PostgreSQL's WAL, replicas and backups still hold is
//! the operator's to manage (see `docs/postgres.md`).

mod backfill;
mod cards;
mod inspect;
pub(crate) mod migrate;
mod search;
mod transfer;

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use aril_core::{
    Card, CardId, CloseReason, Lifecycle, Metadata, Narrowing, NewTurn, Role, Scope, ScopeFilter,
    Segment, SegmentId, Turn, TurnId, render_line,
};
use aril_segment::OpenSegment;
use chrono::{DateTime, Utc};
use postgres::types::ToSql;
use postgres::{Client, GenericClient, NoTls, Row, Transaction};

use crate::{
    ApiKeyRecord, CardBatch, CardLookup, CardQuery, CardVectors, CommitReport, DailyTurns,
    DailyUsage, DeleteReport, Embedding, LlmCall, LlmUsage, Neighbourhood, OpenRead, ScopeSummary,
    Store, StoreError, StoreStats, StoredChunk, TurnDeletion, UnitKind, UnitText, UnitVectors,
    WriteBatch, codec,
};

pub use migrate::PG_SCHEMA_VERSION;
pub use search::PgSearch;

/// The text of ids (`TurnId`, `SegmentId`, `CardId`), for an `= ANY($n)` parameter.
macro_rules! texts {
    ($ids:expr) => {
        $ids.iter().map(|i| i.0.clone()).collect::<Vec<String>>()
    };
}

/// The PostgreSQL implementation of [`Store`].
pub struct PgStore {
    /// The writers' connection (`&mut self`; the mutex only makes the store `Sync`). `None`
    /// only while being dropped.
    client: Mutex<Option<Client>>,
    /// Connections for readers (`&self`), one per call at a time, so readers on several threads
    /// query at once. `None` only while being dropped.
    readers: Option<r2d2::Pool<Connector>>,
    /// The URL without its password, for messages.
    shown: String,
}

/// A reader's connection while one call holds it; back to the pool when dropped.
pub(super) type Conn = r2d2::PooledConnection<Connector>;

/// A connection from the readers' pool (`None`: the store is being dropped).
pub(super) fn pool_conn(readers: Option<&r2d2::Pool<Connector>>) -> Result<Conn, StoreError> {
    readers
        .ok_or_else(|| StoreError::ReadConnection("the store is being closed".into()))?
        .get()
        .map_err(|e| StoreError::ReadConnection(e.to_string()))
}

/// Opens the readers' connections as [`connect`] does.
pub(super) struct Connector {
    url: String,
}

impl r2d2::ManageConnection for Connector {
    type Connection = Client;
    type Error = StoreError;

    fn connect(&self) -> Result<Client, StoreError> {
        connect(&self.url)
    }

    fn is_valid(&self, client: &mut Client) -> Result<(), StoreError> {
        Ok(client.batch_execute("")?)
    }

    fn has_broken(&self, client: &mut Client) -> bool {
        client.is_closed()
    }
}

/// Readers connected at once at most; one more waits for a free connection.
const MAX_READERS: u32 = 8;

/// A URL as it may be shown: without a password.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let auth = &url[scheme + 3..at];
            match auth.find(':') {
                Some(colon) => {
                    format!("{}{}:***{}", &url[..scheme + 3], &auth[..colon], &url[at..])
                }
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// Connects on a thread of its own: the sync client blocks on its own runtime, which panics when
/// the caller is inside an async context (queries then belong on a blocking thread, as every
/// engine call does).
pub(crate) fn connect(url: &str) -> Result<Client, StoreError> {
    let mut client = std::thread::scope(|s| {
        s.spawn(|| Client::connect(url, NoTls))
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
    .map_err(|error| StoreError::Connect {
        url: redact(url),
        error,
    })?;
    // HNSW scans go on past the first candidates until a scope filter has kept enough rows
    // (pgvector 0.8); results are re-sorted by aril, so relaxed order is enough.
    client.batch_execute("SET hnsw.iterative_scan = relaxed_order; SET hnsw.ef_search = 100;")?;
    Ok(client)
}

impl PgStore {
    /// Connects and checks that the schema is this build's; never changes the schema.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let mut client = connect(url)?;
        migrate::check(&mut client, &redact(url))?;
        let readers = r2d2::Pool::builder()
            .max_size(MAX_READERS)
            .min_idle(Some(0))
            .idle_timeout(Some(Duration::from_secs(60)))
            .connection_timeout(Duration::from_secs(30))
            .test_on_check_out(false)
            .build_unchecked(Connector {
                url: url.to_string(),
            });
        Ok(Self {
            client: Mutex::new(Some(client)),
            readers: Some(readers),
            shown: redact(url),
        })
    }

    /// Applies the migrations this build has that the database lacks (one at a time, under an
    /// advisory lock, so concurrent servers do not race); returns the schema version now.
    pub fn migrate(url: &str) -> Result<i64, StoreError> {
        let mut client = connect(url)?;
        migrate::apply(&mut client, &redact(url))
    }

    /// A connection for one reader call, from the pool.
    pub(super) fn conn(&self) -> Result<Conn, StoreError> {
        pool_conn(self.readers.as_ref())
    }

    /// The writers' connection. A write that panicked mid-transaction left it to the `postgres`
    /// client, which rolls back an unfinished transaction when it is dropped.
    pub(super) fn writer(&mut self) -> &mut Client {
        self.client
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
            .expect("the connection is only taken when the store is dropped")
    }

    /// The URL this store is connected to, without a password.
    pub fn url(&self) -> &str {
        &self.shown
    }

    /// Vacuums tables after a deletion, so deleted rows leave their pages (outside any
    /// transaction, as VACUUM requires).
    fn vacuum(&self, tables: &[&str]) -> Result<(), StoreError> {
        let mut client = self.conn()?;
        for t in tables {
            client.batch_execute(&format!("VACUUM {t}"))?;
        }
        Ok(())
    }

    fn segments_where(
        &self,
        clause: &str,
        args: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Segment>, StoreError> {
        let mut client = self.conn()?;
        segments_where(&mut *client, clause, args)
    }
}

impl Drop for PgStore {
    /// The sync client closes its connection by blocking on its own runtime, which panics inside
    /// an async context (a server dropping its engine): the connections are closed on a thread
    /// of their own.
    fn drop(&mut self) {
        let client = self
            .client
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let readers = self.readers.take();
        let _ = std::thread::spawn(move || drop((client, readers))).join();
    }
}

/// Scope columns at `at..at + 3` (user, agent, run; empty text for none).
fn scope_at(r: &Row, at: usize) -> Result<Scope, StoreError> {
    let opt = |s: String| if s.is_empty() { None } else { Some(s) };
    Ok(Scope {
        user_id: r.try_get(at)?,
        agent_id: opt(r.try_get(at + 1)?),
        run_id: opt(r.try_get(at + 2)?),
    })
}

/// The condition a scope filter sets on the scope columns of `alias` (e.g. `"c."`), with its
/// parameters numbered from `$first`.
fn filter_clause(alias: &str, filter: &ScopeFilter, first: usize) -> (String, Vec<String>) {
    let mut clause = format!("{alias}user_id = ${first}");
    let mut args = vec![filter.user_id.clone()];
    if let Some(a) = &filter.agent_id {
        args.push(a.clone());
        clause.push_str(&format!(
            " AND {alias}agent_id = ${}",
            first + args.len() - 1
        ));
    }
    if let Some(r) = &filter.run_id {
        args.push(r.clone());
        clause.push_str(&format!(" AND {alias}run_id = ${}", first + args.len() - 1));
    }
    (clause, args)
}

fn params(args: &[String]) -> Vec<&(dyn ToSql + Sync)> {
    args.iter().map(|a| a as &(dyn ToSql + Sync)).collect()
}

fn segments_where(
    client: &mut impl GenericClient,
    clause: &str,
    args: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Segment>, StoreError> {
    let rows = client.query(
        &format!(
            "SELECT id, user_id, agent_id, run_id, conversation, boundary_score, reason, tokens, \
             start_time, end_time FROM segments WHERE {clause} ORDER BY seq"
        ),
        args,
    )?;
    let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    let mut links: HashMap<String, Vec<TurnId>> = HashMap::new();
    for r in client.query(
        "SELECT segment_id, turn_id FROM segment_turns WHERE segment_id = ANY($1) \
         ORDER BY segment_id, ord",
        &[&ids],
    )? {
        links.entry(r.get(0)).or_default().push(TurnId(r.get(1)));
    }
    rows.iter()
        .map(|r| {
            let id: String = r.try_get(0)?;
            let reason: String = r.try_get(6)?;
            Ok(Segment {
                turns: links.remove(&id).unwrap_or_default(),
                scope: scope_at(r, 1)?,
                conversation: r.try_get(4)?,
                boundary_score: r.try_get::<_, f64>(5)? as f32,
                reason: CloseReason::parse(&reason).ok_or_else(|| {
                    StoreError::Corrupt(format!("unknown segment close reason {reason:?}"))
                })?,
                tokens: r.try_get::<_, i64>(7)? as u32,
                start_time: r.try_get(8)?,
                end_time: r.try_get(9)?,
                id: SegmentId(id),
            })
        })
        .collect()
}

/// The columns [`turn_from_row`] reads, in its order.
pub(super) const TURN_COLUMNS: &str = "id, seq, user_id, agent_id, run_id, conversation, session, \
     role, speaker, text, event_time, ingest_time, source_id, metadata::text, expires_at, immutable, \
     valid_to";

/// A turn from a row that starts with [`TURN_COLUMNS`] (17 columns).
fn turn_from_row(r: &Row) -> Result<Turn, StoreError> {
    let role: String = r.try_get(7)?;
    let metadata: Option<String> = r.try_get(13)?;
    Ok(Turn {
        id: TurnId(r.try_get(0)?),
        seq: r.try_get(1)?,
        turn: NewTurn {
            scope: scope_at(r, 2)?,
            conversation: r.try_get(5)?,
            session: r.try_get(6)?,
            role: Role::parse(&role).map_err(|e| StoreError::Corrupt(e.to_string()))?,
            speaker: r.try_get(8)?,
            text: r.try_get(9)?,
            event_time: r.try_get(10)?,
            source_id: r.try_get(12)?,
            metadata: crate::stored_metadata(metadata.as_deref())?,
            lifecycle: Lifecycle {
                expires_at: r.try_get(14)?,
                immutable: r.try_get(15)?,
                valid_to: r.try_get(16)?,
            },
        },
        ingest_time: r.try_get(11)?,
    })
}

/// Takes, first thing in a write transaction, the advisory locks of `users` that the postings
/// triggers take when they count words (one per user, in user order, held to the commit): a
/// writer then never waits for them while holding row locks another writer of the same user
/// waits for, so writers of one user cannot deadlock on the counters.
pub(super) fn lock_users<'a>(
    tx: &mut impl GenericClient,
    users: impl IntoIterator<Item = &'a str>,
) -> Result<(), StoreError> {
    let users: Vec<&str> = users.into_iter().collect();
    if users.is_empty() {
        return Ok(());
    }
    tx.execute(
        "SELECT pg_advisory_xact_lock(1634888044, hashtext(u)) \
         FROM (SELECT DISTINCT u FROM unnest($1::TEXT[]) u ORDER BY u) s",
        &[&users],
    )?;
    Ok(())
}

/// The users of the turns `turns`, segments `segments` and cards `cards` as stored.
fn users_of(
    tx: &mut impl GenericClient,
    turns: &[String],
    segments: &[String],
    cards: &[String],
) -> Result<Vec<String>, StoreError> {
    Ok(tx
        .query(
            "SELECT user_id FROM turns WHERE id = ANY($1) \
             UNION SELECT user_id FROM segments WHERE id = ANY($2) \
             UNION SELECT user_id FROM cards WHERE id = ANY($3)",
            &[&turns, &segments, &cards],
        )?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?)
}

/// Writes a batch inside an open transaction.
pub(super) fn write_batch(
    tx: &mut Transaction<'_>,
    batch: &WriteBatch,
) -> Result<CommitReport, StoreError> {
    let mut report = CommitReport::default();
    lock_users(
        tx,
        batch
            .turns
            .iter()
            .map(|r| r.turn.turn.scope.user_id.as_str())
            .chain(
                batch
                    .segments
                    .iter()
                    .map(|r| r.segment.scope.user_id.as_str()),
            )
            .chain(batch.open_segments.iter().map(|r| r.scope.user_id.as_str())),
    )?;
    // The open segments first: a writer that lost the race fails before writing anything else,
    // and the winner holds the rows' locks until it commits.
    for rec in &batch.open_segments {
        write_open_segment(tx, rec)?;
    }
    let mut added_turns: Vec<&crate::TurnRecord> = Vec::new();
    let mut added_segments: Vec<String> = Vec::new();
    let insert_turn = tx.prepare(
        "INSERT INTO turns (id, user_id, agent_id, run_id, conversation, session, role, speaker, \
         text, text_hash, event_time, ingest_time, source_id, metadata, expires_at, immutable, \
         valid_to) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::text::jsonb, $15, \
         $16, $17) \
         ON CONFLICT (id) DO NOTHING",
    )?;
    for rec in &batch.turns {
        let t = &rec.turn.turn;
        let n = tx.execute(
            &insert_turn,
            &[
                &rec.turn.id.0,
                &t.scope.user_id,
                &t.scope.agent_id.as_deref().unwrap_or(""),
                &t.scope.run_id.as_deref().unwrap_or(""),
                &t.conversation,
                &t.session,
                &t.role.as_str(),
                &t.speaker,
                &t.text,
                &rec.text_hash,
                &t.event_time,
                &rec.turn.ingest_time,
                &t.source_id,
                &t.metadata.as_ref().map(Metadata::to_json),
                &t.lifecycle.expires_at,
                &t.lifecycle.immutable,
                &t.lifecycle.valid_to,
            ],
        )?;
        if n == 1 {
            report.turns_added += 1;
            added_turns.push(rec);
        } else {
            report.turns_skipped += 1;
        }
    }
    let insert_segment = tx.prepare(
        "INSERT INTO segments (id, user_id, agent_id, run_id, conversation, boundary_score, \
         reason, tokens, start_time, end_time, text_hash) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING",
    )?;
    let insert_link =
        tx.prepare("INSERT INTO segment_turns (segment_id, ord, turn_id) VALUES ($1, $2, $3)")?;
    for rec in &batch.segments {
        let s = &rec.segment;
        let n = tx.execute(
            &insert_segment,
            &[
                &s.id.0,
                &s.scope.user_id,
                &s.scope.agent_id.as_deref().unwrap_or(""),
                &s.scope.run_id.as_deref().unwrap_or(""),
                &s.conversation,
                &(s.boundary_score as f64),
                &s.reason.as_str(),
                &(s.tokens as i64),
                &s.start_time,
                &s.end_time,
                &rec.text_hash,
            ],
        )?;
        if n == 1 {
            report.segments_added += 1;
            added_segments.push(s.id.0.clone());
            tx.execute(
                "INSERT INTO consolidation (segment_id, status) VALUES ($1, 'pending') \
                 ON CONFLICT DO NOTHING",
                &[&s.id.0],
            )?;
            for (ord, turn) in s.turns.iter().enumerate() {
                tx.execute(&insert_link, &[&s.id.0, &(ord as i32), &turn.0])?;
            }
        }
    }
    let insert_embedding = tx.prepare(
        "INSERT INTO embeddings (model, text_hash, pieces, chunks) VALUES ($1, $2, $3, $4) \
         ON CONFLICT DO NOTHING",
    )?;
    for e in &batch.embeddings {
        tx.execute(
            &insert_embedding,
            &[
                &e.model,
                &e.text_hash,
                &(e.pieces as i32),
                &codec::encode(&e.chunks),
            ],
        )?;
    }
    for r in &batch.revisions {
        tx.execute(
            "INSERT INTO revisions (turn_id, memory_id, version) VALUES ($1, $2, $3) \
             ON CONFLICT (turn_id) DO NOTHING",
            &[&r.turn.0, &r.memory.0, &(r.version as i32)],
        )?;
    }
    // Searchable in the same commit: BM25 texts and chunk vector rows.
    let mut changed = search::index_turn_records(tx, &added_turns)?;
    let added_ids: Vec<TurnId> = added_turns.iter().map(|r| r.turn.id.clone()).collect();
    let windows = crate::windows_widened(&added_ids, |ids| {
        search::neighbourhoods(tx, &texts!(ids), aril_core::WINDOW_SPAN)
    })?;
    changed.extend(search::set_windows(tx, &windows)?);
    changed.sort();
    changed.dedup();
    search::post_turns(tx, &changed)?;
    search::index_segments(tx, &added_segments)?;
    Ok(report)
}

/// Writes an open segment if the store still holds the version the writer read (0: none, or a
/// row still at 0); else [`StoreError::Conflict`].
fn write_open_segment(
    tx: &mut Transaction<'_>,
    rec: &crate::OpenSegmentRecord,
) -> Result<(), StoreError> {
    let state = serde_json::to_value(&rec.state)
        .map_err(|e| StoreError::Corrupt(format!("open segment state: {e}")))?;
    let key: [&(dyn ToSql + Sync); 4] = [
        &rec.scope.user_id,
        &rec.scope.agent_id.as_deref().unwrap_or(""),
        &rec.scope.run_id.as_deref().unwrap_or(""),
        &rec.conversation,
    ];
    let mut args: Vec<&(dyn ToSql + Sync)> = key.to_vec();
    args.push(&state);
    let n = if rec.read_version == 0 {
        tx.execute(
            "INSERT INTO open_segments (user_id, agent_id, run_id, conversation, state, version) \
             VALUES ($1, $2, $3, $4, $5, 1) ON CONFLICT (user_id, agent_id, run_id, conversation) \
             DO UPDATE SET state = excluded.state, version = 1 WHERE open_segments.version = 0",
            &args,
        )?
    } else {
        args.push(&rec.read_version);
        tx.execute(
            "UPDATE open_segments SET state = $5, version = $6 + 1 WHERE user_id = $1 \
             AND agent_id = $2 AND run_id = $3 AND conversation = $4 AND version = $6",
            &args,
        )?
    };
    if n == 1 {
        Ok(())
    } else {
        Err(StoreError::Conflict(crate::describe_open(rec)))
    }
}

/// Drops the cache entries of the given text hashes that no turn or segment uses any more.
fn drop_unused_embeddings(tx: &mut Transaction<'_>, hashes: &[String]) -> Result<u64, StoreError> {
    Ok(tx.execute(
        "DELETE FROM embeddings e WHERE e.text_hash = ANY($1) \
         AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.text_hash = e.text_hash) \
         AND NOT EXISTS (SELECT 1 FROM segments s WHERE s.text_hash = e.text_hash)",
        &[&hashes],
    )?)
}

/// The tables of turns and segments a deletion may touch, vacuumed after it…
const TURN_TABLES: &[&str] = &[
    "turns",
    "segments",
    "segment_turns",
    "open_segments",
    "embeddings",
    "revisions",
    "consolidation",
    "encoder_states",
];
/// …and those of the cards, which go with their segments (or alone, by `delete_cards`).
const CARD_TABLES: &[&str] = &[
    "cards",
    "card_turns",
    "card_entities",
    "card_topics",
    "card_supersedes",
    "card_vectors",
];

impl Store for PgStore {
    fn existing_turns(&self, ids: &[TurnId]) -> Result<HashSet<TurnId>, StoreError> {
        let keys = texts!(ids);
        let rows = self
            .conn()?
            .query("SELECT id FROM turns WHERE id = ANY($1)", &[&keys])?;
        Ok(rows.iter().map(|r| TurnId(r.get(0))).collect())
    }

    fn open_segment(&self, scope: &Scope, conversation: &str) -> Result<OpenRead, StoreError> {
        let row = self.conn()?.query_opt(
            "SELECT state, version FROM open_segments WHERE user_id = $1 AND agent_id = $2 \
             AND run_id = $3 AND conversation = $4",
            &[
                &scope.user_id,
                &scope.agent_id.as_deref().unwrap_or(""),
                &scope.run_id.as_deref().unwrap_or(""),
                &conversation,
            ],
        )?;
        match row {
            None => Ok(OpenRead::default()),
            Some(r) => Ok(OpenRead {
                state: serde_json::from_value(r.try_get(0)?)
                    .map_err(|e| StoreError::Corrupt(format!("open segment state: {e}")))?,
                version: r.try_get(1)?,
            }),
        }
    }

    fn commit(&mut self, batch: WriteBatch) -> Result<CommitReport, StoreError> {
        let client = self.writer();
        let mut tx = client.transaction()?;
        let report = write_batch(&mut tx, &batch)?;
        tx.commit()?;
        Ok(report)
    }

    fn turns(&self, ids: &[TurnId]) -> Result<Vec<Turn>, StoreError> {
        let keys = texts!(ids);
        let rows = self.conn()?.query(
            &format!("SELECT {TURN_COLUMNS} FROM turns WHERE id = ANY($1)"),
            &[&keys],
        )?;
        let mut by_id: HashMap<TurnId, Turn> = rows
            .iter()
            .map(|r| turn_from_row(r).map(|t| (t.id.clone(), t)))
            .collect::<Result<_, _>>()?;
        Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
    }

    fn segments(&self, ids: &[SegmentId]) -> Result<Vec<Segment>, StoreError> {
        let keys = texts!(ids);
        let found = self.segments_where("id = ANY($1)", &[&keys])?;
        let mut by_id: HashMap<SegmentId, Segment> =
            found.into_iter().map(|s| (s.id.clone(), s)).collect();
        Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
    }

    fn list_segments(
        &self,
        filter: &ScopeFilter,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<Segment>, u64), StoreError> {
        let (clause, args) = filter_clause("", filter, 1);
        let args = params(&args);
        let total: i64 = self
            .conn()?
            .query_one(
                &format!("SELECT COUNT(*) FROM segments WHERE {clause}"),
                &args,
            )?
            .get(0);
        // Numbered parameters: the condition's second copy names the same ones.
        let paged = crate::segment_page(&clause, offset, limit);
        Ok((self.segments_where(&paged, &args)?, total as u64))
    }

    fn embeddings(
        &self,
        model: &str,
        hashes: &[String],
    ) -> Result<HashMap<String, Embedding>, StoreError> {
        let rows = self.conn()?.query(
            "SELECT text_hash, pieces, chunks FROM embeddings \
             WHERE model = $1 AND text_hash = ANY($2)",
            &[&model, &hashes],
        )?;
        rows.iter()
            .map(|r| {
                let text_hash: String = r.try_get(0)?;
                Ok((
                    text_hash.clone(),
                    Embedding {
                        model: model.to_string(),
                        text_hash,
                        pieces: r.try_get::<_, i32>(1)? as u32,
                        chunks: codec::decode(r.try_get(2)?)?,
                    },
                ))
            })
            .collect()
    }

    fn each_unit_vectors(
        &self,
        model: &str,
        user_id: &str,
        turn_after: i64,
        segment_after: i64,
        each: &mut dyn FnMut(UnitVectors),
    ) -> Result<(), StoreError> {
        // PostgreSQL searches its own vectors; this serves copies and checks, not searches.
        let mut client = self.conn()?;
        for (kind, table, after) in [
            (UnitKind::Turn, "turns", turn_after),
            (UnitKind::Segment, "segments", segment_after),
        ] {
            let rows = client.query(
                &format!(
                    "SELECT u.id, u.user_id, u.agent_id, u.run_id, e.chunks, u.seq FROM {table} u \
                     JOIN embeddings e ON e.model = $1 AND e.text_hash = u.text_hash \
                     WHERE u.user_id = $2 AND u.seq > $3 ORDER BY u.seq"
                ),
                &[&model, &user_id, &after],
            )?;
            for r in &rows {
                each(UnitVectors {
                    kind,
                    id: r.try_get(0)?,
                    seq: r.try_get(5)?,
                    scope: scope_at(r, 1)?,
                    chunks: codec::decode(r.try_get(4)?)?,
                });
            }
        }
        Ok(())
    }

    fn unit_vectors_at(
        &self,
        model: &str,
        kind: UnitKind,
        seqs: &[i64],
    ) -> Result<Vec<UnitVectors>, StoreError> {
        let Some(table) = crate::vector_table(kind) else {
            return Ok(Vec::new());
        };
        let rows = self.conn()?.query(
            &format!(
                "SELECT u.id, u.user_id, u.agent_id, u.run_id, e.chunks, u.seq FROM {table} u \
                 JOIN embeddings e ON e.model = $1 AND e.text_hash = u.text_hash \
                 WHERE u.seq = ANY($2)"
            ),
            &[&model, &seqs],
        )?;
        rows.iter()
            .map(|r| {
                Ok(UnitVectors {
                    kind,
                    id: r.try_get(0)?,
                    seq: r.try_get(5)?,
                    scope: scope_at(r, 1)?,
                    chunks: codec::decode(r.try_get(4)?)?,
                })
            })
            .collect()
    }

    fn units_after(
        &self,
        turn_seq: i64,
        segment_seq: i64,
        limit: usize,
    ) -> Result<Vec<UnitText>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut out = Vec::new();
        let rows = self.conn()?.query(
            "SELECT id, user_id, agent_id, run_id, role, speaker, text, seq FROM turns \
             WHERE seq > $1 ORDER BY seq LIMIT $2",
            &[&turn_seq, &limit],
        )?;
        for r in &rows {
            let role: String = r.try_get(4)?;
            let role = Role::parse(&role).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let speaker: Option<String> = r.try_get(5)?;
            let text: String = r.try_get(6)?;
            out.push(UnitText {
                kind: UnitKind::Turn,
                id: r.try_get(0)?,
                scope: scope_at(r, 1)?,
                text: render_line(role, speaker.as_deref(), &text),
                seq: r.try_get(7)?,
                role: Some(role),
            });
        }
        let segs: Vec<(String, i64)> = self
            .conn()?
            .query(
                "SELECT id, seq FROM segments WHERE seq > $1 ORDER BY seq LIMIT $2",
                &[&segment_seq, &limit],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        out.extend(crate::segment_units(self, &segs)?);
        Ok(out)
    }

    fn delete(&mut self, filter: &ScopeFilter) -> Result<DeleteReport, StoreError> {
        let (clause, args) = filter_clause("", filter, 1);
        let args = params(&args);
        let report = {
            let client = self.writer();
            let mut tx = client.transaction()?;
            lock_users(&mut tx, [filter.user_id.as_str()])?;
            let turns: i64 = tx
                .query_one(&format!("SELECT COUNT(*) FROM turns WHERE {clause}"), &args)?
                .get(0);
            if turns == 0 {
                return Err(StoreError::UnknownScope(crate::describe_filter(filter)));
            }
            let mut hashes: Vec<String> = Vec::new();
            for table in ["turns", "segments"] {
                for r in tx.query(
                    &format!("SELECT DISTINCT text_hash FROM {table} WHERE {clause}"),
                    &args,
                )? {
                    hashes.push(r.get(0));
                }
            }
            let segments = tx.execute(&format!("DELETE FROM segments WHERE {clause}"), &args)?;
            tx.execute(&format!("DELETE FROM turns WHERE {clause}"), &args)?;
            tx.execute(&format!("DELETE FROM open_segments WHERE {clause}"), &args)?;
            tx.execute(&format!("DELETE FROM encoder_states WHERE {clause}"), &args)?;
            let embeddings = drop_unused_embeddings(&mut tx, &hashes)?;
            tx.commit()?;
            DeleteReport {
                turns: turns as u64,
                segments,
                embeddings,
            }
        };
        self.vacuum(TURN_TABLES)?;
        self.vacuum(CARD_TABLES)?;
        Ok(report)
    }

    fn delete_turns(&mut self, deletion: TurnDeletion) -> Result<DeleteReport, StoreError> {
        let turn_ids = texts!(&deletion.turns);
        let segment_ids = texts!(&deletion.segments);
        let report = {
            let client = self.writer();
            let mut tx = client.transaction()?;
            let users = users_of(&mut tx, &turn_ids, &segment_ids, &[])?;
            lock_users(&mut tx, users.iter().map(String::as_str))?;
            let mut hashes: Vec<String> = Vec::new();
            for (table, ids) in [("segments", &segment_ids), ("turns", &turn_ids)] {
                for r in tx.query(
                    &format!("SELECT DISTINCT text_hash FROM {table} WHERE id = ANY($1)"),
                    &[ids],
                )? {
                    hashes.push(r.get(0));
                }
            }
            // The neighbours whose windows held the deleted turns, windowed again below.
            let neighbours: Vec<String> = crate::members(&search::neighbourhoods(
                &mut tx,
                &turn_ids,
                aril_core::WINDOW_SPAN,
            )?)
            .into_iter()
            .filter(|id| !deletion.turns.contains(id))
            .map(|id| id.0)
            .collect();
            let segments =
                tx.execute("DELETE FROM segments WHERE id = ANY($1)", &[&segment_ids])?;
            tx.execute(
                "DELETE FROM revisions WHERE memory_id = ANY($1)",
                &[&turn_ids],
            )?;
            let turns = tx.execute("DELETE FROM turns WHERE id = ANY($1)", &[&turn_ids])?;
            write_batch(
                &mut tx,
                &WriteBatch {
                    segments: deletion.replacements,
                    open_segments: deletion.open_segments,
                    embeddings: deletion.embeddings,
                    ..Default::default()
                },
            )?;
            search::index_windows(&mut tx, &neighbours)?;
            let embeddings = drop_unused_embeddings(&mut tx, &hashes)?;
            tx.commit()?;
            DeleteReport {
                turns,
                segments,
                embeddings,
            }
        };
        self.vacuum(TURN_TABLES)?;
        self.vacuum(CARD_TABLES)?;
        Ok(report)
    }

    fn session_neighbourhoods(
        &self,
        ids: &[TurnId],
        span: usize,
    ) -> Result<Vec<Neighbourhood>, StoreError> {
        search::neighbourhoods(&mut *self.conn()?, &texts!(ids), span)
    }

    fn segments_holding(&self, turns: &[TurnId]) -> Result<Vec<Segment>, StoreError> {
        let keys = texts!(turns);
        self.segments_where(
            "id IN (SELECT segment_id FROM segment_turns WHERE turn_id = ANY($1))",
            &[&keys],
        )
    }

    fn memory_versions(&self, memory: &TurnId) -> Result<Vec<TurnId>, StoreError> {
        let mut client = self.conn()?;
        let r = client.query_one(
            "SELECT EXISTS (SELECT 1 FROM turns WHERE id = $1), \
             EXISTS (SELECT 1 FROM revisions WHERE turn_id = $1)",
            &[&memory.0],
        )?;
        let (exists, is_later): (bool, bool) = (r.get(0), r.get(1));
        if !exists || is_later {
            return Ok(Vec::new());
        }
        let mut versions = vec![memory.clone()];
        for r in client.query(
            "SELECT turn_id FROM revisions WHERE memory_id = $1 ORDER BY version",
            &[&memory.0],
        )? {
            versions.push(TurnId(r.get(0)));
        }
        Ok(versions)
    }

    fn memory_ids(&self, turns: &[TurnId]) -> Result<HashMap<TurnId, TurnId>, StoreError> {
        let keys = texts!(turns);
        let rows = self.conn()?.query(
            "SELECT turn_id, memory_id FROM revisions WHERE turn_id = ANY($1)",
            &[&keys],
        )?;
        Ok(rows
            .iter()
            .map(|r| (TurnId(r.get(0)), TurnId(r.get(1))))
            .collect())
    }

    fn expired_turns(&self, now: DateTime<Utc>, limit: u64) -> Result<Vec<TurnId>, StoreError> {
        let rows = self.conn()?.query(
            "SELECT id FROM turns WHERE expires_at IS NOT NULL AND expires_at <= $1 \
             AND id NOT IN (SELECT turn_id FROM superseded) ORDER BY expires_at, seq LIMIT $2",
            &[&now, &(limit.min(i64::MAX as u64) as i64)],
        )?;
        Ok(rows.iter().map(|r| TurnId(r.get(0))).collect())
    }

    fn current_turn_facts(
        &self,
        filter: &ScopeFilter,
        narrowing: &Narrowing,
    ) -> Result<Vec<crate::TurnFacts>, StoreError> {
        let (scope, args) = filter_clause("t.", filter, 1);
        let mut live = "t.id NOT IN (SELECT turn_id FROM superseded) \
                        AND (t.expires_at IS NULL OR t.expires_at > now())"
            .to_string();
        // The span's end is included: `< to` leaves out `to` itself, so the bound is a
        // microsecond later (PostgreSQL keeps no finer).
        let created = narrowing.created;
        let to = created.to.map(|t| t + chrono::Duration::microseconds(1));
        let mut next = args.len();
        let mut mark = || {
            next += 1;
            format!("${next}")
        };
        let from_mark = created.from.map(|_| mark());
        let to_mark = to.map(|_| mark());
        let shapes = narrowing.metadata_any_of.as_deref();
        if let Some(shapes) = shapes {
            // Through the `turns_metadata` GIN index (`jsonb_path_ops` serves `@>`).
            let tests: Vec<String> = shapes
                .iter()
                .map(|_| format!("t.metadata @> {}", mark()))
                .collect();
            if tests.is_empty() {
                live.push_str(" AND false");
            } else {
                live.push_str(&format!(" AND ({})", tests.join(" OR ")));
            }
        }
        let mut values = params(&args);
        values.extend(
            created
                .from
                .iter()
                .chain(&to)
                .map(|t| t as &(dyn ToSql + Sync)),
        );
        values.extend(
            shapes
                .unwrap_or_default()
                .iter()
                .map(|v| v as &(dyn ToSql + Sync)),
        );
        let sql = crate::turn_facts_sql(
            "t.metadata::text",
            &scope,
            &live,
            from_mark.as_deref(),
            to_mark.as_deref(),
        );
        let rows = self.conn()?.query(&sql, &values)?;
        let mut facts = Vec::with_capacity(rows.len());
        for r in &rows {
            let created_at: DateTime<Utc> = r.try_get(3)?;
            let metadata = crate::stored_metadata(r.try_get::<_, Option<&str>>(2)?)?;
            if !narrowing.holds(created_at, metadata.as_ref()) {
                continue;
            }
            facts.push(crate::TurnFacts {
                id: TurnId(r.try_get(0)?),
                seq: r.try_get(1)?,
                metadata,
                created_at,
                updated_at: r.try_get(4)?,
                valid_to: r.try_get(5)?,
            });
        }
        Ok(facts)
    }

    fn superseded(&self, user_id: &str) -> Result<HashSet<TurnId>, StoreError> {
        let rows = self.conn()?.query(
            "SELECT s.turn_id FROM superseded s JOIN turns t ON t.id = s.turn_id \
             WHERE t.user_id = $1",
            &[&user_id],
        )?;
        Ok(rows.iter().map(|r| TurnId(r.get(0))).collect())
    }

    fn queued_segments(
        &self,
        limit: usize,
        retry_failed: bool,
    ) -> Result<Vec<SegmentId>, StoreError> {
        cards::queued(&mut *self.conn()?, limit, retry_failed)
    }

    fn claim(
        &mut self,
        ids: Option<&[SegmentId]>,
        limit: usize,
        retry_failed: bool,
        lease: std::time::Duration,
    ) -> Result<Vec<SegmentId>, StoreError> {
        let client = self.writer();
        let mut tx = client.transaction()?;
        let claimed = cards::claim(&mut tx, ids, limit, retry_failed, lease)?;
        tx.commit()?;
        Ok(claimed)
    }

    fn release(&mut self, segment: &SegmentId) -> Result<(), StoreError> {
        self.writer().execute(
            "UPDATE consolidation SET claimed_until = NULL WHERE segment_id = $1",
            &[&segment.0],
        )?;
        Ok(())
    }

    fn export(
        &self,
        table: crate::transfer::Table,
        after: &crate::transfer::Cursor,
        limit: usize,
    ) -> Result<Vec<crate::transfer::Row>, StoreError> {
        transfer::export(self, table, after, limit)
    }

    fn import(&mut self, rows: &[crate::transfer::Row]) -> Result<(), StoreError> {
        transfer::import(self, rows)
    }

    fn cards_generation(&self, user_id: &str) -> Result<(u64, i64), StoreError> {
        let r = self.conn()?.query_one(
            "SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM cards WHERE user_id = $1",
            &[&user_id],
        )?;
        Ok((r.try_get::<_, i64>(0)? as u64, r.try_get(1)?))
    }

    fn scope_summary(&self, filter: &ScopeFilter) -> Result<ScopeSummary, StoreError> {
        inspect::scope_summary(&mut *self.conn()?, filter)
    }

    fn llm_usage_by_day(&self) -> Result<Vec<DailyUsage>, StoreError> {
        inspect::llm_usage_by_day(&mut *self.conn()?)
    }

    fn turns_by_day(&self) -> Result<Vec<DailyTurns>, StoreError> {
        inspect::turns_by_day(&mut *self.conn()?)
    }

    fn find_cards(
        &self,
        filter: &ScopeFilter,
        query: &CardQuery,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<Card>, u64), StoreError> {
        inspect::find_cards(&mut *self.conn()?, filter, query, offset, limit)
    }

    fn session_turns(
        &self,
        filter: &ScopeFilter,
        conversation: &str,
        session: Option<&str>,
    ) -> Result<Vec<TurnId>, StoreError> {
        inspect::session_turns(&mut *self.conn()?, filter, conversation, session)
    }

    fn commit_cards(&mut self, batch: CardBatch) -> Result<(), StoreError> {
        let client = self.writer();
        let mut tx = client.transaction()?;
        lock_users(&mut tx, [batch.scope.user_id.as_str()])?;
        cards::commit(&mut tx, &batch)?;
        tx.commit()?;
        Ok(())
    }

    fn append_cards(&mut self, new: &[Card], vectors: &[CardVectors]) -> Result<(), StoreError> {
        let client = self.writer();
        let mut tx = client.transaction()?;
        lock_users(&mut tx, new.iter().map(|c| c.scope.user_id.as_str()))?;
        cards::insert(&mut tx, new)?;
        cards::put_vectors(&mut tx, vectors)?;
        tx.commit()?;
        Ok(())
    }

    fn cards_superseding(&self, id: &CardId) -> Result<Vec<CardId>, StoreError> {
        let rows = self.conn()?.query(
            "SELECT c.id FROM card_supersedes s JOIN cards c ON c.id = s.card_id \
             WHERE s.supersedes = $1 ORDER BY c.seq",
            &[&id.0],
        )?;
        Ok(rows.iter().map(|r| CardId(r.get(0))).collect())
    }

    fn delete_cards(&mut self, ids: &[CardId]) -> Result<u64, StoreError> {
        let keys = texts!(ids);
        let mut tx = self.writer().transaction()?;
        let users = users_of(&mut tx, &[], &[], &keys)?;
        lock_users(&mut tx, users.iter().map(String::as_str))?;
        let removed = tx.execute("DELETE FROM cards WHERE id = ANY($1)", &[&keys])?;
        tx.commit()?;
        self.vacuum(CARD_TABLES)?;
        Ok(removed)
    }

    fn mark_failed(&mut self, segment: &SegmentId, reason: &str) -> Result<(), StoreError> {
        self.writer().execute(
            "UPDATE consolidation SET status = 'failed', reason = $2, attempts = attempts + 1, \
             claimed_until = NULL WHERE segment_id = $1",
            &[&segment.0, &reason],
        )?;
        Ok(())
    }

    fn cards(&self, filter: &ScopeFilter, current_only: bool) -> Result<Vec<Card>, StoreError> {
        let (mut clause, args) = filter_clause("c.", filter, 1);
        if current_only {
            clause.push_str(inspect::CURRENT_CARDS);
        }
        cards::load(&mut *self.conn()?, &clause, &params(&args))
    }

    fn cards_by_id(&self, ids: &[CardId]) -> Result<Vec<Card>, StoreError> {
        let keys = texts!(ids);
        let found = cards::load(&mut *self.conn()?, "c.id = ANY($1)", &[&keys])?;
        let mut by_id: HashMap<CardId, Card> =
            found.into_iter().map(|c| (c.id.clone(), c)).collect();
        Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
    }

    fn lookup_cards(
        &self,
        filter: &ScopeFilter,
        lookup: &CardLookup,
    ) -> Result<Vec<CardId>, StoreError> {
        cards::lookup(&mut *self.conn()?, filter, lookup)
    }

    fn card_vectors(
        &self,
        model: &str,
        ids: &[CardId],
    ) -> Result<HashMap<CardId, Vec<StoredChunk>>, StoreError> {
        let keys = texts!(ids);
        let rows = self.conn()?.query(
            "SELECT card_id, chunks FROM card_vectors WHERE model = $1 AND card_id = ANY($2)",
            &[&model, &keys],
        )?;
        rows.iter()
            .map(|r| Ok((CardId(r.try_get(0)?), codec::decode(r.try_get(1)?)?)))
            .collect()
    }

    fn put_card_vectors(&mut self, vectors: &[CardVectors]) -> Result<(), StoreError> {
        let client = self.writer();
        let mut tx = client.transaction()?;
        cards::put_vectors(&mut tx, vectors)?;
        tx.commit()?;
        Ok(())
    }

    fn record_llm_calls(&mut self, calls: &[LlmCall]) -> Result<(), StoreError> {
        let client = self.writer();
        let mut tx = client.transaction()?;
        for c in calls {
            insert_llm_call(&mut tx, c, true)?;
        }
        tx.commit()?;
        Ok(())
    }

    fn llm_usage(&self) -> Result<Vec<LlmUsage>, StoreError> {
        let rows = self.conn()?.query(
            "SELECT purpose, model, COUNT(*), SUM(prompt_tokens)::BIGINT, \
             SUM(completion_tokens)::BIGINT, COUNT(*) FILTER (WHERE counted_locally), \
             SUM(latency_ms)::BIGINT, COALESCE(SUM(prompt_o200k), 0)::BIGINT, \
             COALESCE(SUM(completion_o200k), 0)::BIGINT, COUNT(prompt_o200k) FROM llm_calls \
             GROUP BY purpose, model ORDER BY purpose, model",
            &[],
        )?;
        rows.iter()
            .map(|r| {
                let n =
                    |i: usize| -> Result<u64, StoreError> { Ok(r.try_get::<_, i64>(i)? as u64) };
                Ok(LlmUsage {
                    purpose: r.try_get(0)?,
                    model: r.try_get(1)?,
                    calls: n(2)?,
                    prompt_tokens: n(3)?,
                    completion_tokens: n(4)?,
                    counted_locally: n(5)?,
                    latency_ms: n(6)?,
                    prompt_o200k: n(7)?,
                    completion_o200k: n(8)?,
                    o200k_calls: n(9)?,
                })
            })
            .collect()
    }

    fn encoder_state(
        &self,
        scope: &Scope,
        conversation: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        conversation_state(&mut *self.conn()?, "encoder_states", scope, conversation)
    }

    fn stats(&self) -> Result<StoreStats, StoreError> {
        let mut client = self.conn()?;
        let mut count = |sql: &str| -> Result<u64, StoreError> {
            Ok(client.query_one(sql, &[])?.try_get::<_, i64>(0)? as u64)
        };
        let users = count("SELECT COUNT(DISTINCT user_id) FROM turns")?;
        let conversations = count(
            "SELECT COUNT(*) FROM (SELECT DISTINCT user_id, agent_id, run_id, conversation \
             FROM turns) c",
        )?;
        let turns = count("SELECT COUNT(*) FROM turns")?;
        let segments = count("SELECT COUNT(*) FROM segments")?;
        let segmented_turns = count("SELECT COUNT(*) FROM segment_turns")?;
        let segment_tokens = count("SELECT COALESCE(SUM(tokens), 0)::BIGINT FROM segments")?;
        let embeddings = count("SELECT COUNT(*) FROM embeddings")?;
        let cards = count("SELECT COUNT(*) FROM cards")?;
        let segments_pending =
            count("SELECT COUNT(*) FROM consolidation WHERE status = 'pending'")?;
        let segments_failed = count("SELECT COUNT(*) FROM consolidation WHERE status = 'failed'")?;
        let bytes = count("SELECT pg_database_size(current_database())")?;
        let mut open_segment_turns = 0u64;
        for r in client.query("SELECT state FROM open_segments", &[])? {
            let state: OpenSegment = serde_json::from_value(r.try_get(0)?)
                .map_err(|e| StoreError::Corrupt(format!("open segment state: {e}")))?;
            open_segment_turns += state.turn_ids().len() as u64;
        }
        let mut embedded_chunks = 0u64;
        for r in client.query("SELECT chunks FROM embeddings", &[])? {
            embedded_chunks += codec::decode(r.try_get(0)?)?.len() as u64;
        }
        Ok(StoreStats {
            users,
            conversations,
            turns,
            segments,
            segmented_turns,
            segment_tokens,
            open_segment_turns,
            embeddings,
            embedded_chunks,
            cards,
            segments_pending,
            segments_failed,
            bytes,
        })
    }

    fn list_turn_ids(
        &self,
        filter: &ScopeFilter,
        offset: u64,
        limit: u64,
        current_only: bool,
    ) -> Result<(Vec<TurnId>, u64), StoreError> {
        let (mut clause, args) = filter_clause("", filter, 1);
        if current_only {
            clause.push_str(" AND id NOT IN (SELECT turn_id FROM superseded)");
            clause.push_str(" AND (expires_at IS NULL OR expires_at > now())");
        }
        let args = params(&args);
        let mut client = self.conn()?;
        let total: i64 = client
            .query_one(&format!("SELECT COUNT(*) FROM turns WHERE {clause}"), &args)?
            .get(0);
        let page = crate::seq_page(offset, limit);
        let rows = client.query(
            &format!("SELECT id FROM turns WHERE {clause} {page}"),
            &args,
        )?;
        Ok((
            rows.iter().map(|r| TurnId(r.get(0))).collect(),
            total as u64,
        ))
    }

    fn users(&self) -> Result<Vec<String>, StoreError> {
        let rows = self
            .conn()?
            .query("SELECT DISTINCT user_id FROM turns ORDER BY user_id", &[])?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn add_api_key(&mut self, key: &ApiKeyRecord) -> Result<(), StoreError> {
        self.writer().execute(
            "INSERT INTO api_keys (id, key_hash, user_id, admin, created) \
             VALUES ($1, $2, $3, $4, $5)",
            &[
                &key.id,
                &key.key_hash,
                &key.user_id,
                &key.admin,
                &key.created,
            ],
        )?;
        Ok(())
    }

    fn api_keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        let rows = self.conn()?.query(
            "SELECT id, key_hash, user_id, admin, created FROM api_keys ORDER BY created",
            &[],
        )?;
        rows.iter()
            .map(|r| {
                Ok(ApiKeyRecord {
                    id: r.try_get(0)?,
                    key_hash: r.try_get(1)?,
                    user_id: r.try_get(2)?,
                    admin: r.try_get(3)?,
                    created: r.try_get::<_, DateTime<Utc>>(4)?,
                })
            })
            .collect()
    }

    fn check_integrity(&self) -> Result<(), StoreError> {
        let count = |sql: &str| -> Result<i64, StoreError> {
            Ok(self.conn()?.query_one(sql, &[])?.try_get(0)?)
        };
        crate::check_segmentation(
            count(crate::DANGLING_LINKS_SQL)?,
            count(crate::EMPTY_SEGMENTS_SQL)?,
            &self.stats()?,
        )
    }
}

/// One call's row; `o200k` false leaves its o200k counts absent (a call recorded before they
/// were kept, moved from another store).
pub(super) fn insert_llm_call(
    tx: &mut Transaction<'_>,
    c: &LlmCall,
    o200k: bool,
) -> Result<(), StoreError> {
    let count = |n: u64| o200k.then_some(n as i64);
    tx.execute(
        "INSERT INTO llm_calls (at, purpose, model, prompt_tokens, completion_tokens, \
         counted_locally, latency_ms, attempts, prompt_o200k, completion_o200k) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        &[
            &c.at,
            &c.purpose,
            &c.model,
            &(c.prompt_tokens as i64),
            &(c.completion_tokens as i64),
            &c.counted_locally,
            &(c.latency_ms as i64),
            &(c.attempts as i32),
            &count(c.prompt_o200k),
            &count(c.completion_o200k),
        ],
    )?;
    Ok(())
}

/// The JSON `state` of a per-conversation table (`open_segments`, `encoder_states`).
fn conversation_state(
    client: &mut impl GenericClient,
    table: &str,
    scope: &Scope,
    conversation: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    Ok(client
        .query_opt(
            &format!(
                "SELECT state FROM {table} WHERE user_id = $1 AND agent_id = $2 \
                 AND run_id = $3 AND conversation = $4"
            ),
            &[
                &scope.user_id,
                &scope.agent_id.as_deref().unwrap_or(""),
                &scope.run_id.as_deref().unwrap_or(""),
                &conversation,
            ],
        )?
        .map(|r| r.get(0)))
}
