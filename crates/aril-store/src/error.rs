//! Errors of the storage stage.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("could not open the store at {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "the store at {path} has schema version {found}, newer than this aril ({supported}): \
         upgrade aril, or use another data directory"
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error(
        "could not upgrade the store at {path} to schema version {version}: {source} (the file \
         keeps the version before; nothing of it was lost)"
    )]
    Upgrade {
        path: PathBuf,
        version: i64,
        source: rusqlite::Error,
    },
    #[error("nothing is stored for {0}: check the user/agent/run ids")]
    UnknownScope(String),
    #[error("integrity check failed: {0}")]
    Integrity(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error(
        "no read connection to the store came free in time: {0} (more readers at once than the \
         pool holds, or the store became unreachable)"
    )]
    ReadConnection(String),
    #[error(
        "could not connect to PostgreSQL at {url}: {error} (is it running? `scripts/postgres start` \
         runs a local one)"
    )]
    Connect {
        url: String,
        /// Not `source`: the message already carries it, and a chain would print it twice.
        error: postgres::Error,
    },
    #[error("PostgreSQL error: {0}")]
    Postgres(#[from] postgres::Error),
    #[error(
        "the database at {url} is at aril schema version {found}, newer than this aril \
         ({supported}): upgrade aril"
    )]
    NewerDatabase {
        url: String,
        found: i64,
        supported: i64,
    },
    #[error(
        "the database at {url} is at aril schema version {found}, this aril needs {wanted}: \
         run `aril --store {url} migrate` (once, from any one machine)"
    )]
    NotMigrated {
        url: String,
        found: i64,
        wanted: i64,
    },
    #[error(
        "another writer changed {0} while this write was prepared; nothing was written (read it \
         again and retry)"
    )]
    Conflict(String),
    #[error("the schema migration failed: {0}")]
    Migration(String),
}
