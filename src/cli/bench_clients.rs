//! `agentlog bench clients` and its hidden helpers (`clients-worker`, the
//! client process; `echo-server`, the protocol's bound): runs
//! [`crate::bench::clients`] with this binary as the daemon, the workers
//! and the echo server, and prints the phases (text or `--json`).

use super::args;
use super::output::{self, Ui, W};
use crate::bench::clients::{
    run_clients, ClientLang, ClientsConfig, ClientsReport, PhaseReport, Via,
};
use crate::bench::BenchError;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::PathBuf;

pub fn clients(ui: &Ui, out: &mut W, dir: Option<PathBuf>, a: args::BenchClients) -> Result<()> {
    let exe = std::env::current_exe().context("finding this program (/proc/self/exe)")?;
    let cfg = ClientsConfig {
        exe,
        procs: a.procs,
        conns: a.conns,
        agents: a.agents,
        seconds: a.seconds,
        durable: a.durable,
        pipeline: a.pipeline,
        via: match a.via {
            args::Via::Daemon => Via::Daemon,
            args::Via::Cli => Via::Cli,
        },
        compare: a.compare,
        echo: a.echo,
        dir,
        http: a.http.clone(),
        clients: a
            .client
            .iter()
            .map(|c| match c {
                args::ClientLang::Rust => ClientLang::Rust,
                args::ClientLang::Python => ClientLang::Python,
                args::ClientLang::Node => ClientLang::Node,
            })
            .collect(),
        clients_dir: a
            .clients_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/clients"))),
    };
    let r = run_clients(&cfg).map_err(super::bench::usage)?;
    if ui.json {
        output::json(out, &r)?;
        Ok(())
    } else {
        print(out, &r)
    }
}

fn print(w: &mut W, r: &ClientsReport) -> Result<()> {
    let mode = if r.durable { "durable" } else { "lazy" };
    writeln!(
        w,
        "{mode} heartbeats on {} agents from {} processes × {} connection(s), pipeline {}, {:.1} s per phase",
        r.agents, r.procs, r.conns, r.pipeline, r.seconds
    )?;
    let row = |p: &PhaseReport| {
        vec![
            p.target.clone(),
            format!("{:.0}", p.ops_per_s),
            format!("{:.1}", p.latency.p50_us),
            format!("{:.1}", p.latency.p99_us),
            format!("{:.1}", p.latency.p999_us),
            p.refused.to_string(),
            p.failed.to_string(),
        ]
    };
    let rows: Vec<Vec<String>> = r.phases().map(row).collect();
    output::table(
        w,
        &[
            "TARGET",
            "OPS/S",
            "P50 µs",
            "P99 µs",
            "P99.9 µs",
            "REFUSED",
            "FAILED",
        ],
        &rows,
    )?;
    for (pair, ratio) in &r.pair_ratios {
        writeln!(w, "{pair}: {ratio:.2}×")?;
    }
    if let Some(e) = r
        .phases()
        .find_map(|p| p.first_error.as_ref().map(|e| (p, e)))
    {
        writeln!(w, "first error ({}): {}", e.0.target, e.1)?;
    }
    Ok(())
}

/// `bench clients-worker`: one client process (spec and `go` on stdin).
pub fn worker() -> Result<(), BenchError> {
    crate::bench::clients_worker::run_worker(std::io::stdin().lock(), std::io::stdout().lock())
}

/// `bench echo-server --socket PATH`.
pub fn echo_server(a: &args::BenchEchoServer) -> Result<()> {
    crate::bench::echo::serve_echo(&a.socket, |path| {
        println!("agentlog echo: listening on {}", path.display());
        let _ = std::io::stdout().flush();
    })
    .context("bench echo-server")
}
