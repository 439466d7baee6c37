//! What the memory cost to write and keep: the counts `aril stats` gives (turns, segments,
//! vectors, bytes), every language-model call by purpose and model (tokens drawn as bars), and
//! over time: tokens per day stacked by purpose, turns stored per day (embedded or not). Admin keys only, since
//! the numbers span users.

use aril_core::Role;
use aril_engine::{DailyTurns, DailyUsage, LlmUsage};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::NaiveDate;
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
    let (stats, usage_by_day, turns_by_day, dense_roles) = state
        .read(|engine| {
            Ok::<_, aril_engine::EngineError>((
                engine.stats()?,
                engine.llm_usage_by_day()?,
                engine.turns_by_day()?,
                engine.config().dense_roles.clone(),
            ))
        })
        .await?;
    let purposes = purposes(&usage_by_day);
    let tokens_by_day = tokens_per_day(&usage_by_day, &purposes);
    let turns = embedded_per_day(&turns_by_day, &dense_roles);
    let roles: Vec<&str> = dense_roles.iter().map(|r| r.as_str()).collect();
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
            h2 { "Over time (UTC days)" }
            @if !tokens_by_day.is_empty() {
                (daily_chart("Model tokens per day, by purpose", &tokens_by_day, &purposes))
                table {
                    thead { tr { th { "day" } th { "purpose" } th { "model" } th.num { "calls" }
                        th.num { "prompt tokens" } th.num { "reply tokens" } } }
                    tbody { @for u in usage_by_day.iter().rev().take(DAYS_LISTED) { tr {
                        td { (u.day) } td { (u.purpose) } td { (u.model) } td.num { (u.calls) }
                        td.num { (u.prompt_tokens) } td.num { (u.completion_tokens) }
                    } } }
                }
                @if usage_by_day.len() > DAYS_LISTED {
                    p.muted { "The newest " (DAYS_LISTED) " rows of " (usage_by_day.len()) "." }
                }
            }
            @if turns.is_empty() {
                p.muted { "No turn stored yet." }
            } @else {
                (daily_chart("Turns stored per day: embedded as stored, and not", &turns,
                    &["embedded", "not embedded"]))
                p.muted { "Turns of the dense roles (" (roles.join(", ")) ") get their vectors as
                    they are stored: one embedding each, of one or more chunks." }
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

/// Turns stored per day as (embedded, not embedded), by whether their role is a dense one.
fn embedded_per_day(turns: &[DailyTurns], dense: &[Role]) -> Vec<(NaiveDate, Vec<u64>)> {
    stacked_per_day(turns, 2, |t| {
        (t.day, Some(usize::from(!dense.contains(&t.role))), t.turns)
    })
}

/// Rows (oldest day first) summed into one column per day of `parts` figures: `row` gives a
/// row's day, the part it adds to (`None`: none) and its figure.
fn stacked_per_day<T>(
    rows: &[T],
    parts: usize,
    row: impl Fn(&T) -> (NaiveDate, Option<usize>, u64),
) -> Vec<(NaiveDate, Vec<u64>)> {
    let mut days: Vec<(NaiveDate, Vec<u64>)> = Vec::new();
    for r in rows {
        let (day, part, n) = row(r);
        if days.last().is_none_or(|(d, _)| *d != day) {
            days.push((day, vec![0; parts]));
        }
        if let (Some((_, figures)), Some(i)) = (days.last_mut(), part) {
            figures[i] += n;
        }
    }
    days
}

/// Rows of the per-day table shown under the chart.
const DAYS_LISTED: usize = 30;

/// The purposes in the calls, in first-seen order (the chart's stacking and legend order).
fn purposes(usage: &[DailyUsage]) -> Vec<&str> {
    let mut seen: Vec<&str> = Vec::new();
    for u in usage {
        if !seen.contains(&u.purpose.as_str()) {
            seen.push(&u.purpose);
        }
    }
    seen
}

/// Prompt plus reply tokens per day, one figure per purpose (in `purposes`' order).
fn tokens_per_day(usage: &[DailyUsage], purposes: &[&str]) -> Vec<(NaiveDate, Vec<u64>)> {
    stacked_per_day(usage, purposes.len(), |u| {
        let part = purposes.iter().position(|p| *p == u.purpose);
        (u.day, part, u.prompt_tokens + u.completion_tokens)
    })
}

const PALETTE: [&str; 6] = [
    "#2f5d8a", "#d08c2c", "#4e9a6b", "#9b4f96", "#b42318", "#6b7280",
];

/// Days as columns, each stacked from its parts, on one scale; a legend when there are several
/// parts. Only the days present are drawn (a day without any is left out, not drawn empty);
/// the first and last day are labelled. An inline SVG with presentation attributes only.
fn daily_chart(title: &str, days: &[(NaiveDate, Vec<u64>)], parts: &[&str]) -> Markup {
    const PLOT: f64 = 640.0;
    const HIGH: f64 = 160.0;
    const LEFT: f64 = 70.0;
    let most = days
        .iter()
        .map(|(_, p)| p.iter().sum::<u64>())
        .max()
        .unwrap_or(0)
        .max(1);
    let step = PLOT / days.len().max(1) as f64;
    let bar = (step * 0.8).clamp(1.0, 24.0);
    let legend = if parts.len() > 1 { 22.0 } else { 0.0 };
    let height = HIGH + 46.0 + legend;
    let y = |n: u64| HIGH * n as f64 / most as f64;
    let colour = |i: usize| PALETTE[i % PALETTE.len()];
    // (x, top, height, part) of each piece of each column, stacked from the axis up.
    let mut rects: Vec<(f64, f64, f64, usize)> = Vec::new();
    for (d, (_, stacked)) in days.iter().enumerate() {
        let x = LEFT + step * d as f64 + (step - bar) / 2.0;
        let mut top = 20.0 + HIGH;
        for (part, n) in stacked.iter().enumerate() {
            let h = y(*n);
            top -= h;
            rects.push((x, top, h, part));
        }
    }
    html! {
        svg.chart xmlns="http://www.w3.org/2000/svg" role="img" width=(LEFT + PLOT + 20.0)
            height=(height) viewBox=(format!("0 0 {} {height}", LEFT + PLOT + 20.0)) {
            title { (title) }
            text x="0" y="14" font-size="13" fill="#222" { (title) }
            text x=(LEFT - 6.0) y="30" font-size="11" fill="#444" text-anchor="end" { (most) }
            line x1=(LEFT) y1=(20.0 + HIGH) x2=(LEFT + PLOT) y2=(20.0 + HIGH) stroke="#999" {}
            @for (x, top, h, part) in &rects {
                rect x=(format!("{x:.1}")) y=(format!("{top:.1}")) width=(format!("{bar:.1}"))
                    height=(format!("{h:.1}")) fill=(colour(*part)) {}
            }
            @if let (Some((first, _)), Some((last, _))) = (days.first(), days.last()) {
                text x=(LEFT) y=(HIGH + 36.0) font-size="11" fill="#444" { (first) }
                @if days.len() > 1 {
                    text x=(LEFT + PLOT) y=(HIGH + 36.0) font-size="11" fill="#444"
                        text-anchor="end" { (last) }
                }
            }
            @if parts.len() > 1 {
                @for (i, p) in parts.iter().enumerate() {
                    @let x = LEFT + 130.0 * i as f64;
                    rect x=(x) y=(HIGH + 48.0) width="12" height="12" fill=(colour(i)) {}
                    text x=(x + 16.0) y=(HIGH + 58.0) font-size="12" fill="#222" { (p) }
                }
            }
        }
    }
}
