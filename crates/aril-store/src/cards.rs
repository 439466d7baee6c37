//! Cards in SQLite: the `cards` rows, their links (source turns, supersessions) and the structured
//! indexes over their metadata — entity, topic, entity + topic (a join of the two), date (the
//! `cards_time` index) and event frame (`cards_segment`) — plus the consolidation queue and the
//! encoder state. No LLM here: the indexes are built from what the encoder wrote.

use std::collections::{HashMap, HashSet};

use aril_core::{Card, CardId, CardKind, CardTime, Scope, ScopeFilter, SegmentId, TurnId};
use rusqlite::{Connection, OptionalExtension, Transaction, params, params_from_iter};

use crate::{CardBatch, CardLookup, CardVectors, StoreError, codec};

pub(crate) fn kind_text(kind: CardKind) -> Result<String, StoreError> {
    match serde_json::to_value(kind) {
        Ok(serde_json::Value::String(s)) => Ok(s),
        _ => Err(StoreError::Corrupt(format!("card kind {kind:?}"))),
    }
}

pub(crate) fn parse_kind(s: &str) -> Result<CardKind, StoreError> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|_| StoreError::Corrupt(format!("unknown card kind {s:?}")))
}

/// The end of the interval a card time names: its end, else its start plus one unit of its
/// granularity (a day by default).
pub(crate) fn span_end(t: &CardTime) -> Option<chrono::DateTime<chrono::Utc>> {
    if let Some(end) = t.end {
        return Some(end);
    }
    let start = t.start?;
    let months = |n| start.checked_add_months(chrono::Months::new(n));
    match t.granularity.as_str() {
        "year" => months(12),
        "month" => months(1),
        _ => start.checked_add_signed(chrono::TimeDelta::days(1)),
    }
}

/// What BM25 sees of a card: its text, entities and topics (one index for both backends).
pub fn lexical_text(card: &Card) -> String {
    let mut text = card.text.clone();
    for extra in card.entities.iter().chain(&card.topics) {
        text.push(' ');
        text.push_str(extra);
    }
    text
}

pub(crate) fn fold(s: &str) -> String {
    s.trim().to_lowercase()
}

/// Inserts cards with their structured-index rows (entities, topics, source turns) and the cards
/// they supersede. A card whose id exists is left as it is.
pub(crate) fn insert(tx: &Transaction<'_>, cards: &[Card]) -> Result<(), StoreError> {
    let mut card_row = tx.prepare_cached(
        "INSERT OR IGNORE INTO cards (id, user_id, agent_id, run_id, segment_id, kind, text, \
         time_start, time_end, granularity, span_end, valid_from, valid_to) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?;
    let mut turn_link =
        tx.prepare_cached("INSERT OR IGNORE INTO card_turns (card_id, turn_id) VALUES (?1, ?2)")?;
    let mut entity = tx.prepare_cached(
        "INSERT OR IGNORE INTO card_entities (card_id, key, name) VALUES (?1, ?2, ?3)",
    )?;
    let mut topic = tx.prepare_cached(
        "INSERT OR IGNORE INTO card_topics (card_id, key, name) VALUES (?1, ?2, ?3)",
    )?;
    let mut supersede = tx.prepare_cached(
        "INSERT OR IGNORE INTO card_supersedes (card_id, supersedes) VALUES (?1, ?2)",
    )?;
    for c in cards {
        let time = c.time.as_ref();
        card_row.execute(params![
            c.id.0,
            c.scope.user_id,
            c.scope.agent_id.as_deref().unwrap_or(""),
            c.scope.run_id.as_deref().unwrap_or(""),
            c.segment.0,
            kind_text(c.kind)?,
            c.text,
            time.and_then(|t| t.start).map(|t| t.to_rfc3339()),
            time.and_then(|t| t.end).map(|t| t.to_rfc3339()),
            time.map(|t| t.granularity.clone()),
            time.and_then(span_end).map(|t| t.to_rfc3339()),
            c.valid_from.map(crate::sqlite::instant_text),
            c.valid_to.map(crate::sqlite::instant_text),
        ])?;
        for t in &c.source_turns {
            turn_link.execute(params![c.id.0, t.0])?;
        }
        for e in &c.entities {
            entity.execute(params![c.id.0, fold(e), e.trim()])?;
        }
        for t in &c.topics {
            topic.execute(params![c.id.0, fold(t), t.trim()])?;
        }
        for old in &c.supersedes {
            supersede.execute(params![c.id.0, old.0])?;
        }
    }
    Ok(())
}

/// The cards that name `id` in their `supersedes`, in store order.
pub(crate) fn superseding(conn: &Connection, id: &CardId) -> Result<Vec<CardId>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT c.id FROM card_supersedes s JOIN cards c ON c.id = s.card_id \
         WHERE s.supersedes = ?1 ORDER BY c.seq",
    )?;
    let ids = stmt
        .query_map([&id.0], |r| r.get::<_, String>(0).map(CardId))?
        .collect::<Result<_, _>>()?;
    Ok(ids)
}

/// Every card of a batch must come from the batch's segment.
pub(crate) fn check_batch(batch: &CardBatch) -> Result<(), StoreError> {
    match batch.cards.iter().find(|c| c.segment != batch.segment) {
        Some(c) => Err(StoreError::Corrupt(format!(
            "card {} names segment {}, not {}",
            c.id.0, c.segment, batch.segment
        ))),
        None => Ok(()),
    }
}

pub(crate) fn commit(tx: &Transaction<'_>, batch: &CardBatch) -> Result<(), StoreError> {
    let queued: Option<String> = tx
        .query_row(
            "SELECT status FROM consolidation WHERE segment_id = ?1",
            [&batch.segment.0],
            |r| r.get(0),
        )
        .optional()?;
    match queued.as_deref() {
        None => {
            return Err(StoreError::Corrupt(format!(
                "segment {} is not in the consolidation queue (deleted meanwhile?)",
                batch.segment
            )));
        }
        Some("done") => return Err(already_done(&batch.segment)),
        Some(_) => {}
    }
    check_batch(batch)?;
    insert(tx, &batch.cards)?;
    put_vectors(tx, &batch.vectors)?;
    let state = serde_json::to_string(&batch.state)
        .map_err(|e| StoreError::Corrupt(format!("encoder state: {e}")))?;
    tx.execute(
        "INSERT INTO encoder_states (user_id, agent_id, run_id, conversation, state) \
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (user_id, agent_id, run_id, conversation) \
         DO UPDATE SET state = excluded.state",
        params![
            batch.scope.user_id,
            batch.scope.agent_id.as_deref().unwrap_or(""),
            batch.scope.run_id.as_deref().unwrap_or(""),
            batch.conversation,
            state
        ],
    )?;
    tx.execute(
        "UPDATE consolidation SET status = 'done', reason = NULL, attempts = attempts + 1, \
         claimed_until = NULL WHERE segment_id = ?1",
        [&batch.segment.0],
    )?;
    Ok(())
}

pub(crate) fn mark_failed(
    conn: &Connection,
    segment: &SegmentId,
    reason: &str,
) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE consolidation SET status = 'failed', reason = ?2, attempts = attempts + 1, \
         claimed_until = NULL WHERE segment_id = ?1",
        params![segment.0, reason],
    )?;
    Ok(())
}

/// The error for cards of a segment another encoder already wrote.
pub(crate) fn already_done(segment: &SegmentId) -> StoreError {
    StoreError::Conflict(format!(
        "segment {segment}, whose cards are already written,"
    ))
}

/// The statuses a claim may take: pending, and failed ones when retrying.
pub(crate) fn claimable(retry_failed: bool) -> &'static str {
    if retry_failed {
        "('pending', 'failed')"
    } else {
        "('pending')"
    }
}

/// Claims segments inside a transaction (SQLite has one writer, so a select then an update is
/// atomic): see [`crate::Store::claim`].
pub(crate) fn claim(
    tx: &Transaction<'_>,
    ids: Option<&[SegmentId]>,
    limit: usize,
    retry_failed: bool,
    lease: std::time::Duration,
) -> Result<Vec<SegmentId>, StoreError> {
    let now = chrono::Utc::now().timestamp_millis();
    let until = now.saturating_add(lease.as_millis().min(i64::MAX as u128) as i64);
    let only: Option<HashSet<&str>> = ids.map(|ids| ids.iter().map(|i| i.0.as_str()).collect());
    let mut stmt = tx.prepare(&format!(
        "SELECT q.segment_id FROM consolidation q JOIN segments s ON s.id = q.segment_id \
         WHERE q.status IN {} AND (q.claimed_until IS NULL OR q.claimed_until < ?1) \
         ORDER BY s.seq",
        claimable(retry_failed)
    ))?;
    let mut rows = stmt.query([now])?;
    let mut claimed = Vec::new();
    while claimed.len() < limit {
        let Some(r) = rows.next()? else { break };
        let id: String = r.get(0)?;
        if only.as_ref().is_none_or(|o| o.contains(id.as_str())) {
            claimed.push(SegmentId(id));
        }
    }
    drop(rows);
    drop(stmt);
    let mut set =
        tx.prepare("UPDATE consolidation SET claimed_until = ?2 WHERE segment_id = ?1")?;
    for id in &claimed {
        set.execute(params![id.0, until])?;
    }
    Ok(claimed)
}

pub(crate) fn queued(
    conn: &Connection,
    limit: usize,
    retry_failed: bool,
) -> Result<Vec<SegmentId>, StoreError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT q.segment_id FROM consolidation q JOIN segments s ON s.id = q.segment_id \
         WHERE q.status IN {} ORDER BY s.seq LIMIT ?1",
        claimable(retry_failed)
    ))?;
    let ids = stmt
        .query_map([limit.min(i64::MAX as usize) as i64], |r| {
            r.get::<_, String>(0).map(SegmentId)
        })?
        .collect::<Result<_, _>>()?;
    Ok(ids)
}

/// Cards matching a clause over `cards` (aliased `c`), in store order, with their links.
pub(crate) fn load(
    conn: &Connection,
    clause: &str,
    args: &[String],
) -> Result<Vec<Card>, StoreError> {
    struct Row {
        id: String,
        scope: Scope,
        segment: String,
        kind: String,
        text: String,
        start: Option<String>,
        end: Option<String>,
        granularity: Option<String>,
        valid_from: Option<String>,
        valid_to: Option<String>,
    }
    let mut stmt = conn.prepare(&format!(
        "SELECT c.id, c.user_id, c.agent_id, c.run_id, c.segment_id, c.kind, c.text, \
         c.time_start, c.time_end, c.granularity, c.valid_from, c.valid_to \
         FROM cards c WHERE {clause} ORDER BY c.seq"
    ))?;
    let rows: Vec<Row> = stmt
        .query_map(params_from_iter(args), |r| {
            Ok(Row {
                id: r.get(0)?,
                scope: crate::sqlite::scope_from_row(r, 1)?,
                segment: r.get(4)?,
                kind: r.get(5)?,
                text: r.get(6)?,
                start: r.get(7)?,
                end: r.get(8)?,
                granularity: r.get(9)?,
                valid_from: r.get(10)?,
                valid_to: r.get(11)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
    let turns = links(conn, "SELECT card_id, turn_id FROM card_turns", &ids)?;
    let entities = links(conn, "SELECT card_id, name FROM card_entities", &ids)?;
    let topics = links(conn, "SELECT card_id, name FROM card_topics", &ids)?;
    let supersedes = links(
        conn,
        "SELECT card_id, supersedes FROM card_supersedes",
        &ids,
    )?;
    let time = |s: Option<String>| -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
        s.map(|s| {
            chrono::DateTime::parse_from_rfc3339(&s)
                .map(|t| t.with_timezone(&chrono::Utc))
                .map_err(|e| StoreError::Corrupt(format!("card time {s:?}: {e}")))
        })
        .transpose()
    };
    rows.into_iter()
        .map(|r| {
            let take = |m: &HashMap<String, Vec<String>>| m.get(&r.id).cloned().unwrap_or_default();
            Ok(Card {
                kind: parse_kind(&r.kind)?,
                time: match r.granularity {
                    Some(granularity) => Some(CardTime {
                        start: time(r.start)?,
                        end: time(r.end)?,
                        granularity,
                    }),
                    None => None,
                },
                source_turns: take(&turns).into_iter().map(TurnId).collect(),
                entities: take(&entities),
                topics: take(&topics),
                supersedes: take(&supersedes).into_iter().map(CardId).collect(),
                segment: SegmentId(r.segment),
                scope: r.scope,
                text: r.text,
                valid_from: time(r.valid_from)?,
                valid_to: time(r.valid_to)?,
                id: CardId(r.id),
            })
        })
        .collect()
}

/// `card_id → values` for a two-column link query, over many cards.
fn links(
    conn: &Connection,
    select: &str,
    ids: &[String],
) -> Result<HashMap<String, Vec<String>>, StoreError> {
    let pairs = crate::SqliteStore::in_chunks(ids, |marks, chunk| {
        let mut stmt = conn.prepare(&format!(
            "{select} WHERE card_id IN ({marks}) ORDER BY rowid"
        ))?;
        let rows = stmt
            .query_map(params_from_iter(chunk), |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    })?;
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for (card, value) in pairs {
        out.entry(card).or_default().push(value);
    }
    Ok(out)
}

/// The scope clause over `cards c`, and its arguments.
fn scope_clause(filter: &ScopeFilter) -> (String, Vec<String>) {
    crate::sqlite::filter_clause_on("c.", filter)
}

pub(crate) fn of_scope(
    conn: &Connection,
    filter: &ScopeFilter,
    current_only: bool,
) -> Result<Vec<Card>, StoreError> {
    let (mut clause, args) = scope_clause(filter);
    if current_only {
        clause.push_str(&crate::sqlite_inspect::current_cards_clause());
    }
    load(conn, &clause, &args)
}

pub(crate) fn lookup(
    conn: &Connection,
    filter: &ScopeFilter,
    lookup: &CardLookup,
) -> Result<Vec<CardId>, StoreError> {
    let (scope, mut args) = scope_clause(filter);
    let condition = match lookup {
        CardLookup::Entity(e) => {
            args.push(fold(e));
            "c.id IN (SELECT card_id FROM card_entities WHERE key = ?)"
        }
        CardLookup::Topic(t) => {
            args.push(fold(t));
            "c.id IN (SELECT card_id FROM card_topics WHERE key = ?)"
        }
        CardLookup::EntityTopic(e, t) => {
            args.push(fold(e));
            args.push(fold(t));
            "c.id IN (SELECT e.card_id FROM card_entities e JOIN card_topics t \
             ON t.card_id = e.card_id WHERE e.key = ? AND t.key = ?)"
        }
        CardLookup::During(from, to) => {
            args.push(to.to_rfc3339());
            args.push(from.to_rfc3339());
            "c.time_start IS NOT NULL AND c.time_start <= ? AND c.span_end > ?"
        }
        CardLookup::Segment(s) => {
            args.push(s.0.clone());
            "c.segment_id = ?"
        }
    };
    let mut stmt = conn.prepare(&format!(
        "SELECT c.id FROM cards c WHERE {scope} AND {condition} ORDER BY c.seq"
    ))?;
    let ids = stmt
        .query_map(params_from_iter(&args), |r| {
            r.get::<_, String>(0).map(CardId)
        })?
        .collect::<Result<_, _>>()?;
    Ok(ids)
}

pub(crate) fn encoder_state(
    conn: &Connection,
    scope: &Scope,
    conversation: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    let text = crate::sqlite::conversation_state(conn, "encoder_states", scope, conversation)?;
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| StoreError::Corrupt(format!("encoder state: {e}")))
    })
    .transpose()
}

/// Stores card vectors; those of cards that do not exist (any more) are skipped.
pub(crate) fn put_vectors(tx: &Transaction<'_>, vectors: &[CardVectors]) -> Result<(), StoreError> {
    let mut row = tx.prepare_cached(
        "INSERT OR REPLACE INTO card_vectors (card_id, model, chunks) \
         SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM cards WHERE id = ?1)",
    )?;
    for v in vectors {
        row.execute(params![v.card.0, v.model, codec::encode(&v.chunks)])?;
    }
    Ok(())
}
