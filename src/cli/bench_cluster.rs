//! `agentlog bench cluster` and its hidden host process (`cluster-host`):
//! runs [`crate::bench::cluster`] with this binary as the host
//! processes and prints both systems' phases, the ratios and which of
//! the targets in BENCHMARKS.md ("Across hosts") were met (text or `--json`).

use super::args;
use super::output::{self, Ui, W};
use crate::bench::cluster::{
    run_cluster, ClusterConfig, ClusterPhase, ClusterReport, SystemReport, TARGET_DURABLE_VS_ETCD,
    TARGET_HEARTBEATS_PER_S, TARGET_VISIBILITY_P99_MS,
};
use crate::bench::BenchError;
use anyhow::{Context, Result};
use std::path::PathBuf;

pub fn cluster(ui: &Ui, out: &mut W, dir: Option<PathBuf>, a: args::BenchCluster) -> Result<()> {
    let exe = std::env::current_exe().context("finding this program (/proc/self/exe)")?;
    let cfg = ClusterConfig {
        exe,
        hosts: a.hosts,
        agents: a.agents,
        seconds: a.seconds,
        concurrency: a.concurrency,
        dir,
    };
    let r = run_cluster(&cfg).map_err(super::bench::usage)?;
    if ui.json {
        output::json(out, &r)?;
        Ok(())
    } else {
        print(out, &r)
    }
}

fn ms(us: f64) -> String {
    format!("{:.2}", us / 1_000.0)
}

fn vis(p: &ClusterPhase, q: fn(&crate::bench::latency::LatencySummary) -> f64) -> String {
    p.visibility.as_ref().map(|s| ms(q(s))).unwrap_or_default()
}

fn print(w: &mut W, r: &ClusterReport) -> Result<()> {
    writeln!(
        w,
        "{} hosts, {} agents, {:.1} s per phase; {} workers per host for heartbeats and \
         durable writes, 1 per host for visibility (etcd the same)",
        r.hosts, r.agents, r.seconds, r.concurrency
    )?;
    let row = |s: &SystemReport| {
        vec![
            s.system.clone(),
            format!("{:.0}", s.heartbeats.per_s),
            format!("{:.0}", s.durable.per_s),
            ms(s.durable.latency.p50_us),
            vis(&s.durable, |l| l.p99_us),
            vis(&s.visibility, |l| l.p50_us),
            vis(&s.visibility, |l| l.p99_us),
            (s.heartbeats.failed + s.durable.failed + s.visibility.failed).to_string(),
        ]
    };
    output::table(
        w,
        &[
            "SYSTEM",
            "HEARTBEATS/S",
            "DURABLE/S",
            "DURABLE P50 ms",
            "VISIBLE P99 ms (loaded)",
            "VISIBLE P50 ms",
            "VISIBLE P99 ms",
            "FAILED",
        ],
        &[row(&r.nats), row(&r.etcd)],
    )?;
    if let Some(lost) = r.nats.heartbeats.lost {
        writeln!(w, "lazy heartbeats missing from the stream: {lost}")?;
    }
    let q = &r.ratios;
    writeln!(
        w,
        "agentlog / etcd: heartbeats {:.2}×, durable {:.2}×, visibility p50 {:.2}×, p99 {:.2}× \
         (latency: below 1 is faster)",
        q.heartbeats, q.durable, q.visibility_p50, q.visibility_p99
    )?;
    let met = |b: bool| if b { "met" } else { "NOT met" };
    let t = &r.targets;
    writeln!(
        w,
        "targets: ≥ {:.0} heartbeats/s {} ({:.0}); durable ≥ {TARGET_DURABLE_VS_ETCD}× etcd puts {} \
         ({:.2}×); visibility p99 < {TARGET_VISIBILITY_P99_MS} ms {} ({} ms)",
        TARGET_HEARTBEATS_PER_S,
        met(t.heartbeats_50k_per_s),
        r.nats.heartbeats.per_s,
        met(t.durable_5x_etcd),
        q.durable,
        met(t.visibility_p99_under_50ms),
        vis(&r.nats.visibility, |l| l.p99_us),
    )?;
    for s in [&r.nats, &r.etcd] {
        for p in [&s.heartbeats, &s.durable, &s.visibility] {
            if let Some(e) = &p.first_error {
                writeln!(w, "first error ({}): {e}", s.system)?;
            }
        }
    }
    Ok(())
}

/// `bench cluster-host`: one host process (spec and commands on stdin).
pub fn host() -> Result<(), BenchError> {
    crate::bench::cluster_host::run_host(std::io::stdin().lock(), std::io::stdout().lock())
}
