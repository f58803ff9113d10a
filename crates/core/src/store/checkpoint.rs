//! Checkpoints of the [`Store`]: which snapshot `open` may resume from,
//! taking snapshots (every N events or T seconds on a background thread, on
//! clean close, on demand; a store without the thread checks the same
//! triggers on close), and the export that rides along with each.
//!
//! Invariants:
//! - A snapshot never covers a record that is not durable: the log is synced
//!   up to the snapshot's LSN before the file is written.
//! - Appenders are blocked only while the state is cloned under the read
//!   lock; encoding, writing, fsyncing and exporting run on the clone.
//! - `open` trusts a snapshot only if its file is intact (checked by
//!   `crate::snapshot`), it covers no LSN beyond the log's last one, it was
//!   taken in the log's current compaction generation, and it was folded
//!   with the same `max_messages`. A snapshot beyond the log's end is renamed
//!   to `*.untrusted` (new appends will reuse its LSNs, after which it would
//!   look valid but describe another history); the others are only skipped.
//!   Nothing about snapshots ever fails `open`: the log can always refold.
//! - One snapshot is written at a time (`SnapShared::lock`).

use super::{Core, Store, StoreResult};
use crate::export::{ExportOptions, ExportReport, PublishOptions};
use crate::layout::StoreLayout;
use crate::log::Log;
use crate::registry::{Lsn, State};
use crate::snapshot::{self, SnapshotInfo};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The payload of a store snapshot file: the folded state and the log
/// generation it was taken in (see `LogStats::generation`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SnapshotPayload {
    pub generation: u64,
    pub state: State,
}

/// Serialises exactly as [`SnapshotPayload`] without owning the state.
#[derive(Serialize)]
struct PayloadRef<'a> {
    generation: u64,
    state: &'a State,
}

/// A snapshot file `open` did not use, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedSnapshot {
    pub path: PathBuf,
    pub reason: String,
}

/// What [`Store::open`] used.
#[derive(Debug, Clone, Default)]
pub struct OpenReport {
    /// What log recovery found.
    pub recovery: crate::log::RecoveryReport,
    /// LSN of the snapshot file resumed from (`None`: no snapshot file).
    pub snapshot_lsn: Option<Lsn>,
    pub snapshot: Option<SnapshotInfo>,
    /// LSN the fold started after (a snapshot's, `open_from`'s base, or 0).
    pub base_lsn: Lsn,
    /// Log records folded on top of the base.
    pub events_folded: u64,
    /// Snapshot files not trusted, newest first.
    pub skipped_snapshots: Vec<SkippedSnapshot>,
    /// Where the open's time went (informational; never asserted on).
    pub timings: OpenTimings,
}

/// Wall time of the phases of `open`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenTimings {
    /// `Log::open`: lock, recovery scan of the newest segment, maps.
    pub log_open: Duration,
    /// Finding, reading, checking and decoding the snapshot.
    pub snapshot_load: Duration,
    /// Folding the log after the base.
    pub fold: Duration,
}

/// A state to resume the fold from.
pub(crate) struct Base {
    pub state: State,
    pub lsn: Lsn,
    pub info: Option<SnapshotInfo>,
}

/// Finds the newest trusted snapshot for the writer's `log`; see
/// [`trusted_snapshot`].
pub(super) fn load_base(
    dir: &Path,
    log: &Log,
    opts: &super::StoreOptions,
) -> (Option<Base>, Vec<SkippedSnapshot>) {
    let rule = TrustRule {
        last_lsn: log.last_lsn().unwrap_or(0),
        generation: log.stats().generation,
        max_messages: opts.max_messages,
    };
    trusted_snapshot(&StoreLayout::new(dir).snapshots(), &rule, true)
}

/// What a snapshot must agree with to be trusted: the log it will resume.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TrustRule {
    /// The log's last LSN (as the opener sees it).
    pub last_lsn: Lsn,
    /// The log's compaction generation.
    pub generation: u64,
    /// The store's `max_messages` option.
    pub max_messages: usize,
}

/// The one snapshot trust rule, used by the writer's open and the read-only
/// store: the newest intact snapshot in `snap_dir` that covers no LSN beyond
/// the log's last one, was taken in the log's current compaction generation
/// and was folded with the store's `max_messages`. Snapshots beyond the log's
/// end are passed over for older ones; `set_aside` (the writer only: readers
/// change no file) renames them to `*.untrusted`, because new appends will
/// reuse their LSNs, after which they would look valid but describe another
/// history. Returns the base, if any, and every file passed over with why.
pub(crate) fn trusted_snapshot(
    snap_dir: &Path,
    rule: &TrustRule,
    set_aside: bool,
) -> (Option<Base>, Vec<SkippedSnapshot>) {
    let last = rule.last_lsn;
    let mut skipped: Vec<SkippedSnapshot> = Vec::new();
    let skip = |skipped: &mut Vec<SkippedSnapshot>, path: PathBuf, reason: String| {
        if !skipped.iter().any(|s| s.path == path) {
            tracing::warn!(path = %path.display(), %reason, "snapshot not used");
            skipped.push(SkippedSnapshot { path, reason });
        }
    };
    let listed = match snapshot::list(snap_dir) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list snapshots; folding the whole log");
            return (None, skipped);
        }
    };
    for info in listed.iter().rev().filter(|i| i.lsn > last) {
        let reason = format!(
            "covers lsn {} beyond the log's last lsn {last} (the log lost a tail)",
            info.lsn
        );
        skip(&mut skipped, info.path.clone(), reason);
        if set_aside {
            let mut aside = info.path.clone().into_os_string();
            aside.push(".untrusted");
            if let Err(e) = std::fs::rename(&info.path, &aside) {
                tracing::warn!(path = %info.path.display(), error = %e, "cannot set an untrusted snapshot aside");
                return (None, skipped);
            }
        }
    }
    let loaded = match snapshot::load_newest_upto::<SnapshotPayload>(snap_dir, last) {
        Ok(Some(l)) => l,
        Ok(None) => {
            // `load_newest_upto` logs, but does not return, why each file was
            // refused when none is usable: report them by name.
            for info in listed.into_iter().filter(|i| i.lsn <= last) {
                let reason =
                    "damaged or unreadable (the warning logged by the snapshot loader names why)";
                skip(&mut skipped, info.path, reason.to_string());
            }
            return (None, skipped);
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot list snapshots; folding the whole log");
            return (None, skipped);
        }
    };
    for (path, reason) in loaded.skipped {
        skip(&mut skipped, path, reason.to_string());
    }
    let path = loaded.info.path.clone();
    if loaded.state.generation != rule.generation {
        let reason = format!(
            "taken in log generation {}, the log is at generation {} (compacted since: compaction rewrote history)",
            loaded.state.generation, rule.generation
        );
        // Older snapshots are of the same or an older generation.
        skip(&mut skipped, path, reason);
        return (None, skipped);
    }
    if loaded.state.state.max_messages() != rule.max_messages.max(1) {
        let reason = format!(
            "folded with max_messages {}, the store uses {}",
            loaded.state.state.max_messages(),
            rule.max_messages
        );
        skip(&mut skipped, path, reason);
        return (None, skipped);
    }
    (
        Some(Base {
            state: loaded.state.state,
            lsn: loaded.lsn,
            info: Some(loaded.info),
        }),
        skipped,
    )
}

/// Snapshot bookkeeping shared by the store and its thread.
pub(super) struct SnapShared {
    /// Held while a snapshot is written; holds the last snapshot's LSN.
    lock: Mutex<Option<Lsn>>,
    signal: Mutex<Signal>,
    cv: Condvar,
}

#[derive(Default)]
struct Signal {
    nudged: bool,
    stop: bool,
}

impl SnapShared {
    pub(super) fn new(last: Option<Lsn>) -> Self {
        SnapShared {
            lock: Mutex::new(last),
            signal: Mutex::new(Signal::default()),
            cv: Condvar::new(),
        }
    }
    fn last(&self) -> MutexGuard<'_, Option<Lsn>> {
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn signal(&self) -> MutexGuard<'_, Signal> {
        self.signal.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Events per registered agent between count-triggered snapshots, at least.
///
/// A snapshot costs O(agents) (clone, encode, write: ~1 µs an agent here)
/// while the tail it saves a reopen from costs O(events) (~0.1 µs an event),
/// so a fixed event count would make a large registry under heartbeat load
/// snapshot many times a second (measured: at 100,000 agents and 50,000
/// events, snapshot work took a third of the CPU and halved the heartbeat
/// rate). Scaling the interval with the registry keeps snapshot work a small,
/// bounded share of append work; the time trigger still bounds staleness.
pub const SNAPSHOT_EVENTS_PER_AGENT: u64 = 50;

/// Arms the count trigger at `lsn` + max(N, 50 × agents) (or disarms it).
fn arm(core: &Core, lsn: Lsn, agents: usize) {
    let every = core.opts.snapshot_every_events;
    let at = if every == 0 {
        u64::MAX
    } else {
        let every = every.max(SNAPSHOT_EVENTS_PER_AGENT.saturating_mul(agents as u64));
        lsn.saturating_add(every)
    };
    core.next_snapshot.store(at, Ordering::Relaxed);
}

/// (applied LSN, registered agents), read under the lock and released.
fn applied_and_agents(core: &Core) -> (Lsn, usize) {
    let g = core.read();
    (g.applied, g.state.agents().len())
}

/// Called by an appender past the threshold: wakes the thread once.
pub(super) fn nudge(core: &Core) {
    let armed = core.next_snapshot.swap(u64::MAX, Ordering::Relaxed);
    if armed == u64::MAX {
        return; // another appender already nudged
    }
    core.snap.signal().nudged = true;
    core.snap.cv.notify_one();
}

/// Starts the snapshot thread when a count or time trigger is configured
/// and the store runs one ([`super::StoreOptions::snapshot_thread`]).
pub(super) fn start(core: &std::sync::Arc<Core>) -> Option<JoinHandle<()>> {
    let opts = &core.opts;
    if !opts.snapshot_thread || (opts.snapshot_every_events == 0 && opts.snapshot_every_secs == 0) {
        return None;
    }
    let (applied, agents) = applied_and_agents(core);
    arm(core, applied.max(core.report.base_lsn), agents);
    let core = std::sync::Arc::clone(core);
    let spawned = std::thread::Builder::new()
        .name("agentlog-snapshot".into())
        .spawn(move || run(&core));
    match spawned {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::warn!(error = %e, "cannot start the snapshot thread; snapshots only on close and on demand");
            None
        }
    }
}

fn run(core: &Core) {
    // No time trigger: wake up rarely, only to re-check the flags.
    let period = match core.opts.snapshot_every_secs {
        0 => Duration::from_secs(3600),
        s => Duration::from_secs(s),
    };
    let mut due = Instant::now() + period;
    loop {
        let mut sig = core.snap.signal();
        while !sig.nudged && !sig.stop {
            let now = Instant::now();
            if now >= due {
                break;
            }
            sig = core
                .snap
                .cv
                .wait_timeout(sig, due - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if sig.stop {
            return;
        }
        let nudged = std::mem::take(&mut sig.nudged);
        drop(sig);
        let timed = core.opts.snapshot_every_secs > 0 && Instant::now() >= due;
        if nudged || timed {
            if let Err(e) = snapshot_if_new(core) {
                tracing::warn!(dir = %core.dir.display(), error = %e, "automatic snapshot failed");
                // Retry at the next trigger rather than on every append.
                let (applied, agents) = applied_and_agents(core);
                arm(core, applied, agents);
            }
        }
        if timed || nudged {
            due = Instant::now() + period;
        }
    }
}

/// Stops and joins the snapshot thread (if any).
pub(super) fn stop(core: &Core, handle: Option<JoinHandle<()>>) {
    if let Some(h) = handle {
        core.snap.signal().stop = true;
        core.snap.cv.notify_all();
        if h.join().is_err() {
            tracing::warn!(dir = %core.dir.display(), "the snapshot thread panicked");
        }
    }
}

/// Snapshots when something was applied since the last snapshot.
pub(super) fn snapshot_if_new(core: &Core) -> StoreResult<Option<SnapshotInfo>> {
    take(core)
}

/// Snapshots when a trigger is due (a store without the thread, on close):
/// the events since the last snapshot reach the count trigger (armed as the
/// thread arms it), or the time trigger is set and the last snapshot file
/// is at least that old, or there is none yet.
pub(super) fn snapshot_if_due(core: &Core) -> StoreResult<Option<SnapshotInfo>> {
    let opts = &core.opts;
    let (applied, agents) = applied_and_agents(core);
    let last = *core.snap.last();
    if last == Some(applied) || (last.is_none() && applied == 0) {
        return Ok(None);
    }
    let by_count = opts.snapshot_every_events > 0 && {
        let every = opts
            .snapshot_every_events
            .max(SNAPSHOT_EVENTS_PER_AGENT.saturating_mul(agents as u64));
        applied.saturating_sub(last.unwrap_or(0)) >= every
    };
    let by_time = opts.snapshot_every_secs > 0
        && match (last, &core.report.snapshot) {
            (None, _) => true,
            // The snapshot resumed from: its file's age.
            (Some(lsn), Some(info)) if info.lsn == lsn => std::fs::metadata(&info.path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_none_or(|age| age >= Duration::from_secs(opts.snapshot_every_secs)),
            // Taken by this process just now.
            (Some(_), _) => false,
        };
    if by_count || by_time {
        take(core)
    } else {
        Ok(None)
    }
}

/// Takes a snapshot (and the export configured with it) unless the state is
/// the last snapshot's.
fn take(core: &Core) -> StoreResult<Option<SnapshotInfo>> {
    // Held through the export too, so exports publish in snapshot order.
    let mut last = core.snap.last();
    // The generation comes from the same guard as the state: a compaction
    // changes both at once, so the label always matches the content.
    let (state, lsn, generation) = {
        let g = core.read();
        if *last == Some(g.applied) || (last.is_none() && g.applied == 0) {
            return Ok(None);
        }
        (g.state.clone(), g.applied, g.generation)
    };
    write_and_export(core, &mut last, generation, &state, lsn).map(Some)
}

/// Writes the snapshot of (`state`, `lsn`) once the log is durable up to
/// `lsn`, then exports when configured.
fn write_and_export(
    core: &Core,
    last: &mut Option<Lsn>,
    generation: u64,
    state: &State,
    lsn: Lsn,
) -> StoreResult<SnapshotInfo> {
    arm(core, lsn, state.agents().len());
    if lsn > 0 {
        core.log.wait_durable(lsn)?;
    }
    let payload = PayloadRef { generation, state };
    let info = snapshot::write(
        &StoreLayout::new(&core.dir).snapshots(),
        lsn,
        &payload,
        core.opts.snapshots_kept,
    )?;
    *last = Some(lsn);
    if let Some(path) = &core.opts.export_path {
        export_agents(
            state,
            path,
            core.opts.export_strict,
            core.opts.export_schema,
        )?;
    }
    Ok(info)
}

/// Renders and publishes `state`'s agents (registration order) at `path`,
/// unless another writer changed the file since agentlog last published
/// it: that write is left for [`Store::publish_registry`], which ingests it
/// first (`crate::coexist`), and an empty report is returned.
pub(super) fn export_agents(
    state: &State,
    path: &Path,
    strict: bool,
    schema: crate::schemas::Schema,
) -> StoreResult<ExportReport> {
    let (bytes, report) =
        crate::export::render(state.agents().iter(), &ExportOptions { strict, schema })?;
    let _locks = crate::export::lock_registry(path, PublishOptions::default().lock_timeout)?;
    if crate::coexist::changed_on_disk(path)? {
        tracing::info!(
            path = %path.display(),
            "registry.json was changed by another writer; left for the next publish, which ingests it"
        );
        return Ok(ExportReport::default());
    }
    crate::export::publish_locked(path, &bytes)?;
    crate::coexist::record_published(path, &bytes).map_err(crate::export::ExportError::from)?;
    Ok(report)
}

impl Store {
    /// Takes a snapshot now (even if nothing changed since the last one),
    /// then exports to `StoreOptions::export_path` when set. The snapshot
    /// is on disk even if the export then fails (the error is returned).
    pub fn snapshot(&self) -> StoreResult<SnapshotInfo> {
        let core = &*self.core;
        let mut last = core.snap.last();
        let (state, lsn, generation) = {
            let g = core.read();
            (g.state.clone(), g.applied, g.generation)
        };
        write_and_export(core, &mut last, generation, &state, lsn)
    }

    /// The folder holding this store's snapshot files.
    pub fn snapshot_dir(&self) -> PathBuf {
        StoreLayout::new(&self.core.dir).snapshots()
    }
}
