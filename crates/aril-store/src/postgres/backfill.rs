//! Fills in what schemas 2 and 3 index for rows an older aril stored: the `tsvector` of turns,
//! segments and cards, the chunk-vector rows of every unit (decoded from the embedding cache
//! and the cards' vectors), and each turn's window `tsvector`. Runs after the migrations, in
//! pages of one transaction each, so an interrupted `aril migrate` goes on where it stopped when
//! run again; a database with nothing to fill costs four empty queries.

use postgres::Client;

use super::search::{
    ChunkRows, index_cards, index_segments, index_turns, index_windows, put_chunks,
};
use crate::{StoreError, UnitKind, codec};

/// Rows indexed per transaction.
const PAGE: i64 = 1000;

/// The next page of a table's rows that lack a `tsvector`, oldest first.
fn unindexed(tx: &mut postgres::Transaction<'_>, table: &str) -> Result<Vec<String>, StoreError> {
    Ok(tx
        .query(
            &format!("SELECT id FROM {table} WHERE tsv IS NULL ORDER BY seq LIMIT $1"),
            &[&PAGE],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect())
}

pub(super) fn run(client: &mut Client) -> Result<(), StoreError> {
    let mut filled = 0usize;
    for table in ["turns", "segments", "cards"] {
        loop {
            let mut tx = client.transaction()?;
            let ids = unindexed(&mut tx, table)?;
            if ids.is_empty() {
                break;
            }
            match table {
                "turns" => index_turns(&mut tx, &ids)?,
                "segments" => index_segments(&mut tx, &ids)?,
                _ => index_cards_with_vectors(&mut tx, &ids)?,
            }
            tx.commit()?;
            filled += ids.len();
        }
    }
    if filled > 0 {
        tracing::info!(units = filled, "indexed rows stored before schema 2");
    }
    // Schema 3: the lexical windows of turns stored before it.
    let mut windowed = 0usize;
    loop {
        let mut tx = client.transaction()?;
        let ids: Vec<String> = tx
            .query(
                "SELECT id FROM turns WHERE wtsv IS NULL ORDER BY seq LIMIT $1",
                &[&PAGE],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if ids.is_empty() {
            break;
        }
        index_windows(&mut tx, &ids)?;
        tx.commit()?;
        windowed += ids.len();
    }
    if windowed > 0 {
        tracing::info!(turns = windowed, "windowed turns stored before schema 3");
    }
    Ok(())
}

/// Cards' texts and their vectors, which schema 1 kept only in `card_vectors`.
fn index_cards_with_vectors(
    tx: &mut postgres::Transaction<'_>,
    ids: &[String],
) -> Result<(), StoreError> {
    let cards = super::cards::load(tx, "c.id = ANY($1)", &[&ids])?;
    index_cards(tx, &cards)?;
    let rows = tx.query(
        "SELECT v.card_id, v.model, v.chunks FROM card_vectors v WHERE v.card_id = ANY($1)",
        &[&ids],
    )?;
    let mut decoded = Vec::with_capacity(rows.len());
    for r in &rows {
        let id: String = r.try_get(0)?;
        let model: String = r.try_get(1)?;
        decoded.push((id, model, codec::decode(r.try_get(2)?)?));
    }
    let units: Vec<ChunkRows<'_>> = decoded
        .iter()
        .filter_map(|(id, model, chunks)| {
            cards.iter().find(|c| &c.id.0 == id).map(|c| ChunkRows {
                id,
                scope: &c.scope,
                model,
                chunks,
            })
        })
        .collect();
    put_chunks(tx, UnitKind::Card, &units)
}
