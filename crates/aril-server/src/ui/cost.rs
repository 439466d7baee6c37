//! What the memory cost to write and keep: the counts `aril stats` gives (turns, segments,
//! vectors, bytes) and every language-model call by purpose and model, tokens drawn as bars.
//! Admin keys only, since the numbers span users.

use aril_engine::LlmUsage;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::page::page;
use super::{UiError, Viewer};
use crate::{ApiError, AppState};

pub(crate) async fn cost(
    State(state): State<AppState>,
    viewer: Viewer,
) -> Result<Response, UiError> {
    if !viewer.is_admin() {
        return Err(UiError(ApiError::forbidden(
            "the cost spans every user: sign in with an admin key",
        )));
    }
    let stats = state.read(|engine| engine.stats()).await?;
    let s = &stats.store;
    Ok(page(
        "Cost",
        &viewer,
        None,
        html! {
            h1 { "Cost" }
            table.facts {
                tr { th { "store" } td { (stats.backend) } }
                tr { th { "turns" } td { (s.turns) " (" (s.open_segment_turns) " in open segments)" } }
                tr { th { "closed segments" } td { (s.segments) " · "
                    (format!("{:.2}", stats.turns_per_segment)) " turns and "
                    (format!("{:.0}", stats.tokens_per_segment)) " tokens each (one encoder call each)" } }
                tr { th { "vectors" } td { (s.embeddings) " units, " (s.embedded_chunks) " chunks" } }
                tr { th { "BM25 documents" } td { (stats.lexical_units) } }
                tr { th { "cards" } td { (s.cards) " · " (s.segments_pending) " segments waiting · "
                    (s.segments_failed) " failed" } }
                tr { th { "bytes" } td { (s.bytes) } }
            }
            h2 { "Language-model calls" }
            @if stats.llm.is_empty() {
                p.muted { "None: no encoder, planner or answerer has been called on this memory." }
            } @else {
                (usage_chart(&stats.llm))
                table {
                    thead { tr { th { "purpose" } th { "model" } th.num { "calls" }
                        th.num { "prompt tokens" } th.num { "reply tokens" } th.num { "ms" } } }
                    tbody { @for u in &stats.llm { tr {
                        td { (u.purpose) } td { (u.model) } td.num { (u.calls) }
                        td.num { (u.prompt_tokens) } td.num { (u.completion_tokens) }
                        td.num { (u.latency_ms) }
                    } } }
                }
            }
        },
    )
    .into_response())
}

/// Prompt and reply tokens per purpose and model, as horizontal bars on one scale (an inline
/// SVG: presentation attributes only, so the page's policy needs no inline style).
fn usage_chart(usage: &[LlmUsage]) -> Markup {
    const ROW: u32 = 28;
    const LABEL: u32 = 260;
    const BAR: u32 = 420;
    let most = usage
        .iter()
        .map(|u| u.prompt_tokens + u.completion_tokens)
        .max()
        .unwrap_or(0)
        .max(1);
    let width = |n: u64| (n as f64 / most as f64 * f64::from(BAR)).round() as u32;
    let height = ROW * usage.len() as u32 + 24;
    html! {
        svg.chart xmlns="http://www.w3.org/2000/svg" role="img" width=(LABEL + BAR + 120)
            height=(height) viewBox=(format!("0 0 {} {height}", LABEL + BAR + 120)) {
            title { "Tokens per purpose and model (prompt dark, reply light)" }
            @for (i, u) in usage.iter().enumerate() {
                @let y = ROW * i as u32 + 4;
                @let p = width(u.prompt_tokens);
                @let c = width(u.completion_tokens);
                text x="0" y=(y + 16) font-size="13" fill="#222" { (u.purpose) " · " (u.model) }
                rect x=(LABEL) y=(y) width=(p) height="20" fill="#2f5d8a" {}
                rect x=(LABEL + p) y=(y) width=(c) height="20" fill="#9cc3e6" {}
                text x=(LABEL + p + c + 6) y=(y + 15) font-size="12" fill="#444" {
                    (u.prompt_tokens + u.completion_tokens)
                }
            }
        }
    }
}
