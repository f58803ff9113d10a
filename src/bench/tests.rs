//! The benchmark harness run for a fraction of a second: reports carry
//! every field, every figure is positive and measured, the `--compare` ratio
//! is the quotient of the two measured rates, failures surface as errors
//! naming the agent, and the scaling sweep writes a CSV and a well-formed SVG.

use crate::bench::baseline::JsonRewriteRegistry;
use crate::bench::heartbeats::{
    run_heartbeats_on, run_target, HeartbeatBenchConfig, HeartbeatTarget, Mix,
};
use crate::bench::scaling::{run_scaling_on, to_svg, write_outputs};
use crate::bench::{BenchError, Result};
use agentlog::model::Status;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// An in-memory target that counts what it receives.
#[derive(Default)]
struct Counting {
    agents: usize,
    heartbeats: AtomicU64,
    statuses: AtomicU64,
    posts: AtomicU64,
    fail_at: Option<u64>,
}

impl HeartbeatTarget for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn register_all(&mut self, agents: usize) -> Result<()> {
        self.agents = agents;
        Ok(())
    }
    fn heartbeat(&self, agent: usize, _writer: usize) -> Result<()> {
        assert!(agent < self.agents);
        let n = self.heartbeats.fetch_add(1, Ordering::Relaxed);
        if Some(n) == self.fail_at {
            return Err(BenchError::Target {
                target: "counting",
                agent,
                message: "injected failure".into(),
            });
        }
        Ok(())
    }
    fn status(&self, agent: usize, _writer: usize, _s: Status) -> Result<()> {
        assert!(agent < self.agents);
        self.statuses.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn post(&self, from: usize, to: usize, _writer: usize) -> Result<()> {
        assert!(from < self.agents && to < self.agents && from != to);
        self.posts.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn log_bytes(&self) -> Result<u64> {
        Ok(1)
    }
    fn bytes_written(&self) -> u64 {
        40 * (self.heartbeats.load(Ordering::Relaxed)
            + self.statuses.load(Ordering::Relaxed)
            + self.posts.load(Ordering::Relaxed))
    }
}

fn cfg(agents: usize, writers: usize, seconds: f64) -> HeartbeatBenchConfig {
    HeartbeatBenchConfig {
        agents,
        seconds,
        writers,
        durable: false,
        mix: Mix::default(),
        dir: None,
        compare: false,
    }
}

#[test]
fn counts_reported_are_the_operations_the_target_received() {
    let mut t = Counting::default();
    let mut c = cfg(50, 2, 0.05);
    c.mix = Mix::parse("0.1,0.05").unwrap();
    let r = run_target(&mut t, &c).unwrap();
    assert_eq!(r.heartbeats, t.heartbeats.load(Ordering::Relaxed));
    assert_eq!(r.status_changes, t.statuses.load(Ordering::Relaxed));
    assert_eq!(r.posts, t.posts.load(Ordering::Relaxed));
    assert_eq!(r.events, r.heartbeats + r.status_changes + r.posts);
    // Lazy runs time one event in SAMPLE_EVERY per writer (the first of each group).
    let per_writer_max = r.events / crate::bench::heartbeats::SAMPLE_EVERY + c.writers as u64;
    assert!(
        r.latency.count >= r.events / crate::bench::heartbeats::SAMPLE_EVERY
            && r.latency.count <= per_writer_max,
        "{} latency samples for {} events",
        r.latency.count,
        r.events
    );
    // Deterministic mix: per writer, status changes = floor(heartbeats·rate) ± 1.
    let want_status = r.heartbeats as f64 * 0.1;
    assert!(
        (r.status_changes as f64 - want_status).abs() <= 2.0 * 2.0,
        "{r:?}"
    );
    let want_posts = r.heartbeats as f64 * 0.05;
    assert!((r.posts as f64 - want_posts).abs() <= 2.0 * 2.0, "{r:?}");
    assert!((r.bytes_per_event - 40.0).abs() < 1e-9);
    assert!((r.events_per_s - r.events as f64 / r.elapsed_s).abs() < 1e-6);
}

#[test]
fn a_failing_target_is_an_error_not_a_report() {
    let mut t = Counting {
        fail_at: Some(10),
        ..Default::default()
    };
    let e = run_target(&mut t, &cfg(20, 1, 5.0))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("agent #10") && e.contains("injected failure"),
        "{e}"
    );
}

#[test]
fn bad_configurations_are_refused() {
    let mut t = Counting::default();
    for (c, needle) in [
        (cfg(0, 1, 0.1), "agents"),
        (cfg(10, 0, 0.1), "writers"),
        (cfg(10, 1, 0.0), "seconds"),
        (cfg(10, 1, f64::NAN), "seconds"),
    ] {
        let e = run_target(&mut t, &c).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    }
    assert!(Mix::parse("0.1").is_err());
    assert!(Mix::parse("2,0").is_err());
    assert!(Mix::parse("x,0").is_err());
}

#[test]
fn compare_reports_both_rates_and_their_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(30, 2, 0.15);
    c.compare = true;
    c.dir = Some(dir.path().to_path_buf());
    let report = run_heartbeats_on(&c, |_: &Path, _| {
        Ok(Box::new(Counting::default()) as Box<dyn HeartbeatTarget>)
    })
    .unwrap();
    let j = serde_json::to_value(&report).unwrap();
    // The names scripts and BENCHMARKS.md read the report by.
    for k in [
        "events_per_s",
        "p50_us",
        "p99_us",
        "p999_us",
        "bytes_per_event",
        "log_bytes",
        "peak_rss_bytes",
        "machine",
        "agents",
        "writers",
        "durable",
        "seconds",
        "baseline_events_per_s",
        "ratio",
    ] {
        assert!(j.get(k).is_some(), "missing `{k}` in {j}");
    }
    // Every figure measured as a float (rates, latencies, sizes, the
    // ratio) is positive, as is the peak RSS; counts may be zero.
    let floats: Vec<(&String, &serde_json::Value)> = (j.as_object().unwrap().iter())
        .filter(|(_, v)| v.is_f64())
        .collect();
    assert!(floats.len() >= 9, "{j}");
    for (k, v) in floats {
        assert!(v.as_f64().unwrap() > 0.0, "`{k}` not positive in {j}");
    }
    assert!(j["peak_rss_bytes"].as_u64().unwrap() > 0, "{j}");
    assert!(j["p50_us"].as_f64() <= j["p99_us"].as_f64());
    assert!(j["p99_us"].as_f64() <= j["p999_us"].as_f64());
    let b = report.baseline.as_ref().unwrap();
    assert_eq!(b.target, "json-rewrite");
    assert!(
        b.events > 0 && b.bytes_per_event > 1_000.0,
        "whole file per event: {b:?}"
    );
    let ratio = report.events_per_s / b.events_per_s;
    assert!((report.ratio.unwrap() - ratio).abs() <= 1e-9 * ratio);
    assert_eq!(report.baseline_events_per_s, Some(b.events_per_s));
    // The baseline's file is still a valid schema-v4-like registry.
    let text = std::fs::read(dir.path().join("json-baseline/registry.json")).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(v["agents"].as_array().unwrap().len(), 30);
    // Round-trips through JSON.
    let back: crate::bench::heartbeats::HeartbeatReport = serde_json::from_value(j).unwrap();
    assert_eq!(back, report);
}

#[test]
fn baseline_alone_without_compare_has_no_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = JsonRewriteRegistry::new(dir.path()).unwrap();
    let r = run_target(&mut b, &cfg(10, 1, 0.05)).unwrap();
    assert!(r.events > 0 && r.events_per_s > 0.0);
    let c = cfg(10, 1, 0.05);
    let rep = run_heartbeats_on(&c, |root: &Path, _| {
        Ok(Box::new(JsonRewriteRegistry::new(&root.join("p"))?) as Box<dyn HeartbeatTarget>)
    })
    .unwrap();
    let j = serde_json::to_value(&rep).unwrap();
    assert!(j.get("ratio").is_none() && j.get("baseline_events_per_s").is_none());
}

/// A tiny well-formedness check: every tag closes, in order, and the root is `svg`.
fn assert_balanced_xml(s: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = s;
    let mut roots = 0;
    while let Some(i) = rest.find('<') {
        let j = rest[i..].find('>').expect("unterminated tag") + i;
        let tag = &rest[i + 1..j];
        assert!(!tag.contains('<'), "`<` inside a tag: {tag}");
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(name.trim()),
                "mismatched </{name}>"
            );
        } else if !tag.ends_with('/') {
            let name = tag.split_whitespace().next().unwrap().to_string();
            if stack.is_empty() {
                roots += 1;
                assert_eq!(name, "svg");
            }
            stack.push(name);
        }
        // Attribute values are quoted pairs.
        assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes: {tag}");
        rest = &rest[j + 1..];
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    assert_eq!(roots, 1);
    // Text between tags has no raw `&` (entities only).
    for part in s.split('&').skip(1) {
        assert!(
            ["amp;", "lt;", "gt;", "quot;"]
                .iter()
                .any(|e| part.starts_with(e)),
            "raw & in {part:.20}"
        );
    }
}

#[test]
fn scaling_sweep_writes_csv_and_svg_with_one_point_per_row() {
    let dir = tempfile::tempdir().unwrap();
    let rows = run_scaling_on(
        &[10, 100, 1000],
        &[1, 2],
        0.03,
        false,
        Some(dir.path()),
        |_, _| Ok(Box::new(Counting::default()) as Box<dyn HeartbeatTarget>),
    )
    .unwrap();
    assert_eq!(rows.len(), 6);
    assert!(rows.iter().all(|r| r.events_per_s > 0.0 && r.p99_us > 0.0));
    let (csv, svg) = write_outputs(&rows, &dir.path().join("out")).unwrap();
    let csv = std::fs::read_to_string(csv).unwrap();
    assert_eq!(csv.lines().count(), 1 + rows.len());
    let svg = std::fs::read_to_string(svg).unwrap();
    assert_balanced_xml(&svg);
    assert_eq!(svg.matches(r#"class="pt eps""#).count(), rows.len());
    assert_eq!(svg.matches(r#"class="pt p99""#).count(), rows.len());
    for label in [
        "agents (log scale)",
        "events/s",
        "p99 latency",
        "1 writer<",
        "2 writers<",
    ] {
        assert!(svg.contains(label), "missing label {label}");
    }
    // Scaling points are cleaned up; a single point still plots.
    assert_balanced_xml(&to_svg(&rows[..1]));
    assert!(run_scaling_on(&[], &[1], 0.01, false, None, |_, _| {
        Ok(Box::new(Counting::default()) as Box<dyn HeartbeatTarget>)
    })
    .is_err());
}

#[test]
fn agentlog_heartbeats_lazy_with_compare() {
    let mut c = cfg(200, 2, 0.1);
    c.compare = true;
    let r = crate::bench::heartbeats::run_heartbeats(&c).unwrap();
    assert_eq!(r.target, "store");
    assert!(!r.durable);
    assert!(r.events > 0 && r.events_per_s > 0.0 && r.p99_us > 0.0);
    assert!(
        r.status_changes > 0,
        "default mix has status changes: {r:?}"
    );
    // Every event is a record: at least a 16-byte header plus a payload.
    assert!(r.bytes_per_event > 16.0, "{r:?}");
    assert!(r.log_bytes >= r.events * 16);
    let b = r.baseline_events_per_s.unwrap();
    assert!((r.ratio.unwrap() - r.events_per_s / b).abs() <= 1e-9 * r.ratio.unwrap());
}

#[test]
fn agentlog_heartbeats_durable_many_writers() {
    let mut c = cfg(100, 8, 0.1);
    c.durable = true;
    c.mix = Mix::NONE;
    let r = crate::bench::heartbeats::run_heartbeats(&c).unwrap();
    assert!(r.durable && r.writers == 8);
    assert_eq!(r.events, r.heartbeats);
    assert!(r.events_per_s > 0.0 && r.p50_us > 0.0);
    assert!(r.baseline.is_none() && r.ratio.is_none());
}

#[test]
fn raw_log_target_reports_its_record_size() {
    let mut c = cfg(100, 1, 0.05);
    c.mix = Mix::NONE;
    let r = run_heartbeats_on(&c, crate::bench::raw_log::RawLogTarget::factory).unwrap();
    assert_eq!(r.target, "raw-log");
    // 40-byte payload + 16-byte header, 8-aligned.
    assert!((r.bytes_per_event - 56.0).abs() < 1e-9, "{r:?}");
}
