//! Moving a memory to another store (embedded ↔ PostgreSQL): the store's rows are copied page by
//! page ([`aril_store::transfer::copy`]), then the target's derived indexes catch up, and both
//! stores can be fingerprinted to prove nothing was lost.

use std::sync::atomic::AtomicBool;

use aril_store::transfer::{Fingerprint, MoveProgress, MoveReport};

use crate::{Engine, EngineError};

impl Engine {
    /// Copies everything this engine's store holds that `target`'s lacks. Resumable: each page
    /// is one transaction of the target, and a second run copies only what the first did not.
    pub fn copy_into(
        &self,
        target: &mut Engine,
        progress: &mut dyn FnMut(MoveProgress),
        cancel: &AtomicBool,
    ) -> Result<MoveReport, EngineError> {
        let report =
            aril_store::transfer::copy(&*self.store, &mut *target.store, progress, cancel)?;
        target.forget_card_indexes();
        target.search.imported(&*target.store)?;
        Ok(report)
    }

    /// Every table of the store counted and hashed in a backend-independent form.
    pub fn fingerprint(&self) -> Result<Fingerprint, EngineError> {
        Ok(aril_store::transfer::fingerprint(&*self.store)?)
    }
}
