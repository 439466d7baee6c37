//! A report as a picture: recall against the context it was given — token budgets where the
//! report has them (LoCoMo), else the number of units recalled (LongMemEval, HotpotQA) — one line
//! for all questions and one per category or question type. Written as a standalone SVG beside
//! the JSON report, from the report's JSON, so reports made earlier can be drawn too.
//!
//! Drawn by hand: a few dozen lines of SVG; the plotting crates (plotters and the like) bring
//! font rasterising and bitmap back ends that a line chart of at most a dozen series does not need.

use std::fmt::Write;

use serde_json::Value;

/// A series: its label and its recall at each cut-off (`None` where the group lacks it).
struct Series {
    label: String,
    points: Vec<Option<f64>>,
}

/// A cut-off of a recall metric: its key (`recall@2k_tokens`) and its value in units or tokens.
struct Cut {
    key: String,
    size: u64,
}

/// The recall keys of a family, smallest cut-off first: `recall@Nk_tokens` when `budgets`, else
/// `recall@N`.
fn cuts(family: &serde_json::Map<String, Value>, budgets: bool) -> Vec<Cut> {
    let mut cuts: Vec<Cut> = family
        .keys()
        .filter_map(|key| {
            let cut = key.strip_prefix("recall@")?;
            let size = if budgets {
                cut.strip_suffix("k_tokens")?.parse::<u64>().ok()? * 1000
            } else {
                cut.parse::<u64>().ok()?
            };
            Some(Cut {
                key: key.clone(),
                size,
            })
        })
        .collect();
    cuts.sort_by_key(|c| c.size);
    cuts
}

/// The family drawn, its cut-offs and whether they are budgets: the first family with token
/// budgets, else the first with `recall@N` (families in the report's order).
fn chosen(metrics: &serde_json::Map<String, Value>) -> Option<(&str, Vec<Cut>, bool)> {
    for budgets in [true, false] {
        for (name, family) in metrics {
            let cuts = family
                .as_object()
                .map(|f| cuts(f, budgets))
                .unwrap_or_default();
            if cuts.len() >= 2 {
                return Some((name, cuts, budgets));
            }
        }
    }
    None
}

/// The SVG of a report's JSON (as `aril bench --json` writes it), or `None` when it holds no
/// recall measured at two cut-offs or more.
pub fn recall_svg(report: &Value) -> Option<String> {
    let metrics = report.get("metrics")?.as_object()?;
    let (family, cuts, budgets) = chosen(metrics)?;
    let at = |metrics: &Value| -> Vec<Option<f64>> {
        cuts.iter()
            .map(|c| metrics.get(family)?.get(&c.key)?.as_f64())
            .collect()
    };
    let mut series = vec![Series {
        label: "all questions".into(),
        points: at(&report["metrics"]),
    }];
    let groups = report
        .get("by_category")
        .or_else(|| report.get("by_type"))
        .and_then(Value::as_object);
    for (name, metrics) in groups.into_iter().flatten() {
        series.push(Series {
            label: name.clone(),
            points: at(metrics),
        });
    }
    let title = format!(
        "{} · {} · {family} recall",
        report.get("benchmark")?.as_str()?,
        report.get("strategy")?.as_str()?
    );
    let axis = if budgets {
        "context budget (o200k tokens)"
    } else {
        "units recalled (k)"
    };
    let ticks: Vec<String> = cuts
        .iter()
        .map(|c| match budgets {
            true => format!("{}k", c.size / 1000),
            false => c.size.to_string(),
        })
        .collect();
    Some(draw(&title, axis, &ticks, &series))
}

/// Line colours, distinguishable in print and for the common colour-vision deficiencies
/// (Okabe–Ito), the first, black, for all questions.
const COLOURS: [&str; 8] = [
    "#000000", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#0072B2", "#CC79A7", "#999999",
];

/// The picture's size, and the plot area's origin and size, in pixels.
const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 60.0;
const TOP: f64 = 40.0;
const PLOT_W: f64 = 420.0;
const PLOT_H: f64 = 320.0;

/// Text as SVG character data.
fn escaped(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The chart: recall 0–1 upwards, the cut-offs evenly spaced across, a legend on the right.
fn draw(title: &str, axis: &str, ticks: &[String], series: &[Series]) -> String {
    let x = |i: usize| LEFT + PLOT_W * i as f64 / (ticks.len().max(2) - 1) as f64;
    let y = |v: f64| TOP + PLOT_H * (1.0 - v.clamp(0.0, 1.0));
    let mut svg = String::new();
    // Writing to a String cannot fail.
    let _ = write!(
        svg,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">
<title>{t}</title>
<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>
<text x="{LEFT}" y="22" font-size="14" font-weight="bold">{t}</text>
"##,
        t = escaped(title)
    );
    for step in 0..=5 {
        let v = f64::from(step) / 5.0;
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" x2="{}" y1="{y}" y2="{y}" stroke="#dddddd"/><text x="{}" y="{}" text-anchor="end">{v:.1}</text>"##,
            LEFT + PLOT_W,
            LEFT - 6.0,
            y(v) + 4.0,
            y = y(v),
        );
    }
    for (i, tick) in ticks.iter().enumerate() {
        let _ = writeln!(
            svg,
            r##"<line x1="{x}" x2="{x}" y1="{TOP}" y2="{}" stroke="#eeeeee"/><text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
            TOP + PLOT_H,
            TOP + PLOT_H + 16.0,
            escaped(tick),
            x = x(i),
        );
    }
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="{}" text-anchor="middle">{}</text><text transform="translate(16 {}) rotate(-90)" text-anchor="middle">recall</text>"##,
        LEFT + PLOT_W / 2.0,
        TOP + PLOT_H + 36.0,
        escaped(axis),
        TOP + PLOT_H / 2.0,
    );
    for (n, s) in series.iter().enumerate() {
        let colour = COLOURS[n % COLOURS.len()];
        let width = if n == 0 { 3.0 } else { 1.5 };
        let points: Vec<String> = s
            .points
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| format!("{:.1},{:.1}", x(i), y(v))))
            .collect();
        let _ = writeln!(
            svg,
            r##"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="{width}"/>"##,
            points.join(" ")
        );
        for p in &points {
            let (px, py) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(
                svg,
                r##"<circle cx="{px}" cy="{py}" r="3" fill="{colour}"/>"##
            );
        }
        let ly = TOP + 10.0 + 20.0 * n as f64;
        let last = s.points.iter().rev().flatten().next();
        let _ = writeln!(
            svg,
            r##"<line x1="{}" x2="{}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="{width}"/><text x="{}" y="{}">{}{}</text>"##,
            LEFT + PLOT_W + 24.0,
            LEFT + PLOT_W + 44.0,
            LEFT + PLOT_W + 50.0,
            ly + 4.0,
            escaped(&s.label),
            last.map(|v| format!(" ({v:.3})")).unwrap_or_default(),
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Value {
        serde_json::json!({
            "benchmark": "locomo", "strategy": "aril",
            "metrics": {
                "evidence": {"n": 3, "recall@5": 0.5, "recall@1k_tokens": 0.6,
                             "recall@2k_tokens": 0.8, "recall@4k_tokens": 0.9},
                "session": {"n": 3, "recall@5": 0.7, "recall@10": 0.9}
            },
            "by_category": {
                "1 multi-hop": {"evidence": {"recall@1k_tokens": 0.4, "recall@2k_tokens": 0.7,
                                             "recall@4k_tokens": 0.85}},
                "4 <single>": {"evidence": {"recall@1k_tokens": 0.9}}
            }
        })
    }

    #[test]
    fn budgets_are_drawn_when_the_report_has_them_with_a_line_per_category() {
        let svg = recall_svg(&report()).unwrap();
        assert!(svg.contains("context budget (o200k tokens)"));
        for tick in [">1k<", ">2k<", ">4k<"] {
            assert!(svg.contains(tick), "{tick}");
        }
        assert_eq!(
            svg.matches("<polyline").count(),
            3,
            "all, and two categories"
        );
        assert!(svg.contains("all questions (0.900)"));
        assert!(svg.contains("1 multi-hop (0.850)"));
        // Labels are escaped; a category measured at one cut-off has one point.
        assert!(svg.contains("4 &lt;single&gt; (0.900)"));
        // 0.9 at 4k: the top of the plot is 1.0 at y = TOP.
        let y = TOP + PLOT_H * 0.1;
        assert!(svg.contains(&format!("{:.1},{:.1}", LEFT + PLOT_W, y)));
    }

    #[test]
    fn units_are_drawn_when_there_are_no_budgets() {
        let mut r = report();
        r["metrics"]["evidence"] = serde_json::json!({"n": 3, "recall@5": 0.5});
        let svg = recall_svg(&r).unwrap();
        assert!(svg.contains("units recalled (k)") && svg.contains("session recall"));
        assert!(svg.contains(">5<") && svg.contains(">10<"));
    }

    #[test]
    fn a_report_without_two_cut_offs_draws_nothing() {
        let r = serde_json::json!({"benchmark": "x", "strategy": "y",
            "metrics": {"evidence": {"n": 1, "recall@5": 0.5}}});
        assert!(recall_svg(&r).is_none());
    }
}
