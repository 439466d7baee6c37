//! Progress bars and Ctrl-C handling for long work: the first Ctrl-C asks the engine to stop after
//! the batch in flight (nothing committed is lost, nothing half-written is kept).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use aril_engine::{IngestReport, Progress};
use indicatif::{ProgressBar, ProgressStyle};

/// A cancel flag raised by Ctrl-C.
pub fn cancel_on_ctrl_c() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let handler_flag = flag.clone();
    // A handler may already be installed (the demo calls this twice); the first one serves.
    let _ = ctrlc::set_handler(move || {
        if handler_flag.swap(true, Ordering::SeqCst) {
            eprintln!("\ninterrupted again: exiting now (committed batches are safe)");
            std::process::exit(130);
        }
        eprintln!("\ninterrupt: stopping after the current batch (Ctrl-C again to exit at once)");
    });
    flag
}

/// A turns progress bar, updated from engine progress callbacks.
pub fn turns_bar(label: &str) -> ProgressBar {
    units_bar(label, "turns")
}

/// A progress bar counting `unit`s.
pub fn units_bar(label: &str, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {unit}  {{per_sec}}  eta {{eta}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_prefix(label.to_string());
    bar
}

/// A `(done, total)` callback that moves `bar`.
pub fn counter(bar: &ProgressBar) -> impl FnMut(usize, usize) + '_ {
    move |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    }
}

pub fn update(bar: &ProgressBar, p: Progress) {
    bar.set_length(p.total as u64);
    bar.set_position(p.done as u64);
}

/// One line: what was added, skipped and segmented, and how fast.
pub fn summary(report: &IngestReport) -> String {
    let rate = if report.elapsed_s > 0.0 {
        report.turns_added as f64 / report.elapsed_s
    } else {
        0.0
    };
    format!(
        "{} turns added, {} already stored, {} segments closed, {} texts embedded in {:.1} s ({:.0} turns/s){}",
        report.turns_added,
        report.turns_skipped,
        report.segments_closed,
        report.embedded_texts,
        report.elapsed_s,
        rate,
        if report.interrupted {
            "; interrupted: run the same command again to finish"
        } else {
            ""
        }
    )
}
