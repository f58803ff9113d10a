//! The heartbeat workload: N registered agents, W writer threads sending
//! heartbeats round-robin for S seconds, with status changes and message posts
//! mixed in at a fixed rate per heartbeat.
//!
//! The workload runs against any [`HeartbeatTarget`]: the agentlog `Store`
//! (default), raw log appends, and the whole-file JSON rewrite baseline. Each writer times every operation back to back (one clock read
//! per event: the gap between consecutive acknowledgements), records it in its
//! own [`Histogram`], and the histograms are merged after the run. Rates are
//! counted events over the elapsed time measured around the whole phase; the
//! `--compare` ratio divides two such rates from the same call. A phase with
//! zero events is an error.

use super::baseline::JsonRewriteRegistry;
use super::latency::{Histogram, LatencySummary};
use super::machine::MachineInfo;
use super::rss::{self, PeakRss};
use super::{BenchError, Result};
use agentlog::model::Status;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// What a workload drives: one registry implementation.
///
/// `register_all` runs once, single-threaded, before the timed phase; the
/// other calls come from `writers` threads at once, so a target shares state
/// through `&self` (and locks inside where it must). `writer` is the calling
/// thread's number (0..writers), for targets that keep per-writer handles.
pub trait HeartbeatTarget: Sync {
    /// Short name used in reports (`raw-log`, `store`, `json-rewrite`).
    fn name(&self) -> &'static str;
    /// Registers agents `0..agents`.
    fn register_all(&mut self, agents: usize) -> Result<()>;
    /// One heartbeat of agent `agent`; returns once acknowledged (durably,
    /// when the target was built durable).
    fn heartbeat(&self, agent: usize, writer: usize) -> Result<()>;
    /// A status change of `agent`.
    fn status(&self, agent: usize, writer: usize, status: Status) -> Result<()>;
    /// A message post from `from` to `to`.
    fn post(&self, from: usize, to: usize, writer: usize) -> Result<()>;
    /// Size of the target's data on disk now.
    fn log_bytes(&self) -> Result<u64>;
    /// Bytes of records / files this target has written so far.
    fn bytes_written(&self) -> u64;
}

/// Rates of the other events, per heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Mix {
    /// Status changes per heartbeat (e.g. 0.01: one per hundred heartbeats).
    pub status_per_heartbeat: f64,
    /// Message posts per heartbeat.
    pub posts_per_heartbeat: f64,
}

impl Default for Mix {
    fn default() -> Self {
        Mix {
            status_per_heartbeat: 0.01,
            posts_per_heartbeat: 0.001,
        }
    }
}

impl Mix {
    /// Heartbeats only.
    pub const NONE: Mix = Mix {
        status_per_heartbeat: 0.0,
        posts_per_heartbeat: 0.0,
    };

    /// Parses `STATUS,POSTS` (e.g. `0.01,0.001`), each a rate per heartbeat in
    /// `0..=1`.
    pub fn parse(s: &str) -> Result<Mix> {
        let bad = || {
            BenchError::Config(format!(
                "mix `{s}`: expected STATUS_RATE,POST_RATE per heartbeat, each in 0..=1 (e.g. 0.01,0.001)"
            ))
        };
        let (a, b) = s.split_once(',').ok_or_else(bad)?;
        let m = Mix {
            status_per_heartbeat: a.trim().parse().map_err(|_| bad())?,
            posts_per_heartbeat: b.trim().parse().map_err(|_| bad())?,
        };
        m.validate().map_err(|_| bad())?;
        Ok(m)
    }

    fn validate(&self) -> Result<()> {
        for (what, v) in [
            ("status rate", self.status_per_heartbeat),
            ("post rate", self.posts_per_heartbeat),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(BenchError::Config(format!(
                    "mix {what} {v} is outside 0..=1"
                )));
            }
        }
        Ok(())
    }
}

/// `agentlog bench heartbeats` options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatBenchConfig {
    pub agents: usize,
    /// Length of the timed phase (per target when comparing).
    pub seconds: f64,
    pub writers: usize,
    /// Each append waits for an fsync that covers it.
    pub durable: bool,
    pub mix: Mix,
    /// Where the stores go; a fresh temporary directory when `None`.
    pub dir: Option<PathBuf>,
    /// Also run the JSON-rewrite baseline for the same time and report the ratio.
    pub compare: bool,
}

impl Default for HeartbeatBenchConfig {
    fn default() -> Self {
        HeartbeatBenchConfig {
            agents: 1_000,
            seconds: 5.0,
            writers: 1,
            durable: false,
            mix: Mix::default(),
            dir: None,
            compare: false,
        }
    }
}

impl HeartbeatBenchConfig {
    pub fn validate(&self) -> Result<()> {
        if self.agents == 0 {
            return Err(BenchError::Config("agents must be at least 1".into()));
        }
        if self.writers == 0 || self.writers > 4096 {
            return Err(BenchError::Config(format!(
                "writers {} must be in 1..=4096",
                self.writers
            )));
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0 && self.seconds <= 86_400.0) {
            return Err(BenchError::Config(format!(
                "seconds {} must be in (0, 86400]",
                self.seconds
            )));
        }
        self.mix.validate()
    }
}

/// What one timed phase against one target measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    pub target: String,
    pub events: u64,
    pub heartbeats: u64,
    pub status_changes: u64,
    pub posts: u64,
    /// Measured wall time of the timed phase.
    pub elapsed_s: f64,
    pub events_per_s: f64,
    pub latency: LatencySummary,
    /// Bytes written during the timed phase.
    pub bytes_written: u64,
    pub bytes_per_event: f64,
    /// Size of the target's data on disk after the phase.
    pub log_bytes: u64,
    pub peak_rss: PeakRss,
}

/// The `bench heartbeats --json` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatReport {
    /// Which implementation produced the main figures (`raw-log`, `store`, …).
    pub target: String,
    pub agents: usize,
    pub writers: usize,
    pub durable: bool,
    /// Measured length of the main timed phase.
    pub seconds: f64,
    pub events: u64,
    pub heartbeats: u64,
    pub status_changes: u64,
    pub posts: u64,
    pub events_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub bytes_per_event: f64,
    pub log_bytes: u64,
    pub peak_rss_bytes: u64,
    /// Whether `peak_rss_bytes` was reset at the phase start (else it is the
    /// process's peak so far).
    pub peak_rss_phase_only: bool,
    /// Anonymous / file-backed resident memory at the end of the main phase
    /// (mapped log pages are file-backed and count towards the peak).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_anon_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_file_bytes: Option<u64>,
    pub machine: MachineInfo,
    /// The JSON-rewrite baseline run (`--compare`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<PhaseResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_events_per_s: Option<f64>,
    /// `events_per_s / baseline_events_per_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
}

#[derive(Default)]
struct WriterTally {
    heartbeats: u64,
    status_changes: u64,
    posts: u64,
}

/// Lazy runs time one event in this many (see `writer_loop`).
pub const SAMPLE_EVERY: u64 = 64;

/// One writer's loop: round-robin over its agents until the deadline.
fn writer_loop(
    target: &dyn HeartbeatTarget,
    cfg: &HeartbeatBenchConfig,
    w: usize,
    stop: &AtomicBool,
    start: &Barrier,
    hist: &mut Histogram,
) -> Result<WriterTally> {
    let agents = cfg.agents;
    let step = cfg.writers;
    let mut idx = w % agents;
    let mut tally = WriterTally::default();
    let (mut acc_status, mut acc_post) = (0.0f64, 0.0f64);
    let mut busy_next = true;
    let duration = Duration::from_secs_f64(cfg.seconds);
    // Reading the clock costs about as much as a lazy append, so lazy runs
    // time one event in `SAMPLE_EVERY` (both clock reads around that single
    // event: an unbiased sample of per-append latency) instead of taxing every
    // event; durable runs, where an event costs an fsync, time every event.
    let sample_every: u64 = if cfg.durable { 1 } else { SAMPLE_EVERY };
    start.wait();
    let deadline = Instant::now() + duration;
    let mut n: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let sampled = n.is_multiple_of(sample_every);
        n += 1;
        let t0 = sampled.then(Instant::now);
        let r = if acc_status >= 1.0 {
            acc_status -= 1.0;
            tally.status_changes += 1;
            let s = if busy_next {
                Status::Busy
            } else {
                Status::Live
            };
            busy_next = !busy_next;
            target.status(idx, w, s)
        } else if acc_post >= 1.0 {
            acc_post -= 1.0;
            tally.posts += 1;
            let to = if idx + 1 == agents { 0 } else { idx + 1 };
            target.post(idx, to, w)
        } else {
            acc_status += cfg.mix.status_per_heartbeat;
            acc_post += cfg.mix.posts_per_heartbeat;
            tally.heartbeats += 1;
            target.heartbeat(idx, w)
        };
        if let Err(e) = r {
            stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
        idx += step;
        if idx >= agents {
            idx %= agents;
        }
        if let Some(t0) = t0 {
            let now = Instant::now();
            hist.record(now.duration_since(t0).as_nanos() as u64);
            if now >= deadline {
                break;
            }
        }
    }
    Ok(tally)
}

/// Registers `cfg.agents` agents on `target`, then runs the timed phase.
pub fn run_target(
    target: &mut dyn HeartbeatTarget,
    cfg: &HeartbeatBenchConfig,
) -> Result<PhaseResult> {
    cfg.validate()?;
    target.register_all(cfg.agents)?;
    let target: &dyn HeartbeatTarget = target;
    let written_before = target.bytes_written();
    let phase = rss::Phase::start();
    let stop = AtomicBool::new(false);
    let start = Barrier::new(cfg.writers + 1);
    let mut hists: Vec<Histogram> = (0..cfg.writers).map(|_| Histogram::new()).collect();

    let (outcomes, elapsed) = std::thread::scope(|s| {
        let handles: Vec<_> = hists
            .iter_mut()
            .enumerate()
            .map(|(w, h)| {
                let (stop, start) = (&stop, &start);
                s.spawn(move || writer_loop(target, cfg, w, stop, start, h))
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        let outcomes: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        (outcomes, t0.elapsed())
    });

    let mut tally = WriterTally::default();
    for o in outcomes {
        let t = o.map_err(|p| {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            BenchError::WriterPanicked(msg)
        })??;
        tally.heartbeats += t.heartbeats;
        tally.status_changes += t.status_changes;
        tally.posts += t.posts;
    }
    let peak_rss = phase.finish()?;
    let mut hist = Histogram::new();
    for h in &hists {
        hist.merge(h);
    }
    let events = tally.heartbeats + tally.status_changes + tally.posts;
    let elapsed_s = elapsed.as_secs_f64();
    let phase_name = target.name();
    let latency = match hist.summary() {
        Some(l) if events > 0 && elapsed_s > 0.0 => l,
        _ => {
            return Err(BenchError::NothingMeasured {
                phase: phase_name.to_string(),
                detail: format!("{events} events in {elapsed_s:.6} s"),
            })
        }
    };
    let bytes_written = target.bytes_written().saturating_sub(written_before);
    Ok(PhaseResult {
        target: phase_name.to_string(),
        events,
        heartbeats: tally.heartbeats,
        status_changes: tally.status_changes,
        posts: tally.posts,
        elapsed_s,
        events_per_s: events as f64 / elapsed_s,
        latency,
        bytes_written,
        bytes_per_event: bytes_written as f64 / events as f64,
        log_bytes: target.log_bytes()?,
        peak_rss,
    })
}

/// Prefix of the benchmarks' temporary directories.
const BENCH_DIR_PREFIX: &str = "agentlog-bench-";
/// File in each of them naming the pid of the run that owns it.
const OWNER_MARKER: &str = "agentlog-bench.pid";

/// A directory for the run: `cfg.dir` or a fresh temporary one (kept alive by
/// the returned guard, removed when it drops). A killed run cannot drop its
/// guard, so each new temporary directory carries an owner marker, and a run
/// first removes the directories of owners that are gone.
pub(crate) fn work_dir(dir: Option<&Path>) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
    match dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| BenchError::io("cannot create benchmark directory", d, e))?;
            Ok((d.to_path_buf(), None))
        }
        None => {
            let tmp = std::env::temp_dir();
            let t = tempfile::Builder::new()
                .prefix(BENCH_DIR_PREFIX)
                .tempdir()
                .map_err(|e| BenchError::io("cannot create temporary directory in", &tmp, e))?;
            let marker = t.path().join(OWNER_MARKER);
            std::fs::write(&marker, std::process::id().to_string())
                .map_err(|e| BenchError::io("cannot write", &marker, e))?;
            remove_abandoned(&tmp, t.path());
            Ok((t.path().to_path_buf(), Some(t)))
        }
    }
}

/// Removes `agentlog-bench-*` directories in `tmp` that belong to the same
/// user as `ours` and whose marker names a process that no longer runs.
/// Best effort: what cannot be inspected or removed is left (with a warning).
pub(crate) fn remove_abandoned(tmp: &Path, ours: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(me) = std::fs::metadata(ours).map(|m| m.uid()) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let ours_or_foreign = path == ours
            || !e
                .file_name()
                .to_string_lossy()
                .starts_with(BENCH_DIR_PREFIX)
            || std::fs::symlink_metadata(&path).map_or(true, |m| !m.is_dir() || m.uid() != me);
        if ours_or_foreign {
            continue;
        }
        let Ok(pid) = std::fs::read_to_string(path.join(OWNER_MARKER)) else {
            continue; // no marker: not ours to judge
        };
        let alive = pid
            .trim()
            .parse::<u32>()
            .map_or(true, |p| Path::new(&format!("/proc/{p}")).exists());
        if !alive {
            if let Err(err) = std::fs::remove_dir_all(&path) {
                tracing::warn!(dir = %path.display(), error = %err, "cannot remove an abandoned benchmark directory");
            }
        }
    }
}

/// Builds the report from a main phase and, when comparing, a baseline phase.
pub fn report_from(
    cfg: &HeartbeatBenchConfig,
    main: PhaseResult,
    baseline: Option<PhaseResult>,
    machine: MachineInfo,
) -> HeartbeatReport {
    let baseline_events_per_s = baseline.as_ref().map(|b| b.events_per_s);
    let ratio = baseline_events_per_s.map(|b| main.events_per_s / b);
    HeartbeatReport {
        target: main.target,
        agents: cfg.agents,
        writers: cfg.writers,
        durable: cfg.durable,
        seconds: main.elapsed_s,
        events: main.events,
        heartbeats: main.heartbeats,
        status_changes: main.status_changes,
        posts: main.posts,
        events_per_s: main.events_per_s,
        p50_us: main.latency.p50_us,
        p99_us: main.latency.p99_us,
        p999_us: main.latency.p999_us,
        max_us: main.latency.max_us,
        bytes_per_event: main.bytes_per_event,
        log_bytes: main.log_bytes,
        peak_rss_bytes: main.peak_rss.peak_rss_bytes,
        peak_rss_phase_only: main.peak_rss.phase_only,
        rss_anon_bytes: main.peak_rss.rss_anon_bytes,
        rss_file_bytes: main.peak_rss.rss_file_bytes,
        machine,
        baseline,
        baseline_events_per_s,
        ratio,
    }
}

/// Runs the workload on `primary` (built by the caller in a subdirectory of
/// the work directory it is given) and, with `cfg.compare`, on the JSON
/// rewrite baseline in `<dir>/json-baseline` for the same time.
pub fn run_heartbeats_on(
    cfg: &HeartbeatBenchConfig,
    make_primary: impl FnOnce(&Path, &HeartbeatBenchConfig) -> Result<Box<dyn HeartbeatTarget>>,
) -> Result<HeartbeatReport> {
    cfg.validate()?;
    let (root, _guard) = work_dir(cfg.dir.as_deref())?;
    let machine = MachineInfo::probe(&root)?;
    let mut primary = make_primary(&root, cfg)?;
    let main = run_target(primary.as_mut(), cfg)?;
    drop(primary);
    let baseline = if cfg.compare {
        let mut b = JsonRewriteRegistry::new(&root.join("json-baseline"))?;
        Some(run_target(&mut b, cfg)?)
    } else {
        None
    };
    Ok(report_from(cfg, main, baseline, machine))
}

/// `agentlog bench heartbeats`: the workload on an agentlog [`Store`]
/// (`target: "store"`: registry commands, validated, logged and folded) and,
/// with `cfg.compare`, on the JSON-rewrite baseline.
///
/// [`Store`]: agentlog::store::Store
pub fn run_heartbeats(cfg: &HeartbeatBenchConfig) -> Result<HeartbeatReport> {
    run_heartbeats_on(cfg, super::targets::StoreTarget::factory)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abandoned_bench_dirs_are_removed_live_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let mk = |name: &str, pid: Option<&str>| {
            let d = tmp.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("big.seg"), b"x").unwrap();
            if let Some(pid) = pid {
                std::fs::write(d.join(OWNER_MARKER), pid).unwrap();
            }
            d
        };
        let ours = mk("agentlog-bench-ours", Some(&std::process::id().to_string()));
        // Beyond the largest pid Linux hands out (4194304): no such process.
        let dead = mk("agentlog-bench-dead", Some("4999999"));
        let live = mk("agentlog-bench-live", Some("1"));
        let unmarked = mk("agentlog-bench-unmarked", None);
        let other = mk("other-dead", Some("4999999"));
        remove_abandoned(tmp.path(), &ours);
        assert!(!dead.exists());
        for kept in [&ours, &live, &unmarked, &other] {
            assert!(kept.exists(), "{}", kept.display());
        }
    }
}
