//! Read-only connections to the store file for readers (`&self` calls), so that readers on
//! several threads read at once: in WAL mode a reader sees the last commit and neither waits for
//! the writer nor holds it up. The writer keeps its own connection.
//!
//! Written here rather than taken from r2d2: r2d2 opens connections on background threads and
//! may hold them past the pool's drop, while SQLite removes the WAL (with whatever deleted text it
//! still holds) only when the writer's connection closes last. These connections are opened on
//! the caller's thread and all closed when the store drops, before the writer's.

use std::ops::Deref;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use rusqlite::{Connection, OpenFlags};

/// Idle connections kept for the next readers; more are opened when more read at once.
const KEEP_IDLE: usize = 8;

/// The read-only connections of one store file.
pub(crate) struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

/// One reader's connection; back to the idle ones when dropped.
pub(crate) struct Reader<'a> {
    conn: Option<Connection>,
    readers: &'a Readers,
}

impl Readers {
    /// Readers of `path`, opening nothing yet (the writer has created the file and its WAL).
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An idle connection, else a new one.
    pub(crate) fn get(&self) -> Result<Reader<'_>, rusqlite::Error> {
        let held = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let conn = match held {
            Some(conn) => conn,
            None => {
                let conn = Connection::open_with_flags(
                    &self.path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                conn.execute_batch("PRAGMA busy_timeout = 5000;")?;
                conn
            }
        };
        Ok(Reader {
            conn: Some(conn),
            readers: self,
        })
    }
}

impl Deref for Reader<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        // Taken only in `drop`.
        self.conn.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        let mut idle = self
            .readers
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if idle.len() < KEEP_IDLE {
            idle.push(conn);
        }
    }
}
