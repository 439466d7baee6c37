//! API keys: made here, shown once, stored only as a hash. A key is bound to one user, or is an
//! admin key. The server checks a presented key with [`KeyRing`], a copy of the stored hashes;
//! it reads the store again when a key is not in its copy (a key made by another process sharing
//! the store).

use std::collections::HashMap;

use aril_store::ApiKeyRecord;
use chrono::Utc;

use crate::{Engine, EngineError};

/// What a key is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// Read and write one user's memories only.
    User(String),
    /// Any user's, and scope-less deletions with explicit confirmation.
    Admin,
}

/// Hashes of the stored keys, for checking presented keys without touching the store.
#[derive(Debug, Clone, Default)]
pub struct KeyRing {
    by_hash: HashMap<String, Grant>,
}

impl KeyRing {
    /// What the presented key grants, if it is one of ours.
    pub fn check(&self, presented: &str) -> Option<&Grant> {
        self.by_hash.get(&hash_key(presented.trim()))
    }

    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }
}

fn hash_key(key: &str) -> String {
    // Keys are 256 random bits, so a fast hash cannot be brute-forced; no salt is needed.
    blake3::hash(key.as_bytes()).to_hex().to_string()
}

impl Engine {
    /// Makes a new key for `user` (or an admin key with `user = None`), stores its hash and returns
    /// the key itself, which is never stored or shown again.
    pub fn create_api_key(&mut self, user: Option<&str>) -> Result<String, EngineError> {
        if let Some(u) = user {
            aril_core::Scope::user(u)?;
        }
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret)
            .map_err(|e| EngineError::Config(format!("no system randomness for a key: {e}")))?;
        let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        let key = format!("aril_{hex}");
        let record = ApiKeyRecord {
            id: format!("key_{}", &hex[..8]),
            key_hash: hash_key(&key),
            user_id: user.map(str::to_string),
            admin: user.is_none(),
            created: Utc::now(),
        };
        self.store.add_api_key(&record)?;
        Ok(key)
    }

    /// The stored keys (hashes and grants only).
    pub fn api_keys(&self) -> Result<Vec<ApiKeyRecord>, EngineError> {
        Ok(self.store.api_keys()?)
    }

    /// A key ring of every stored key.
    pub fn key_ring(&self) -> Result<KeyRing, EngineError> {
        let by_hash = self
            .store
            .api_keys()?
            .into_iter()
            .map(|k| {
                let grant = match (k.admin, k.user_id) {
                    (false, Some(user)) => Grant::User(user),
                    _ => Grant::Admin,
                };
                (k.key_hash, grant)
            })
            .collect();
        Ok(KeyRing { by_hash })
    }
}
