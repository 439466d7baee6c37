//! What the server's load examples share: a server on a loopback port and latency percentiles.

use std::net::SocketAddr;

use aril_server::AppState;

/// A server running in this process until [`Served::stop`].
pub struct Served {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), aril_server::ServerError>>,
}

/// Serves `state` on a free loopback port.
pub async fn serve(state: AppState) -> Result<Served, Box<dyn std::error::Error>> {
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel::<SocketAddr>();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(aril_server::serve(
        state,
        "127.0.0.1:0".parse()?,
        move |a| {
            let _ = addr_tx.send(a);
        },
        async {
            let _ = stop_rx.await;
        },
    ));
    Ok(Served {
        base: format!("http://{}", addr_rx.await?),
        stop,
        task,
    })
}

impl Served {
    /// Stops the server and waits until it has shut down.
    pub async fn stop(self) -> Result<(), Box<dyn std::error::Error>> {
        let _ = self.stop.send(());
        self.task.await??;
        Ok(())
    }
}

/// The `p` quantile (0–1) of sorted latencies; 0 for none.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}
