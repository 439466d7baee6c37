//! The one cache root of everything aril fetches or derives outside a memory: the embedding model,
//! the local LLM server and model, the bench caches. The project's scripts use the same rule.

use std::path::PathBuf;

/// `$ARIL_CACHE`, else `~/.cache/aril` (`.cache/aril` under the working directory without `HOME`).
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("ARIL_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
        .join(".cache/aril")
}
