//! Token accounting in SQLite: one `llm_calls` row per model call, summed by purpose and model
//! for `aril stats`.

use rusqlite::{Connection, Transaction, params};

use crate::{LlmCall, LlmUsage, StoreError};

pub(crate) fn record(conn: &mut Connection, calls: &[LlmCall]) -> Result<(), StoreError> {
    let tx = conn.transaction()?;
    for c in calls {
        insert(&tx, c, true)?;
    }
    tx.commit()?;
    Ok(())
}

/// One call's row; `o200k` false leaves its o200k counts absent (a call recorded before they
/// were kept, moved from another store).
pub(crate) fn insert(tx: &Transaction<'_>, c: &LlmCall, o200k: bool) -> Result<(), StoreError> {
    let count = |n: u64| o200k.then_some(n as i64);
    tx.prepare_cached(
        "INSERT INTO llm_calls (at, purpose, model, prompt_tokens, completion_tokens, \
         counted_locally, latency_ms, attempts, prompt_o200k, completion_o200k) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        c.at.to_rfc3339(),
        c.purpose,
        c.model,
        c.prompt_tokens as i64,
        c.completion_tokens as i64,
        c.counted_locally,
        c.latency_ms as i64,
        c.attempts,
        count(c.prompt_o200k),
        count(c.completion_o200k),
    ])?;
    Ok(())
}

pub(crate) fn usage(conn: &Connection) -> Result<Vec<LlmUsage>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT purpose, model, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), \
         SUM(counted_locally), SUM(latency_ms), COALESCE(SUM(prompt_o200k), 0), \
         COALESCE(SUM(completion_o200k), 0), COUNT(prompt_o200k) FROM llm_calls \
         GROUP BY purpose, model ORDER BY purpose, model",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok(LlmUsage {
                purpose: r.get(0)?,
                model: r.get(1)?,
                calls: r.get::<_, i64>(2)? as u64,
                prompt_tokens: r.get::<_, i64>(3)? as u64,
                completion_tokens: r.get::<_, i64>(4)? as u64,
                counted_locally: r.get::<_, i64>(5)? as u64,
                latency_ms: r.get::<_, i64>(6)? as u64,
                prompt_o200k: r.get::<_, i64>(7)? as u64,
                completion_o200k: r.get::<_, i64>(8)? as u64,
                o200k_calls: r.get::<_, i64>(9)? as u64,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}
