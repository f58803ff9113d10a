//! `agentlog bench cli`: what one command costs a user who runs the binary
//! once per command (no daemon). For each log length it builds a store
//! through the library (the synthetic fleet workload, then a snapshot at its
//! end, closed cleanly: a store as the CLI leaves it), then times whole
//! invocations of `heartbeat`, `status`, `list`, `audit` and `export` with
//! `--no-daemon`: wall time from spawn to reaping, and the child's peak RSS
//! from `wait4`'s rusage.
//!
//! Invariants: building is never timed; every command is run once untimed
//! first (the first open after the builder pays for its recovery), then
//! `runs` times; a run that fails is an error naming the command and its
//! stderr, never a row; the median is of measured runs only.

use super::heartbeats::work_dir;
use super::machine::MachineInfo;
use super::runners::{bench_options, fresh_dir, recent_start, Workload};
use super::{BenchError, Result};
use agentlog::store::Store;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The commands timed, in order.
pub const COMMANDS: [&str; 5] = ["heartbeat", "status", "list", "audit", "export"];
/// Target median wall time of `heartbeat` (ms).
pub const HEARTBEAT_TARGET_MS: f64 = 5.0;
/// Target median wall time of `list` (ms).
pub const LIST_TARGET_MS: f64 = 10.0;
/// Peak RSS may grow at most this much from the shortest to the longest log.
pub const RSS_FLAT_RATIO: f64 = 1.5;

/// `bench cli` settings.
#[derive(Debug, Clone)]
pub struct CliBenchConfig {
    /// Log lengths in events.
    pub events: Vec<u64>,
    pub agents: usize,
    /// Timed invocations per command and length.
    pub runs: usize,
    /// The agentlog binary to run.
    pub exe: PathBuf,
    /// Work directory (`None`: a temporary one, removed afterwards).
    pub dir: Option<PathBuf>,
}

/// One command on one log length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CliRow {
    pub events: u64,
    pub command: String,
    pub runs: usize,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// Median user + system CPU time of the child (`wait4` rusage): what
    /// the command costs without the wait for a busy machine's run queue.
    pub median_cpu_ms: f64,
    /// The largest peak RSS of the timed runs (`wait4` `ru_maxrss`).
    pub peak_rss_bytes: u64,
}

/// Peak RSS of one command at the longest log over the shortest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RssGrowth {
    pub command: String,
    pub ratio: f64,
    pub flat: bool,
}

/// The whole report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CliReport {
    pub agents: usize,
    pub rows: Vec<CliRow>,
    /// Per command, from the shortest to the longest log (when more than one).
    pub rss_growth: Vec<RssGrowth>,
    pub heartbeat_target_ms: f64,
    pub list_target_ms: f64,
    pub rss_flat_ratio: f64,
    /// Every target met (the medians, and RSS growth where measured).
    pub targets_met: bool,
    pub machine: MachineInfo,
}

/// Where the store of `events` events lives under the work directory.
pub fn store_path(root: &Path, events: u64) -> PathBuf {
    root.join(format!("bench-cli-{events}"))
}

/// Builds a store of `events` events at `path`, snapshotted at its end
/// (`bench cli --build-only`, run in a child process by [`run_cli`]).
pub fn build_store(path: &Path, events: u64, agents: usize) -> Result<()> {
    fresh_dir(path)?;
    let w = Workload {
        agents,
        events,
        start: recent_start(events),
    };
    let store = Store::open(path, bench_options())?;
    w.append(&store, 0, events)?;
    store.snapshot()?;
    store.close()?;
    Ok(())
}

/// Runs `exe args…` once: wall time, the child's CPU time and peak RSS.
fn invoke(exe: &Path, args: &[String]) -> Result<Run> {
    // The peak RSS `wait4` reports includes this process's RSS when it
    // forked (exec keeps the larger high-water mark): start it from now.
    let _ = super::rss::reset_peak();
    let started = Instant::now();
    let mut child = Command::new(exe)
        .args(args)
        .env_remove("AGENTLOG_NOW")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| BenchError::io("cannot run", exe, e))?;
    let reaped = agentlog::internals::wait_child(child.id());
    let elapsed = started.elapsed();
    let usage = reaped.map_err(|e| BenchError::io("cannot wait for", exe, e))?;
    let status = usage.status;
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(BenchError::Format {
            path: exe.to_path_buf(),
            message: format!(
                "`agentlog {}` failed (wait status {status}): {}",
                args.join(" "),
                stderr.trim()
            ),
        });
    }
    Ok(Run {
        wall: elapsed,
        cpu: usage.cpu,
        peak_rss: usage.peak_rss,
    })
}

/// One measured invocation.
struct Run {
    wall: Duration,
    cpu: Duration,
    peak_rss: u64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The arguments of `command` on the store at `dir`.
fn command_args(dir: &Path, command: &str, out: &Path) -> Vec<String> {
    let agent = super::baseline::agent_name(0);
    let mut a = vec![
        "--dir".to_string(),
        dir.display().to_string(),
        "--no-daemon".to_string(),
        command.to_string(),
    ];
    match command {
        "heartbeat" | "audit" => a.push(agent),
        "status" => a.extend([agent, "busy".to_string()]),
        "export" => a.extend(["--out".to_string(), out.display().to_string()]),
        _ => {}
    }
    a
}

/// Times `command` on the store at `dir`: one untimed run, then `runs`.
fn measure(exe: &Path, dir: &Path, events: u64, command: &str, runs: usize) -> Result<CliRow> {
    let out = dir.with_extension("export.json");
    let args = command_args(dir, command, &out);
    invoke(exe, &args)?;
    let mut times = Vec::with_capacity(runs);
    let mut cpu = Vec::with_capacity(runs);
    let mut peak = 0;
    for _ in 0..runs {
        let run = invoke(exe, &args)?;
        times.push(ms(run.wall));
        cpu.push(ms(run.cpu));
        peak = peak.max(run.peak_rss);
    }
    times.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    if median <= 0.0 || peak == 0 {
        return Err(BenchError::NothingMeasured {
            phase: format!("cli {command} at {events} events"),
            detail: format!("median {median} ms, peak RSS {peak} bytes"),
        });
    }
    Ok(CliRow {
        events,
        command: command.to_string(),
        runs,
        median_ms: median,
        min_ms: times[0],
        max_ms: times[times.len() - 1],
        median_cpu_ms: cpu[cpu.len() / 2],
        peak_rss_bytes: peak,
    })
}

/// Builds each store, times every command on it, and judges the targets.
pub fn run_cli(cfg: &CliBenchConfig) -> Result<CliReport> {
    if cfg.events.is_empty() {
        return Err(BenchError::Config("no log lengths given".into()));
    }
    if cfg.runs == 0 {
        return Err(BenchError::Config("runs must be at least 1".into()));
    }
    for &n in &cfg.events {
        Workload {
            agents: cfg.agents,
            events: n,
            start: recent_start(n),
        }
        .check()?;
    }
    let (root, _guard) = work_dir(cfg.dir.as_deref())?;
    let mut rows = Vec::with_capacity(cfg.events.len() * COMMANDS.len());
    for &n in &cfg.events {
        // Built by a child process: this one stays small, so the children
        // it times do not inherit its RSS (see `invoke`).
        let args: Vec<String> = [
            "--dir".to_string(),
            root.display().to_string(),
            "bench".into(),
            "cli".into(),
            "--build-only".into(),
            "--events".into(),
            n.to_string(),
            "--agents".into(),
            cfg.agents.to_string(),
        ]
        .into();
        invoke(&cfg.exe, &args)?;
        let path = store_path(&root, n);
        for c in COMMANDS {
            rows.push(measure(&cfg.exe, &path, n, c, cfg.runs)?);
        }
        if cfg.dir.is_none() {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
    let (short, long) = (
        cfg.events.iter().min().copied().unwrap_or(0),
        cfg.events.iter().max().copied().unwrap_or(0),
    );
    let rss = |n: u64, c: &str| {
        rows.iter()
            .find(|r| r.events == n && r.command == c)
            .map(|r| r.peak_rss_bytes as f64)
    };
    let rss_growth: Vec<RssGrowth> = if short < long {
        COMMANDS
            .iter()
            .filter_map(|c| {
                let ratio = rss(long, c)? / rss(short, c)?;
                Some(RssGrowth {
                    command: c.to_string(),
                    ratio,
                    flat: ratio <= RSS_FLAT_RATIO,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let within = |c: &str, target: f64| {
        rows.iter()
            .filter(|r| r.command == c)
            .all(|r| r.median_ms <= target)
    };
    let targets_met = within("heartbeat", HEARTBEAT_TARGET_MS)
        && within("list", LIST_TARGET_MS)
        && rss_growth.iter().all(|g| g.flat);
    Ok(CliReport {
        agents: cfg.agents,
        rows,
        rss_growth,
        heartbeat_target_ms: HEARTBEAT_TARGET_MS,
        list_target_ms: LIST_TARGET_MS,
        rss_flat_ratio: RSS_FLAT_RATIO,
        targets_met,
        machine: MachineInfo::probe(&root)?,
    })
}
