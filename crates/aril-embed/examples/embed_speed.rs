//! Measures the embedder on this machine: batch throughput, and the latency of one question
//! embedded alone (what a search pays). `cargo run --release -p aril-embed --example embed_speed`.

use std::time::Instant;

use aril_embed::{Embedder, MiniLm, default_model_dir};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = MiniLm::load(&default_model_dir())?;
    let sentence = "I went to a support group yesterday and it was so powerful, the stories were inspiring and everyone was kind.";
    for (n, words) in [(128usize, 1usize), (32, 6)] {
        let text = vec![sentence; words].join(" ");
        let pieces = model.tokenize(&text)?.ids;
        let seqs: Vec<&[u32]> = (0..n).map(|_| &pieces[..pieces.len().min(254)]).collect();
        model.embed_pieces(&seqs[..1])?;
        let start = Instant::now();
        model.embed_pieces(&seqs)?;
        let s = start.elapsed().as_secs_f64();
        println!(
            "{n} texts of {} pieces: {:.1} texts/s, {:.0} pieces/s",
            seqs[0].len(),
            n as f64 / s,
            (n * seqs[0].len()) as f64 / s
        );
    }
    let question = model
        .tokenize("What did I say about my sister's birthday present last month?")?
        .ids;
    let mut ms: Vec<f64> = (0..200)
        .map(|_| {
            let start = Instant::now();
            model
                .embed_pieces(&[&question])
                .map(|_| start.elapsed().as_secs_f64() * 1e3)
        })
        .collect::<Result<_, _>>()?;
    ms.sort_by(f64::total_cmp);
    println!(
        "one question of {} pieces: p50 {:.2} ms, p99 {:.2} ms",
        question.len(),
        ms[ms.len() / 2],
        ms[ms.len() * 99 / 100]
    );
    let rss_kib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());
    println!("resident memory: {rss_kib}");
    Ok(())
}
