//! Where aril keeps what it knows. The [`Store`] trait is the storage seam: turns (append-only, the
//! ground state), closed segments, each conversation's open segment, and the embedding cache. One
//! [`WriteBatch`] is one atomic, durable write. [`SqliteStore`] is the embedded implementation;
//! [`PgStore`] keeps the same tables in PostgreSQL, for several processes sharing one database.
//!
//! Only this crate knows SQL.

mod accounting;
mod cards;
mod codec;
mod error;
mod inspect;
pub(crate) mod postgres;
mod schema;
#[cfg(feature = "scratch")]
pub mod scratch;
pub(crate) mod sqlite;
mod sqlite_inspect;
mod sqlite_readers;
mod sqlite_transfer;
pub mod transfer;

use std::collections::{HashMap, HashSet};

use aril_core::{
    Card, Narrowing, Role, Scope, ScopeFilter, Segment, SegmentId, Turn, TurnId, UnitId, UnitKind,
};
use aril_segment::OpenSegment;
use chrono::{DateTime, Utc};
use serde::Serialize;

pub use cards::lexical_text as card_lexical_text;
pub use error::StoreError;
pub use inspect::{CardQuery, DailyTurns, DailyUsage, ScopeSummary};
pub use postgres::{PG_SCHEMA_VERSION, PgSearch, PgStore, redact as redact_url};
pub use schema::SCHEMA_VERSION;
pub use sqlite::SqliteStore;

/// One embedded chunk of a text: byte range and unit vector.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredChunk {
    pub start: u32,
    pub end: u32,
    pub vector: Vec<f32>,
}

/// The vectors of one text under one model (the embedding-cache entry).
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    pub model: String,
    /// The entry's key: a [`aril_core::content_hash`] of the embedded text (with the rule it was
    /// cut by, when that is not the default whole-text chunking; the engine decides).
    pub text_hash: String,
    pub pieces: u32,
    pub chunks: Vec<StoredChunk>,
}

/// A closed segment with the hash of its embedded text.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentRecord {
    pub segment: Segment,
    pub text_hash: String,
}

/// A turn with the key of its vectors in the embedding cache (a hash of the rendered
/// `Speaker: text`, and of the rule it was embedded by when that is not the default).
#[derive(Debug, Clone, PartialEq)]
pub struct TurnRecord {
    pub turn: Turn,
    pub text_hash: String,
}

/// The open segment of one conversation, as a write replaces it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenSegmentRecord {
    pub scope: Scope,
    pub conversation: String,
    pub state: OpenSegment,
    /// The version the writer read ([`OpenRead::version`]): the write applies only if the store
    /// still holds that version, else the whole batch fails with [`StoreError::Conflict`] (another
    /// writer advanced the segment meanwhile) and nothing is written.
    pub read_version: i64,
}

/// A conversation's open segment as read, with its version (0: none stored yet). Every write of
/// the open segment raises the version by one, so two writers never both advance the same state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenRead {
    pub state: OpenSegment,
    pub version: i64,
}

/// Everything one step of ingest writes, applied all-or-nothing.
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    /// New turns; their `seq` is assigned by the store. Turns whose id exists are skipped.
    pub turns: Vec<TurnRecord>,
    pub segments: Vec<SegmentRecord>,
    pub open_segments: Vec<OpenSegmentRecord>,
    pub embeddings: Vec<Embedding>,
    /// Memory versions the batch's turns hold.
    pub revisions: Vec<RevisionRecord>,
}

/// One segment's cards as the encoder wrote them, with the encoder state that follows them in the
/// segment's conversation. Committed at once; the segment is then done.
#[derive(Debug, Clone)]
pub struct CardBatch {
    pub segment: SegmentId,
    pub cards: Vec<Card>,
    pub scope: Scope,
    pub conversation: String,
    pub state: serde_json::Value,
    /// The cards' vectors (any subset; a card without one is embedded when recall needs it).
    pub vectors: Vec<CardVectors>,
}

/// A card's chunk vectors under one embedding model. They live and die with the card.
#[derive(Debug, Clone, PartialEq)]
pub struct CardVectors {
    pub card: aril_core::CardId,
    pub model: String,
    pub chunks: Vec<StoredChunk>,
}

/// One language-model call as it was paid for. Purpose and model are plain text: the store knows
/// no model types. No content and no user is kept.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmCall {
    pub at: DateTime<Utc>,
    pub purpose: String,
    pub model: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// True when the server sent no `usage` and the tokens were counted locally (o200k).
    pub counted_locally: bool,
    /// Prompt and reply in o200k tokens, so runs with different models compare.
    pub prompt_o200k: u64,
    pub completion_o200k: u64,
    pub latency_ms: u64,
    pub attempts: u32,
}

/// The recorded calls of one purpose and model, summed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LlmUsage {
    pub purpose: String,
    pub model: String,
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Calls whose tokens were counted locally because the server reported none.
    pub counted_locally: u64,
    /// Prompt and reply tokens under the o200k tokenizer, over the calls that have them (calls
    /// recorded before schema 5 do not; `o200k_calls` says how many do).
    pub prompt_o200k: u64,
    pub completion_o200k: u64,
    pub o200k_calls: u64,
    pub latency_ms: u64,
}

/// A structured-index lookup over cards (no LLM call): by entity, topic, both, a time window, or
/// the event frame (segment) a card came from. Entity and topic match case-insensitively.
#[derive(Debug, Clone, PartialEq)]
pub enum CardLookup {
    Entity(String),
    Topic(String),
    EntityTopic(String, String),
    /// Cards whose time overlaps `[from, to]`.
    During(DateTime<Utc>, DateTime<Utc>),
    Segment(SegmentId),
}

/// A later version of a memory: the turn `turn` is version `version` (from 2) of the memory whose
/// first version, and id, is the turn `memory`.
#[derive(Debug, Clone, PartialEq)]
pub struct RevisionRecord {
    pub memory: TurnId,
    pub version: u32,
    pub turn: TurnId,
}

/// The deletion of single turns (every version of one memory), applied all-or-nothing with what
/// the turns leave behind rebuilt.
#[derive(Debug, Clone, Default)]
pub struct TurnDeletion {
    pub turns: Vec<TurnId>,
    /// Closed segments that held any of the turns: removed…
    pub segments: Vec<SegmentId>,
    /// …and replaced by these (the same segments without the deleted turns; none when nothing is
    /// left), with the cache entries their vectors need.
    pub replacements: Vec<SegmentRecord>,
    pub embeddings: Vec<Embedding>,
    /// Open segments that held any of the turns, without them.
    pub open_segments: Vec<OpenSegmentRecord>,
}

/// One unit found by a search, with the search's own score (higher is better). A window's hit
/// is its turn's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub unit: UnitId,
    pub score: f32,
}

impl Hit {
    /// Best first: higher score, then the unit's id (so equal scores rank alike everywhere).
    pub fn ranking(a: &Hit, b: &Hit) -> std::cmp::Ordering {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.unit.as_str().cmp(b.unit.as_str()))
    }
}

/// What a committed batch added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommitReport {
    pub turns_added: usize,
    pub turns_skipped: usize,
    pub segments_added: usize,
}

/// A searchable unit (a turn, a segment or a card) with its text and scope, as indexes need it.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitText {
    pub kind: UnitKind,
    pub id: String,
    pub scope: Scope,
    pub text: String,
    /// Store order of the unit inside its kind; indexes remember the highest they have seen.
    pub seq: i64,
    /// The role of the turn a turn or window unit stands for; `None` for segments, cards and
    /// units that are no one turn.
    pub role: Option<Role>,
}

/// The chunk vectors of one unit.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitVectors {
    pub kind: UnitKind,
    pub id: String,
    /// Store order of the unit inside its kind (as [`UnitText::seq`]); cards have none (0).
    pub seq: i64,
    pub scope: Scope,
    pub chunks: Vec<StoredChunk>,
}

/// A turn's metadata as stored (JSON text), read back; text that is not a metadata object is a
/// corrupt store.
pub(crate) fn stored_metadata(
    text: Option<&str>,
) -> Result<Option<aril_core::Metadata>, StoreError> {
    text.map(aril_core::Metadata::from_json)
        .transpose()
        .map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// The SQL of a [`TurnFacts`] query over `turns t`, the same on both stores: the turns that are
/// no later version of a memory (found through the `turns_said` index when a bound is given),
/// then the later versions, whose memory was created when its first version (`f`) was said.
/// `metadata` is the metadata column as the store reads it; `scope` and `live` are conditions on
/// `t`; `from` / `to` are the placeholders of the bounds on when the memory was said, used in
/// both halves (SQLite's `?` takes its arguments twice). The later versions are few: they
/// lead their join (`CROSS JOIN` fixes SQLite's order), so no half walks the whole memory.
pub(crate) fn turn_facts_sql(
    metadata: &str,
    scope: &str,
    live: &str,
    from: Option<&str>,
    to: Option<&str>,
) -> String {
    let said = |a: &str| {
        let mut clause = String::new();
        if let Some(from) = from {
            clause.push_str(&format!(
                " AND COALESCE({a}.event_time, {a}.ingest_time) >= {from}"
            ));
        }
        if let Some(to) = to {
            clause.push_str(&format!(
                " AND COALESCE({a}.event_time, {a}.ingest_time) < {to}"
            ));
        }
        clause
    };
    format!(
        "SELECT t.id, t.seq, {metadata}, COALESCE(t.event_time, t.ingest_time), t.ingest_time, \
         t.valid_to FROM turns t WHERE {scope} AND {live}{first} \
         AND NOT EXISTS (SELECT 1 FROM revisions r WHERE r.turn_id = t.id) \
         UNION ALL \
         SELECT t.id, t.seq, {metadata}, COALESCE(f.event_time, f.ingest_time), t.ingest_time, \
         t.valid_to FROM revisions r CROSS JOIN turns t CROSS JOIN turns f \
         WHERE t.id = r.turn_id AND f.id = r.memory_id AND {scope} AND {live}{later} ORDER BY 2",
        first = said("t"),
        later = said("f"),
    )
}

/// What a filter reads of a turn, without its text: its place, the metadata its client attached,
/// its memory's times as Mem0 names them, and the end of its validity.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnFacts {
    pub id: TurnId,
    pub seq: i64,
    pub metadata: Option<aril_core::Metadata>,
    /// When its memory was first said (else stored): the first version's time, for a later
    /// version.
    pub created_at: DateTime<Utc>,
    /// When this version was stored.
    pub updated_at: DateTime<Utc>,
    pub valid_to: Option<DateTime<Utc>>,
}

impl TurnFacts {
    /// The memory as a filter's condition sees it.
    pub fn subject(&self) -> aril_core::Subject<'_> {
        aril_core::Subject {
            metadata: self.metadata.as_ref(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// Counts over the whole store.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StoreStats {
    pub users: u64,
    pub conversations: u64,
    pub turns: u64,
    pub segments: u64,
    /// Turns inside closed segments.
    pub segmented_turns: u64,
    /// o200k tokens of the closed segments' turns, summed: what encoding them all would read.
    pub segment_tokens: u64,
    pub open_segment_turns: u64,
    pub embeddings: u64,
    pub embedded_chunks: u64,
    pub cards: u64,
    /// Closed segments waiting to be written into cards, and those whose encoding failed.
    pub segments_pending: u64,
    pub segments_failed: u64,
    pub bytes: u64,
}

/// An API key as stored: its hash only, never the key. A key is bound to one user, or is an admin
/// key (no user).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiKeyRecord {
    /// A short public handle for the key (shown in listings and logs).
    pub id: String,
    pub key_hash: String,
    pub user_id: Option<String>,
    pub admin: bool,
    pub created: DateTime<Utc>,
}

/// What a deletion removed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DeleteReport {
    pub turns: u64,
    pub segments: u64,
    pub embeddings: u64,
}

/// The table holding the units of `kind` that have vectors by store order (turns, segments).
pub(crate) fn vector_table(kind: UnitKind) -> Option<&'static str> {
    match kind {
        UnitKind::Turn => Some("turns"),
        UnitKind::Segment => Some("segments"),
        UnitKind::Card | UnitKind::Window => None,
    }
}

/// The segments among `segs` (id, store order) as index units: each rendered from its turns.
/// What both backends' [`Store::units_after`] does once it has the new segments' ids.
pub(crate) fn segment_units(
    store: &(impl Store + ?Sized),
    segs: &[(String, i64)],
) -> Result<Vec<UnitText>, StoreError> {
    let mut out = Vec::with_capacity(segs.len());
    for chunk in segs.chunks(500) {
        let ids: Vec<SegmentId> = chunk.iter().map(|(id, _)| SegmentId(id.clone())).collect();
        for (segment, (_, seq)) in store.segments(&ids)?.into_iter().zip(chunk) {
            let turns = store.turns(&segment.turns)?;
            out.push(UnitText {
                kind: UnitKind::Segment,
                id: segment.id.0,
                scope: segment.scope,
                text: aril_core::render_turns(&turns),
                seq: *seq,
                role: None,
            });
        }
    }
    Ok(out)
}

/// A turn and the turns around it in its session, in store order (the turn among them).
#[derive(Debug, Clone, PartialEq)]
pub struct Neighbourhood {
    pub center: TurnId,
    pub turns: Vec<Turn>,
}

/// The lexical window units ([`UnitKind::Window`]) of the neighbourhoods' centres.
pub fn window_units(neighbourhoods: &[Neighbourhood]) -> Vec<UnitText> {
    neighbourhoods
        .iter()
        .filter_map(|n| {
            let at = n.turns.iter().position(|t| t.id == n.center)?;
            let refs: Vec<&Turn> = n.turns.iter().collect();
            let center = &n.turns[at];
            Some(UnitText {
                kind: UnitKind::Window,
                id: center.id.0.clone(),
                scope: center.turn.scope.clone(),
                text: aril_core::window_text(&refs, at),
                seq: center.seq,
                role: Some(center.turn.role),
            })
        })
        .collect()
}

/// The distinct turns of neighbourhoods, in the order met.
pub(crate) fn members(neighbourhoods: &[Neighbourhood]) -> Vec<TurnId> {
    let mut seen = HashSet::new();
    neighbourhoods
        .iter()
        .flat_map(|n| n.turns.iter().map(|t| t.id.clone()))
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

/// The turns whose windows change when `turns` are added or removed: those within
/// [`aril_core::WINDOW_SPAN`] places of one of them in its session (themselves included when
/// they are still stored).
pub fn windows_touched(
    store: &(impl Store + ?Sized),
    turns: &[TurnId],
) -> Result<Vec<TurnId>, StoreError> {
    Ok(members(
        &store.session_neighbourhoods(turns, aril_core::WINDOW_SPAN)?,
    ))
}

/// The window units that change when the turns `added` are stored: theirs, and those of the
/// turns before them they widen. `read` gives neighbourhoods of [`aril_core::WINDOW_SPAN`]
/// ([`Store::session_neighbourhoods`], or a backend's read inside its own transaction); the
/// new turns' windows come from the first read, and only the turns they widen are read again.
pub fn windows_widened(
    added: &[TurnId],
    mut read: impl FnMut(&[TurnId]) -> Result<Vec<Neighbourhood>, StoreError>,
) -> Result<Vec<UnitText>, StoreError> {
    let around = read(added)?;
    let mut units = window_units(&around);
    let added: HashSet<&TurnId> = added.iter().collect();
    let widened: Vec<TurnId> = members(&around)
        .into_iter()
        .filter(|t| !added.contains(t))
        .collect();
    if !widened.is_empty() {
        units.extend(window_units(&read(&widened)?));
    }
    Ok(units)
}

/// The window units of `centers` as the store holds them now.
pub fn session_windows(
    store: &(impl Store + ?Sized),
    centers: &[TurnId],
) -> Result<Vec<UnitText>, StoreError> {
    Ok(window_units(
        &store.session_neighbourhoods(centers, aril_core::WINDOW_SPAN)?,
    ))
}

/// Counts segment links that point at no turn (the same SQL in both dialects).
pub(crate) const DANGLING_LINKS_SQL: &str = "SELECT COUNT(*) FROM segment_turns st \
     LEFT JOIN turns t ON t.id = st.turn_id WHERE t.id IS NULL";
/// Counts closed segments without a turn (the same SQL in both dialects).
pub(crate) const EMPTY_SEGMENTS_SQL: &str = "SELECT COUNT(*) FROM segments s WHERE NOT EXISTS \
     (SELECT 1 FROM segment_turns st WHERE st.segment_id = s.id)";

/// The integrity rules both backends check over their counts: no dangling segment link, no empty
/// segment, and every turn in exactly one place of the segmentation (a closed segment or an open
/// one).
pub(crate) fn check_segmentation(
    dangling: i64,
    empty: i64,
    stats: &StoreStats,
) -> Result<(), StoreError> {
    if dangling > 0 {
        return Err(StoreError::Integrity(format!(
            "{dangling} segment links point at missing turns"
        )));
    }
    if empty > 0 {
        return Err(StoreError::Integrity(format!(
            "{empty} segments have no turns"
        )));
    }
    if stats.turns != stats.segmented_turns + stats.open_segment_turns {
        return Err(StoreError::Integrity(format!(
            "{} turns, but {} in closed segments and {} in open ones",
            stats.turns, stats.segmented_turns, stats.open_segment_turns
        )));
    }
    Ok(())
}

/// An open segment as a conflict names it: `the open segment of conversation "c" (user "u")`.
pub(crate) fn describe_open(rec: &OpenSegmentRecord) -> String {
    format!(
        "the open segment of conversation {:?} ({})",
        rec.conversation,
        describe_filter(&rec.scope.as_filter())
    )
}

/// A scope filter as messages name it: `user "u", agent "a", run "r"`.
/// `clause` (a `WHERE` condition on `segments`) narrowed to one page of the segments it admits,
/// in store order: `limit` of them after the first `offset`. The condition appears twice, so a
/// positional binding gives its arguments twice.
pub(crate) fn segment_page(clause: &str, offset: u64, limit: u64) -> String {
    let page = seq_page(offset, limit);
    format!("{clause} AND seq IN (SELECT seq FROM segments WHERE {clause} {page})")
}

/// The SQL tail of a page in store order: `limit` rows after the first `offset` (both within
/// what SQL's signed 64-bit bounds take), the same for both backends.
pub(crate) fn seq_page(offset: u64, limit: u64) -> String {
    format!(
        "ORDER BY seq LIMIT {} OFFSET {}",
        limit.min(i64::MAX as u64),
        offset.min(i64::MAX as u64)
    )
}

pub(crate) fn describe_filter(filter: &ScopeFilter) -> String {
    format!(
        "user {:?}{}{}",
        filter.user_id,
        filter
            .agent_id
            .as_ref()
            .map(|a| format!(", agent {a:?}"))
            .unwrap_or_default(),
        filter
            .run_id
            .as_ref()
            .map(|r| format!(", run {r:?}"))
            .unwrap_or_default()
    )
}

/// The storage seam. Implementations: [`SqliteStore`] (embedded) and [`PgStore`] (PostgreSQL).
/// Every method that writes is atomic and durable when it returns. A store is `Sync`: its readers
/// (`&self`) may be called from several threads at once.
pub trait Store: Send + Sync {
    /// Which of `ids` are already stored.
    fn existing_turns(&self, ids: &[TurnId]) -> Result<HashSet<TurnId>, StoreError>;
    /// The open segment of a conversation (empty, version 0, if none).
    fn open_segment(&self, scope: &Scope, conversation: &str) -> Result<OpenRead, StoreError>;
    /// Applies a batch atomically and durably; [`StoreError::Conflict`] (and nothing written) when
    /// an open segment's version is no longer the one the batch read.
    fn commit(&mut self, batch: WriteBatch) -> Result<CommitReport, StoreError>;
    /// Turns by id, in the order asked; unknown ids are left out.
    fn turns(&self, ids: &[TurnId]) -> Result<Vec<Turn>, StoreError>;
    /// Segments by id, in the order asked; unknown ids are left out.
    fn segments(&self, ids: &[SegmentId]) -> Result<Vec<Segment>, StoreError>;
    /// For each of `ids` (unknown ones left out), the turns of its session (same scope,
    /// conversation and session) from `span` places before it to `span` after it, in store
    /// order, itself included: what [`session_windows`] makes its lexical window from.
    fn session_neighbourhoods(
        &self,
        ids: &[TurnId],
        span: usize,
    ) -> Result<Vec<Neighbourhood>, StoreError>;
    /// A page of a scope's closed segments in store order (`limit` of them after the first
    /// `offset`), and how many the scope has in all.
    fn list_segments(
        &self,
        filter: &ScopeFilter,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<Segment>, u64), StoreError>;
    /// Cached embeddings of `model` for the given text hashes.
    fn embeddings(
        &self,
        model: &str,
        hashes: &[String],
    ) -> Result<HashMap<String, Embedding>, StoreError>;
    /// The chunk vectors, under `model`, of the units of a user with a store order above the
    /// given ones (turns, segments; 0 and 0 for all of them), each kind in store order, handed
    /// to `each` one unit at a time: a large user's vectors are never all decoded at once.
    fn each_unit_vectors(
        &self,
        model: &str,
        user_id: &str,
        turn_after: i64,
        segment_after: i64,
        each: &mut dyn FnMut(UnitVectors),
    ) -> Result<(), StoreError>;
    /// [`Store::each_unit_vectors`], collected.
    fn unit_vectors(
        &self,
        model: &str,
        user_id: &str,
        turn_after: i64,
        segment_after: i64,
    ) -> Result<Vec<UnitVectors>, StoreError> {
        let mut out = Vec::new();
        self.each_unit_vectors(model, user_id, turn_after, segment_after, &mut |u| {
            out.push(u)
        })?;
        Ok(out)
    }
    /// The chunk vectors, under `model`, of the units of `kind` (turns or segments) with these
    /// store orders, in no particular order: what a vector graph's candidates are rescored with.
    /// An order with no such unit, or one without vectors under `model`, is left out.
    fn unit_vectors_at(
        &self,
        model: &str,
        kind: UnitKind,
        seqs: &[i64],
    ) -> Result<Vec<UnitVectors>, StoreError>;
    /// Units with a store order above the given ones (turns, segments), for index catch-up: the
    /// first `limit` turns and the first `limit` segments after them, each kind in store order
    /// (a catch-up of a large memory reads it a page at a time).
    fn units_after(
        &self,
        turn_seq: i64,
        segment_seq: i64,
        limit: usize,
    ) -> Result<Vec<UnitText>, StoreError>;
    /// Removes everything of the scopes a filter admits: turns, segments, open segments, and cached
    /// vectors no other unit uses. Fails with [`StoreError::UnknownScope`] when nothing matches.
    fn delete(&mut self, filter: &ScopeFilter) -> Result<DeleteReport, StoreError>;
    /// Removes single turns with their revisions, swaps the segments that held them for their
    /// replacements, and drops cached vectors nothing uses any more.
    fn delete_turns(&mut self, deletion: TurnDeletion) -> Result<DeleteReport, StoreError>;
    /// The closed segments holding any of the turns, in store order.
    fn segments_holding(&self, turns: &[TurnId]) -> Result<Vec<Segment>, StoreError>;
    /// The versions of a memory, first to newest (the first is the memory id itself). Empty when
    /// no turn has this id, or when the turn is a later version of another memory.
    fn memory_versions(&self, memory: &TurnId) -> Result<Vec<TurnId>, StoreError>;
    /// For those of `turns` that are later versions of a memory: the memory's id.
    fn memory_ids(&self, turns: &[TurnId]) -> Result<HashMap<TurnId, TurnId>, StoreError>;
    /// A user's turns that a newer version of their memory replaces.
    fn superseded(&self, user_id: &str) -> Result<HashSet<TurnId>, StoreError>;
    /// The facts of every current turn a filter admits (none a newer version replaces, none
    /// expired) inside `narrowing` (its memory created inside the span; its metadata containing
    /// one of the objects, when some are given), in store order: what a filter on metadata or
    /// times is tested against, read without any text. A bounded span reads the turns said
    /// inside it through an index, not the whole memory; PostgreSQL finds the metadata objects
    /// through an index too.
    fn current_turn_facts(
        &self,
        filter: &ScopeFilter,
        narrowing: &Narrowing,
    ) -> Result<Vec<TurnFacts>, StoreError>;
    /// The facts of the current turns a filter admits that meet `condition`, in store order:
    /// [`Store::current_turn_facts`] inside the condition's narrowing, the condition tested on
    /// each.
    fn current_turn_facts_meeting(
        &self,
        filter: &ScopeFilter,
        condition: &aril_core::Condition,
    ) -> Result<Vec<TurnFacts>, StoreError> {
        let mut facts = self.current_turn_facts(filter, &condition.narrowing())?;
        facts.retain(|f| condition.admits(&f.subject()));
        Ok(facts)
    }
    /// Turns no newer version replaces whose memory expired at or before `now`, soonest expired
    /// first, at most `limit`: what the expiry sweep deletes.
    fn expired_turns(&self, now: DateTime<Utc>, limit: u64) -> Result<Vec<TurnId>, StoreError>;
    /// Closed segments waiting for consolidation (with `retry_failed`, the failed ones too), oldest
    /// first, at most `limit`.
    fn queued_segments(
        &self,
        limit: usize,
        retry_failed: bool,
    ) -> Result<Vec<SegmentId>, StoreError>;
    /// Claims queued segments for one encoder for `lease`: among `ids` (or, with `None`, the
    /// oldest queued ones, failed ones too with `retry_failed`), at most `limit` that no other
    /// claim holds (a claim ends with the segment's cards, its failure, [`Store::release`], or the
    /// lease running out). Returns what it claimed, oldest first. Two processes never hold a claim
    /// on the same segment, so no segment is encoded twice at once.
    fn claim(
        &mut self,
        ids: Option<&[SegmentId]>,
        limit: usize,
        retry_failed: bool,
        lease: std::time::Duration,
    ) -> Result<Vec<SegmentId>, StoreError>;
    /// Ends a claim without an outcome (the encoder could not be reached): the segment is queued
    /// for anyone again.
    fn release(&mut self, segment: &SegmentId) -> Result<(), StoreError>;
    /// Stores a segment's cards, their index entries and supersessions, the conversation's
    /// encoder state, and marks the segment done — one transaction.
    fn commit_cards(&mut self, batch: CardBatch) -> Result<(), StoreError>;
    /// Appends cards outside consolidation (a user's edit of a card: a new card superseding the
    /// old), with their index entries and vectors. Each card's segment must exist.
    fn append_cards(&mut self, cards: &[Card], vectors: &[CardVectors]) -> Result<(), StoreError>;
    /// The cards that supersede `id`, in store order.
    fn cards_superseding(
        &self,
        id: &aril_core::CardId,
    ) -> Result<Vec<aril_core::CardId>, StoreError>;
    /// Removes cards with their index entries, the supersessions they named and their vectors;
    /// returns how many were removed. The verbatim turns they came from stay.
    fn delete_cards(&mut self, ids: &[aril_core::CardId]) -> Result<u64, StoreError>;
    /// Marks a segment's consolidation failed, with the reason (its turns stay searchable).
    fn mark_failed(&mut self, segment: &SegmentId, reason: &str) -> Result<(), StoreError>;
    /// The cards of a scope in store order; with `current_only`, those no newer card supersedes.
    fn cards(&self, filter: &ScopeFilter, current_only: bool) -> Result<Vec<Card>, StoreError>;
    /// Cards by id, in the order asked; unknown ids are left out.
    fn cards_by_id(&self, ids: &[aril_core::CardId]) -> Result<Vec<Card>, StoreError>;
    /// The ids of a scope's cards one structured index finds, in store order.
    fn lookup_cards(
        &self,
        filter: &ScopeFilter,
        lookup: &CardLookup,
    ) -> Result<Vec<aril_core::CardId>, StoreError>;
    /// The stored vectors of cards under `model`; cards without any are left out.
    fn card_vectors(
        &self,
        model: &str,
        ids: &[aril_core::CardId],
    ) -> Result<HashMap<aril_core::CardId, Vec<StoredChunk>>, StoreError>;
    /// Stores card vectors (replacing a card's vectors under the same model). Vectors of cards
    /// that no longer exist are skipped.
    fn put_card_vectors(&mut self, vectors: &[CardVectors]) -> Result<(), StoreError>;
    /// Appends language-model calls to the accounting (durably).
    fn record_llm_calls(&mut self, calls: &[LlmCall]) -> Result<(), StoreError>;
    /// Every recorded call summed by purpose and model, sorted.
    fn llm_usage(&self) -> Result<Vec<LlmUsage>, StoreError>;
    /// The encoder state of a conversation, if one was stored.
    fn encoder_state(
        &self,
        scope: &Scope,
        conversation: &str,
    ) -> Result<Option<serde_json::Value>, StoreError>;
    fn stats(&self) -> Result<StoreStats, StoreError>;
    /// Ids of the turns a filter admits, in store order, from `offset`, at most `limit`; and how
    /// many it admits in all. With `current_only`, turns a newer version replaces are left out.
    fn list_turn_ids(
        &self,
        filter: &ScopeFilter,
        offset: u64,
        limit: u64,
        current_only: bool,
    ) -> Result<(Vec<TurnId>, u64), StoreError>;
    /// Every user with at least one stored turn, sorted.
    fn users(&self) -> Result<Vec<String>, StoreError>;
    /// Stores a new API key (durably).
    fn add_api_key(&mut self, key: &ApiKeyRecord) -> Result<(), StoreError>;
    /// Every stored API key.
    fn api_keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError>;
    /// Checks the file and the links between tables; the error says what is wrong.
    fn check_integrity(&self) -> Result<(), StoreError>;
    /// A fingerprint of a user's cards (their number and newest store order): it changes with
    /// every card written or deleted, by this process or any other, so a cache of the cards can
    /// tell it is stale with one small query.
    fn cards_generation(&self, user_id: &str) -> Result<(u64, i64), StoreError>;
    /// What one scope's memory holds: counts, text bytes, the last write.
    fn scope_summary(&self, filter: &ScopeFilter) -> Result<ScopeSummary, StoreError>;
    /// Every model call summed per UTC day, purpose and model, oldest day first.
    fn llm_usage_by_day(&self) -> Result<Vec<DailyUsage>, StoreError>;
    /// Turns stored per UTC day and role, oldest day first, across the store.
    fn turns_by_day(&self) -> Result<Vec<DailyTurns>, StoreError>;
    /// One page of the cards a query admits in a scope, in store order, and how many it admits
    /// in all (the filters run in the store, on its structured indexes).
    fn find_cards(
        &self,
        filter: &ScopeFilter,
        query: &CardQuery,
        offset: u64,
        limit: u64,
    ) -> Result<(Vec<Card>, u64), StoreError>;
    /// The turns of one session of a conversation in a scope (every version stored there), in
    /// store order; `None` is the conversation's turns that name no session.
    fn session_turns(
        &self,
        filter: &ScopeFilter,
        conversation: &str,
        session: Option<&str>,
    ) -> Result<Vec<TurnId>, StoreError>;
    /// A page of one table's rows in the table's order, after `after`, at most `limit`: what
    /// [`transfer::copy`] moves to another store.
    fn export(
        &self,
        table: transfer::Table,
        after: &transfer::Cursor,
        limit: usize,
    ) -> Result<Vec<transfer::Row>, StoreError>;
    /// Writes exported rows in one transaction; rows the store already holds are left alone
    /// (a segment's place in the consolidation queue and an open segment take the source's).
    fn import(&mut self, rows: &[transfer::Row]) -> Result<(), StoreError>;
}
