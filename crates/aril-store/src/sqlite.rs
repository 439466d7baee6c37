//! The embedded store: one SQLite file in WAL mode, `synchronous=FULL` so a commit that returned is
//! on disk, `secure_delete` so deleted text does not linger in free pages.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use aril_core::{
    Card, CardId, CloseReason, Lifecycle, Metadata, Narrowing, NewTurn, Role, Scope, ScopeFilter,
    Segment, SegmentId, Turn, TurnId, render_line,
};
use aril_segment::OpenSegment;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Row, Transaction, params, params_from_iter};

use crate::schema::{self, SCHEMA_VERSION};
use crate::sqlite_readers::{Reader, Readers};
use crate::{
    ApiKeyRecord, CardBatch, CardLookup, CardQuery, CardVectors, CommitReport, DailyTurns,
    DailyUsage, DeleteReport, Embedding, LlmCall, LlmUsage, Neighbourhood, OpenRead, ScopeSummary,
    Store, StoreError, StoreStats, StoredChunk, TurnDeletion, UnitKind, UnitText, UnitVectors,
    WriteBatch, accounting, cards, codec, sqlite_inspect,
};

/// SQLite allows 32766 bound parameters; stay well below.
const IN_CHUNK: usize = 500;

/// The embedded SQLite implementation of [`Store`].
///
/// Writers (`&mut self`) use the one read-write connection; readers (`&self`) on several threads
/// each take a read-only connection for the length of one call (`sqlite_readers`), so they read
/// at once and always see the last commit.
pub struct SqliteStore {
    /// Declared before the writer's connection so they close first: the last connection to
    /// close checkpoints the WAL into the file and removes it, and only the writer can.
    readers: Readers,
    /// The writer's connection; behind a mutex only so the store is `Sync` (writers hold
    /// `&mut self` and never lock it).
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (or creates) the store file, applying the schema; refuses a newer schema.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        let mut conn = Connection::open(path).map_err(open_err)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = FULL;
             PRAGMA foreign_keys = ON;
             PRAGMA secure_delete = ON;
             PRAGMA busy_timeout = 5000;",
        )
        .map_err(open_err)?;
        let found = schema::version_of(&conn).map_err(open_err)?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: path.to_path_buf(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        schema::upgrade(&mut conn, path, found, SCHEMA_VERSION)?;
        Ok(Self {
            readers: Readers::new(path.to_path_buf()),
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
        })
    }

    /// A read-only connection, for one call of a reader; it goes back to the pool when dropped.
    pub(crate) fn conn(&self) -> Result<Reader<'_>, StoreError> {
        Ok(self.readers.get()?)
    }

    /// The writer's connection.
    pub(crate) fn conn_mut(&mut self) -> &mut Connection {
        self.conn.get_mut().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` with the ids split into chunks small enough for one statement.
    pub(crate) fn in_chunks<T, F>(ids: &[String], mut f: F) -> Result<Vec<T>, StoreError>
    where
        F: FnMut(&str, &[String]) -> Result<Vec<T>, StoreError>,
    {
        let mut out = Vec::new();
        for chunk in ids.chunks(IN_CHUNK) {
            let marks = vec!["?"; chunk.len()].join(",");
            out.extend(f(&marks, chunk)?);
        }
        Ok(out)
    }

    /// Moves deleted pages out of the WAL into the (securely zeroed) main file, so deleted text
    /// is gone from every file once a deletion returns.
    fn checkpoint(conn: &Connection) -> Result<(), StoreError> {
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }

    fn segment_turn_ids(conn: &Connection, segment: &str) -> Result<Vec<TurnId>, StoreError> {
        let mut stmt = conn.prepare_cached(
            "SELECT turn_id FROM segment_turns WHERE segment_id = ?1 ORDER BY ord",
        )?;
        let ids = stmt
            .query_map([segment], |r| r.get::<_, String>(0).map(TurnId))?
            .collect::<Result<_, _>>()?;
        Ok(ids)
    }

    fn segments_where(
        conn: &Connection,
        clause: &str,
        args: &[String],
    ) -> Result<Vec<Segment>, StoreError> {
        let sql = format!(
            "SELECT id, user_id, agent_id, run_id, conversation, boundary_score, reason, tokens, \
             start_time, end_time FROM segments WHERE {clause} ORDER BY seq"
        );
        let mut stmt = conn.prepare(&sql)?;
        let rows: Vec<SegmentRow> = stmt
            .query_map(params_from_iter(args), |r| {
                Ok(SegmentRow {
                    id: r.get(0)?,
                    scope: scope_from_row(r, 1)?,
                    conversation: r.get(4)?,
                    score: r.get(5)?,
                    reason: r.get(6)?,
                    tokens: r.get(7)?,
                    start: r.get(8)?,
                    end: r.get(9)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|row| {
                Ok(Segment {
                    turns: Self::segment_turn_ids(conn, &row.id)?,
                    id: SegmentId(row.id),
                    scope: row.scope,
                    conversation: row.conversation,
                    boundary_score: row.score as f32,
                    reason: CloseReason::parse(&row.reason).ok_or_else(|| {
                        StoreError::Corrupt(format!(
                            "unknown segment close reason {:?}",
                            row.reason
                        ))
                    })?,
                    tokens: row.tokens as u32,
                    start_time: parse_time(row.start)?,
                    end_time: parse_time(row.end)?,
                })
            })
            .collect()
    }
}

/// The JSON `state` column of a per-conversation table (`open_segments`, `encoder_states`).
pub(crate) fn conversation_state(
    conn: &Connection,
    table: &str,
    scope: &Scope,
    conversation: &str,
) -> Result<Option<String>, StoreError> {
    Ok(conn
        .query_row(
            &format!(
                "SELECT state FROM {table} WHERE user_id = ?1 AND agent_id = ?2 \
                 AND run_id = ?3 AND conversation = ?4"
            ),
            params![
                scope.user_id,
                scope.agent_id.as_deref().unwrap_or(""),
                scope.run_id.as_deref().unwrap_or(""),
                conversation
            ],
            |r| r.get(0),
        )
        .optional()?)
}

/// Ends a deletion: drops the cache entries of `hashes` nothing uses any more and commits. The
/// caller then checkpoints, so the deleted text is gone from every file.
fn commit_delete(
    tx: Transaction<'_>,
    hashes: &[String],
    turns: u64,
    segments: u64,
) -> Result<DeleteReport, StoreError> {
    let embeddings = drop_unused_embeddings(&tx, hashes)? as u64;
    tx.commit()?;
    Ok(DeleteReport {
        turns,
        segments,
        embeddings,
    })
}

/// Drops the cache entries of the given text hashes that no turn or segment uses any more.
fn drop_unused_embeddings(tx: &Transaction<'_>, hashes: &[String]) -> Result<usize, StoreError> {
    let mut drop_unused = tx.prepare_cached(
        "DELETE FROM embeddings WHERE text_hash = ?1 \
         AND NOT EXISTS (SELECT 1 FROM turns WHERE text_hash = ?1) \
         AND NOT EXISTS (SELECT 1 FROM segments WHERE text_hash = ?1)",
    )?;
    let mut dropped = 0;
    for h in hashes {
        dropped += drop_unused.execute([h])?;
    }
    Ok(dropped)
}

/// Writes a batch inside an open transaction.
pub(crate) fn write_batch(
    tx: &Transaction<'_>,
    batch: &WriteBatch,
) -> Result<CommitReport, StoreError> {
    let mut report = CommitReport::default();
    let mut insert_turn = tx.prepare_cached(
        "INSERT OR IGNORE INTO turns (id, user_id, agent_id, run_id, conversation, session, \
             role, speaker, text, text_hash, event_time, ingest_time, source_id, metadata, \
             expires_at, immutable, valid_to) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    )?;
    for rec in &batch.turns {
        let t = &rec.turn.turn;
        let n = insert_turn.execute(params![
            rec.turn.id.0,
            t.scope.user_id,
            t.scope.agent_id.as_deref().unwrap_or(""),
            t.scope.run_id.as_deref().unwrap_or(""),
            t.conversation,
            t.session,
            t.role.as_str(),
            t.speaker,
            t.text,
            rec.text_hash,
            time_text(t.event_time),
            rec.turn.ingest_time.to_rfc3339(),
            t.source_id,
            t.metadata.as_ref().map(Metadata::to_json),
            t.lifecycle.expires_at.map(instant_text),
            t.lifecycle.immutable,
            t.lifecycle.valid_to.map(instant_text),
        ])?;
        if n == 1 {
            report.turns_added += 1;
        } else {
            report.turns_skipped += 1;
        }
    }
    let mut insert_segment = tx.prepare_cached(
        "INSERT OR IGNORE INTO segments (id, user_id, agent_id, run_id, conversation, \
             boundary_score, reason, tokens, start_time, end_time, text_hash) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
    let mut insert_link = tx.prepare_cached(
        "INSERT INTO segment_turns (segment_id, ord, turn_id) VALUES (?1, ?2, ?3)",
    )?;
    for rec in &batch.segments {
        let s = &rec.segment;
        let n = insert_segment.execute(params![
            s.id.0,
            s.scope.user_id,
            s.scope.agent_id.as_deref().unwrap_or(""),
            s.scope.run_id.as_deref().unwrap_or(""),
            s.conversation,
            s.boundary_score as f64,
            s.reason.as_str(),
            s.tokens,
            time_text(s.start_time),
            time_text(s.end_time),
            rec.text_hash,
        ])?;
        if n == 1 {
            report.segments_added += 1;
            tx.prepare_cached(
                "INSERT OR IGNORE INTO consolidation (segment_id, status) VALUES (?1, 'pending')",
            )?
            .execute([&s.id.0])?;
            for (ord, turn) in s.turns.iter().enumerate() {
                insert_link.execute(params![s.id.0, ord as i64, turn.0])?;
            }
        }
    }
    // Version 0 read: the row may be absent (insert) or still at 0; else it must be at the
    // version read. Anything else is another writer's work: the batch fails whole.
    let mut insert_open = tx.prepare_cached(
        "INSERT INTO open_segments (user_id, agent_id, run_id, conversation, state, version) \
             VALUES (?1, ?2, ?3, ?4, ?5, 1) ON CONFLICT (user_id, agent_id, run_id, conversation) \
             DO UPDATE SET state = excluded.state, version = 1 WHERE open_segments.version = 0",
    )?;
    let mut update_open = tx.prepare_cached(
        "UPDATE open_segments SET state = ?5, version = ?6 + 1 WHERE user_id = ?1 \
             AND agent_id = ?2 AND run_id = ?3 AND conversation = ?4 AND version = ?6",
    )?;
    for rec in &batch.open_segments {
        let state = serde_json::to_string(&rec.state)
            .map_err(|e| StoreError::Corrupt(format!("open segment state: {e}")))?;
        let key = (
            &rec.scope.user_id,
            rec.scope.agent_id.as_deref().unwrap_or(""),
            rec.scope.run_id.as_deref().unwrap_or(""),
            &rec.conversation,
        );
        let n = if rec.read_version == 0 {
            insert_open.execute(params![key.0, key.1, key.2, key.3, state])?
        } else {
            update_open.execute(params![key.0, key.1, key.2, key.3, state, rec.read_version])?
        };
        if n != 1 {
            return Err(StoreError::Conflict(crate::describe_open(rec)));
        }
    }
    let mut insert_embedding = tx.prepare_cached(
        "INSERT OR IGNORE INTO embeddings (model, text_hash, pieces, chunks) \
             VALUES (?1, ?2, ?3, ?4)",
    )?;
    for e in &batch.embeddings {
        insert_embedding.execute(params![
            e.model,
            e.text_hash,
            e.pieces,
            codec::encode(&e.chunks)
        ])?;
    }
    let mut insert_revision = tx.prepare_cached(
        "INSERT INTO revisions (turn_id, memory_id, version) VALUES (?1, ?2, ?3) \
         ON CONFLICT (turn_id) DO NOTHING",
    )?;
    for r in &batch.revisions {
        insert_revision.execute(params![r.turn.0, r.memory.0, r.version])?;
    }
    Ok(report)
}

/// A `segments` row before its links and times are resolved.
struct SegmentRow {
    id: String,
    scope: Scope,
    conversation: String,
    score: f64,
    reason: String,
    tokens: i64,
    start: Option<String>,
    end: Option<String>,
}

pub(crate) fn scope_from_row(r: &Row<'_>, at: usize) -> rusqlite::Result<Scope> {
    let opt = |s: String| if s.is_empty() { None } else { Some(s) };
    Ok(Scope {
        user_id: r.get(at)?,
        agent_id: opt(r.get(at + 1)?),
        run_id: opt(r.get(at + 2)?),
    })
}

fn time_text(t: Option<DateTime<Utc>>) -> Option<String> {
    t.map(|t| t.to_rfc3339())
}

/// An instant as stored where SQL compares it (an expiry, a validity): UTC with microseconds
/// always, so that comparing the text compares times (the sweep asks `expires_at <= now`).
pub(crate) fn instant_text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

pub(crate) fn parse_time(s: Option<String>) -> Result<Option<DateTime<Utc>>, StoreError> {
    s.as_deref().map(parse_time_text).transpose()
}

/// A stored time, read in place.
fn parse_time_text(s: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("bad stored time {s:?}: {e}")))
}

/// Column `i` of a row as text read in place (`None` when NULL).
fn text_at<'r>(row: &'r Row<'_>, i: usize) -> Result<Option<&'r str>, StoreError> {
    row.get_ref(i)?
        .as_str_or_null()
        .map_err(|e| StoreError::Corrupt(format!("column {i} is not text: {e}")))
}

/// `(clause, args)` selecting the rows a filter admits, for tables with scope columns.
fn filter_clause(filter: &ScopeFilter) -> (String, Vec<String>) {
    filter_clause_on("", filter)
}

/// The SQL condition a scope filter sets on the scope columns of the table aliased `alias`
/// (`""` for an unaliased table, `"c."` for `cards c`), and its arguments.
pub(crate) fn filter_clause_on(alias: &str, filter: &ScopeFilter) -> (String, Vec<String>) {
    let mut clause = format!("{alias}user_id = ?");
    let mut args = vec![filter.user_id.clone()];
    if let Some(a) = &filter.agent_id {
        clause.push_str(&format!(" AND {alias}agent_id = ?"));
        args.push(a.clone());
    }
    if let Some(r) = &filter.run_id {
        clause.push_str(&format!(" AND {alias}run_id = ?"));
        args.push(r.clone());
    }
    (clause, args)
}

impl Store for SqliteStore {
    fn existing_turns(&self, ids: &[TurnId]) -> Result<HashSet<TurnId>, StoreError> {
        let conn = self.conn()?;
        let ids: Vec<String> = ids.iter().map(|t| t.0.clone()).collect();
        let found = Self::in_chunks(&ids, |marks, chunk| {
            let mut stmt = conn.prepare(&format!("SELECT id FROM turns WHERE id IN ({marks})"))?;
            let v = stmt
                .query_map(params_from_iter(chunk), |r| {
                    r.get::<_, String>(0).map(TurnId)
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(v)
        })?;
        Ok(found.into_iter().collect())
    }

    fn open_segment(&self, scope: &Scope, conversation: &str) -> Result<OpenRead, StoreError> {
        let conn = self.conn()?;
        let row: Option<(String, i64)> = conn
            .query_row(
                "SELECT state, version FROM open_segments WHERE user_id = ?1 AND agent_id = ?2 \
                 AND run_id = ?3 AND conversation = ?4",
                params![
                    scope.user_id,
                    scope.agent_id.as_deref().unwrap_or(""),
                    scope.run_id.as_deref().unwrap_or(""),
                    conversation
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        match row {
            None => Ok(OpenRead::default()),
            Some((s, version)) => Ok(OpenRead {
                state: serde_json::from_str(&s)
                    .map_err(|e| StoreError::Corrupt(format!("open segment state: {e}")))?,
                version,
            }),
        }
    }

    fn commit(&mut self, batch: WriteBatch) -> Result<CommitReport, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let report = write_batch(&tx, &batch)?;
        tx.commit()?;
        Ok(report)
    }

    fn turns(&self, ids: &[TurnId]) -> Result<Vec<Turn>, StoreError> {
        let conn = self.conn()?;
        let keys: Vec<String> = ids.iter().map(|t| t.0.clone()).collect();
        let found = Self::in_chunks(&keys, |marks, chunk| {
            let mut stmt = conn.prepare(&format!(
                "SELECT id, seq, user_id, agent_id, run_id, conversation, session, role, speaker, \
                 text, event_time, ingest_time, source_id, metadata, expires_at, immutable, valid_to \
                 FROM turns WHERE id IN ({marks})"
            ))?;
            let rows = stmt
                .query_map(params_from_iter(chunk), |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        scope_from_row(r, 2)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, Option<String>>(6)?,
                        r.get::<_, String>(7)?,
                        r.get::<_, Option<String>>(8)?,
                        r.get::<_, String>(9)?,
                        r.get::<_, Option<String>>(10)?,
                        r.get::<_, String>(11)?,
                        r.get::<_, Option<String>>(12)?,
                        r.get::<_, Option<String>>(13)?,
                        r.get::<_, Option<String>>(14)?,
                        r.get::<_, bool>(15)?,
                        r.get::<_, Option<String>>(16)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            rows.into_iter()
                .map(
                    |(
                        id,
                        seq,
                        scope,
                        conversation,
                        session,
                        role,
                        speaker,
                        text,
                        event,
                        ingest,
                        source,
                        metadata,
                        expires_at,
                        immutable,
                        valid_to,
                    )| {
                        Ok(Turn {
                            id: TurnId(id),
                            seq,
                            turn: NewTurn {
                                scope,
                                conversation,
                                session,
                                role: Role::parse(&role)
                                    .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                                speaker,
                                text,
                                event_time: parse_time(event)?,
                                source_id: source,
                                metadata: crate::stored_metadata(metadata.as_deref())?,
                                lifecycle: Lifecycle {
                                    expires_at: parse_time(expires_at)?,
                                    immutable,
                                    valid_to: parse_time(valid_to)?,
                                },
                            },
                            ingest_time: parse_time(Some(ingest))?.unwrap_or_default(),
                        })
                    },
                )
                .collect()
        })?;
        let mut by_id: HashMap<TurnId, Turn> =
            found.into_iter().map(|t| (t.id.clone(), t)).collect();
        Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
    }

    fn segments(&self, ids: &[SegmentId]) -> Result<Vec<Segment>, StoreError> {
        let conn = self.conn()?;
        let keys: Vec<String> = ids.iter().map(|s| s.0.clone()).collect();
        let found = Self::in_chunks(&keys, |marks, chunk| {
            Self::segments_where(&conn, &format!("id IN ({marks})"), chunk)
        })?;
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
        let conn = self.conn()?;
        let (clause, args) = filter_clause(filter);
        let total: i64 = conn.query_row(
            &format!("SELECT COUNT(*) FROM segments WHERE {clause}"),
            params_from_iter(&args),
            |r| r.get(0),
        )?;
        let paged = crate::segment_page(&clause, offset, limit);
        let twice: Vec<String> = args.iter().chain(&args).cloned().collect();
        Ok((Self::segments_where(&conn, &paged, &twice)?, total as u64))
    }

    fn embeddings(
        &self,
        model: &str,
        hashes: &[String],
    ) -> Result<HashMap<String, Embedding>, StoreError> {
        let conn = self.conn()?;
        let found = Self::in_chunks(hashes, |marks, chunk| {
            let mut stmt = conn.prepare(&format!(
                "SELECT text_hash, pieces, chunks FROM embeddings \
                 WHERE model = ? AND text_hash IN ({marks})"
            ))?;
            let args = std::iter::once(model.to_string()).chain(chunk.iter().cloned());
            let rows = stmt
                .query_map(params_from_iter(args), |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, u32>(1)?,
                        r.get::<_, Vec<u8>>(2)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            rows.into_iter()
                .map(|(text_hash, pieces, blob)| {
                    Ok(Embedding {
                        model: model.to_string(),
                        text_hash,
                        pieces,
                        chunks: codec::decode(&blob)?,
                    })
                })
                .collect()
        })?;
        Ok(found
            .into_iter()
            .map(|e| (e.text_hash.clone(), e))
            .collect())
    }

    fn each_unit_vectors(
        &self,
        model: &str,
        user_id: &str,
        turn_after: i64,
        segment_after: i64,
        each: &mut dyn FnMut(UnitVectors),
    ) -> Result<(), StoreError> {
        let conn = self.conn()?;
        for (kind, table, after) in [
            (UnitKind::Turn, "turns", turn_after),
            (UnitKind::Segment, "segments", segment_after),
        ] {
            // From the start, the user's rows through the scope index; past a store order (a
            // catch-up: what the last commits stored), the rows after it in store order, so the
            // cost is what is new, not everything the user holds (`+` keeps SQLite off the scope
            // index, CROSS JOIN keeps the units first).
            let user = if after > 0 { "+u.user_id" } else { "u.user_id" };
            let mut stmt = conn.prepare(&format!(
                "SELECT u.id, u.user_id, u.agent_id, u.run_id, e.chunks, u.seq FROM {table} u \
                 CROSS JOIN embeddings e ON e.model = ?1 AND e.text_hash = u.text_hash \
                 WHERE {user} = ?2 AND u.seq > ?3 ORDER BY u.seq"
            ))?;
            let mut rows = stmt.query(params![model, user_id, after])?;
            while let Some(r) = rows.next()? {
                each(UnitVectors {
                    kind,
                    id: r.get(0)?,
                    seq: r.get(5)?,
                    scope: scope_from_row(r, 1)?,
                    chunks: codec::decode(r.get_ref(4)?.as_blob().map_err(rusqlite::Error::from)?)?,
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
        let conn = self.conn()?;
        let mut out = Vec::with_capacity(seqs.len());
        for chunk in seqs.chunks(IN_CHUNK) {
            let marks = vec!["?"; chunk.len()].join(",");
            // Units first (each a primary-key lookup), then each one's cache entry.
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT u.id, u.user_id, u.agent_id, u.run_id, e.chunks, u.seq FROM {table} u \
                 CROSS JOIN embeddings e ON e.model = ?1 AND e.text_hash = u.text_hash \
                 WHERE u.seq IN ({marks})"
            ))?;
            let args = std::iter::once(rusqlite::types::Value::from(model.to_string()))
                .chain(chunk.iter().map(|&s| rusqlite::types::Value::from(s)));
            let mut rows = stmt.query(params_from_iter(args))?;
            while let Some(r) = rows.next()? {
                out.push(UnitVectors {
                    kind,
                    id: r.get(0)?,
                    seq: r.get(5)?,
                    scope: scope_from_row(r, 1)?,
                    chunks: codec::decode(r.get_ref(4)?.as_blob().map_err(rusqlite::Error::from)?)?,
                });
            }
        }
        Ok(out)
    }

    fn units_after(
        &self,
        turn_seq: i64,
        segment_seq: i64,
        limit: usize,
    ) -> Result<Vec<UnitText>, StoreError> {
        let conn = self.conn()?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut out = Vec::new();
        let mut stmt = conn.prepare(
            "SELECT id, user_id, agent_id, run_id, role, speaker, text, seq FROM turns \
             WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        )?;
        let rows = stmt
            .query_map([turn_seq, limit], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    scope_from_row(r, 1)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, i64>(7)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        for (id, scope, role, speaker, text, seq) in rows {
            let role = Role::parse(&role).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let rendered = render_line(role, speaker.as_deref(), &text);
            out.push(UnitText {
                kind: UnitKind::Turn,
                id,
                scope,
                text: rendered,
                seq,
                role: Some(role),
            });
        }
        drop(stmt);
        let segs: Vec<(String, i64)> = conn
            .prepare("SELECT id, seq FROM segments WHERE seq > ?1 ORDER BY seq LIMIT ?2")?
            .query_map([segment_seq, limit], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        // Rendering a segment reads it and its turns through `self`: this connection goes back first.
        drop(conn);
        out.extend(crate::segment_units(self, &segs)?);
        Ok(out)
    }

    fn delete(&mut self, filter: &ScopeFilter) -> Result<DeleteReport, StoreError> {
        let (clause, args) = filter_clause(filter);
        let tx = self.conn_mut().transaction()?;
        let turns: i64 = tx.query_row(
            &format!("SELECT COUNT(*) FROM turns WHERE {clause}"),
            params_from_iter(&args),
            |r| r.get(0),
        )?;
        if turns == 0 {
            return Err(StoreError::UnknownScope(crate::describe_filter(filter)));
        }
        // Text hashes of what goes, to drop cache entries nothing else uses.
        let mut hashes: Vec<String> = Vec::new();
        for table in ["turns", "segments"] {
            let mut stmt = tx.prepare(&format!(
                "SELECT DISTINCT text_hash FROM {table} WHERE {clause}"
            ))?;
            let h = stmt
                .query_map(params_from_iter(&args), |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            hashes.extend(h);
        }
        let segments = tx.execute(
            &format!("DELETE FROM segments WHERE {clause}"),
            params_from_iter(&args),
        )?;
        tx.execute(
            &format!("DELETE FROM turns WHERE {clause}"),
            params_from_iter(&args),
        )?;
        tx.execute(
            &format!("DELETE FROM open_segments WHERE {clause}"),
            params_from_iter(&args),
        )?;
        tx.execute(
            &format!("DELETE FROM encoder_states WHERE {clause}"),
            params_from_iter(&args),
        )?;
        let report = commit_delete(tx, &hashes, turns as u64, segments as u64)?;
        Self::checkpoint(self.conn_mut())?;
        Ok(report)
    }

    fn delete_turns(&mut self, deletion: TurnDeletion) -> Result<DeleteReport, StoreError> {
        let turn_ids: Vec<String> = deletion.turns.iter().map(|t| t.0.clone()).collect();
        let segment_ids: Vec<String> = deletion.segments.iter().map(|s| s.0.clone()).collect();
        let tx = self.conn_mut().transaction()?;
        let mut hashes: Vec<String> = Vec::new();
        let (mut turns, mut segments) = (0, 0);
        for (table, ids, removed) in [
            ("segments", &segment_ids, &mut segments),
            ("turns", &turn_ids, &mut turns),
        ] {
            for chunk in ids.chunks(IN_CHUNK) {
                let marks = vec!["?"; chunk.len()].join(",");
                let mut stmt = tx.prepare(&format!(
                    "SELECT DISTINCT text_hash FROM {table} WHERE id IN ({marks})"
                ))?;
                hashes.extend(
                    stmt.query_map(params_from_iter(chunk), |r| r.get::<_, String>(0))?
                        .collect::<Result<Vec<_>, _>>()?,
                );
                if table == "turns" {
                    tx.execute(
                        &format!("DELETE FROM revisions WHERE memory_id IN ({marks})"),
                        params_from_iter(chunk),
                    )?;
                }
                *removed += tx.execute(
                    &format!("DELETE FROM {table} WHERE id IN ({marks})"),
                    params_from_iter(chunk),
                )?;
            }
        }
        write_batch(
            &tx,
            &WriteBatch {
                segments: deletion.replacements,
                open_segments: deletion.open_segments,
                embeddings: deletion.embeddings,
                ..Default::default()
            },
        )?;
        let report = commit_delete(tx, &hashes, turns as u64, segments as u64)?;
        Self::checkpoint(self.conn_mut())?;
        Ok(report)
    }

    fn segments_holding(&self, turns: &[TurnId]) -> Result<Vec<Segment>, StoreError> {
        let conn = self.conn()?;
        let ids: Vec<String> = turns.iter().map(|t| t.0.clone()).collect();
        let mut found = Self::in_chunks(&ids, |marks, chunk| {
            Self::segments_where(
                &conn,
                &format!("id IN (SELECT segment_id FROM segment_turns WHERE turn_id IN ({marks}))"),
                chunk,
            )
        })?;
        let mut seen = HashSet::new();
        found.retain(|s| seen.insert(s.id.clone()));
        Ok(found)
    }

    fn memory_versions(&self, memory: &TurnId) -> Result<Vec<TurnId>, StoreError> {
        let conn = self.conn()?;
        let (exists, is_later): (bool, bool) = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM turns WHERE id = ?1), \
             EXISTS (SELECT 1 FROM revisions WHERE turn_id = ?1)",
            [&memory.0],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        if !exists || is_later {
            return Ok(Vec::new());
        }
        let mut stmt = conn.prepare_cached(
            "SELECT turn_id FROM revisions WHERE memory_id = ?1 ORDER BY version",
        )?;
        let mut versions = vec![memory.clone()];
        for id in stmt.query_map([&memory.0], |r| r.get::<_, String>(0))? {
            versions.push(TurnId(id?));
        }
        Ok(versions)
    }

    fn memory_ids(&self, turns: &[TurnId]) -> Result<HashMap<TurnId, TurnId>, StoreError> {
        let conn = self.conn()?;
        let ids: Vec<String> = turns.iter().map(|t| t.0.clone()).collect();
        let pairs = Self::in_chunks(&ids, |marks, chunk| {
            let mut stmt = conn.prepare(&format!(
                "SELECT turn_id, memory_id FROM revisions WHERE turn_id IN ({marks})"
            ))?;
            let rows = stmt
                .query_map(params_from_iter(chunk), |r| {
                    Ok((TurnId(r.get(0)?), TurnId(r.get(1)?)))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })?;
        Ok(pairs.into_iter().collect())
    }

    fn superseded(&self, user_id: &str) -> Result<HashSet<TurnId>, StoreError> {
        let conn = self.conn()?;
        // CROSS JOIN keeps the (small) superseded set the outer loop: SQLite would otherwise
        // walk every turn of the user and probe the set, a cost that grows with the memory.
        let mut stmt = conn.prepare_cached(
            "SELECT s.turn_id FROM superseded s CROSS JOIN turns t ON t.id = s.turn_id \
             WHERE t.user_id = ?1",
        )?;
        let ids = stmt
            .query_map([user_id], |r| r.get::<_, String>(0).map(TurnId))?
            .collect::<Result<_, _>>()?;
        Ok(ids)
    }

    fn current_turn_facts(
        &self,
        filter: &ScopeFilter,
        narrowing: &Narrowing,
    ) -> Result<Vec<crate::TurnFacts>, StoreError> {
        let created = narrowing.created;
        let conn = self.conn()?;
        let (scope, scope_args) = filter_clause_on("t.", filter);
        // The time is ours, not the caller's: written into the SQL as text.
        let live = format!(
            "t.id NOT IN (SELECT turn_id FROM superseded) \
             AND (t.expires_at IS NULL OR t.expires_at > '{}')",
            instant_text(Utc::now())
        );
        // Stored times differ in their fraction's digits, so the bounds are whole seconds (the
        // first second of the span, the second after it): text order is time order there, and
        // the exact test follows.
        let second = |t: DateTime<Utc>| t.format("%Y-%m-%dT%H:%M:%S").to_string();
        let from = created.from.map(second);
        let to = created.to.map(|t| second(t + chrono::Duration::seconds(1)));
        let mut half = scope_args;
        half.extend(from.iter().chain(&to).cloned());
        let args: Vec<&String> = half.iter().chain(&half).collect();
        let sql = crate::turn_facts_sql(
            "t.metadata",
            &scope,
            &live,
            from.as_ref().map(|_| "?"),
            to.as_ref().map(|_| "?"),
        );
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query(params_from_iter(args))?;
        let mut facts = Vec::new();
        // Read in place: a memory's row costs its id and nothing else it does not keep.
        while let Some(r) = rows.next()? {
            let time = |i| -> Result<Option<DateTime<Utc>>, StoreError> {
                text_at(r, i)?.map(parse_time_text).transpose()
            };
            // The metadata objects are tested here (no index holds metadata): a memory outside
            // the narrowing costs no id.
            let created_at = time(3)?.unwrap_or_default();
            let metadata = crate::stored_metadata(text_at(r, 2)?)?;
            if !narrowing.holds(created_at, metadata.as_ref()) {
                continue;
            }
            facts.push(crate::TurnFacts {
                id: TurnId(r.get(0)?),
                seq: r.get(1)?,
                metadata,
                created_at,
                updated_at: time(4)?.unwrap_or_default(),
                valid_to: time(5)?,
            });
        }
        Ok(facts)
    }

    fn expired_turns(&self, now: DateTime<Utc>, limit: u64) -> Result<Vec<TurnId>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(
            "SELECT id FROM turns WHERE expires_at IS NOT NULL AND expires_at <= ?1 \
             AND id NOT IN (SELECT turn_id FROM superseded) ORDER BY expires_at, seq LIMIT ?2",
        )?;
        let ids = stmt
            .query_map(
                params![instant_text(now), limit.min(i64::MAX as u64) as i64],
                |r| r.get::<_, String>(0).map(TurnId),
            )?
            .collect::<Result<_, _>>()?;
        Ok(ids)
    }

    fn session_neighbourhoods(
        &self,
        ids: &[TurnId],
        span: usize,
    ) -> Result<Vec<Neighbourhood>, StoreError> {
        let conn = self.conn()?;
        // The turns `n` of the session of turn `c` = ?1.
        const SAME_SESSION: &str = "SELECT n.id, n.seq FROM turns c JOIN turns n \
             ON n.user_id = c.user_id AND n.agent_id = c.agent_id AND n.run_id = c.run_id \
             AND n.conversation = c.conversation AND IFNULL(n.session, '') = IFNULL(c.session, '') \
             WHERE c.id = ?1";
        let mut around = conn.prepare_cached(&format!(
            "{SAME_SESSION} AND n.seq < c.seq ORDER BY n.seq DESC LIMIT ?2"
        ))?;
        let mut after = conn.prepare_cached(&format!(
            "{SAME_SESSION} AND n.seq >= c.seq ORDER BY n.seq LIMIT ?2"
        ))?;
        let mut plans: Vec<(TurnId, Vec<TurnId>)> = Vec::with_capacity(ids.len());
        for id in ids {
            let mut members: Vec<(String, i64)> = around
                .query_map(params![id.0, span as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            let following: Vec<(String, i64)> = after
                .query_map(params![id.0, span as i64 + 1], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?
                .collect::<Result<_, _>>()?;
            if following.first().map(|(f, _)| f.as_str()) != Some(id.0.as_str()) {
                continue;
            }
            members.extend(following);
            members.sort_by_key(|(_, seq)| *seq);
            plans.push((
                id.clone(),
                members.into_iter().map(|(m, _)| TurnId(m)).collect(),
            ));
        }
        let wanted: Vec<TurnId> = plans
            .iter()
            .flat_map(|(_, m)| m.iter().cloned())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        // `turns` takes a connection of its own: this one goes back first.
        drop((around, after));
        drop(conn);
        let by_id: HashMap<TurnId, Turn> = self
            .turns(&wanted)?
            .into_iter()
            .map(|t| (t.id.clone(), t))
            .collect();
        Ok(plans
            .into_iter()
            .map(|(center, members)| Neighbourhood {
                center,
                turns: members
                    .iter()
                    .filter_map(|m| by_id.get(m).cloned())
                    .collect(),
            })
            .collect())
    }

    fn list_turn_ids(
        &self,
        filter: &ScopeFilter,
        offset: u64,
        limit: u64,
        current_only: bool,
    ) -> Result<(Vec<TurnId>, u64), StoreError> {
        let conn = self.conn()?;
        let (mut clause, args) = filter_clause(filter);
        if current_only {
            clause.push_str(" AND id NOT IN (SELECT turn_id FROM superseded)");
            // The time is ours, not the caller's: written into the SQL as text.
            clause.push_str(&format!(
                " AND (expires_at IS NULL OR expires_at > '{}')",
                instant_text(Utc::now())
            ));
        }
        let total: i64 = conn.query_row(
            &format!("SELECT COUNT(*) FROM turns WHERE {clause}"),
            params_from_iter(&args),
            |r| r.get(0),
        )?;
        let page = crate::seq_page(offset, limit);
        let mut stmt = conn.prepare(&format!("SELECT id FROM turns WHERE {clause} {page}"))?;
        let ids = stmt
            .query_map(params_from_iter(&args), |r| {
                r.get::<_, String>(0).map(TurnId)
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok((ids, total as u64))
    }

    fn users(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare("SELECT DISTINCT user_id FROM turns ORDER BY user_id")?;
        let users = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(users)
    }

    fn add_api_key(&mut self, key: &ApiKeyRecord) -> Result<(), StoreError> {
        self.conn_mut().execute(
            "INSERT INTO api_keys (id, key_hash, user_id, admin, created) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                key.id,
                key.key_hash,
                key.user_id,
                key.admin,
                key.created.to_rfc3339()
            ],
        )?;
        Ok(())
    }

    fn api_keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT id, key_hash, user_id, admin, created FROM api_keys ORDER BY created",
        )?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, bool>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(id, key_hash, user_id, admin, created)| {
                Ok(ApiKeyRecord {
                    id,
                    key_hash,
                    user_id,
                    admin,
                    created: parse_time(Some(created))?.ok_or_else(|| {
                        StoreError::Corrupt("api key without a creation time".into())
                    })?,
                })
            })
            .collect()
    }

    fn queued_segments(
        &self,
        limit: usize,
        retry_failed: bool,
    ) -> Result<Vec<SegmentId>, StoreError> {
        let conn = self.conn()?;
        cards::queued(&conn, limit, retry_failed)
    }

    fn claim(
        &mut self,
        ids: Option<&[SegmentId]>,
        limit: usize,
        retry_failed: bool,
        lease: std::time::Duration,
    ) -> Result<Vec<SegmentId>, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let claimed = cards::claim(&tx, ids, limit, retry_failed, lease)?;
        tx.commit()?;
        Ok(claimed)
    }

    fn release(&mut self, segment: &SegmentId) -> Result<(), StoreError> {
        self.conn_mut().execute(
            "UPDATE consolidation SET claimed_until = NULL WHERE segment_id = ?1",
            [&segment.0],
        )?;
        Ok(())
    }

    fn export(
        &self,
        table: crate::transfer::Table,
        after: &crate::transfer::Cursor,
        limit: usize,
    ) -> Result<Vec<crate::transfer::Row>, StoreError> {
        crate::sqlite_transfer::export(self, table, after, limit)
    }

    fn import(&mut self, rows: &[crate::transfer::Row]) -> Result<(), StoreError> {
        crate::sqlite_transfer::import(self, rows)
    }

    fn cards_generation(&self, user_id: &str) -> Result<(u64, i64), StoreError> {
        let conn = self.conn()?;
        Ok(conn.query_row(
            "SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM cards WHERE user_id = ?1",
            [user_id],
            |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)),
        )?)
    }

    fn scope_summary(&self, filter: &ScopeFilter) -> Result<ScopeSummary, StoreError> {
        sqlite_inspect::scope_summary(&*self.conn()?, filter)
    }

    fn llm_usage_by_day(&self) -> Result<Vec<DailyUsage>, StoreError> {
        sqlite_inspect::llm_usage_by_day(&*self.conn()?)
    }

    fn turns_by_day(&self) -> Result<Vec<DailyTurns>, StoreError> {
        sqlite_inspect::turns_by_day(&*self.conn()?)
    }

    fn find_cards(
        &self,
        filter: &ScopeFilter,
        query: &CardQuery,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<Card>, u64), StoreError> {
        sqlite_inspect::find_cards(&*self.conn()?, filter, query, offset, limit)
    }

    fn session_turns(
        &self,
        filter: &ScopeFilter,
        conversation: &str,
        session: Option<&str>,
    ) -> Result<Vec<TurnId>, StoreError> {
        sqlite_inspect::session_turns(&*self.conn()?, filter, conversation, session)
    }

    fn commit_cards(&mut self, batch: CardBatch) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        cards::commit(&tx, &batch)?;
        tx.commit()?;
        Ok(())
    }

    fn append_cards(&mut self, cards: &[Card], vectors: &[CardVectors]) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        cards::insert(&tx, cards)?;
        cards::put_vectors(&tx, vectors)?;
        tx.commit()?;
        Ok(())
    }

    fn cards_superseding(&self, id: &CardId) -> Result<Vec<CardId>, StoreError> {
        let conn = self.conn()?;
        cards::superseding(&conn, id)
    }

    fn delete_cards(&mut self, ids: &[CardId]) -> Result<u64, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let mut removed = 0;
        {
            let mut stmt = tx.prepare_cached("DELETE FROM cards WHERE id = ?1")?;
            for id in ids {
                removed += stmt.execute([&id.0])? as u64;
            }
        }
        tx.commit()?;
        Self::checkpoint(self.conn_mut())?;
        Ok(removed)
    }

    fn mark_failed(&mut self, segment: &SegmentId, reason: &str) -> Result<(), StoreError> {
        cards::mark_failed(self.conn_mut(), segment, reason)
    }

    fn cards(&self, filter: &ScopeFilter, current_only: bool) -> Result<Vec<Card>, StoreError> {
        let conn = self.conn()?;
        cards::of_scope(&conn, filter, current_only)
    }

    fn cards_by_id(&self, ids: &[CardId]) -> Result<Vec<Card>, StoreError> {
        let conn = self.conn()?;
        let keys: Vec<String> = ids.iter().map(|c| c.0.clone()).collect();
        let found = Self::in_chunks(&keys, |marks, chunk| {
            cards::load(&conn, &format!("c.id IN ({marks})"), chunk)
        })?;
        let mut by_id: HashMap<CardId, Card> =
            found.into_iter().map(|c| (c.id.clone(), c)).collect();
        Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
    }

    fn lookup_cards(
        &self,
        filter: &ScopeFilter,
        lookup: &CardLookup,
    ) -> Result<Vec<CardId>, StoreError> {
        let conn = self.conn()?;
        cards::lookup(&conn, filter, lookup)
    }

    fn card_vectors(
        &self,
        model: &str,
        ids: &[CardId],
    ) -> Result<HashMap<CardId, Vec<StoredChunk>>, StoreError> {
        let conn = self.conn()?;
        let keys: Vec<String> = ids.iter().map(|c| c.0.clone()).collect();
        let rows = Self::in_chunks(&keys, |marks, chunk| {
            let mut stmt = conn.prepare(&format!(
                "SELECT card_id, chunks FROM card_vectors WHERE model = ? AND card_id IN ({marks})"
            ))?;
            let args = std::iter::once(model.to_string()).chain(chunk.iter().cloned());
            let rows = stmt
                .query_map(params_from_iter(args), |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })?;
        rows.into_iter()
            .map(|(id, blob)| Ok((CardId(id), codec::decode(&blob)?)))
            .collect()
    }

    fn put_card_vectors(&mut self, vectors: &[CardVectors]) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        cards::put_vectors(&tx, vectors)?;
        tx.commit()?;
        Ok(())
    }

    fn record_llm_calls(&mut self, calls: &[LlmCall]) -> Result<(), StoreError> {
        accounting::record(self.conn_mut(), calls)
    }

    fn llm_usage(&self) -> Result<Vec<LlmUsage>, StoreError> {
        let conn = self.conn()?;
        accounting::usage(&conn)
    }

    fn encoder_state(
        &self,
        scope: &Scope,
        conversation: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let conn = self.conn()?;
        cards::encoder_state(&conn, scope, conversation)
    }

    fn stats(&self) -> Result<StoreStats, StoreError> {
        let conn = self.conn()?;
        let count = |sql: &str| -> Result<u64, StoreError> {
            Ok(conn.query_row(sql, [], |r| r.get::<_, i64>(0))? as u64)
        };
        let mut open_turns = 0;
        let mut stmt = conn.prepare("SELECT state FROM open_segments")?;
        for state in stmt.query_map([], |r| r.get::<_, String>(0))? {
            let state: OpenSegment = serde_json::from_str(&state?)
                .map_err(|e| StoreError::Corrupt(format!("open segment state: {e}")))?;
            open_turns += state.turn_ids().len() as u64;
        }
        let mut embedded_chunks = 0u64;
        let mut stmt = conn.prepare("SELECT chunks FROM embeddings")?;
        for blob in stmt.query_map([], |r| r.get::<_, Vec<u8>>(0))? {
            embedded_chunks += codec::decode(&blob?)?.len() as u64;
        }
        let bytes = ["", "-wal", "-shm"]
            .iter()
            .filter_map(|suffix| {
                let mut p = self.path.clone().into_os_string();
                p.push(suffix);
                std::fs::metadata(p).ok().map(|m| m.len())
            })
            .sum();
        Ok(StoreStats {
            users: count("SELECT COUNT(DISTINCT user_id) FROM turns")?,
            conversations: count(
                "SELECT COUNT(*) FROM (SELECT DISTINCT user_id, agent_id, run_id, conversation FROM turns)",
            )?,
            turns: count("SELECT COUNT(*) FROM turns")?,
            segments: count("SELECT COUNT(*) FROM segments")?,
            segmented_turns: count("SELECT COUNT(*) FROM segment_turns")?,
            segment_tokens: count("SELECT COALESCE(SUM(tokens), 0) FROM segments")?,
            open_segment_turns: open_turns,
            embeddings: count("SELECT COUNT(*) FROM embeddings")?,
            embedded_chunks,
            cards: count("SELECT COUNT(*) FROM cards")?,
            segments_pending: count("SELECT COUNT(*) FROM consolidation WHERE status = 'pending'")?,
            segments_failed: count("SELECT COUNT(*) FROM consolidation WHERE status = 'failed'")?,
            bytes,
        })
    }

    fn check_integrity(&self) -> Result<(), StoreError> {
        let (dangling, empty) = {
            let conn = self.conn()?;
            let result: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
            if result != "ok" {
                return Err(StoreError::Integrity(result));
            }
            let count = |sql: &str| -> Result<i64, StoreError> {
                Ok(conn.query_row(sql, [], |r| r.get(0))?)
            };
            (
                count(crate::DANGLING_LINKS_SQL)?,
                count(crate::EMPTY_SEGMENTS_SQL)?,
            )
        };
        // `stats` takes a connection of its own: this one goes back first.
        crate::check_segmentation(dangling, empty, &self.stats()?)
    }
}
