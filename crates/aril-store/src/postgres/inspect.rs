//! The inspector's reads in PostgreSQL ([`crate::inspect`]): counts of one scope, model calls
//! and stored turns per UTC day, a filtered page of cards, one session's turns.

use aril_core::{Card, Role, ScopeFilter, TurnId};
use chrono::{DateTime, NaiveDate, Utc};
use postgres::GenericClient;
use postgres::types::ToSql;

use super::{cards, filter_clause, params};
use crate::StoreError;
use crate::cards::{fold, kind_text};
use crate::inspect::{CardQuery, DailyTurns, DailyUsage, ScopeSummary};

/// The condition that leaves out superseded cards and those a forgetting ended.
pub(super) const CURRENT_CARDS: &str = " AND c.id NOT IN (SELECT supersedes FROM card_supersedes) \
     AND (c.valid_to IS NULL OR c.valid_to > now())";

pub(super) fn scope_summary(
    client: &mut impl GenericClient,
    filter: &ScopeFilter,
) -> Result<ScopeSummary, StoreError> {
    let (turns, args) = filter_clause("", filter, 1);
    let (segs, _) = filter_clause("s.", filter, 1);
    let (cards, _) = filter_clause("c.", filter, 1);
    let args = params(&args);
    let row = client.query_one(
        &format!(
            "SELECT \
             (SELECT COUNT(*) FROM turns WHERE {turns}), \
             (SELECT COUNT(*) FROM segments s WHERE {segs}), \
             (SELECT COUNT(*) FROM cards c WHERE {cards}{CURRENT_CARDS}), \
             (SELECT COUNT(*) FROM consolidation q JOIN segments s ON s.id = q.segment_id \
              WHERE {segs} AND q.status = 'pending'), \
             (SELECT COUNT(*) FROM consolidation q JOIN segments s ON s.id = q.segment_id \
              WHERE {segs} AND q.status = 'failed'), \
             (COALESCE((SELECT SUM(octet_length(text)) FROM turns WHERE {turns}), 0) \
              + COALESCE((SELECT SUM(octet_length(c.text)) FROM cards c WHERE {cards}), 0))::BIGINT, \
             (SELECT ingest_time FROM turns WHERE {turns} ORDER BY seq DESC LIMIT 1)"
        ),
        &args,
    )?;
    let n = |i: usize| -> Result<u64, StoreError> { Ok(row.try_get::<_, i64>(i)? as u64) };
    Ok(ScopeSummary {
        turns: n(0)?,
        segments: n(1)?,
        current_cards: n(2)?,
        segments_pending: n(3)?,
        segments_failed: n(4)?,
        text_bytes: n(5)?,
        last_write: row.try_get::<_, Option<DateTime<Utc>>>(6)?,
    })
}

pub(super) fn llm_usage_by_day(
    client: &mut impl GenericClient,
) -> Result<Vec<DailyUsage>, StoreError> {
    let rows = client.query(
        "SELECT (at AT TIME ZONE 'UTC')::date AS day, purpose, model, COUNT(*), \
         SUM(prompt_tokens)::BIGINT, SUM(completion_tokens)::BIGINT FROM llm_calls \
         GROUP BY day, purpose, model ORDER BY day, purpose, model",
        &[],
    )?;
    rows.iter()
        .map(|r| {
            let n = |i: usize| -> Result<u64, StoreError> { Ok(r.try_get::<_, i64>(i)? as u64) };
            Ok(DailyUsage {
                day: r.try_get::<_, NaiveDate>(0)?,
                purpose: r.try_get(1)?,
                model: r.try_get(2)?,
                calls: n(3)?,
                prompt_tokens: n(4)?,
                completion_tokens: n(5)?,
            })
        })
        .collect()
}

pub(super) fn turns_by_day(client: &mut impl GenericClient) -> Result<Vec<DailyTurns>, StoreError> {
    let rows = client.query(
        "SELECT (ingest_time AT TIME ZONE 'UTC')::date AS day, role, COUNT(*) FROM turns \
         GROUP BY day, role ORDER BY day, role",
        &[],
    )?;
    rows.iter()
        .map(|r| {
            Ok(DailyTurns {
                day: r.try_get::<_, NaiveDate>(0)?,
                role: Role::parse(r.try_get(1)?).map_err(|e| StoreError::Corrupt(e.to_string()))?,
                turns: r.try_get::<_, i64>(2)? as u64,
            })
        })
        .collect()
}

pub(super) fn find_cards(
    client: &mut impl GenericClient,
    filter: &ScopeFilter,
    query: &CardQuery,
    offset: u64,
    limit: u64,
) -> Result<(Vec<Card>, u64), StoreError> {
    let (mut clause, args) = filter_clause("c.", filter, 1);
    let mut owned: Vec<Box<dyn ToSql + Sync>> = Vec::new();
    let mut add = |clause: &mut String, condition: &str, value: Box<dyn ToSql + Sync>| {
        owned.push(value);
        clause.push_str(&condition.replace("$?", &format!("${}", args.len() + owned.len())));
    };
    if let Some(kind) = query.kind {
        add(&mut clause, " AND c.kind = $?", Box::new(kind_text(kind)?));
    }
    if let Some(entity) = &query.entity {
        add(
            &mut clause,
            " AND c.id IN (SELECT card_id FROM card_entities WHERE key = $?)",
            Box::new(fold(entity)),
        );
    }
    if let Some(topic) = &query.topic {
        add(
            &mut clause,
            " AND c.id IN (SELECT card_id FROM card_topics WHERE key = $?)",
            Box::new(fold(topic)),
        );
    }
    let (from, until) = query.bounds();
    if let Some(from) = from {
        add(&mut clause, " AND c.time_start >= $?", Box::new(from));
    }
    if let Some(until) = until {
        add(&mut clause, " AND c.time_start < $?", Box::new(until));
    }
    if query.current_only {
        clause.push_str(CURRENT_CARDS);
    }
    let mut all = params(&args);
    all.extend(owned.iter().map(|b| b.as_ref() as &(dyn ToSql + Sync)));
    let total: i64 = client
        .query_one(
            &format!("SELECT COUNT(*) FROM cards c WHERE {clause}"),
            &all,
        )?
        .try_get(0)?;
    // The subquery reads `cards c` alone: its `seq` is the card's.
    let page = crate::seq_page(offset, limit);
    let found = cards::load(
        client,
        &format!("c.id IN (SELECT c.id FROM cards c WHERE {clause} {page})"),
        &all,
    )?;
    Ok((found, total as u64))
}

pub(super) fn session_turns(
    client: &mut impl GenericClient,
    filter: &ScopeFilter,
    conversation: &str,
    session: Option<&str>,
) -> Result<Vec<TurnId>, StoreError> {
    let (mut clause, mut args) = filter_clause("", filter, 1);
    args.push(conversation.to_string());
    clause.push_str(&format!(" AND conversation = ${}", args.len()));
    match session {
        Some(s) => {
            args.push(s.to_string());
            clause.push_str(&format!(" AND session = ${}", args.len()));
        }
        None => clause.push_str(" AND session IS NULL"),
    }
    let rows = client.query(
        &format!("SELECT id FROM turns WHERE {clause} ORDER BY seq"),
        &params(&args),
    )?;
    Ok(rows.iter().map(|r| TurnId(r.get(0))).collect())
}
