//! Read commands: `search`, `segments`, `stats`, as text tables or JSON.

use aril_engine::{Condition, Engine, SearchRequest};

use crate::args::{ProfileCmd, SearchCmd, SegmentsCmd, StatsCmd};

/// `--filter JSON`: the condition it sets (the scope comes from the scope flags).
fn parse_filter(text: &str) -> anyhow::Result<Option<Condition>> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| anyhow::anyhow!("--filter is not JSON: {e}"))?;
    Condition::unscoped(&value).map_err(|e| anyhow::anyhow!("--filter: {e}"))
}

pub fn search(engine: Engine, cmd: &SearchCmd) -> anyhow::Result<()> {
    let request = SearchRequest {
        filter: cmd.scope.filter()?,
        query: cmd.query.clone(),
        k: cmd.k,
        budget: cmd.budget,
        asked_at: Some(crate::args::parse_at(cmd.at.as_deref())?.unwrap_or_else(chrono::Utc::now)),
        condition: cmd
            .filter
            .as_deref()
            .map(parse_filter)
            .transpose()?
            .flatten(),
        threshold: cmd.threshold,
    };
    let response = if cmd.sessions {
        engine.search_sessions(&request)?
    } else {
        engine.search(&request)?
    };
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&response)?);
        return Ok(());
    }
    if response.results.is_empty() {
        println!("nothing recalled for {}", cmd.scope.describe());
    }
    for hit in &response.results {
        let when = hit
            .time
            .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_else(|| "undated".into());
        println!(
            "{:>2}. {} {} [{}] ({}, score {:.4})",
            hit.rank,
            hit.kind.as_str(),
            hit.source.turns.join(","),
            when,
            hit.source
                .session
                .as_deref()
                .unwrap_or(&hit.source.conversation),
            hit.score
        );
        for line in hit.text.lines() {
            println!("      {line}");
        }
    }
    println!(
        "({} results, {} tokens)",
        response.results.len(),
        response.context_tokens
    );
    Ok(())
}

pub fn segments(engine: &Engine, cmd: &SegmentsCmd) -> anyhow::Result<()> {
    let (segments, total) = engine.segments(&cmd.scope.filter()?, cmd.offset, cmd.limit)?;
    if cmd.json {
        let page = serde_json::json!({"total": total, "offset": cmd.offset, "segments": segments});
        println!("{}", serde_json::to_string_pretty(&page)?);
        return Ok(());
    }
    for s in &segments {
        println!(
            "{} {:>2} turns {:>4} tokens  {:<13} p={:.2}  {}",
            s.id,
            s.turns.len(),
            s.tokens,
            s.reason.as_str(),
            s.boundary_score,
            s.start_time
                .map(|t| t.format("%Y-%m-%d").to_string())
                .unwrap_or_default()
        );
    }
    let shown = segments.len() as u64;
    match shown {
        0 => println!("(no segment after the first {} of {total})", cmd.offset),
        _ => println!(
            "(segments {}-{} of {total}{})",
            cmd.offset + 1,
            cmd.offset + shown,
            match cmd.offset + shown < total {
                true => format!("; --offset {} for the next", cmd.offset + shown),
                false => String::new(),
            }
        ),
    }
    Ok(())
}

pub fn profile(engine: &mut Engine, cmd: &ProfileCmd) -> anyhow::Result<()> {
    let profile = engine.profile(&cmd.scope.filter()?)?;
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&profile)?);
        return Ok(());
    }
    for (title, cards) in [
        ("Preferences", &profile.preferences),
        ("Stable traits", &profile.traits),
    ] {
        println!("{title} ({}):", cards.len());
        for c in cards {
            let when = c
                .time
                .as_ref()
                .and_then(|t| t.start)
                .map(|t| t.format("%Y-%m-%d ").to_string())
                .unwrap_or_default();
            println!("  {when}{}", c.text);
        }
    }
    Ok(())
}

pub fn stats(engine: &Engine, cmd: &StatsCmd) -> anyhow::Result<()> {
    let stats = engine.stats()?;
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&stats)?);
        return Ok(());
    }
    let s = &stats.store;
    println!("data directory      {}", stats.data_dir);
    println!("store               {}", stats.backend);
    println!("users               {}", s.users);
    println!("conversations       {}", s.conversations);
    println!("turns               {}", s.turns);
    println!("segments            {}", s.segments);
    // Each closed segment is one encoder call when cards are written.
    println!(
        "turns per segment   {:.2} ({:.0} o200k tokens each)",
        stats.turns_per_segment, stats.tokens_per_segment
    );
    println!("turns in open segs  {}", s.open_segment_turns);
    // What a stored turn costs the embedder (the cache keeps one entry per distinct text).
    println!(
        "embedded texts      {} ({} chunks; {:.2} texts, {:.2} chunks per turn)",
        s.embeddings,
        s.embedded_chunks,
        s.embeddings as f64 / s.turns.max(1) as f64,
        s.embedded_chunks as f64 / s.turns.max(1) as f64
    );
    println!("lexical units       {}", stats.lexical_units);
    println!("cards               {}", s.cards);
    println!(
        "segments to encode  {} pending, {} failed (aril consolidate [--retry-failed])",
        s.segments_pending, s.segments_failed
    );
    println!("store bytes         {}", s.bytes);
    if stats.llm.is_empty() {
        println!("LLM calls           none");
    }
    for u in &stats.llm {
        println!(
            "LLM {:<8}        {} calls to {}: {} prompt + {} completion tokens ({} + {} in o200k{}), {:.1} s{}",
            u.purpose,
            u.calls,
            u.model,
            u.prompt_tokens,
            u.completion_tokens,
            u.prompt_o200k,
            u.completion_o200k,
            if u.o200k_calls < u.calls {
                format!(", {} older calls without", u.calls - u.o200k_calls)
            } else {
                String::new()
            },
            u.latency_ms as f64 / 1000.0,
            if u.counted_locally > 0 {
                format!(" ({} counted locally, o200k)", u.counted_locally)
            } else {
                String::new()
            }
        );
    }
    Ok(())
}
