//! Measures embedding throughput on this machine: `cargo run --release --example embed_speed`.

use std::time::Instant;

use aril_embed::{Embedder, MiniLm, default_model_dir};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = MiniLm::load(&default_model_dir())?;
    let sentence = "I went to a support group yesterday and it was so powerful, the stories were inspiring and everyone was kind.";
    for (n, words) in [(128usize, 1usize), (32, 6)] {
        let text = vec![sentence; words].join(" ");
        let pieces = model.tokenize(&text)?.ids;
        let seqs: Vec<&[u32]> = (0..n).map(|_| &pieces[..pieces.len().min(254)]).collect();
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
    Ok(())
}
