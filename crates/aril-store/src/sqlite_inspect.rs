//! The inspector's reads in SQLite ([`crate::inspect`]): counts of one scope, model calls and
//! stored turns per UTC day (times are stored as RFC 3339 text in UTC, so a day is the text's
//! first ten characters), a filtered page of cards, one session's turns.

use aril_core::{Card, Role, ScopeFilter, TurnId};
use chrono::NaiveDate;
use rusqlite::{Connection, OptionalExtension, params_from_iter};

use crate::StoreError;
use crate::cards::{fold, kind_text};
use crate::inspect::{CardQuery, DailyTurns, DailyUsage, ScopeSummary};
use crate::sqlite::{filter_clause_on, instant_text, parse_time};

/// The condition that leaves out superseded cards and those a forgetting ended (the time is
/// ours, written into the SQL as text).
pub(crate) fn current_cards_clause() -> String {
    format!(
        " AND c.id NOT IN (SELECT supersedes FROM card_supersedes) \
         AND (c.valid_to IS NULL OR c.valid_to > '{}')",
        instant_text(chrono::Utc::now())
    )
}

pub(crate) fn scope_summary(
    conn: &Connection,
    filter: &ScopeFilter,
) -> Result<ScopeSummary, StoreError> {
    let count = |sql: String, args: &[String]| -> Result<u64, StoreError> {
        Ok(conn.query_row(&sql, params_from_iter(args), |r| r.get::<_, i64>(0))? as u64)
    };
    let (turns_clause, args) = filter_clause_on("", filter);
    let (seg_clause, _) = filter_clause_on("s.", filter);
    let (card_clause, _) = filter_clause_on("c.", filter);
    let queued = |status: &str| {
        count(
            format!(
                "SELECT COUNT(*) FROM consolidation q JOIN segments s ON s.id = q.segment_id \
                 WHERE {seg_clause} AND q.status = '{status}'"
            ),
            &args,
        )
    };
    let last_write: Option<String> = conn
        .query_row(
            &format!(
                "SELECT ingest_time FROM turns WHERE {turns_clause} ORDER BY seq DESC LIMIT 1"
            ),
            params_from_iter(&args),
            |r| r.get(0),
        )
        .optional()?;
    Ok(ScopeSummary {
        turns: count(
            format!("SELECT COUNT(*) FROM turns WHERE {turns_clause}"),
            &args,
        )?,
        segments: count(
            format!("SELECT COUNT(*) FROM segments s WHERE {seg_clause}"),
            &args,
        )?,
        current_cards: count(
            format!(
                "SELECT COUNT(*) FROM cards c WHERE {card_clause}{}",
                current_cards_clause()
            ),
            &args,
        )?,
        segments_pending: queued("pending")?,
        segments_failed: queued("failed")?,
        text_bytes: count(
            format!(
                "SELECT COALESCE((SELECT SUM(LENGTH(CAST(text AS BLOB))) FROM turns \
                 WHERE {turns_clause}), 0) + COALESCE((SELECT SUM(LENGTH(CAST(c.text AS BLOB))) \
                 FROM cards c WHERE {card_clause}), 0)"
            ),
            &[args.clone(), args.clone()].concat(),
        )?,
        last_write: parse_time(last_write)?,
    })
}

fn day(text: &str) -> Result<NaiveDate, StoreError> {
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map_err(|e| StoreError::Corrupt(format!("bad stored day {text:?}: {e}")))
}

pub(crate) fn llm_usage_by_day(conn: &Connection) -> Result<Vec<DailyUsage>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT substr(at, 1, 10) AS day, purpose, model, COUNT(*), SUM(prompt_tokens), \
         SUM(completion_tokens) FROM llm_calls GROUP BY day, purpose, model \
         ORDER BY day, purpose, model",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter()
        .map(|(d, purpose, model, calls, prompt, completion)| {
            Ok(DailyUsage {
                day: day(&d)?,
                purpose,
                model,
                calls: calls as u64,
                prompt_tokens: prompt as u64,
                completion_tokens: completion as u64,
            })
        })
        .collect()
}

pub(crate) fn turns_by_day(conn: &Connection) -> Result<Vec<DailyTurns>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT substr(ingest_time, 1, 10) AS day, role, COUNT(*) FROM turns \
         GROUP BY day, role ORDER BY day, role",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter()
        .map(|(d, role, turns)| {
            Ok(DailyTurns {
                day: day(&d)?,
                role: Role::parse(&role).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                turns: turns as u64,
            })
        })
        .collect()
}

pub(crate) fn find_cards(
    conn: &Connection,
    filter: &ScopeFilter,
    query: &CardQuery,
    offset: u64,
    limit: u64,
) -> Result<(Vec<Card>, u64), StoreError> {
    let (mut clause, mut args) = filter_clause_on("c.", filter);
    if let Some(kind) = query.kind {
        clause.push_str(" AND c.kind = ?");
        args.push(kind_text(kind)?);
    }
    if let Some(entity) = &query.entity {
        clause.push_str(" AND c.id IN (SELECT card_id FROM card_entities WHERE key = ?)");
        args.push(fold(entity));
    }
    if let Some(topic) = &query.topic {
        clause.push_str(" AND c.id IN (SELECT card_id FROM card_topics WHERE key = ?)");
        args.push(fold(topic));
    }
    let (from, until) = query.bounds();
    if let Some(from) = from {
        clause.push_str(" AND c.time_start >= ?");
        args.push(from.to_rfc3339());
    }
    if let Some(until) = until {
        clause.push_str(" AND c.time_start < ?");
        args.push(until.to_rfc3339());
    }
    if query.current_only {
        clause.push_str(&current_cards_clause());
    }
    let total: i64 = conn.query_row(
        &format!("SELECT COUNT(*) FROM cards c WHERE {clause}"),
        params_from_iter(&args),
        |r| r.get(0),
    )?;
    // The subquery reads `cards c` alone: its `seq` is the card's.
    let page = crate::seq_page(offset, limit);
    let cards = crate::cards::load(
        conn,
        &format!("c.id IN (SELECT c.id FROM cards c WHERE {clause} {page})"),
        &args,
    )?;
    Ok((cards, total as u64))
}

pub(crate) fn session_turns(
    conn: &Connection,
    filter: &ScopeFilter,
    conversation: &str,
    session: Option<&str>,
) -> Result<Vec<TurnId>, StoreError> {
    let (mut clause, mut args) = filter_clause_on("", filter);
    clause.push_str(" AND conversation = ?");
    args.push(conversation.to_string());
    match session {
        Some(s) => {
            clause.push_str(" AND session = ?");
            args.push(s.to_string());
        }
        None => clause.push_str(" AND session IS NULL"),
    }
    let mut stmt = conn.prepare(&format!("SELECT id FROM turns WHERE {clause} ORDER BY seq"))?;
    let ids = stmt
        .query_map(params_from_iter(&args), |r| {
            r.get::<_, String>(0).map(TurnId)
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ids)
}
