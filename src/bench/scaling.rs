//! The scaling sweep: the heartbeat workload over a grid of fleet sizes and
//! writer counts, written as a CSV and a hand-drawn SVG plot (events/s and p99
//! latency against agents on a log-scale axis, one line per writer count).
//!
//! Every row is one measured [`run_target`] phase on a fresh target in its own
//! subdirectory (removed after the point is measured, so a sweep to 100,000
//! agents does not pile up disk).

use super::heartbeats::{run_target, work_dir, HeartbeatBenchConfig, HeartbeatTarget, Mix};
use super::{BenchError, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One measured point of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingRow {
    pub target: String,
    pub agents: usize,
    pub writers: usize,
    pub durable: bool,
    pub seconds: f64,
    pub events: u64,
    pub events_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub bytes_per_event: f64,
    pub peak_rss_bytes: u64,
}

/// Runs every (agents, writers) pair for `seconds` each on a target built by
/// `make` in a fresh subdirectory of `dir` (or of a temporary directory).
pub fn run_scaling_on(
    agents: &[usize],
    writers: &[usize],
    seconds: f64,
    durable: bool,
    dir: Option<&Path>,
    mut make: impl FnMut(&Path, &HeartbeatBenchConfig) -> Result<Box<dyn HeartbeatTarget>>,
) -> Result<Vec<ScalingRow>> {
    if agents.is_empty() || writers.is_empty() {
        return Err(BenchError::Config(
            "scaling needs at least one agents value and one writers value".into(),
        ));
    }
    let (root, _guard) = work_dir(dir)?;
    let mut rows = Vec::with_capacity(agents.len() * writers.len());
    for &a in agents {
        for &w in writers {
            let point = root.join(format!("scaling-a{a}-w{w}"));
            let cfg = HeartbeatBenchConfig {
                agents: a,
                seconds,
                writers: w,
                durable,
                mix: Mix::NONE,
                dir: Some(point.clone()),
                compare: false,
            };
            cfg.validate()?;
            std::fs::create_dir_all(&point)
                .map_err(|e| BenchError::io("cannot create scaling point directory", &point, e))?;
            let mut target = make(&point, &cfg)?;
            let r = run_target(target.as_mut(), &cfg)?;
            drop(target);
            let _ = std::fs::remove_dir_all(&point);
            rows.push(ScalingRow {
                target: r.target,
                agents: a,
                writers: w,
                durable,
                seconds: r.elapsed_s,
                events: r.events,
                events_per_s: r.events_per_s,
                p50_us: r.latency.p50_us,
                p99_us: r.latency.p99_us,
                p999_us: r.latency.p999_us,
                bytes_per_event: r.bytes_per_event,
                peak_rss_bytes: r.peak_rss.peak_rss_bytes,
            });
        }
    }
    Ok(rows)
}

const CSV_HEADER: &str =
    "target,agents,writers,durable,seconds,events,events_per_s,p50_us,p99_us,p999_us,bytes_per_event,peak_rss_bytes";

/// The rows as CSV (header + one line per row).
pub fn to_csv(rows: &[ScalingRow]) -> String {
    let mut s = String::from(CSV_HEADER);
    s.push('\n');
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{:.3},{},{:.1},{:.3},{:.3},{:.3},{:.2},{}",
            r.target,
            r.agents,
            r.writers,
            r.durable,
            r.seconds,
            r.events,
            r.events_per_s,
            r.p50_us,
            r.p99_us,
            r.p999_us,
            r.bytes_per_event,
            r.peak_rss_bytes
        );
    }
    s
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// 1234 → "1.2k", 5_000_000 → "5M".
fn si(v: f64) -> String {
    let (d, suffix) = match v.abs() {
        x if x >= 1e9 => (1e9, "G"),
        x if x >= 1e6 => (1e6, "M"),
        x if x >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    };
    let x = v / d;
    let t = if x.fract().abs() < 1e-9 || x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    format!("{t}{suffix}")
}

/// The smallest 1, 2, 2.5 or 5 × 10^k that is ≥ `raw` (axis tick step).
fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw * (1.0 - 1e-12))
        .unwrap_or(10.0 * mag)
}

const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];
const PANEL_W: f64 = 480.0;
const PANEL_H: f64 = 400.0;
const M_LEFT: f64 = 72.0;
const M_RIGHT: f64 = 20.0;
const M_TOP: f64 = 40.0;
const M_BOTTOM: f64 = 56.0;

/// One panel: `y(row)` against agents (log x), one series per writer count.
fn panel(
    out: &mut String,
    rows: &[ScalingRow],
    x0: f64,
    title: &str,
    y_label: &str,
    class: &str,
    y: fn(&ScalingRow) -> f64,
) {
    let plot_w = PANEL_W - M_LEFT - M_RIGHT;
    let plot_h = PANEL_H - M_TOP - M_BOTTOM;
    let (left, top) = (x0 + M_LEFT, M_TOP);
    let bottom = top + plot_h;

    let amin = rows.iter().map(|r| r.agents).min().unwrap_or(1).max(1) as f64;
    let amax = rows.iter().map(|r| r.agents).max().unwrap_or(1).max(1) as f64;
    let (lx0, lx1) = if amax > amin {
        (amin.log10(), amax.log10())
    } else {
        (amin.log10() - 0.5, amin.log10() + 0.5)
    };
    let ymax = rows.iter().map(y).fold(0.0f64, f64::max);
    let step = nice_step(if ymax > 0.0 { ymax * 1.05 / 5.0 } else { 0.2 });
    let ymax = step * (ymax * 1.05 / step).ceil().max(1.0);
    let px = |a: f64| left + (a.max(1.0).log10() - lx0) / (lx1 - lx0) * plot_w;
    let py = |v: f64| bottom - v / ymax * plot_h;

    let _ = writeln!(out, r#"<g class="panel {class}">"#);
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
        left + plot_w / 2.0,
        xml_escape(title)
    );
    let _ = writeln!(
        out,
        r##"<rect x="{left:.1}" y="{top:.1}" width="{plot_w:.1}" height="{plot_h:.1}" fill="none" stroke="#444"/>"##
    );
    // X ticks at powers of ten inside the range (log scale).
    let mut e = lx0.ceil() as i32;
    while (e as f64) <= lx1 + 1e-9 {
        let a = 10f64.powi(e);
        let x = px(a);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{bottom:.1}" x2="{x:.1}" y2="{:.1}" stroke="#ccc"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"##,
            top,
            bottom + 16.0,
            si(a)
        );
        e += 1;
    }
    let ticks = (ymax / step).round() as usize;
    for i in 0..=ticks {
        let v = step * i as f64;
        let yv = py(v);
        let _ = writeln!(
            out,
            r##"<line x1="{left:.1}" y1="{yv:.1}" x2="{:.1}" y2="{yv:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11">{}</text>"##,
            left + plot_w,
            left - 6.0,
            yv + 4.0,
            si(v)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">agents (log scale)</text>"#,
        left + plot_w / 2.0,
        bottom + 38.0
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12" transform="rotate(-90 {:.1} {:.1})">{}</text>"#,
        x0 + 16.0,
        top + plot_h / 2.0,
        x0 + 16.0,
        top + plot_h / 2.0,
        xml_escape(y_label)
    );

    let mut writers: Vec<usize> = rows.iter().map(|r| r.writers).collect();
    writers.sort_unstable();
    writers.dedup();
    // Legend box (top right) drawn under its entries so lines stay readable.
    let _ = writeln!(
        out,
        r##"<rect class="legend" x="{:.1}" y="{:.1}" width="104" height="{:.1}" fill="white" fill-opacity="0.85" stroke="#bbb"/>"##,
        left + plot_w - 116.0,
        top + 4.0,
        16.0 * writers.len() as f64 + 4.0
    );
    for (si_, w) in writers.iter().enumerate() {
        let color = PALETTE[si_ % PALETTE.len()];
        let mut pts: Vec<&ScalingRow> = rows.iter().filter(|r| r.writers == *w).collect();
        pts.sort_by_key(|r| r.agents);
        let line: Vec<String> = pts
            .iter()
            .map(|r| format!("{:.1},{:.1}", px(r.agents as f64), py(y(r))))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            line.join(" ")
        );
        for r in &pts {
            let _ = writeln!(
                out,
                r#"<circle class="pt {class}" cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}"><title>{} agents, {} writers: {}</title></circle>"#,
                px(r.agents as f64),
                py(y(r)),
                r.agents,
                r.writers,
                si(y(r))
            );
        }
        // Legend entry.
        let ly = top + 14.0 + 16.0 * si_ as f64;
        let lx = left + plot_w - 110.0;
        let _ = writeln!(
            out,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"/><text x="{:.1}" y="{:.1}" font-size="11">{w} writer{}</text>"#,
            lx + 18.0,
            lx + 24.0,
            ly + 4.0,
            if *w == 1 { "" } else { "s" }
        );
    }
    out.push_str("</g>\n");
}

/// A two-panel SVG: events/s and p99 latency (µs) against agents.
pub fn to_svg(rows: &[ScalingRow]) -> String {
    let mut out = String::new();
    let width = 2.0 * PANEL_W;
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{PANEL_H:.0}" viewBox="0 0 {width:.0} {PANEL_H:.0}" font-family="sans-serif">"#
    );
    out.push_str("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    panel(
        &mut out,
        rows,
        0.0,
        "heartbeats: events/s",
        "events/s",
        "eps",
        |r| r.events_per_s,
    );
    panel(
        &mut out,
        rows,
        PANEL_W,
        "heartbeats: p99 latency",
        "p99 latency (µs)",
        "p99",
        |r| r.p99_us,
    );
    out.push_str("</svg>\n");
    out
}

/// Writes `scaling.csv` and `scaling.svg` into `dir`; returns their paths.
pub fn write_outputs(rows: &[ScalingRow], dir: &Path) -> Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::io("cannot create output directory", dir, e))?;
    let csv = dir.join("scaling.csv");
    let svg = dir.join("scaling.svg");
    std::fs::write(&csv, to_csv(rows)).map_err(|e| BenchError::io("cannot write", &csv, e))?;
    std::fs::write(&svg, to_svg(rows)).map_err(|e| BenchError::io("cannot write", &svg, e))?;
    Ok((csv, svg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(agents: usize, writers: usize, eps: f64, p99: f64) -> ScalingRow {
        ScalingRow {
            target: "t".into(),
            agents,
            writers,
            durable: false,
            seconds: 1.0,
            events: eps as u64,
            events_per_s: eps,
            p50_us: p99 / 2.0,
            p99_us: p99,
            p999_us: p99 * 2.0,
            bytes_per_event: 40.0,
            peak_rss_bytes: 1 << 20,
        }
    }

    #[test]
    fn si_formats() {
        assert_eq!(si(1000.0), "1k");
        assert_eq!(si(100_000.0), "100k");
        assert_eq!(si(5_500_000.0), "5.50M");
        assert_eq!(si(0.0), "0");
        assert_eq!(nice_step(0.37), 0.5);
        assert_eq!(nice_step(2.1e6 / 5.0), 500_000.0);
        assert_eq!(nice_step(1.0), 1.0);
        assert_eq!(nice_step(2.2), 2.5);
    }

    #[test]
    fn csv_has_header_and_a_line_per_row() {
        let rows = vec![row(100, 1, 10.0, 1.0), row(1000, 4, 20.0, 2.0)];
        let csv = to_csv(&rows);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], CSV_HEADER);
        assert!(lines[2].starts_with("t,1000,4,false,"));
        assert_eq!(lines[1].split(',').count(), CSV_HEADER.split(',').count());
    }
}
