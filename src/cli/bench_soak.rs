//! `agentlog bench soak` and its hidden client process (`soak-worker`):
//! runs [`crate::bench::soak`] with this binary as the daemon and the
//! clients, prints the report (text or `--json`), and exits 1 when the run
//! did not pass (an acknowledged write lost, a bound passed, a kill or a
//! compaction that was due missing).

use super::args;
use super::output::{self, human_bytes, Ui, W};
use crate::bench::soak::{run_soak, SoakConfig, SoakReport};
use crate::bench::BenchError;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;

pub fn soak(ui: &Ui, out: &mut W, dir: Option<PathBuf>, a: args::BenchSoak) -> Result<ExitCode> {
    let exe = std::env::current_exe().context("finding this program (/proc/self/exe)")?;
    let cfg = SoakConfig {
        seconds: a.seconds,
        agents: a.agents,
        clients: a.clients,
        rate: a.rate,
        status_every: a.status_every,
        watchers: a.watchers as usize,
        idle_watchers: a.idle_watchers as usize,
        sse: a.sse as usize,
        scrape_every: a.scrape_every,
        compact_every: a.compact_every,
        kill_every: a.kill_every,
        rss_bound_bytes: a.rss_bound_mib << 20,
        fd_bound: a.fd_bound,
        dir,
        ..SoakConfig::full(exe)
    };
    let r = run_soak(&cfg).map_err(super::bench::usage)?;
    if ui.json {
        output::json(out, &r)?;
    } else {
        print(out, &r)?;
    }
    if r.passed {
        return Ok(ExitCode::SUCCESS);
    }
    out.flush()?;
    eprintln!(
        "agentlog: bench soak failed: {} acknowledged writes lost, peak RSS {} (bound {}), \
         peak fds {} (bound {}), {} kills, {} compactions",
        r.lost_acked_writes,
        human_bytes(r.daemon.peak_rss_bytes),
        human_bytes(r.daemon.rss_bound_bytes),
        r.daemon.peak_fds,
        r.daemon.fd_bound,
        r.kills,
        r.load.compactions
    );
    Ok(ExitCode::from(1))
}

fn print(w: &mut W, r: &SoakReport) -> Result<()> {
    writeln!(
        w,
        "soak of {:.0} s: {} agents, {} client processes at {:.0} writes/s (every {}th a durable status), \
         {} watchers ({} never reading), {} SSE clients, /metrics every {} s, compaction every {} s, \
         kill -9 every {} s",
        r.seconds,
        r.agents,
        r.clients,
        r.rate,
        r.status_every,
        r.watchers,
        r.idle_watchers,
        r.sse,
        r.scrape_every_s,
        r.compact_every_s,
        r.kill_every_s
    )?;
    let h = &r.history;
    writeln!(
        w,
        "acknowledged writes lost   {} (of {} acknowledged: {} found as written, {} collapsed by compaction)",
        r.lost_acked_writes, h.acked, h.found, h.collapsed_by_compaction
    )?;
    for e in &h.examples {
        writeln!(w, "  lost: {e}")?;
    }
    writeln!(
        w,
        "writes                     {} sent, {:.0}/s acknowledged, {} cut by kills, {} errors",
        r.writes.sent, r.writes.writes_per_s, r.writes.unacked, r.writes.errors
    )?;
    writeln!(
        w,
        "latency                    p50 {:.0} µs, p99 {:.0} µs, p99.9 {:.0} µs, max {:.0} µs; per-minute p99 spread {:.2}×",
        r.latency.p50_us, r.latency.p99_us, r.latency.p999_us, r.latency.max_us, r.p99_spread
    )?;
    let d = &r.daemon;
    writeln!(
        w,
        "daemon                     peak RSS {} (anon {}; bound {}), peak fds {} (bound {}), fds at end {}",
        human_bytes(d.peak_rss_bytes),
        human_bytes(d.peak_rss_anon_bytes),
        human_bytes(d.rss_bound_bytes),
        d.peak_fds,
        d.fd_bound,
        d.final_fds
    )?;
    writeln!(
        w,
        "kills / restarts           {} / {} (restart max {:.0} ms, mean {:.0} ms)",
        r.kills, r.restarts, r.restart_ms_max, r.restart_ms_mean
    )?;
    let l = &r.load;
    writeln!(
        w,
        "compactions                {} ({} rounds failed, slowest {} ms, {} heartbeats collapsed)",
        l.compactions, l.compactions_failed, l.compaction_ms_max, l.heartbeats_collapsed
    )?;
    writeln!(
        w,
        "watchers                   {} items, {} lagged (daemon: {}), {} reconnects; never-reading: {} opened, {} closed by the daemon",
        l.watch_items, l.watch_lagged, d.watchers_lagged, l.watch_reconnects, l.idle_watches_opened, l.idle_watches_closed
    )?;
    writeln!(
        w,
        "SSE / metrics              {} events, {} lagged, {} reconnects; {} scrapes ok, {} failed",
        l.sse_items, l.sse_lagged, l.sse_reconnects, l.scrapes_ok, l.scrapes_failed
    )?;
    let rows: Vec<Vec<String>> = r
        .minutes
        .iter()
        .map(|m| {
            vec![
                m.minute.to_string(),
                m.writes.to_string(),
                format!("{:.0}", m.writes_per_s),
                format!("{:.0}", m.p50_us),
                format!("{:.0}", m.p99_us),
                format!("{:.0}", m.max_us),
                human_bytes(m.peak_rss_bytes),
                m.peak_fds.to_string(),
            ]
        })
        .collect();
    output::table(
        w,
        &[
            "MINUTE", "WRITES", "WRITES/S", "P50 µs", "P99 µs", "MAX µs", "PEAK RSS", "PEAK FDS",
        ],
        &rows,
    )?;
    super::bench::print_machine(w, &r.machine)?;
    writeln!(w, "{}", if r.passed { "passed" } else { "FAILED" })?;
    Ok(())
}

/// `bench soak-worker`: one client process (spec on stdin).
pub fn worker() -> Result<(), BenchError> {
    crate::bench::soak_worker::run_soak_worker(std::io::stdin().lock(), std::io::stdout().lock())
}
