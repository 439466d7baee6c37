//! Search inside PostgreSQL: every unit's chunk vectors are rows of `turn_chunks`,
//! `segment_chunks` or `card_chunks` (pgvector, a partial HNSW index per vector size), and its
//! searchable text a `tsvector` whose lexemes are rows of a postings table (`turn_postings`,
//! with windows as a second kind, `segment_postings`, `card_postings`). Writers index a unit in
//! the transaction that stores it ([`index_turns`], [`index_segments`], [`index_cards`]), so a
//! unit is searchable by every process the moment it is committed, and deleting the unit deletes
//! its rows (foreign keys, `ON DELETE CASCADE`).
//!
//! Dense search is approximate where the planner uses HNSW (pgvector 0.8 iterative scans, so a
//! scope filter still fills `k`); exact where it scans a small scope. BM25 uses tantivy's formula
//! (k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5))) with PostgreSQL's `english`
//! configuration (Snowball stemming, stop words dropped), its statistics taken over the units of
//! the filter (counted by the database's triggers as postings come and go: schema 4), where
//! tantivy takes them over the whole index: rankings differ slightly between the backends
//! (measured in `docs/postgres.md`). It reads at most [`POSTINGS_PER_WORD`] postings per word of
//! the question, best first by their weight, so its cost does not grow with the scope; that
//! makes it approximate for words more common than that.

use std::collections::HashMap;

use aril_core::{BM25_QUERY_WORDS, Role, ScopeFilter, Turn, TurnId, UnitId};
use pgvector::Vector;
use postgres::GenericClient;
use postgres::types::ToSql;

use super::{
    Conn, Connector, PgStore, TURN_COLUMNS, filter_clause, params, pool_conn, turn_from_row,
};
use crate::{Hit, StoreError, TurnRecord, UnitKind, codec};

/// The text search configuration of every `tsvector`.
const TS_CONFIG: &str = "english";
/// HNSW indexes pgvector can build (`vector` up to 2,000 dimensions); larger vectors are
/// searched exactly.
const HNSW_MAX_DIMS: usize = 2000;

/// The table of a kind's units and the chunk table beside it, with its id column.
struct Tables {
    units: &'static str,
    chunks: &'static str,
    id: &'static str,
    /// The `tsvector` column a unit's postings are made from, and its length column.
    tsv: &'static str,
    tsv_len: &'static str,
    /// The table of the kind's postings, and the kind's code in it and in the statistics.
    postings: &'static str,
    code: i16,
    /// The role a posting records (only turns have one).
    role: &'static str,
}

fn tables(kind: UnitKind) -> Tables {
    match kind {
        UnitKind::Turn => Tables {
            units: "turns",
            chunks: "turn_chunks",
            id: "turn_id",
            tsv: "tsv",
            tsv_len: "tsv_len",
            postings: "turn_postings",
            code: 0,
            role: "u.role",
        },
        UnitKind::Segment => Tables {
            units: "segments",
            chunks: "segment_chunks",
            id: "segment_id",
            tsv: "tsv",
            tsv_len: "tsv_len",
            postings: "segment_postings",
            code: 2,
            role: "''",
        },
        UnitKind::Card => Tables {
            units: "cards",
            chunks: "card_chunks",
            id: "card_id",
            tsv: "tsv",
            tsv_len: "tsv_len",
            postings: "card_postings",
            code: 3,
            role: "''",
        },
        // A window is a turn's second text; it has no vectors of its own.
        UnitKind::Window => Tables {
            units: "turns",
            chunks: "turn_chunks",
            id: "turn_id",
            tsv: "wtsv",
            tsv_len: "wtsv_len",
            postings: "turn_postings",
            code: 1,
            role: "u.role",
        },
    }
}

/// Creates the HNSW indexes for vectors of `dims` dimensions when they are missing (the
/// 384-dimensional ones come with the schema). Serialised across processes by an advisory lock.
fn ensure_hnsw(client: &mut impl GenericClient, dims: usize) -> Result<(), StoreError> {
    if dims > HNSW_MAX_DIMS {
        return Ok(());
    }
    let name = format!("turn_chunks_hnsw_{dims}");
    let exists: bool = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&name])?
        .get(0);
    if exists {
        return Ok(());
    }
    client.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&(0x6172_696c_0000_0000_i64 + dims as i64)],
    )?;
    for kind in [UnitKind::Turn, UnitKind::Segment, UnitKind::Card] {
        let t = tables(kind);
        client.batch_execute(&format!(
            "CREATE INDEX IF NOT EXISTS {c}_hnsw_{dims} ON {c} \
             USING hnsw ((vec::vector({dims})) vector_cosine_ops) WHERE dims = {dims}",
            c = t.chunks
        ))?;
    }
    Ok(())
}

/// One unit's chunk rows to write.
pub(super) struct ChunkRows<'a> {
    pub id: &'a str,
    pub scope: &'a aril_core::Scope,
    pub model: &'a str,
    pub chunks: &'a [crate::StoredChunk],
}

/// Replaces the chunk rows of units under their model.
pub(super) fn put_chunks(
    client: &mut impl GenericClient,
    kind: UnitKind,
    units: &[ChunkRows<'_>],
) -> Result<(), StoreError> {
    let t = tables(kind);
    let mut dims_seen: Vec<usize> = Vec::new();
    for u in units {
        for c in u.chunks {
            if !dims_seen.contains(&c.vector.len()) {
                dims_seen.push(c.vector.len());
            }
        }
    }
    for dims in dims_seen {
        ensure_hnsw(client, dims)?;
    }
    let clear = client.prepare(&format!(
        "DELETE FROM {} WHERE {} = $1 AND model = $2",
        t.chunks, t.id
    ))?;
    let row = client.prepare(&format!(
        "INSERT INTO {} ({}, model, n, user_id, agent_id, run_id, dims, vec) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        t.chunks, t.id
    ))?;
    for u in units {
        client.execute(&clear, &[&u.id, &u.model])?;
        for (n, c) in u.chunks.iter().enumerate() {
            client.execute(
                &row,
                &[
                    &u.id,
                    &u.model,
                    &(n as i32),
                    &u.scope.user_id,
                    &u.scope.agent_id.as_deref().unwrap_or(""),
                    &u.scope.run_id.as_deref().unwrap_or(""),
                    &(c.vector.len() as i32),
                    &Vector::from(c.vector.clone()),
                ],
            )?;
        }
    }
    Ok(())
}

/// The length (in tokens) at which a posting's `weight` is taken: a typical turn's. The weight
/// only orders a lexeme's postings (which are read first); scores use the scope's mean length.
const WEIGHT_LENGTH: f64 = 32.0;

/// The posting kind of a word a turn and its window both hold when the window's words are the
/// turn's (a long turn fills its window alone): one row serves both searches, and the triggers
/// count it under both kinds.
const SHARED_KIND: i16 = 4;

/// Sets units' `tsvector` from the text they are searched by; returns the units whose words
/// changed, whose postings [`post`] then replaces (a window a new turn would widen past its
/// length limit keeps its words, and its postings).
fn set_texts(
    client: &mut impl GenericClient,
    kind: UnitKind,
    texts: &[(String, String)],
) -> Result<Vec<String>, StoreError> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let (ids, bodies): (Vec<&str>, Vec<&str>) = texts
        .iter()
        .map(|(id, text)| (id.as_str(), text.as_str()))
        .unzip();
    let t = tables(kind);
    let changed = client
        .query(
            &format!(
                "UPDATE {units} u SET {tsv} = v.tsv \
                 FROM (SELECT id, to_tsvector('{TS_CONFIG}', body) AS tsv \
                       FROM unnest($1::TEXT[], $2::TEXT[]) AS v (id, body)) v \
                 WHERE u.id = v.id AND u.{tsv} IS DISTINCT FROM v.tsv RETURNING u.id",
                units = t.units,
                tsv = t.tsv
            ),
            &[&ids, &bodies],
        )?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    Ok(changed)
}

/// The SELECT of the postings of units' `tsvector` column `tsv` (length column `len`) in
/// `units` (alias `u`), as posting `kind`; `role` is the role each records.
fn postings_of(units: &str, tsv: &str, len: &str, kind: &str, role: &str) -> String {
    format!(
        "SELECT u.id, {kind}, u.user_id, u.agent_id, u.run_id, {role}, w.lexeme, f.tf, u.{len}, \
                f.tf / (f.tf + 1.2 * (0.25 + 0.75 * u.{len} / {WEIGHT_LENGTH:.1})) \
         FROM {units} u CROSS JOIN LATERAL unnest(u.{tsv}) w \
              CROSS JOIN LATERAL (SELECT COALESCE(array_length(w.positions, 1), 1) AS tf) f"
    )
}

/// Replaces the postings of units of `kind` (the database's triggers count them). A turn's
/// and its window's postings are replaced together: the words of a turn whose window holds
/// the same words are posted once, as [`SHARED_KIND`].
fn post(client: &mut impl GenericClient, kind: UnitKind, ids: &[String]) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    let t = tables(kind);
    const COLUMNS: &str =
        "(unit_id, kind, user_id, agent_id, run_id, role, lexeme, tf, len, weight)";
    client.execute(
        &format!("DELETE FROM {} WHERE unit_id = ANY($1)", t.postings),
        &[&ids],
    )?;
    let rows = if matches!(kind, UnitKind::Turn | UnitKind::Window) {
        let (tw, ww) = (tables(UnitKind::Turn), tables(UnitKind::Window));
        let turn_kind = format!(
            "CASE WHEN u.{} = u.{} THEN {SHARED_KIND} ELSE {} END",
            ww.tsv, tw.tsv, tw.code
        );
        let turn = postings_of(tw.units, tw.tsv, tw.tsv_len, &turn_kind, tw.role);
        let window = postings_of(ww.units, ww.tsv, ww.tsv_len, &ww.code.to_string(), ww.role);
        format!(
            "{turn} WHERE u.id = ANY($1) \
             UNION ALL {window} WHERE u.id = ANY($1) AND u.{wtsv} IS DISTINCT FROM u.{tsv}",
            wtsv = ww.tsv,
            tsv = tw.tsv,
        )
    } else {
        let rows = postings_of(t.units, t.tsv, t.tsv_len, &t.code.to_string(), t.role);
        format!("{rows} WHERE u.id = ANY($1)")
    };
    client.execute(
        &format!("INSERT INTO {} {COLUMNS} {rows}", t.postings),
        &[&ids],
    )?;
    Ok(())
}

/// Sets units' `tsvector`s and replaces the postings of those whose words changed.
fn put_texts(
    client: &mut impl GenericClient,
    kind: UnitKind,
    texts: &[(String, String)],
) -> Result<(), StoreError> {
    let changed = set_texts(client, kind, texts)?;
    post(client, kind, &changed)
}

/// Per text hash, its cached chunk vectors under each model that has them.
type CachedVectors = HashMap<String, Vec<(String, Vec<crate::StoredChunk>)>>;

/// The cached vectors of text hashes, under every model that has them.
fn cached_vectors(
    client: &mut impl GenericClient,
    hashes: &[String],
) -> Result<CachedVectors, StoreError> {
    let mut out = CachedVectors::new();
    for r in client.query(
        "SELECT text_hash, model, chunks FROM embeddings WHERE text_hash = ANY($1)",
        &[&hashes],
    )? {
        out.entry(r.try_get(0)?)
            .or_default()
            .push((r.try_get(1)?, codec::decode(r.try_get(2)?)?));
    }
    Ok(out)
}

/// Indexes stored turns: their `Speaker: text` for BM25 and the cached vectors of that text as
/// chunk rows (turns of roles that are not embedded have none).
pub(super) fn index_turns(
    client: &mut impl GenericClient,
    ids: &[String],
) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    let rows = client.query(
        &format!("SELECT {TURN_COLUMNS}, text_hash FROM turns WHERE id = ANY($1)"),
        &[&ids],
    )?;
    let mut records: Vec<TurnRecord> = Vec::with_capacity(rows.len());
    for r in &rows {
        records.push(TurnRecord {
            turn: turn_from_row(r)?,
            text_hash: r.try_get(17)?,
        });
    }
    let changed = index_turn_records(client, &records.iter().collect::<Vec<_>>())?;
    post_turns(client, &changed)
}

/// [`index_turns`] for turns whose records the caller holds (a batch that has just stored
/// them), without reading them back, and without their postings: returns the turns whose
/// words changed, for [`post_turns`] once their windows are set too (one posting per word a
/// turn shares with its window).
pub(super) fn index_turn_records(
    client: &mut impl GenericClient,
    turns: &[&TurnRecord],
) -> Result<Vec<String>, StoreError> {
    if turns.is_empty() {
        return Ok(Vec::new());
    }
    let texts: Vec<(String, String)> = turns
        .iter()
        .map(|r| (r.turn.id.0.clone(), r.turn.rendered()))
        .collect();
    let changed = set_texts(client, UnitKind::Turn, &texts)?;
    let hashes: Vec<String> = turns.iter().map(|r| r.text_hash.clone()).collect();
    let vectors = cached_vectors(client, &hashes)?;
    let units: Vec<ChunkRows<'_>> = turns
        .iter()
        .flat_map(|r| {
            vectors
                .get(&r.text_hash)
                .into_iter()
                .flatten()
                .map(|(model, chunks)| ChunkRows {
                    id: &r.turn.id.0,
                    scope: &r.turn.turn.scope,
                    model,
                    chunks,
                })
        })
        .collect();
    put_chunks(client, UnitKind::Turn, &units)?;
    Ok(changed)
}

/// Replaces the postings of turns (and their windows) whose words changed.
pub(super) fn post_turns(
    client: &mut impl GenericClient,
    ids: &[String],
) -> Result<(), StoreError> {
    post(client, UnitKind::Turn, ids)
}

/// Indexes stored segments: the rendered text of their turns for BM25, and their cached (pooled)
/// vectors as chunk rows.
pub(super) fn index_segments(
    client: &mut impl GenericClient,
    ids: &[String],
) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    let segments = super::segments_where(client, "id = ANY($1)", &[&ids])?;
    let hashes: HashMap<String, String> = client
        .query(
            "SELECT id, text_hash FROM segments WHERE id = ANY($1)",
            &[&ids],
        )?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let members: Vec<String> = segments
        .iter()
        .flat_map(|s| s.turns.iter().map(|t| t.0.clone()))
        .collect();
    let rows = client.query(
        &format!("SELECT {TURN_COLUMNS} FROM turns WHERE id = ANY($1)"),
        &[&members],
    )?;
    let mut by_id: HashMap<TurnId, Turn> = HashMap::with_capacity(rows.len());
    for r in &rows {
        let t = turn_from_row(r)?;
        by_id.insert(t.id.clone(), t);
    }
    let texts: Vec<(String, String)> = segments
        .iter()
        .map(|s| {
            let turns: Vec<Turn> = s
                .turns
                .iter()
                .filter_map(|t| by_id.get(t).cloned())
                .collect();
            (s.id.0.clone(), aril_core::render_turns(&turns))
        })
        .collect();
    put_texts(client, UnitKind::Segment, &texts)?;
    let wanted: Vec<String> = hashes.values().cloned().collect();
    let vectors = cached_vectors(client, &wanted)?;
    let units: Vec<ChunkRows<'_>> = segments
        .iter()
        .flat_map(|s| {
            hashes
                .get(&s.id.0)
                .and_then(|h| vectors.get(h))
                .into_iter()
                .flatten()
                .map(|(model, chunks)| ChunkRows {
                    id: &s.id.0,
                    scope: &s.scope,
                    model,
                    chunks,
                })
        })
        .collect();
    put_chunks(client, UnitKind::Segment, &units)
}

/// Indexes stored cards for BM25: their text with entities and topics. (Their vectors become
/// chunk rows when they are stored: [`super::cards::put_vectors`].)
pub(super) fn index_cards(
    client: &mut impl GenericClient,
    cards: &[aril_core::Card],
) -> Result<(), StoreError> {
    let texts: Vec<(String, String)> = cards
        .iter()
        .map(|c| (c.id.0.clone(), crate::cards::lexical_text(c)))
        .collect();
    put_texts(client, UnitKind::Card, &texts)
}

/// For each of `ids`, its session neighbourhood: the turns of its scope, conversation and
/// session from `span` places before it to `span` after it, in store order.
pub(super) fn neighbourhoods(
    client: &mut impl GenericClient,
    ids: &[String],
    span: usize,
) -> Result<Vec<crate::Neighbourhood>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    const COLUMNS: &str = "t.id, t.seq, t.user_id, t.agent_id, t.run_id, t.conversation, \
         t.session, t.role, t.speaker, t.text, t.event_time, t.ingest_time, t.source_id, \
         t.metadata::text, t.expires_at, t.immutable, t.valid_to";
    const SAME_SESSION: &str = "t.user_id = c.user_id AND t.agent_id = c.agent_id \
         AND t.run_id = c.run_id AND t.conversation = c.conversation \
         AND COALESCE(t.session, '') = COALESCE(c.session, '')";
    let rows = client.query(
        &format!(
            "SELECT n.*, c.id FROM turns c CROSS JOIN LATERAL ( \
               (SELECT {COLUMNS} FROM turns t WHERE {SAME_SESSION} AND t.seq < c.seq \
                ORDER BY t.seq DESC LIMIT $2) \
               UNION ALL \
               (SELECT {COLUMNS} FROM turns t WHERE {SAME_SESSION} AND t.seq >= c.seq \
                ORDER BY t.seq LIMIT $2 + 1)) n \
             WHERE c.id = ANY($1)"
        ),
        &[&ids, &(span as i64)],
    )?;
    let mut by_center: HashMap<String, Vec<Turn>> = HashMap::new();
    for r in &rows {
        by_center
            .entry(r.try_get(17)?)
            .or_default()
            .push(turn_from_row(r)?);
    }
    Ok(ids
        .iter()
        .filter_map(|id| {
            let mut turns = by_center.remove(id)?;
            turns.sort_by_key(|t| t.seq);
            Some(crate::Neighbourhood {
                center: TurnId(id.clone()),
                turns,
            })
        })
        .collect())
}

/// Sets the window `tsvector` of the turns `centers` from their neighbourhoods as stored now,
/// with their postings.
pub(super) fn index_windows(
    client: &mut impl GenericClient,
    centers: &[String],
) -> Result<(), StoreError> {
    let units = crate::window_units(&neighbourhoods(client, centers, aril_core::WINDOW_SPAN)?);
    let changed = set_windows(client, &units)?;
    post_turns(client, &changed)
}

/// Writes window units' `tsvector`s; returns the turns whose window words changed, for
/// [`post_turns`].
pub(super) fn set_windows(
    client: &mut impl GenericClient,
    units: &[crate::UnitText],
) -> Result<Vec<String>, StoreError> {
    let texts: Vec<(String, String)> = units
        .iter()
        .map(|u| (u.id.clone(), u.text.clone()))
        .collect();
    set_texts(client, UnitKind::Window, &texts)
}

/// Cards a newer card supersedes, or that a forgetting says no longer hold, are not found
/// (recall shows what holds now).
fn current_only(kind: UnitKind, column: &str) -> String {
    match kind {
        UnitKind::Card => format!(
            " AND {column} NOT IN (SELECT supersedes FROM card_supersedes) \
             AND {column} NOT IN (SELECT id FROM cards WHERE valid_to <= now())"
        ),
        _ => String::new(),
    }
}

/// The posting kinds a search of `kind` reads.
fn posting_kinds(kind: UnitKind) -> Vec<i16> {
    match kind {
        UnitKind::Turn | UnitKind::Window => vec![tables(kind).code, SHARED_KIND],
        UnitKind::Segment | UnitKind::Card => vec![tables(kind).code],
    }
}

/// Postings read per word of a question, best weight first. A word held by more units than
/// this adds to the scores of its best postings only: a unit found by a rarer word but beyond
/// this rank in a common one misses that word's (small, common-word) part of its score, and a
/// unit holding only common words beyond this rank in each is not found.
const POSTINGS_PER_WORD: usize = 2000;

/// Every posting as the statistics count it (a common CTE, named `counted`): a word a turn and
/// its window share ([`SHARED_KIND`]) counts as the turn's and as the window's, as the triggers
/// of schema 4 count it.
fn counted_postings() -> String {
    let (turn, window) = (tables(UnitKind::Turn).code, tables(UnitKind::Window).code);
    format!(
        "counted AS ( \
         SELECT p.user_id, p.agent_id, p.run_id, k.kind, p.lexeme, p.unit_id, p.len \
         FROM (SELECT user_id, agent_id, run_id, kind, lexeme, unit_id, len FROM turn_postings \
               UNION ALL SELECT user_id, agent_id, run_id, kind, lexeme, unit_id, len \
                         FROM segment_postings \
               UNION ALL SELECT user_id, agent_id, run_id, kind, lexeme, unit_id, len \
                         FROM card_postings) p \
         CROSS JOIN LATERAL (SELECT p.kind WHERE p.kind <> {SHARED_KIND} \
                             UNION ALL SELECT {turn} WHERE p.kind = {SHARED_KIND} \
                             UNION ALL SELECT {window} WHERE p.kind = {SHARED_KIND}) k (kind))"
    )
}

/// `lexical_terms` as the postings make it: units per scope, kind and word.
const EXPECTED_TERMS: &str = "SELECT user_id, agent_id, run_id, kind, lexeme, COUNT(*)::BIGINT AS n \
     FROM counted GROUP BY user_id, agent_id, run_id, kind, lexeme";

/// `lexical_totals` as the postings make it: units and their summed lengths per scope and kind.
const EXPECTED_TOTALS: &str = "SELECT user_id, agent_id, run_id, kind, COUNT(*)::BIGINT AS units, \
     SUM(len)::BIGINT AS length \
     FROM (SELECT DISTINCT user_id, agent_id, run_id, kind, unit_id, len FROM counted) d \
     GROUP BY user_id, agent_id, run_id, kind";

/// Search inside a PostgreSQL store (pgvector HNSW over chunk rows, BM25 over `tsvector`
/// columns), which indexes each unit in the commit that stores it, so every process sharing the
/// store sees the same index the moment a write commits. A handle on the store's reader
/// connections ([`PgStore::searcher`]): it searches while the store writes.
pub struct PgSearch {
    /// `None` only while being dropped.
    readers: Option<r2d2::Pool<Connector>>,
}

impl PgStore {
    /// A search over this store, sharing its reader connections.
    pub fn searcher(&self) -> PgSearch {
        PgSearch {
            readers: self.readers.clone(),
        }
    }
}

impl Drop for PgSearch {
    /// As [`PgStore`]'s: connections close on a thread of their own (never inside an async
    /// context).
    fn drop(&mut self) {
        let readers = self.readers.take();
        let _ = std::thread::spawn(move || drop(readers)).join();
    }
}

impl PgSearch {
    fn conn(&self) -> Result<Conn, StoreError> {
        pool_conn(self.readers.as_ref())
    }

    /// How many rows of the BM25 statistics (`lexical_terms`, `lexical_totals`) disagree with
    /// what the postings hold: word counts, then unit totals. Both are zero unless a trigger
    /// was bypassed (a restore of some tables only, a hand edit).
    pub fn statistics_mismatches(&self) -> Result<(i64, i64), StoreError> {
        let mut client = self.conn()?;
        let counted = counted_postings();
        let count = |client: &mut Conn, sql: String| -> Result<i64, StoreError> {
            Ok(client.query_one(&sql, &[])?.try_get(0)?)
        };
        let terms = count(
            &mut client,
            format!(
                "WITH {counted}, expected AS ({EXPECTED_TERMS}) \
                 SELECT COUNT(*) FROM expected e FULL JOIN lexical_terms t \
                 USING (user_id, agent_id, run_id, kind, lexeme) WHERE e.n IS DISTINCT FROM t.n"
            ),
        )?;
        let totals = count(
            &mut client,
            format!(
                "WITH {counted}, expected AS ({EXPECTED_TOTALS}) \
                 SELECT COUNT(*) FROM expected e FULL JOIN lexical_totals t \
                 USING (user_id, agent_id, run_id, kind) \
                 WHERE e.units IS DISTINCT FROM t.units OR e.length IS DISTINCT FROM t.length"
            ),
        )?;
        Ok((terms, totals))
    }

    /// Counts the BM25 statistics again from the postings, in one transaction that holds the
    /// postings and statistics tables against writers meanwhile (a writer waits, or, caught
    /// between two of the tables, one of the two is refused as a deadlock and can run again).
    pub fn recount_statistics(&self) -> Result<(), StoreError> {
        let mut client = self.conn()?;
        let mut tx = client.transaction()?;
        let counted = counted_postings();
        tx.batch_execute(&format!(
            "LOCK TABLE turn_postings, segment_postings, card_postings, lexical_terms, \
             lexical_totals IN SHARE ROW EXCLUSIVE MODE;
             DELETE FROM lexical_terms;
             DELETE FROM lexical_totals;
             INSERT INTO lexical_terms (user_id, agent_id, run_id, kind, lexeme, n)
                 WITH {counted} {EXPECTED_TERMS};
             INSERT INTO lexical_totals (user_id, agent_id, run_id, kind, units, length)
                 WITH {counted} {EXPECTED_TOTALS};"
        ))?;
        tx.commit()?;
        Ok(())
    }

    /// The `k` units of `kind` inside the filter whose best chunk vector under `model` is
    /// nearest `query` (cosine), best first. Cards: current ones only (none a newer card
    /// supersedes). A window has no vectors of its own: none are found.
    pub fn dense(
        &self,
        model: &str,
        filter: &ScopeFilter,
        query: &[f32],
        k: usize,
        kind: UnitKind,
    ) -> Result<Vec<Hit>, StoreError> {
        if k == 0 || query.is_empty() || kind == UnitKind::Window {
            // A window has no vectors of its own (its turn's are searched as the turn).
            return Ok(Vec::new());
        }
        let t = tables(kind);
        let dims = query.len();
        let (scope, args) = filter_clause("c.", filter, 3);
        let current = current_only(kind, &format!("c.{}", t.id));
        let q = Vector::from(query.to_vec());
        let mut client = self.conn()?;
        // A long unit has several chunks: ask for more rows than units until k units are found
        // or the scope has no more.
        let mut rows_wanted = (k * 2).max(20);
        loop {
            let sql = format!(
                "SELECT c.{id}, (c.vec::vector({dims}) <=> $1::vector({dims}))::FLOAT8 \
                 FROM {chunks} c WHERE c.model = $2 AND c.dims = {dims} AND {scope}{current} \
                 ORDER BY c.vec::vector({dims}) <=> $1::vector({dims}) LIMIT {rows_wanted}",
                id = t.id,
                chunks = t.chunks,
            );
            let mut all: Vec<&(dyn ToSql + Sync)> = vec![&q, &model];
            all.extend(params(&args));
            let rows = client.query(&sql, &all)?;
            let mut best: HashMap<String, f32> = HashMap::new();
            for r in &rows {
                let id: String = r.try_get(0)?;
                let score = 1.0 - r.try_get::<_, f64>(1)? as f32;
                let entry = best.entry(id).or_insert(f32::MIN);
                *entry = entry.max(score);
            }
            if best.len() >= k || rows.len() < rows_wanted {
                let mut hits: Vec<Hit> = best
                    .into_iter()
                    .map(|(id, score)| Hit {
                        unit: UnitId::of(kind, id),
                        score,
                    })
                    .collect();
                hits.sort_by(Hit::ranking);
                hits.truncate(k);
                return Ok(hits);
            }
            rows_wanted *= 4;
        }
    }

    /// The `k` units of `kind` inside the filter with the best BM25 score (k1 = 1.2, b = 0.75,
    /// statistics over the filter's units of that kind, superseded cards included) for the
    /// words of `query`, best first, summed over each word's best [`POSTINGS_PER_WORD`]
    /// postings.
    /// With `roles`, only the turns (or windows) of turns of those roles are returned, while
    /// the statistics still count every unit of the kind; segments and cards have no role, so a
    /// role restriction finds none of them.
    pub fn lexical(
        &self,
        filter: &ScopeFilter,
        query: &str,
        k: usize,
        kind: UnitKind,
        roles: Option<&[Role]>,
    ) -> Result<Vec<Hit>, StoreError> {
        // Only turns (and their windows, rows of the same table) have a role.
        let has_role = matches!(kind, UnitKind::Turn | UnitKind::Window);
        if k == 0 || query.trim().is_empty() || (roles.is_some() && !has_role) {
            return Ok(Vec::new());
        }
        let t = tables(kind);
        let code = t.code;
        let (scope, mut args) = filter_clause("p.", filter, 2);
        let (stats_scope, _) = filter_clause("t.", filter, 2);
        let current = current_only(kind, "p.unit_id");
        let returned = match roles {
            Some(roles) => {
                let names: Vec<&str> = roles.iter().map(|r| r.as_str()).collect();
                args.push(names.join(","));
                format!(
                    " AND p.role = ANY(string_to_array(${}, ','))",
                    args.len() + 1
                )
            }
            None => String::new(),
        };
        // Per posting kind the kind holds (a turn's words and its window's share one where
        // they are the same), a word's best postings: an index range read in order.
        let best = posting_kinds(kind)
            .iter()
            .map(|posted| {
                format!(
                    "(SELECT p.unit_id, p.tf, p.len FROM {postings} p \
                     WHERE {scope} AND p.kind = {posted} AND p.lexeme = i.lexeme{returned}{current} \
                     ORDER BY p.weight DESC LIMIT {POSTINGS_PER_WORD})",
                    postings = t.postings
                )
            })
            .collect::<Vec<_>>()
            .join(" UNION ALL ");
        // Each word's idf from the counted document frequencies of the filter's scopes (the
        // question's `BM25_QUERY_WORDS` rarest words held there, as `aril_core::bm25` says); per
        // word, its best postings by weight (an index range, read in order); a unit's score sums
        // the postings read. The role restriction picks the postings read, not the statistics.
        let sql = format!(
            "WITH words AS (SELECT DISTINCT lexeme FROM unnest(to_tsvector('{TS_CONFIG}', $1))), \
             st AS (SELECT COALESCE(SUM(t.units), 0)::FLOAT8 AS n, \
                    GREATEST(COALESCE(SUM(t.length)::FLOAT8 / NULLIF(SUM(t.units), 0), 1), 1) AS avgdl \
                    FROM lexical_totals t WHERE t.kind = {code} AND {stats_scope}), \
             idf AS (SELECT w.lexeme, LN(1 + (st.n - d.n + 0.5) / (d.n + 0.5)) AS w \
                    FROM words w CROSS JOIN st CROSS JOIN LATERAL ( \
                        SELECT COALESCE(SUM(t.n), 0)::FLOAT8 AS n FROM lexical_terms t \
                        WHERE t.kind = {code} AND t.lexeme = w.lexeme AND {stats_scope}) d \
                    WHERE d.n > 0 ORDER BY d.n, w.lexeme COLLATE \"C\" LIMIT {BM25_QUERY_WORDS}) \
             SELECT p.unit_id, SUM(i.w * p.tf * 2.2 \
                    / (p.tf + 1.2 * (0.25 + 0.75 * p.len / st.avgdl)))::FLOAT8 AS score \
             FROM idf i CROSS JOIN st CROSS JOIN LATERAL ({best}) p \
             GROUP BY p.unit_id ORDER BY score DESC, p.unit_id LIMIT {k}",
        );
        let mut all: Vec<&(dyn ToSql + Sync)> = vec![&query];
        all.extend(params(&args));
        let rows = self.conn()?.query(&sql, &all)?;
        rows.iter()
            .map(|r| {
                Ok(Hit {
                    unit: UnitId::of(kind, r.try_get(0)?),
                    score: r.try_get::<_, f64>(1)? as f32,
                })
            })
            .collect()
    }
}
