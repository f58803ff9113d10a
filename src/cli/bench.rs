//! `agentlog bench heartbeats | scaling | replay | open | export | compact | cli | soak`: runs the benchmark harness
//! (`crate::bench`) and prints its measured figures (text or `--json`).
//! The harness refuses to report a figure it did not measure; this layer
//! only formats.

use super::args;
use super::output::human_bytes;
use super::output::{self, Ui, W};
use super::Usage;
use crate::bench::heartbeats::{run_heartbeats, HeartbeatBenchConfig, HeartbeatReport};
use crate::bench::machine::MachineInfo;
use crate::bench::runners::{
    run_compact, run_export, run_open, run_replay, CompactConfig, ExportConfig, OpenConfig,
    ReplayConfig,
};
use crate::bench::scaling::{run_scaling_on, write_outputs};
use crate::bench::targets::StoreTarget;
use crate::bench::BenchError;
use anyhow::Result;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

pub fn run(ui: &Ui, dir: Option<PathBuf>, b: args::Bench) -> Result<ExitCode> {
    let mut out = super::output::Out::new(std::io::stdout().lock(), false);
    match b {
        args::Bench::Heartbeats(a) => {
            let cfg = HeartbeatBenchConfig {
                agents: a.agents,
                seconds: a.seconds,
                writers: a.writers,
                durable: a.durable,
                mix: a.mix.unwrap_or_default(),
                dir,
                compare: a.compare,
            };
            let rep = run_heartbeats(&cfg).map_err(usage)?;
            if ui.json {
                output::json(&mut out, &rep)?;
            } else {
                print_heartbeats(&mut out, &rep)?;
            }
        }
        args::Bench::Scaling(a) => {
            let rows = run_scaling_on(
                &a.agents,
                &a.writers,
                a.seconds,
                a.durable,
                dir.as_deref(),
                StoreTarget::factory,
            )
            .map_err(usage)?;
            let (csv, svg) = write_outputs(&rows, &a.out)?;
            if ui.json {
                output::json(&mut out, &json!({"rows": rows, "csv": csv, "svg": svg}))?;
            } else {
                let table: Vec<Vec<String>> = rows
                    .iter()
                    .map(|r| {
                        vec![
                            r.agents.to_string(),
                            r.writers.to_string(),
                            format!("{:.0}", r.events_per_s),
                            format!("{:.2}", r.p50_us),
                            format!("{:.2}", r.p99_us),
                            format!("{:.2}", r.p999_us),
                        ]
                    })
                    .collect();
                output::table(
                    &mut out,
                    &[
                        "AGENTS",
                        "WRITERS",
                        "EVENTS/S",
                        "P50 µs",
                        "P99 µs",
                        "P99.9 µs",
                    ],
                    &table,
                )?;
                writeln!(out, "wrote {} and {}", csv.display(), svg.display())?;
            }
        }
        args::Bench::Replay(a) => {
            let cfg = ReplayConfig {
                events: a.events,
                agents: a.agents,
                dir,
            };
            let r = run_replay(&cfg).map_err(usage)?;
            if ui.json {
                output::json(&mut out, &r)?;
            } else {
                writeln!(
                    out,
                    "replayed {} events ({}) into {} agents in {:.3} s",
                    r.events,
                    human_bytes(r.log_bytes),
                    r.agents,
                    r.seconds
                )?;
                writeln!(
                    out,
                    "events/s     {:.0}\nMB/s         {:.1}\npeak RSS     {}",
                    r.events_per_s,
                    r.mb_per_s,
                    human_bytes(r.peak_rss_bytes)
                )?;
                print_machine(&mut out, &r.machine)?;
            }
        }
        args::Bench::Open(a) => {
            let cfg = OpenConfig {
                events: a.events,
                agents: a.agents,
                dir,
            };
            let r = run_open(&cfg).map_err(usage)?;
            if ui.json {
                output::json(&mut out, &r)?;
            } else {
                let table: Vec<Vec<String>> = r
                    .rows
                    .iter()
                    .map(|o| {
                        vec![
                            o.log_events.to_string(),
                            human_bytes(o.log_bytes),
                            if o.with_snapshot { "yes" } else { "no" }.to_string(),
                            o.events_folded.to_string(),
                            format!("{:.1}", o.open_ms),
                            human_bytes(o.peak_rss_bytes),
                        ]
                    })
                    .collect();
                output::table(
                    &mut out,
                    &["EVENTS", "LOG", "SNAPSHOT", "FOLDED", "OPEN ms", "PEAK RSS"],
                    &table,
                )?;
                print_machine(&mut out, &r.machine)?;
            }
        }
        args::Bench::Export(a) => {
            let cfg = ExportConfig {
                agents: a.agents,
                dir,
            };
            let r = run_export(&cfg).map_err(usage)?;
            if ui.json {
                output::json(&mut out, &r)?;
            } else {
                writeln!(
                    out,
                    "exported {} rows ({}) in {:.3} s\nrows/s       {:.0}\nMB/s         {:.1}",
                    r.rows,
                    human_bytes(r.bytes),
                    r.seconds,
                    r.rows_per_s,
                    r.mb_per_s
                )?;
                print_machine(&mut out, &r.machine)?;
            }
        }
        args::Bench::Compact(a) => {
            let cfg = CompactConfig {
                events: a.events,
                agents: a.agents,
                dir,
            };
            let r = run_compact(&cfg).map_err(usage)?;
            if ui.json {
                output::json(&mut out, &r)?;
            } else {
                writeln!(
                    out,
                    "compacted {} events ({}) to {} events ({}) in {:.3} s",
                    r.events_before,
                    human_bytes(r.bytes_before),
                    r.events_after,
                    human_bytes(r.bytes_after),
                    r.seconds
                )?;
                writeln!(
                    out,
                    "MB/s         {:.1} (of log bytes before)\npeak RSS     {}",
                    r.mb_per_s,
                    human_bytes(r.peak_rss_bytes)
                )?;
                print_machine(&mut out, &r.machine)?;
            }
        }
        args::Bench::Clients(a) => super::bench_clients::clients(ui, &mut out, dir, a)?,
        args::Bench::ClientsWorker => super::bench_clients::worker()?,
        args::Bench::EchoServer(a) => super::bench_clients::echo_server(&a)?,
        args::Bench::Cluster(a) => super::bench_cluster::cluster(ui, &mut out, dir, a)?,
        args::Bench::ClusterHost => super::bench_cluster::host()?,
        args::Bench::Soak(a) => {
            let code = super::bench_soak::soak(ui, &mut out, dir, a)?;
            out.flush()?;
            return Ok(code);
        }
        args::Bench::SoakWorker => super::bench_soak::worker()?,
        args::Bench::Cli(a) if a.build_only => {
            let root = dir.ok_or_else(|| Usage("bench cli --build-only needs --dir".into()))?;
            for &n in &a.events {
                let path = crate::bench::cli::store_path(&root, n);
                crate::bench::cli::build_store(&path, n, a.agents).map_err(usage)?;
            }
        }
        args::Bench::Cli(a) => {
            let cfg = crate::bench::cli::CliBenchConfig {
                events: a.events,
                agents: a.agents,
                runs: a.runs,
                exe: std::env::current_exe()?,
                dir,
            };
            let r = crate::bench::cli::run_cli(&cfg).map_err(usage)?;
            if ui.json {
                output::json(&mut out, &r)?;
            } else {
                print_cli(&mut out, &r)?;
            }
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn print_cli(w: &mut W, r: &crate::bench::cli::CliReport) -> Result<()> {
    let table: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            vec![
                row.events.to_string(),
                row.command.clone(),
                format!("{:.2}", row.median_ms),
                format!("{:.2}", row.min_ms),
                format!("{:.2}", row.max_ms),
                format!("{:.2}", row.median_cpu_ms),
                human_bytes(row.peak_rss_bytes),
            ]
        })
        .collect();
    output::table(
        w,
        &[
            "EVENTS",
            "COMMAND",
            "MEDIAN ms",
            "MIN ms",
            "MAX ms",
            "CPU ms",
            "PEAK RSS",
        ],
        &table,
    )?;
    for g in &r.rss_growth {
        writeln!(
            w,
            "peak RSS of {} grows {:.2}x from the shortest to the longest log{}",
            g.command,
            g.ratio,
            if g.flat { "" } else { " (over the target)" }
        )?;
    }
    writeln!(
        w,
        "targets (heartbeat <= {} ms, list <= {} ms, RSS within {}x): {}",
        r.heartbeat_target_ms,
        r.list_target_ms,
        r.rss_flat_ratio,
        if r.targets_met { "met" } else { "not met" }
    )?;
    print_machine(w, &r.machine)
}

fn print_heartbeats(w: &mut W, r: &HeartbeatReport) -> Result<()> {
    let mode = if r.durable { "durable" } else { "lazy" };
    writeln!(
        w,
        "{} {mode} events from {} writer(s) on {} agents in {:.2} s ({} heartbeats, {} status changes, {} posts) — target `{}`",
        r.events, r.writers, r.agents, r.seconds, r.heartbeats, r.status_changes, r.posts, r.target
    )?;
    writeln!(w, "events/s     {:.0}", r.events_per_s)?;
    writeln!(
        w,
        "latency      p50 {:.2} µs, p99 {:.2} µs, p99.9 {:.2} µs, max {:.2} µs",
        r.p50_us, r.p99_us, r.p999_us, r.max_us
    )?;
    writeln!(
        w,
        "bytes/event  {:.1}; log {}; peak RSS {}",
        r.bytes_per_event,
        human_bytes(r.log_bytes),
        human_bytes(r.peak_rss_bytes)
    )?;
    if let (Some(b), Some(ratio)) = (r.baseline_events_per_s, r.ratio) {
        writeln!(
            w,
            "whole-file JSON rewrite (flock + fsync + rename per event): {b:.0} events/s; agentlog is {ratio:.0}× faster"
        )?;
    }
    print_machine(w, &r.machine)
}

pub(super) fn print_machine(w: &mut W, m: &MachineInfo) -> Result<()> {
    writeln!(
        w,
        "machine      {} cores, {}, kernel {}, {} on {} ({})",
        m.cores,
        m.cpu_model,
        m.kernel,
        m.fs_type,
        m.device,
        match m.rotational {
            Some(true) => "rotational",
            Some(false) => "SSD",
            None => "disk kind unknown",
        }
    )?;
    Ok(())
}

/// A bad benchmark configuration is a usage error (exit 2).
pub(super) fn usage(e: BenchError) -> anyhow::Error {
    match e {
        BenchError::Config(m) => Usage(format!("invalid benchmark configuration: {m}")).into(),
        e => e.into(),
    }
}
