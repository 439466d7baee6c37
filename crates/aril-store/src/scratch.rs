//! Throwaway PostgreSQL databases for tests (feature `scratch`): each [`ScratchDatabase`] is a
//! fresh, migrated database on the test server, dropped with the value. The server is
//! `ARIL_TEST_PG_URL` (any database URL on it; the scratch databases are created beside it) or,
//! when that is unset, the project's local server, started with `scripts/postgres start`.

use std::sync::atomic::{AtomicU32, Ordering};

use postgres::{Client, NoTls};

use crate::{PgStore, StoreError};

/// Declares, for each listed test function `name(place: &Place)`, the tests `sqlite::name` and
/// `postgres::name`: the same test code once per backend. The calling file defines `Place`
/// with `Place::sqlite()` and `Place::postgres()` (what a test opens differs by crate).
#[macro_export]
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $name() { super::$name(&super::Place::sqlite()) })*
        }
        mod postgres {
            $(#[test] fn $name() { super::$name(&super::Place::postgres()) })*
        }
    };
}

/// The embedding cache's binary form of chunk vectors, for tests that write rows by hand.
pub fn encode_chunks(chunks: &[crate::StoredChunk]) -> Vec<u8> {
    crate::codec::encode(chunks)
}

/// A database that exists while this value does.
pub struct ScratchDatabase {
    admin: String,
    name: String,
    url: String,
}

/// The test server's URL: the environment's, or the one the project script starts.
pub fn server_url() -> Result<String, StoreError> {
    if let Ok(url) = std::env::var("ARIL_TEST_PG_URL") {
        return Ok(url);
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/postgres");
    let out = std::process::Command::new("bash")
        .args([script, "start"])
        .output()
        .map_err(|e| StoreError::Migration(format!("cannot run {script}: {e}")))?;
    if !out.status.success() {
        return Err(StoreError::Migration(format!(
            "{script} start failed (set ARIL_TEST_PG_URL to use another server): {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .map(str::to_string)
        .ok_or_else(|| StoreError::Migration(format!("{script} printed no URL")))
}

/// `url` with its database name replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let host_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let base = match base[host_end..].find('/') {
        Some(slash) => &base[..host_end + slash],
        None => base,
    };
    format!("{base}/{db}{query}")
}

impl ScratchDatabase {
    /// Creates and migrates a new database on the test server. Works from any thread, async
    /// contexts included.
    pub fn new() -> Result<Self, StoreError> {
        std::thread::scope(|s| {
            s.spawn(Self::create)
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// A new database migrated only up to schema `version`, as an older aril left it.
    pub fn at_version(version: u32) -> Result<Self, StoreError> {
        std::thread::scope(|s| {
            s.spawn(|| {
                let (admin, name, url) = Self::empty()?;
                let mut client = crate::postgres::connect(&url)?;
                crate::postgres::migrate::apply_up_to(&mut client, version)?;
                Ok(Self { admin, name, url })
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// A fresh, empty database: its admin URL, name and URL.
    fn empty() -> Result<(String, String, String), StoreError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let admin = with_database(&server_url()?, "postgres");
        let name = format!(
            "aril_scratch_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let mut client = crate::postgres::connect(&admin)?;
        client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
        client.batch_execute(&format!("CREATE DATABASE {name}"))?;
        let url = with_database(&admin, &name);
        Ok((admin, name, url))
    }

    fn create() -> Result<Self, StoreError> {
        let (admin, name, url) = Self::empty()?;
        PgStore::migrate(&url)?;
        Ok(Self { admin, name, url })
    }

    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for ScratchDatabase {
    /// Drops the database on a thread of its own (the sync client cannot block inside an async
    /// context, where a test may drop this).
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            if let Ok(mut client) = Client::connect(&admin, NoTls) {
                let _ =
                    client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
            }
        })
        .join();
    }
}

/// Creates an embedded store file at `path` as an aril of schema `version` left it (the
/// migrations up to that version only), for tests of upgrades.
pub fn sqlite_file_at_version(path: &std::path::Path, version: i64) -> Result<(), StoreError> {
    let mut conn = rusqlite::Connection::open(path).map_err(|source| StoreError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    crate::schema::upgrade(&mut conn, path, 0, version)
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn the_database_name_is_swapped_and_the_rest_kept() {
        assert_eq!(
            with_database("postgres://u:p@h:5432/aril?sslmode=disable", "x"),
            "postgres://u:p@h:5432/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://u@h", "x"), "postgres://u@h/x");
    }
}
