//! [`crate::transfer`] for PostgreSQL: pages of each table in its order, and imports in one
//! transaction through the writers ingest and consolidation use (so imported units are indexed
//! for search in the same commit).

use std::collections::HashMap;

use aril_core::{CardId, TurnId};

use super::{PgStore, scope_at, write_batch};
use crate::transfer::{Cursor, QueueState, Row, SegmentMeta, Table};
use crate::{
    CardVectors, Embedding, LlmCall, OpenSegmentRecord, RevisionRecord, Store, StoreError, codec,
};

pub(super) fn export(
    store: &PgStore,
    table: Table,
    after: &Cursor,
    limit: usize,
) -> Result<Vec<Row>, StoreError> {
    let limit = limit.min(i64::MAX as usize) as i64;
    match table {
        Table::Turns => {
            let keys: Vec<(String, String)> = store
                .conn()?
                .query(
                    "SELECT id, text_hash FROM turns WHERE seq > $1 ORDER BY seq LIMIT $2",
                    &[&after.seq(), &limit],
                )?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            crate::transfer::turn_rows(store, keys)
        }
        Table::Segments => {
            let rows = store.conn()?.query(
                "SELECT s.id, s.seq, s.text_hash, q.status, q.reason, q.attempts FROM segments s \
                 LEFT JOIN consolidation q ON q.segment_id = s.id WHERE s.seq > $1 \
                 ORDER BY s.seq LIMIT $2",
                &[&after.seq(), &limit],
            )?;
            let mut meta: Vec<SegmentMeta> = Vec::with_capacity(rows.len());
            for r in &rows {
                let status: Option<String> = r.try_get(3)?;
                let queue = match status {
                    Some(status) => Some(QueueState {
                        status,
                        reason: r.try_get(4)?,
                        attempts: r.try_get::<_, i32>(5)? as i64,
                    }),
                    None => None,
                };
                meta.push((
                    r.try_get::<_, String>(0)?,
                    r.try_get::<_, i64>(1)?,
                    r.try_get::<_, String>(2)?,
                    queue,
                ));
            }
            crate::transfer::segment_rows(store, meta)
        }
        Table::OpenSegments => store
            .conn()?
            .query(
                "SELECT user_id, agent_id, run_id, conversation, state, version FROM open_segments \
                 ORDER BY user_id, agent_id, run_id, conversation LIMIT $1",
                &[&limit],
            )?
            .iter()
            .map(|r| {
                Ok(Row::OpenSegment(OpenSegmentRecord {
                    scope: scope_at(r, 0)?,
                    conversation: r.try_get(3)?,
                    state: serde_json::from_value(r.try_get(4)?)
                        .map_err(|e| StoreError::Corrupt(format!("open segment state: {e}")))?,
                    read_version: r.try_get(5)?,
                }))
            })
            .collect(),
        Table::Embeddings => {
            let (model, hash) = after.key();
            store
                .conn()?
                .query(
                    "SELECT model, text_hash, pieces, chunks FROM embeddings \
                     WHERE (model, text_hash) > ($1, $2) ORDER BY model, text_hash LIMIT $3",
                    &[&model, &hash, &limit],
                )?
                .iter()
                .map(|r| {
                    Ok(Row::Embedding(Embedding {
                        model: r.try_get(0)?,
                        text_hash: r.try_get(1)?,
                        pieces: r.try_get::<_, i32>(2)? as u32,
                        chunks: codec::decode(r.try_get(3)?)?,
                    }))
                })
                .collect()
        }
        Table::Revisions => {
            let (turn, _) = after.key();
            store
                .conn()?
                .query(
                    "SELECT turn_id, memory_id, version FROM revisions WHERE turn_id > $1 \
                     ORDER BY turn_id LIMIT $2",
                    &[&turn, &limit],
                )?
                .iter()
                .map(|r| {
                    Ok(Row::Revision(RevisionRecord {
                        turn: TurnId(r.try_get(0)?),
                        memory: TurnId(r.try_get(1)?),
                        version: r.try_get::<_, i32>(2)? as u32,
                    }))
                })
                .collect()
        }
        Table::Cards => {
            let keys: Vec<(String, i64)> = store
                .conn()?
                .query(
                    "SELECT id, seq FROM cards WHERE seq > $1 ORDER BY seq LIMIT $2",
                    &[&after.seq(), &limit],
                )?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            let texts: Vec<String> = keys.iter().map(|(id, _)| id.clone()).collect();
            let mut vectors: HashMap<String, Vec<CardVectors>> = HashMap::new();
            for r in store.conn()?.query(
                "SELECT card_id, model, chunks FROM card_vectors WHERE card_id = ANY($1) \
                 ORDER BY card_id, model",
                &[&texts],
            )? {
                let card: String = r.try_get(0)?;
                vectors.entry(card.clone()).or_default().push(CardVectors {
                    card: CardId(card),
                    model: r.try_get(1)?,
                    chunks: codec::decode(r.try_get(2)?)?,
                });
            }
            crate::transfer::card_rows(store, keys, vectors)
        }
        Table::EncoderStates => store
            .conn()?
            .query(
                "SELECT user_id, agent_id, run_id, conversation, state FROM encoder_states \
                 ORDER BY user_id, agent_id, run_id, conversation LIMIT $1",
                &[&limit],
            )?
            .iter()
            .map(|r| {
                Ok(Row::EncoderState {
                    scope: scope_at(r, 0)?,
                    conversation: r.try_get(3)?,
                    state: r.try_get(4)?,
                })
            })
            .collect(),
        Table::LlmCalls => store
            .conn()?
            .query(
                "SELECT at, purpose, model, prompt_tokens, completion_tokens, counted_locally, \
                 latency_ms, attempts, prompt_o200k, completion_o200k FROM llm_calls \
                 ORDER BY seq LIMIT $1",
                &[&limit],
            )?
            .iter()
            .map(|r| {
                let po: Option<i64> = r.try_get(8)?;
                let co: Option<i64> = r.try_get(9)?;
                Ok(Row::LlmCall {
                    o200k: po.is_some(),
                    call: LlmCall {
                        at: r.try_get(0)?,
                        purpose: r.try_get(1)?,
                        model: r.try_get(2)?,
                        prompt_tokens: r.try_get::<_, i64>(3)? as u64,
                        completion_tokens: r.try_get::<_, i64>(4)? as u64,
                        counted_locally: r.try_get(5)?,
                        latency_ms: r.try_get::<_, i64>(6)? as u64,
                        attempts: r.try_get::<_, i32>(7)? as u32,
                        prompt_o200k: po.unwrap_or(0) as u64,
                        completion_o200k: co.unwrap_or(0) as u64,
                    },
                })
            })
            .collect(),
        Table::ApiKeys => Ok(store.api_keys()?.into_iter().map(Row::ApiKey).collect()),
    }
}

pub(super) fn import(store: &mut PgStore, rows: &[Row]) -> Result<(), StoreError> {
    let client = store.writer();
    let mut tx = client.transaction()?;
    let (batch, queues) = crate::transfer::ingest_part(rows);
    // A move copies the embedding cache first, so the turns and segments written here find
    // their vectors for the search index.
    write_batch(&mut tx, &batch)?;
    for (segment, q) in queues {
        tx.execute(
            "UPDATE consolidation SET status = $2, reason = $3, attempts = $4 \
             WHERE segment_id = $1",
            &[&segment.0, &q.status, &q.reason, &(q.attempts as i32)],
        )?;
    }
    for row in rows {
        match row {
            Row::OpenSegment(o) => {
                let state = serde_json::to_value(&o.state)
                    .map_err(|e| StoreError::Corrupt(format!("open segment state: {e}")))?;
                tx.execute(
                    "INSERT INTO open_segments (user_id, agent_id, run_id, conversation, state, \
                     version) VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT (user_id, agent_id, run_id, conversation) \
                     DO UPDATE SET state = excluded.state, version = excluded.version",
                    &[
                        &o.scope.user_id,
                        &o.scope.agent_id.as_deref().unwrap_or(""),
                        &o.scope.run_id.as_deref().unwrap_or(""),
                        &o.conversation,
                        &state,
                        &o.read_version,
                    ],
                )?;
            }
            Row::Card { card, vectors, .. } => {
                super::cards::insert(&mut tx, std::slice::from_ref(card))?;
                super::cards::put_vectors(&mut tx, vectors)?;
            }
            Row::EncoderState {
                scope,
                conversation,
                state,
            } => {
                tx.execute(
                    "INSERT INTO encoder_states (user_id, agent_id, run_id, conversation, state) \
                     VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (user_id, agent_id, run_id, conversation) \
                     DO UPDATE SET state = excluded.state",
                    &[
                        &scope.user_id,
                        &scope.agent_id.as_deref().unwrap_or(""),
                        &scope.run_id.as_deref().unwrap_or(""),
                        &conversation,
                        &state,
                    ],
                )?;
            }
            Row::LlmCall { call, o200k } => super::insert_llm_call(&mut tx, call, *o200k)?,
            Row::ApiKey(k) => {
                tx.execute(
                    "INSERT INTO api_keys (id, key_hash, user_id, admin, created) \
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
                    &[&k.id, &k.key_hash, &k.user_id, &k.admin, &k.created],
                )?;
            }
            _ => {}
        }
    }
    tx.commit()?;
    Ok(())
}
