//! One process owns a data directory: an exclusive OS lock on `aril.lock`, released when the
//! process exits, however it exits.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::Path;

use crate::EngineError;

pub(crate) struct DirLock {
    _file: File,
}

impl DirLock {
    pub(crate) fn acquire(dir: &Path) -> Result<Self, EngineError> {
        let path = dir.join("aril.lock");
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| EngineError::Io {
                what: format!("opening {}", path.display()),
                cause: e,
            })?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path).unwrap_or_default();
                return Err(EngineError::Busy {
                    dir: dir.display().to_string(),
                    holder: holder.trim().to_string(),
                });
            }
            Err(TryLockError::Error(e)) => {
                return Err(EngineError::Io {
                    what: format!("locking {}", path.display()),
                    cause: e,
                });
            }
        }
        // Record the holder for the error a second process gets; best effort.
        let _ = file.set_len(0);
        let _ = write!(file, "pid {}", std::process::id());
        Ok(Self { _file: file })
    }
}
