//! The SQLite schema as a sequence of versioned migrations (`migrations/sqlite/`), and the
//! upgrade that brings a file of any past version to this build's. Turns are never updated; they
//! are deleted only by a deletion (of a scope, or of one memory with all its versions). Segments
//! link to turns through `segment_turns`; a memory's later versions link to its first turn
//! through `revisions`.
//!
//! The version lives in `meta.schema_version`. Each migration runs in its own transaction with
//! the version it reaches, so an interrupted upgrade leaves the file at the last version it
//! completed, and opening it again goes on from there. Written by hand (no migration crate
//! supports rusqlite 0.43: refinery 0.10 and rusqlite_migration 2.6 stop at 0.40); what it must
//! survive, beyond running each step once: files that an earlier aril upgraded only half-way
//! (it ran the whole current schema before adding columns, so a column may already exist: a
//! column is added only when missing).

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};

use crate::StoreError;

/// One step of the schema: what it creates, the columns it adds to existing tables, and the
/// version it reaches.
struct Migration {
    version: i64,
    /// Statements that create (idempotently: `IF NOT EXISTS`) and fill, run after `columns`.
    sql: &'static str,
    /// `(table, column, definition)`: added when the table lacks the column (an existing table
    /// only: a table `sql` creates has its columns there).
    columns: &'static [(&'static str, &'static str, &'static str)],
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sql: include_str!("../migrations/sqlite/V1__turns_segments_embeddings.sql"),
        columns: &[],
    },
    Migration {
        version: 2,
        sql: include_str!("../migrations/sqlite/V2__revisions.sql"),
        columns: &[],
    },
    Migration {
        version: 3,
        sql: include_str!("../migrations/sqlite/V3__cards_and_consolidation.sql"),
        columns: &[],
    },
    Migration {
        version: 4,
        sql: include_str!("../migrations/sqlite/V4__card_vectors_and_llm_calls.sql"),
        columns: &[],
    },
    // Version 5: o200k token counts of each call (empty for older calls).
    Migration {
        version: 5,
        sql: "",
        columns: &[
            ("llm_calls", "prompt_o200k", "INTEGER"),
            ("llm_calls", "completion_o200k", "INTEGER"),
        ],
    },
    // Version 6: a version on each open segment (a write must find the version it read) and a
    // claim lease on each queued segment (Unix milliseconds).
    Migration {
        version: 6,
        sql: "",
        columns: &[
            ("open_segments", "version", "INTEGER NOT NULL DEFAULT 0"),
            ("consolidation", "claimed_until", "INTEGER"),
        ],
    },
    Migration {
        version: 7,
        sql: include_str!("../migrations/sqlite/V7__api_keys_and_session_order.sql"),
        columns: &[],
    },
    // Version 8: what a client attached to a turn (a JSON object, as text), and the lifecycle
    // of the memory it holds: when it expires (RFC 3339 in UTC, microseconds, so that text
    // order is time order) and whether it may be updated.
    Migration {
        version: 8,
        sql: include_str!("../migrations/sqlite/V8__turn_metadata_and_lifecycle.sql"),
        columns: &[
            ("turns", "metadata", "TEXT"),
            ("turns", "expires_at", "TEXT"),
            ("turns", "immutable", "INTEGER NOT NULL DEFAULT 0"),
        ],
    },
    // Version 9: validity (RFC 3339 in UTC, microseconds, like `expires_at`). A turn may say from
    // when the memory it holds no longer does (a forgetting writes such a version); a card says
    // since when its content holds and, once forgotten, until when.
    Migration {
        version: 9,
        sql: "",
        columns: &[
            ("turns", "valid_to", "TEXT"),
            ("cards", "valid_from", "TEXT"),
            ("cards", "valid_to", "TEXT"),
        ],
    },
    Migration {
        version: 10,
        sql: include_str!("../migrations/sqlite/V10__turns_said.sql"),
        columns: &[],
    },
];

/// The schema this build reads and writes. A store with a higher version is refused.
pub const SCHEMA_VERSION: i64 = 10;

/// The version a file is at: 0 for a file that holds no store yet.
pub(crate) fn version_of(conn: &Connection) -> rusqlite::Result<i64> {
    let has_meta: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta')",
        [],
        |r| r.get(0),
    )?;
    if !has_meta {
        return Ok(0);
    }
    let value: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    Ok(value.and_then(|v| v.parse().ok()).unwrap_or(0))
}

/// Applies every migration above `from` up to `to` to the file at `path`, each in its own
/// transaction; on failure the error names the migration, and the file stays at the one before.
pub(crate) fn upgrade(
    conn: &mut Connection,
    path: &Path,
    from: i64,
    to: i64,
) -> Result<(), StoreError> {
    for m in MIGRATIONS
        .iter()
        .filter(|m| m.version > from && m.version <= to)
    {
        apply(conn, m).map_err(|source| StoreError::Upgrade {
            path: path.to_path_buf(),
            version: m.version,
            source,
        })?;
    }
    Ok(())
}

fn apply(conn: &mut Connection, m: &Migration) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    // Columns first, so that the statements may index them.
    for (table, column, definition) in m.columns {
        let present: bool = tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
            [table, column],
            |r| r.get(0),
        )?;
        if !present {
            tx.execute_batch(&format!(
                "ALTER TABLE {table} ADD COLUMN {column} {definition}"
            ))?;
        }
    }
    tx.execute_batch(m.sql)?;
    tx.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?1)",
        [m.version.to_string()],
    )?;
    tx.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_migrations_count_up_to_the_schema_version_one_by_one() {
        let versions: Vec<i64> = MIGRATIONS.iter().map(|m| m.version).collect();
        assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
    }
}
