//! [`crate::transfer`] for the embedded store: pages of each table in its order, and imports in
//! one transaction through the same writers ingest and consolidation use.

use std::collections::HashMap;

use aril_core::TurnId;
use rusqlite::{OptionalExtension, params, params_from_iter};

use crate::sqlite::{SqliteStore, parse_time, scope_from_row, write_batch};
use crate::transfer::{Cursor, QueueState, Row, SegmentMeta, Table};
use crate::{
    ApiKeyRecord, CardVectors, Embedding, LlmCall, OpenSegmentRecord, RevisionRecord, Store,
    StoreError, cards, codec,
};

fn sql_limit(limit: usize) -> i64 {
    limit.min(i64::MAX as usize) as i64
}

pub(crate) fn export(
    store: &SqliteStore,
    table: Table,
    after: &Cursor,
    limit: usize,
) -> Result<Vec<Row>, StoreError> {
    if table == Table::ApiKeys {
        // Before a connection is taken: `api_keys` takes its own.
        return Ok(store.api_keys()?.into_iter().map(Row::ApiKey).collect());
    }
    let guard = store.conn()?;
    let conn = &*guard;
    let limit = sql_limit(limit);
    match table {
        Table::Turns => {
            let mut stmt = conn
                .prepare("SELECT id, text_hash FROM turns WHERE seq > ?1 ORDER BY seq LIMIT ?2")?;
            let keys: Vec<(String, String)> = stmt
                .query_map(params![after.seq(), limit], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            // These read through `store`: this connection goes back first.
            drop(stmt);
            drop(guard);
            crate::transfer::turn_rows(store, keys)
        }
        Table::Segments => {
            let mut stmt = conn.prepare(
                "SELECT s.id, s.seq, s.text_hash, q.status, q.reason, q.attempts FROM segments s \
                 LEFT JOIN consolidation q ON q.segment_id = s.id WHERE s.seq > ?1 \
                 ORDER BY s.seq LIMIT ?2",
            )?;
            let meta: Vec<SegmentMeta> = stmt
                .query_map(params![after.seq(), limit], |r| {
                    let status: Option<String> = r.get(3)?;
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        match status {
                            Some(status) => Some(QueueState {
                                status,
                                reason: r.get(4)?,
                                attempts: r.get(5)?,
                            }),
                            None => None,
                        },
                    ))
                })?
                .collect::<Result<_, _>>()?;
            // These read through `store`: this connection goes back first.
            drop(stmt);
            drop(guard);
            crate::transfer::segment_rows(store, meta)
        }
        Table::OpenSegments => {
            let mut stmt = conn.prepare(
                "SELECT user_id, agent_id, run_id, conversation, state, version FROM open_segments \
                 ORDER BY user_id, agent_id, run_id, conversation LIMIT ?1",
            )?;
            let rows: Vec<(aril_core::Scope, String, String, i64)> = stmt
                .query_map([limit], |r| {
                    Ok((scope_from_row(r, 0)?, r.get(3)?, r.get(4)?, r.get(5)?))
                })?
                .collect::<Result<_, _>>()?;
            rows.into_iter()
                .map(|(scope, conversation, state, version)| {
                    Ok(Row::OpenSegment(OpenSegmentRecord {
                        scope,
                        conversation,
                        state: serde_json::from_str(&state)
                            .map_err(|e| StoreError::Corrupt(format!("open segment state: {e}")))?,
                        read_version: version,
                    }))
                })
                .collect()
        }
        Table::Embeddings => {
            let (model, hash) = after.key();
            let mut stmt = conn.prepare(
                "SELECT model, text_hash, pieces, chunks FROM embeddings \
                 WHERE (model, text_hash) > (?1, ?2) ORDER BY model, text_hash LIMIT ?3",
            )?;
            let rows: Vec<(String, String, u32, Vec<u8>)> = stmt
                .query_map(params![model, hash, limit], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?
                .collect::<Result<_, _>>()?;
            rows.into_iter()
                .map(|(model, text_hash, pieces, chunks)| {
                    Ok(Row::Embedding(Embedding {
                        model,
                        text_hash,
                        pieces,
                        chunks: codec::decode(&chunks)?,
                    }))
                })
                .collect()
        }
        Table::Revisions => {
            let (turn, _) = after.key();
            let mut stmt = conn.prepare(
                "SELECT turn_id, memory_id, version FROM revisions WHERE turn_id > ?1 \
                 ORDER BY turn_id LIMIT ?2",
            )?;
            Ok(stmt
                .query_map(params![turn, limit], |r| {
                    Ok(Row::Revision(RevisionRecord {
                        turn: TurnId(r.get(0)?),
                        memory: TurnId(r.get(1)?),
                        version: r.get(2)?,
                    }))
                })?
                .collect::<Result<_, _>>()?)
        }
        Table::Cards => {
            let mut stmt =
                conn.prepare("SELECT id, seq FROM cards WHERE seq > ?1 ORDER BY seq LIMIT ?2")?;
            let keys: Vec<(String, i64)> = stmt
                .query_map(params![after.seq(), limit], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            let texts: Vec<String> = keys.iter().map(|(id, _)| id.clone()).collect();
            let mut vectors: HashMap<String, Vec<CardVectors>> = HashMap::new();
            for v in SqliteStore::in_chunks(&texts, |marks, chunk| {
                let mut stmt = conn.prepare(&format!(
                    "SELECT card_id, model, chunks FROM card_vectors WHERE card_id IN ({marks}) \
                     ORDER BY card_id, model"
                ))?;
                let rows: Vec<(String, String, Vec<u8>)> = stmt
                    .query_map(params_from_iter(chunk), |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })?
                    .collect::<Result<_, _>>()?;
                Ok(rows)
            })? {
                let (card, model, chunks) = v;
                vectors.entry(card.clone()).or_default().push(CardVectors {
                    card: aril_core::CardId(card),
                    model,
                    chunks: codec::decode(&chunks)?,
                });
            }
            // These read through `store`: this connection goes back first.
            drop(stmt);
            drop(guard);
            crate::transfer::card_rows(store, keys, vectors)
        }
        Table::EncoderStates => {
            let mut stmt = conn.prepare(
                "SELECT user_id, agent_id, run_id, conversation, state FROM encoder_states \
                 ORDER BY user_id, agent_id, run_id, conversation LIMIT ?1",
            )?;
            let rows: Vec<(aril_core::Scope, String, String)> = stmt
                .query_map([limit], |r| {
                    Ok((scope_from_row(r, 0)?, r.get(3)?, r.get(4)?))
                })?
                .collect::<Result<_, _>>()?;
            rows.into_iter()
                .map(|(scope, conversation, state)| {
                    Ok(Row::EncoderState {
                        scope,
                        conversation,
                        state: serde_json::from_str(&state)
                            .map_err(|e| StoreError::Corrupt(format!("encoder state: {e}")))?,
                    })
                })
                .collect()
        }
        Table::LlmCalls => {
            let mut stmt = conn.prepare(
                "SELECT at, purpose, model, prompt_tokens, completion_tokens, counted_locally, \
                 latency_ms, attempts, prompt_o200k, completion_o200k FROM llm_calls \
                 ORDER BY seq LIMIT ?1",
            )?;
            type Raw = (
                String,
                String,
                String,
                i64,
                i64,
                bool,
                i64,
                u32,
                Option<i64>,
                Option<i64>,
            );
            let rows: Vec<Raw> = stmt
                .query_map([limit], |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                        r.get(7)?,
                        r.get(8)?,
                        r.get(9)?,
                    ))
                })?
                .collect::<Result<_, _>>()?;
            rows.into_iter()
                .map(
                    |(at, purpose, model, p, c, local, latency, attempts, po, co)| {
                        Ok(Row::LlmCall {
                            o200k: po.is_some(),
                            call: LlmCall {
                                at: parse_time(Some(at))?.unwrap_or_default(),
                                purpose,
                                model,
                                prompt_tokens: p as u64,
                                completion_tokens: c as u64,
                                counted_locally: local,
                                prompt_o200k: po.unwrap_or(0) as u64,
                                completion_o200k: co.unwrap_or(0) as u64,
                                latency_ms: latency as u64,
                                attempts,
                            },
                        })
                    },
                )
                .collect()
        }
        Table::ApiKeys => Ok(Vec::new()), // answered above
    }
}

pub(crate) fn import(store: &mut SqliteStore, rows: &[Row]) -> Result<(), StoreError> {
    let tx = store.conn_mut().transaction()?;
    let (batch, queues) = crate::transfer::ingest_part(rows);
    write_batch(&tx, &batch)?;
    for (segment, q) in queues {
        tx.execute(
            "UPDATE consolidation SET status = ?2, reason = ?3, attempts = ?4 \
             WHERE segment_id = ?1",
            params![segment.0, q.status, q.reason, q.attempts],
        )?;
    }
    for row in rows {
        match row {
            Row::OpenSegment(o) => {
                let state = serde_json::to_string(&o.state)
                    .map_err(|e| StoreError::Corrupt(format!("open segment state: {e}")))?;
                tx.execute(
                    "INSERT INTO open_segments (user_id, agent_id, run_id, conversation, state, \
                     version) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                     ON CONFLICT (user_id, agent_id, run_id, conversation) \
                     DO UPDATE SET state = excluded.state, version = excluded.version",
                    params![
                        o.scope.user_id,
                        o.scope.agent_id.as_deref().unwrap_or(""),
                        o.scope.run_id.as_deref().unwrap_or(""),
                        o.conversation,
                        state,
                        o.read_version
                    ],
                )?;
            }
            Row::Card { card, vectors, .. } => {
                cards::insert(&tx, std::slice::from_ref(card))?;
                cards::put_vectors(&tx, vectors)?;
            }
            Row::EncoderState {
                scope,
                conversation,
                state,
            } => {
                let state = serde_json::to_string(state)
                    .map_err(|e| StoreError::Corrupt(format!("encoder state: {e}")))?;
                tx.execute(
                    "INSERT INTO encoder_states (user_id, agent_id, run_id, conversation, state) \
                     VALUES (?1, ?2, ?3, ?4, ?5) \
                     ON CONFLICT (user_id, agent_id, run_id, conversation) \
                     DO UPDATE SET state = excluded.state",
                    params![
                        scope.user_id,
                        scope.agent_id.as_deref().unwrap_or(""),
                        scope.run_id.as_deref().unwrap_or(""),
                        conversation,
                        state
                    ],
                )?;
            }
            Row::LlmCall { call, o200k } => crate::accounting::insert(&tx, call, *o200k)?,
            Row::ApiKey(k) => insert_key(&tx, k)?,
            _ => {}
        }
    }
    tx.commit()?;
    Ok(())
}

fn insert_key(tx: &rusqlite::Transaction<'_>, k: &ApiKeyRecord) -> Result<(), StoreError> {
    let known: Option<String> = tx
        .query_row("SELECT id FROM api_keys WHERE id = ?1", [&k.id], |r| {
            r.get(0)
        })
        .optional()?;
    if known.is_none() {
        tx.execute(
            "INSERT INTO api_keys (id, key_hash, user_id, admin, created) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![k.id, k.key_hash, k.user_id, k.admin, k.created.to_rfc3339()],
        )?;
    }
    Ok(())
}
