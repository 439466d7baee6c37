//! Cards in PostgreSQL: the same rows, links and structured indexes as the SQLite store's
//! `cards` module — entity, topic, entity + topic, date (`cards_time`) and event frame
//! (`cards_segment`) — the consolidation queue and the encoder state.

use std::collections::HashMap;

use aril_core::{Card, CardId, CardTime, ScopeFilter, SegmentId, TurnId};
use postgres::types::ToSql;
use postgres::{GenericClient, Transaction};

use super::{filter_clause, params, scope_at};
use crate::cards::{check_batch, claimable, fold, kind_text, parse_kind, span_end};
use crate::{CardBatch, CardLookup, CardVectors, StoreError, codec};

pub(super) fn queued(
    client: &mut impl GenericClient,
    limit: usize,
    retry_failed: bool,
) -> Result<Vec<SegmentId>, StoreError> {
    let rows = client.query(
        &format!(
            "SELECT q.segment_id FROM consolidation q JOIN segments s ON s.id = q.segment_id \
             WHERE q.status IN {} ORDER BY s.seq LIMIT $1",
            claimable(retry_failed)
        ),
        &[&(limit.min(i64::MAX as usize) as i64)],
    )?;
    Ok(rows.iter().map(|r| SegmentId(r.get(0))).collect())
}

/// Claims segments for one encoder (see [`crate::Store::claim`]): rows another transaction is
/// claiming are skipped, not waited for (`FOR UPDATE SKIP LOCKED`), so concurrent claimers never
/// take the same segment.
pub(super) fn claim(
    tx: &mut Transaction<'_>,
    ids: Option<&[SegmentId]>,
    limit: usize,
    retry_failed: bool,
    lease: std::time::Duration,
) -> Result<Vec<SegmentId>, StoreError> {
    let only: Option<Vec<String>> = ids.map(|ids| ids.iter().map(|i| i.0.clone()).collect());
    let lease_ms = lease.as_millis().min(i64::MAX as u128) as i64;
    let limit = limit.min(i64::MAX as usize) as i64;
    let rows = tx.query(
        &format!(
            "WITH picked AS (SELECT q.segment_id, s.seq FROM consolidation q \
                 JOIN segments s ON s.id = q.segment_id \
                 WHERE q.status IN {} AND (q.claimed_until IS NULL OR q.claimed_until < now()) \
                 AND ($1::TEXT[] IS NULL OR q.segment_id = ANY($1)) \
                 ORDER BY s.seq LIMIT $2 FOR UPDATE OF q SKIP LOCKED) \
             UPDATE consolidation c SET claimed_until = now() + $3 * interval '1 millisecond' \
             FROM picked WHERE c.segment_id = picked.segment_id \
             RETURNING c.segment_id, picked.seq",
            claimable(retry_failed)
        ),
        &[&only, &limit, &(lease_ms as f64)],
    )?;
    let mut claimed: Vec<(i64, SegmentId)> = rows
        .iter()
        .map(|r| (r.get(1), SegmentId(r.get(0))))
        .collect();
    claimed.sort();
    Ok(claimed.into_iter().map(|(_, id)| id).collect())
}

/// Inserts cards with their index rows and supersessions; a card whose id exists is left alone.
pub(super) fn insert(tx: &mut Transaction<'_>, cards: &[Card]) -> Result<(), StoreError> {
    let card_row = tx.prepare(
        "INSERT INTO cards (id, user_id, agent_id, run_id, segment_id, kind, text, time_start, \
         time_end, granularity, span_end, valid_from, valid_to) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
         ON CONFLICT (id) DO NOTHING",
    )?;
    let turn_link = tx.prepare(
        "INSERT INTO card_turns (card_id, turn_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
    )?;
    let entity = tx.prepare(
        "INSERT INTO card_entities (card_id, key, name) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
    )?;
    let topic = tx.prepare(
        "INSERT INTO card_topics (card_id, key, name) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
    )?;
    let supersede = tx.prepare(
        "INSERT INTO card_supersedes (card_id, supersedes) VALUES ($1, $2) ON CONFLICT DO NOTHING",
    )?;
    for c in cards {
        let time = c.time.as_ref();
        tx.execute(
            &card_row,
            &[
                &c.id.0,
                &c.scope.user_id,
                &c.scope.agent_id.as_deref().unwrap_or(""),
                &c.scope.run_id.as_deref().unwrap_or(""),
                &c.segment.0,
                &kind_text(c.kind)?,
                &c.text,
                &time.and_then(|t| t.start),
                &time.and_then(|t| t.end),
                &time.map(|t| t.granularity.clone()),
                &time.and_then(span_end),
                &c.valid_from,
                &c.valid_to,
            ],
        )?;
        for t in &c.source_turns {
            tx.execute(&turn_link, &[&c.id.0, &t.0])?;
        }
        for e in &c.entities {
            tx.execute(&entity, &[&c.id.0, &fold(e), &e.trim()])?;
        }
        for t in &c.topics {
            tx.execute(&topic, &[&c.id.0, &fold(t), &t.trim()])?;
        }
        for old in &c.supersedes {
            tx.execute(&supersede, &[&c.id.0, &old.0])?;
        }
    }
    super::search::index_cards(tx, cards)
}

pub(super) fn commit(tx: &mut Transaction<'_>, batch: &CardBatch) -> Result<(), StoreError> {
    let queued = tx.query_opt(
        "SELECT status FROM consolidation WHERE segment_id = $1 FOR UPDATE",
        &[&batch.segment.0],
    )?;
    let status: Option<String> = queued.map(|r| r.get(0));
    match status.as_deref() {
        None => {
            return Err(StoreError::Corrupt(format!(
                "segment {} is not in the consolidation queue (deleted meanwhile?)",
                batch.segment
            )));
        }
        Some("done") => return Err(crate::cards::already_done(&batch.segment)),
        Some(_) => {}
    }
    check_batch(batch)?;
    insert(tx, &batch.cards)?;
    put_vectors(tx, &batch.vectors)?;
    tx.execute(
        "INSERT INTO encoder_states (user_id, agent_id, run_id, conversation, state) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (user_id, agent_id, run_id, conversation) \
         DO UPDATE SET state = excluded.state",
        &[
            &batch.scope.user_id,
            &batch.scope.agent_id.as_deref().unwrap_or(""),
            &batch.scope.run_id.as_deref().unwrap_or(""),
            &batch.conversation,
            &batch.state,
        ],
    )?;
    tx.execute(
        "UPDATE consolidation SET status = 'done', reason = NULL, attempts = attempts + 1, \
         claimed_until = NULL WHERE segment_id = $1",
        &[&batch.segment.0],
    )?;
    Ok(())
}

/// Cards matching a clause over `cards c`, in store order, with their links.
pub(super) fn load(
    client: &mut impl GenericClient,
    clause: &str,
    args: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Card>, StoreError> {
    let rows = client.query(
        &format!(
            "SELECT c.id, c.user_id, c.agent_id, c.run_id, c.segment_id, c.kind, c.text, \
             c.time_start, c.time_end, c.granularity, c.valid_from, c.valid_to \
             FROM cards c WHERE {clause} ORDER BY c.seq"
        ),
        args,
    )?;
    let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    let mut links = |select: &str| -> Result<HashMap<String, Vec<String>>, StoreError> {
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        for r in client.query(
            &format!("{select} WHERE card_id = ANY($1) ORDER BY n"),
            &[&ids],
        )? {
            out.entry(r.get(0)).or_default().push(r.get(1));
        }
        Ok(out)
    };
    let turns = links("SELECT card_id, turn_id FROM card_turns")?;
    let entities = links("SELECT card_id, name FROM card_entities")?;
    let topics = links("SELECT card_id, name FROM card_topics")?;
    let supersedes = links("SELECT card_id, supersedes FROM card_supersedes")?;
    rows.iter()
        .map(|r| {
            let id: String = r.try_get(0)?;
            let take = |m: &HashMap<String, Vec<String>>| m.get(&id).cloned().unwrap_or_default();
            let kind: String = r.try_get(5)?;
            let granularity: Option<String> = r.try_get(9)?;
            Ok(Card {
                kind: parse_kind(&kind)?,
                time: match granularity {
                    Some(granularity) => Some(CardTime {
                        start: r.try_get(7)?,
                        end: r.try_get(8)?,
                        granularity,
                    }),
                    None => None,
                },
                source_turns: take(&turns).into_iter().map(TurnId).collect(),
                entities: take(&entities),
                topics: take(&topics),
                supersedes: take(&supersedes).into_iter().map(CardId).collect(),
                segment: SegmentId(r.try_get(4)?),
                scope: scope_at(r, 1)?,
                text: r.try_get(6)?,
                valid_from: r.try_get(10)?,
                valid_to: r.try_get(11)?,
                id: CardId(id),
            })
        })
        .collect()
}

pub(super) fn lookup(
    client: &mut impl GenericClient,
    filter: &ScopeFilter,
    lookup: &CardLookup,
) -> Result<Vec<CardId>, StoreError> {
    let (scope, args) = filter_clause("c.", filter, 1);
    let next = args.len() + 1;
    let mut owned: Vec<Box<dyn ToSql + Sync>> = Vec::new();
    let condition = match lookup {
        CardLookup::Entity(e) => {
            owned.push(Box::new(fold(e)));
            format!("c.id IN (SELECT card_id FROM card_entities WHERE key = ${next})")
        }
        CardLookup::Topic(t) => {
            owned.push(Box::new(fold(t)));
            format!("c.id IN (SELECT card_id FROM card_topics WHERE key = ${next})")
        }
        CardLookup::EntityTopic(e, t) => {
            owned.push(Box::new(fold(e)));
            owned.push(Box::new(fold(t)));
            format!(
                "c.id IN (SELECT e.card_id FROM card_entities e JOIN card_topics t \
                 ON t.card_id = e.card_id WHERE e.key = ${next} AND t.key = ${})",
                next + 1
            )
        }
        CardLookup::During(from, to) => {
            owned.push(Box::new(*to));
            owned.push(Box::new(*from));
            format!(
                "c.time_start IS NOT NULL AND c.time_start <= ${next} AND c.span_end > ${}",
                next + 1
            )
        }
        CardLookup::Segment(s) => {
            owned.push(Box::new(s.0.clone()));
            format!("c.segment_id = ${next}")
        }
    };
    let mut all = params(&args);
    all.extend(owned.iter().map(|b| b.as_ref() as &(dyn ToSql + Sync)));
    let rows = client.query(
        &format!("SELECT c.id FROM cards c WHERE {scope} AND {condition} ORDER BY c.seq"),
        &all,
    )?;
    Ok(rows.iter().map(|r| CardId(r.get(0))).collect())
}

/// Stores card vectors; those of cards that do not exist (any more) are skipped.
pub(super) fn put_vectors(
    tx: &mut Transaction<'_>,
    vectors: &[CardVectors],
) -> Result<(), StoreError> {
    let row = tx.prepare(
        "INSERT INTO card_vectors (card_id, model, chunks) \
         SELECT $1::TEXT, $2::TEXT, $3::BYTEA WHERE EXISTS (SELECT 1 FROM cards WHERE id = $1) \
         ON CONFLICT (card_id, model) DO UPDATE SET chunks = excluded.chunks",
    )?;
    let mut rows = Vec::with_capacity(vectors.len());
    let scopes = card_scopes(tx, vectors)?;
    for v in vectors {
        tx.execute(&row, &[&v.card.0, &v.model, &codec::encode(&v.chunks)])?;
        if let Some(scope) = scopes.get(&v.card.0) {
            rows.push(super::search::ChunkRows {
                id: &v.card.0,
                scope,
                model: &v.model,
                chunks: &v.chunks,
            });
        }
    }
    super::search::put_chunks(tx, crate::UnitKind::Card, &rows)
}

/// The scopes of the stored cards among those the vectors name.
fn card_scopes(
    tx: &mut Transaction<'_>,
    vectors: &[CardVectors],
) -> Result<HashMap<String, aril_core::Scope>, StoreError> {
    let ids: Vec<String> = vectors.iter().map(|v| v.card.0.clone()).collect();
    tx.query(
        "SELECT id, user_id, agent_id, run_id FROM cards WHERE id = ANY($1)",
        &[&ids],
    )?
    .iter()
    .map(|r| Ok((r.try_get(0)?, scope_at(r, 1)?)))
    .collect()
}
