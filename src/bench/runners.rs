//! The runners of `agentlog bench replay | open | export | compact`: each
//! builds a registry store with a synthetic fleet workload (registrations,
//! heartbeats, some status changes and message posts, all at explicit event
//! times), then times the real operation once and returns its report.
//!
//! Invariants: workload construction is never inside the timed region; the
//! timed region is exactly the operation named (a full fold, `Store::open`,
//! `Store::export`, `Store::compact`); every report comes from the
//! `from_measurement` constructors of [`super::reports`], which refuse zero
//! counts or zero time. A measured run that did not do what it claims (an
//! open that did not use the snapshot, a compaction that dropped nothing) is
//! an error, not a row.

use super::heartbeats::work_dir;
use super::machine::MachineInfo;
use super::reports::{CompactReport, ExportReport, OpenReport, OpenRow, ReplayReport};
use super::rss::Phase;
use super::{BenchError, Result};
use agentlog::compact::CompactOptions;
use agentlog::log::Durability;
use agentlog::model::Status;
use agentlog::registry::{PostMessage, Registration};
use agentlog::store::{Store, StoreOptions, Until, DEFAULT_SNAPSHOT_EVERY_EVENTS};
use agentlog::time::Timestamp;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One status change per this many workload events (alternating busy/idle).
const STATUS_EVERY: u64 = 100;
/// One message post per this many workload events.
const POST_EVERY: u64 = 1_000;
/// Workload events are this far apart in event time.
const STEP_MS: i64 = 1;
const DAY_MS: i64 = 24 * 3600 * 1000;

/// Store options for building and measuring: lazy appends (the workload is
/// setup, not the figure) and no automatic snapshots, so a background
/// snapshot never runs inside a timed region and the runners decide exactly
/// which snapshots exist.
pub(super) fn bench_options() -> StoreOptions {
    StoreOptions {
        heartbeat_durability: Durability::Lazy,
        command_durability: Durability::Lazy,
        snapshot_every_events: 0,
        snapshot_every_secs: 0,
        ..StoreOptions::default()
    }
}

fn name(i: usize) -> String {
    super::baseline::agent_name(i)
}

fn pid(i: usize) -> u32 {
    20_000 + i as u32
}

/// Appends the synthetic fleet workload to `store`.
///
/// Registers `agents` agents, then appends `events - agents` more events
/// round-robin over the agents: every [`STATUS_EVERY`]th a status change,
/// every [`POST_EVERY`]th a message post, the rest heartbeats. Event `k` is at
/// `start + k * STEP_MS`. Returns the time after the last event.
pub(super) struct Workload {
    pub agents: usize,
    pub events: u64,
    pub start: Timestamp,
}

impl Workload {
    pub(super) fn check(&self) -> Result<()> {
        if self.agents == 0 {
            return Err(BenchError::Config("agents must be at least 1".into()));
        }
        if self.events < self.agents as u64 {
            return Err(BenchError::Config(format!(
                "events {} is fewer than agents {} (each agent registers once)",
                self.events, self.agents
            )));
        }
        Ok(())
    }

    fn at(&self, k: u64) -> Timestamp {
        Timestamp::from_millis(self.start.as_millis() + k as i64 * STEP_MS)
    }

    /// Appends events `from..to` of the workload (registrations first).
    pub(super) fn append(&self, store: &Store, from: u64, to: u64) -> Result<()> {
        let names: Vec<String> = (0..self.agents).map(name).collect();
        let a = self.agents as u64;
        for k in from..to {
            let at = Some(self.at(k));
            if k < a {
                let i = k as usize;
                let mut reg = Registration::new(&names[i], "claude", "/work/bench");
                reg.pid = Some(pid(i));
                reg.role = Some("worker".into());
                store.register(reg, at)?;
                continue;
            }
            let j = k - a;
            let i = (j % a) as usize;
            if j % POST_EVERY == POST_EVERY - 1 {
                let to = &names[(i + 1) % self.agents];
                let post =
                    PostMessage::new(&names[i], Some(to), "status", "benchmark message body");
                store.post_message(post, at)?;
            } else if j % STATUS_EVERY == STATUS_EVERY - 1 {
                let s = if (j / STATUS_EVERY).is_multiple_of(2) {
                    Status::Busy
                } else {
                    Status::Idle
                };
                store.set_status(&names[i], s, None, at)?;
            } else {
                store.heartbeat(&names[i], Some(pid(i)), at)?;
            }
        }
        Ok(())
    }
}

fn check_events(events: u64, agents: usize) -> Result<()> {
    Workload {
        agents,
        events,
        start: Timestamp::from_millis(0),
    }
    .check()
}

/// Ends event time just before now, so nothing is in the future.
pub(super) fn recent_start(events: u64) -> Timestamp {
    Timestamp::from_millis(Timestamp::now().as_millis() - events as i64 * STEP_MS - 1_000)
}

fn count_records(store: &Store) -> Result<u64> {
    let mut n = 0;
    for r in store.view().iter() {
        r?;
        n += 1;
    }
    Ok(n)
}

/// Clears and creates a bench-owned directory (`bench-*` names only, so a
/// `--dir` holding a real store never loses it).
pub(super) fn fresh_dir(path: &Path) -> Result<()> {
    debug_assert!(path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("bench-")));
    if path.exists() {
        std::fs::remove_dir_all(path)
            .map_err(|e| BenchError::io("cannot clear benchmark directory", path, e))?;
    }
    std::fs::create_dir_all(path)
        .map_err(|e| BenchError::io("cannot create benchmark directory", path, e))
}

fn peak(phase: Phase) -> u64 {
    phase.finish().map(|p| p.peak_rss_bytes).unwrap_or(0)
}

/// `bench replay` settings.
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    pub events: u64,
    pub agents: usize,
    /// The work directory. When it is itself a store (`<dir>/log` exists) or
    /// `<dir>/agentlog` holds a store with records, that store is replayed as
    /// it is (no workload is appended, nothing is snapshotted); otherwise the
    /// workload is built in `<dir>/agentlog`. `None`: a temporary directory.
    pub dir: Option<PathBuf>,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            events: 1_000_000,
            agents: 1_000,
            dir: None,
        }
    }
}

/// Times a full fold of the store's log into a fresh registry state
/// (`Store::state_at(Until::End)`: decode + apply of every record).
pub fn run_replay(cfg: &ReplayConfig) -> Result<ReplayReport> {
    let (root, _guard) = work_dir(cfg.dir.as_deref())?;
    let path = if agentlog::StoreLayout::new(&root).exists() {
        root.clone()
    } else {
        root.join("agentlog")
    };
    let store = Store::open(&path, bench_options())?;
    if store.log().stats().last_lsn.is_none() {
        let w = Workload {
            agents: cfg.agents,
            events: cfg.events,
            start: recent_start(cfg.events),
        };
        w.check()?;
        w.append(&store, 0, cfg.events)?;
        store.sync()?;
    }
    let events = count_records(&store)?;
    let log_bytes = store.log().stats().bytes;
    let phase = Phase::start();
    let started = Instant::now();
    let state = store.state_at(Until::End)?;
    let elapsed = started.elapsed();
    let peak = peak(phase);
    let agents = state.agents().len() as u64;
    drop(state);
    // Dropped, not closed: a replayed existing store gets no new snapshot.
    drop(store);
    ReplayReport::from_measurement(
        events,
        log_bytes,
        agents,
        elapsed,
        peak,
        MachineInfo::probe(&root)?,
    )
}

/// `bench open` settings.
#[derive(Debug, Clone)]
pub struct OpenConfig {
    /// Log lengths (events) measured, one store each.
    pub events: Vec<u64>,
    pub agents: usize,
    pub dir: Option<PathBuf>,
}

impl Default for OpenConfig {
    fn default() -> Self {
        OpenConfig {
            events: vec![10_000, 100_000, 1_000_000],
            agents: 1_000,
            dir: None,
        }
    }
}

/// Events appended after the snapshot of a "with snapshot" open: a tenth of
/// the log, at most the default snapshot cadence (what a store running with
/// default options has at most past its newest snapshot).
pub fn open_tail(events: u64) -> u64 {
    (events / 10).min(DEFAULT_SNAPSHOT_EVERY_EVENTS)
}

/// Opens the store once, timing `Store::open` by its own phase timings
/// (log open + snapshot load + fold of the tail); checks that the snapshot
/// was (or was not) used as the row says.
fn measure_open(path: &Path, events: u64, with_snapshot: bool) -> Result<OpenRow> {
    let phase = Phase::start();
    let store = Store::open(path, bench_options())?;
    let peak = peak(phase);
    let rep = store.open_report();
    let t = rep.timings;
    let elapsed = t.log_open + t.snapshot_load + t.fold;
    if rep.snapshot_lsn.is_some() != with_snapshot {
        return Err(BenchError::Format {
            path: path.to_path_buf(),
            message: format!(
                "open {} a snapshot, expected {} (skipped: {:?})",
                if rep.snapshot_lsn.is_some() {
                    "used"
                } else {
                    "did not use"
                },
                if with_snapshot { "one" } else { "none" },
                rep.skipped_snapshots
            ),
        });
    }
    let row = OpenRow::from_measurement(
        events,
        store.log().stats().bytes,
        with_snapshot,
        rep.events_folded,
        elapsed,
        peak,
    )?;
    // Dropped, not closed: a clean close would write a new snapshot.
    drop(store);
    Ok(row)
}

/// For each log length: a store whose snapshot is [`open_tail`] events old,
/// opened with it, then with the snapshots removed (full fold).
pub fn run_open(cfg: &OpenConfig) -> Result<OpenReport> {
    if cfg.events.is_empty() {
        return Err(BenchError::Config("no log lengths given".into()));
    }
    for &n in &cfg.events {
        check_events(n, cfg.agents)?;
    }
    let (root, _guard) = work_dir(cfg.dir.as_deref())?;
    let mut rows = Vec::with_capacity(cfg.events.len() * 2);
    for &n in &cfg.events {
        let path = root.join(format!("bench-open-{n}"));
        fresh_dir(&path)?;
        let w = Workload {
            agents: cfg.agents,
            events: n,
            start: recent_start(n),
        };
        let cut = n - open_tail(n);
        {
            let store = Store::open(&path, bench_options())?;
            w.append(&store, 0, cut)?;
            store.snapshot()?;
            w.append(&store, cut, n)?;
            store.sync()?;
            // Dropped without a clean close: the snapshot stays at `cut`.
        }
        // An untimed open first: the first open after the writer went away
        // pays for its recovery (measured ~25 ms more at 10k events), which
        // would otherwise land on the with-snapshot row only. Both rows then
        // open the same recovered log from a warm page cache.
        drop(Store::open(&path, bench_options())?);
        rows.push(measure_open(&path, n, true)?);
        let snaps = agentlog::StoreLayout::new(&path).snapshots();
        std::fs::remove_dir_all(&snaps)
            .map_err(|e| BenchError::io("cannot remove snapshots", &snaps, e))?;
        rows.push(measure_open(&path, n, false)?);
        // Each length's store is only needed for its own two rows.
        if cfg.dir.is_none() {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
    OpenReport::new(rows, MachineInfo::probe(&root)?)
}

/// `bench export` settings.
#[derive(Debug, Clone)]
pub struct ExportConfig {
    pub agents: usize,
    pub dir: Option<PathBuf>,
}

impl Default for ExportConfig {
    fn default() -> Self {
        ExportConfig {
            agents: 10_000,
            dir: None,
        }
    }
}

/// Times `Store::export` of `agents` registered agents (each with a few
/// heartbeats and a status change) to `<dir>/bench-export/registry.json`.
pub fn run_export(cfg: &ExportConfig) -> Result<ExportReport> {
    let events = cfg.agents as u64 * 4;
    check_events(events, cfg.agents)?;
    let (root, _guard) = work_dir(cfg.dir.as_deref())?;
    let path = root.join("bench-export");
    fresh_dir(&path)?;
    let store = Store::open(&path, bench_options())?;
    let w = Workload {
        agents: cfg.agents,
        events,
        start: recent_start(events),
    };
    w.append(&store, 0, events)?;
    let file = agentlog::StoreLayout::new(&path).registry_json();
    let started = Instant::now();
    let rep = store.export(Some(&file), false)?;
    let elapsed = started.elapsed();
    let bytes = std::fs::metadata(&file)
        .map_err(|e| BenchError::io("cannot stat export", &file, e))?
        .len();
    if rep.rows != cfg.agents {
        return Err(BenchError::Format {
            path: file,
            message: format!(
                "exported {} rows of {} agents ({} skipped)",
                rep.rows,
                cfg.agents,
                rep.skipped.len()
            ),
        });
    }
    drop(store);
    ExportReport::from_measurement(rep.rows as u64, bytes, elapsed, MachineInfo::probe(&root)?)
}

/// `bench compact` settings.
#[derive(Debug, Clone)]
pub struct CompactConfig {
    pub events: u64,
    pub agents: usize,
    pub dir: Option<PathBuf>,
}

impl Default for CompactConfig {
    fn default() -> Self {
        CompactConfig {
            events: 500_000,
            agents: 1_000,
            dir: None,
        }
    }
}

/// Times `Store::compact(now, default options)` of a log whose workload ran
/// two days ago, after which nine agents in ten exited (retired by the
/// presence TTL); the live tenth keep their first and last heartbeats.
/// Includes the snapshot of the new generation `compact` writes.
pub fn run_compact(cfg: &CompactConfig) -> Result<CompactReport> {
    if cfg.agents < 2 {
        return Err(BenchError::Config(
            "compact needs at least 2 agents (most of them exit)".into(),
        ));
    }
    let (root, _guard) = work_dir(cfg.dir.as_deref())?;
    let path = root.join("bench-compact");
    fresh_dir(&path)?;
    let store = Store::open(&path, bench_options())?;
    let w = Workload {
        agents: cfg.agents,
        events: cfg.events,
        start: Timestamp::from_millis(Timestamp::now().as_millis() - 2 * DAY_MS),
    };
    w.check()?;
    w.append(&store, 0, cfg.events)?;
    let mut exits = 0u64;
    for i in (0..cfg.agents).filter(|i| i % 10 != 0) {
        exits += 1;
        let at = w.at(cfg.events + exits);
        store.set_status(&name(i), Status::Exited, None, Some(at))?;
    }
    store.sync()?;
    let events_before = count_records(&store)?;
    let phase = Phase::start();
    let started = Instant::now();
    let rep = store.compact(Timestamp::now(), &CompactOptions::default())?;
    let elapsed = started.elapsed();
    let peak = peak(phase);
    if rep.generation == rep.generation_before || rep.events_dropped == 0 {
        return Err(BenchError::NothingMeasured {
            phase: "compact".into(),
            detail: format!(
                "the compaction dropped nothing ({} records scanned)",
                rep.records_scanned
            ),
        });
    }
    let events_after = count_records(&store)?;
    store.close()?;
    CompactReport::from_measurement(
        rep.bytes_before,
        rep.bytes_after,
        events_before,
        events_after,
        elapsed,
        peak,
        MachineInfo::probe(&root)?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_sizes_are_config_errors() {
        let e = run_replay(&ReplayConfig {
            events: 5,
            agents: 10,
            dir: None,
        })
        .unwrap_err();
        assert!(matches!(e, BenchError::Config(_)), "{e}");
        assert!(matches!(
            run_open(&OpenConfig {
                events: vec![],
                agents: 1,
                dir: None
            }),
            Err(BenchError::Config(_))
        ));
        assert!(matches!(
            run_export(&ExportConfig {
                agents: 0,
                dir: None
            }),
            Err(BenchError::Config(_))
        ));
    }

    #[test]
    fn open_tail_is_bounded_by_the_default_cadence() {
        assert_eq!(open_tail(10_000), 1_000);
        assert_eq!(open_tail(10_000_000), DEFAULT_SNAPSHOT_EVERY_EVENTS);
    }
}
