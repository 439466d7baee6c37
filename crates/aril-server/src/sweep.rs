//! The expiry sweep of a running server: every [`SWEEP_EVERY`], the memories whose expiry has
//! passed are deleted with the same purge as a deletion (the engine sweeps once on open too;
//! between sweeps recall and listings already skip them).

use std::time::Duration;

use crate::AppState;

/// How often a server looks for expired memories.
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Sweeps until the task is dropped; a failed sweep is logged and tried again next time.
pub(crate) async fn sweep_periodically(state: AppState) {
    let mut every = tokio::time::interval(SWEEP_EVERY);
    // The first tick is at once; the engine swept when it opened.
    every.tick().await;
    loop {
        every.tick().await;
        match state
            .run(|engine| engine.sweep_expired(chrono::Utc::now()))
            .await
        {
            Ok(0) => {}
            Ok(swept) => tracing::info!(swept, "deleted the memories that expired"),
            Err(e) => {
                tracing::warn!(error = %e.message, "the expiry sweep failed; trying again later")
            }
        }
    }
}
