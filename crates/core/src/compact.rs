//! Registry-level compaction (docs/behaviour.md §4): decides which records of
//! the sealed log survive and drives the log's generation switch
//! ([`Log::compact_sealed`]).
//!
//! Invariants:
//! * **Keep rule.** A record at LSN `l <= L` survives iff
//!   [`Kept::keeps`](crate::registry::Kept::keeps) says so for the retention of the state at `L` (agent
//!   events of retained agents, posts of retained messages, read receipts of a
//!   retained reader naming at least one retained message, session events of
//!   retained sessions), except that a *heartbeat run* — consecutive
//!   heartbeats of one agent with the same pid and no other event of that
//!   agent between — collapses to its first and last heartbeat (unless
//!   `keep_all_heartbeats`). Same-pid runs are exact: every heartbeat of such
//!   a run has the same effect on the fold but its time, so the last one sets
//!   `last_active` exactly as the whole run did.
//! * **The fold commutes with compaction:** folding the compacted records
//!   `<= L` gives `retain(state_L, now)` (the `anomalies` counter aside: a
//!   dropped event can no longer count as one), assuming event times never
//!   decrease along the log (the Store stamps them from the clock).
//! * Records are kept with their original LSNs and order; records above `L`
//!   are never touched, so appends continue in the active segment (online).
//! * The decision is planned with one scan of the sealed range into a bitmap
//!   of dropped LSNs before the log rewrites anything; the log's MANIFEST
//!   rename is the single commit point (see `log/compaction.rs`).
//!
//! Pre-compaction snapshots must not be folded with the compacted log (they
//! would resurrect retired agents): a snapshot taken at LSN `S` is only valid
//! with the generation it was taken in (`LogStats::generation`); after a
//! compaction the Store should take a fresh one.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::log::record::record_size;
use crate::log::{Log, LogView, Lsn};
use crate::log::{LogError, Result};
use crate::registry::agents::FxBuild;
use crate::registry::codec::{self, DecodeError};
use crate::registry::history::{self, undecodable, Until};
use crate::registry::{Event, RetentionPolicy, SessionKey, State};
use crate::time::Timestamp;

/// What a compaction keeps and whether it writes anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompactOptions {
    pub policy: RetentionPolicy,
    /// Keep every heartbeat instead of collapsing runs to first + last.
    pub keep_all_heartbeats: bool,
    /// Plan only: report what would be dropped, change nothing.
    pub dry_run: bool,
}

/// What a compaction did (or, for a dry run, would do). Serialized as JSON
/// by the CLI (`agentlog compact --json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionReport {
    pub dry_run: bool,
    /// The "now" retention was judged at (ms since the epoch).
    pub now: Timestamp,
    /// Records with LSN <= this were considered.
    pub upto_lsn: Lsn,
    pub generation_before: u64,
    /// The generation current afterwards (unchanged by a dry run or no-op).
    pub generation: u64,
    /// Used bytes of the whole log before / after (after = estimated for a dry run).
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_scanned: u64,
    pub events_kept: u64,
    pub events_dropped: u64,
    /// Record bytes (headers included) of the dropped events.
    pub bytes_dropped: u64,
    /// Heartbeats (lone or in a batch) that were the middle of a run.
    pub heartbeats_collapsed: u64,
    pub agents_retired: Vec<String>,
    pub messages_dropped: u64,
    pub sessions_dropped: u64,
    pub duration_ms: u64,
}

/// The result of [`compact`]: the report and the retained state, which equals
/// the fold of the compacted records `<= report.upto_lsn`.
#[derive(Debug, Clone)]
pub struct Compaction {
    pub report: CompactionReport,
    pub retained: State,
}

/// Dropped LSNs as disjoint, non-adjacent inclusive ranges (start -> end).
///
/// Sized by what is kept, not by the LSN span: the dropped records of a long
/// heartbeat history form runs between the few kept ones, so a year of
/// heartbeats costs a few ranges per kept record instead of a bit per LSN.
#[derive(Debug, Clone, Default)]
pub struct DropSet {
    ranges: std::collections::BTreeMap<Lsn, Lsn>,
}

impl DropSet {
    fn insert(&mut self, lsn: Lsn) {
        let below = self.ranges.range(..=lsn).next_back().map(|(s, e)| (*s, *e));
        if below.is_some_and(|(_, e)| e >= lsn) {
            return;
        }
        let above = lsn
            .checked_add(1)
            .and_then(|n| self.ranges.get(&n).map(|e| (n, *e)));
        let start = match below {
            Some((s, e)) if e + 1 == lsn => s,
            _ => lsn,
        };
        let end = match above {
            Some((n, e)) => {
                self.ranges.remove(&n);
                e
            }
            None => lsn,
        };
        self.ranges.insert(start, end);
    }
    /// Whether `lsn` is dropped.
    pub fn contains(&self, lsn: Lsn) -> bool {
        self.ranges
            .range(..=lsn)
            .next_back()
            .is_some_and(|(_, e)| *e >= lsn)
    }
    /// How many disjoint ranges hold the dropped LSNs (its memory is O(this)).
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }
}

/// The outcome of the planning scan.
#[derive(Debug, Clone)]
pub struct Plan {
    pub drop: DropSet,
    pub report: CompactionReport,
    pub retained: State,
}

#[derive(Clone, Copy)]
struct Run {
    pid: Option<u32>,
    /// The run's latest heartbeat after its first (0: the run has one heartbeat).
    last: Lsn,
    last_bytes: u64,
}

/// A heartbeat batch record still needed: how many of its beats are some
/// run's latest, whether one began a run (then it is kept), its size.
#[derive(Clone, Copy)]
struct BatchLeft {
    pending: u32,
    pinned: bool,
    bytes: u64,
}

/// `run`'s latest heartbeat became a middle one (a later one at `current`
/// joined the run): its record is dropped, or, for a batch, drops once
/// none of its beats is needed (never before the batch at `current` is
/// read whole).
fn supersede(
    drop: &mut DropSet,
    report: &mut CompactionReport,
    batches: &mut HashMap<Lsn, BatchLeft, FxBuild>,
    run: &Run,
    current: Lsn,
) {
    report.heartbeats_collapsed += 1;
    let (lsn, bytes) = match batches.get_mut(&run.last) {
        None => (run.last, run.last_bytes),
        Some(left) => {
            left.pending -= 1;
            if left.pending > 0 || left.pinned || run.last == current {
                return;
            }
            let bytes = left.bytes;
            batches.remove(&run.last);
            (run.last, bytes)
        }
    };
    drop.insert(lsn);
    report.events_dropped += 1;
    report.bytes_dropped += bytes;
}

/// Plans a compaction of the records `<= upto` of `view`, given `state` =
/// the fold of exactly those records. One scan; heartbeats are judged
/// without allocating.
pub fn plan(
    view: &LogView,
    state: &State,
    upto: Lsn,
    now: Timestamp,
    opts: &CompactOptions,
) -> Result<Plan> {
    let mut retained = state.clone();
    let ret = retained.retain(now, &opts.policy);
    let kept = retained.kept();
    let mut report = CompactionReport {
        dry_run: opts.dry_run,
        now,
        upto_lsn: upto,
        bytes_before: view.bytes(),
        agents_retired: ret.retired_agents.iter().cloned().collect(),
        ..Default::default()
    };
    let mut drop = DropSet::default();
    // One map lookup per heartbeat: kept agents with their open run (a
    // name missing from the map is not kept).
    let mut runs: HashMap<&str, Option<Run>, FxBuild> = HashMap::default();
    runs.reserve(kept.agents.len());
    for a in &kept.agents {
        runs.insert(a.as_str(), None);
    }
    // Heartbeat batches (several agents' beats in one record) whose beats
    // are still some run's latest, by LSN.
    let mut batches: HashMap<Lsn, BatchLeft, FxBuild> = HashMap::default();
    let mut posts_dropped = 0u64;
    let mut sessions_dropped = std::collections::BTreeSet::<SessionKey>::new();
    for r in view.iter() {
        let r = r?;
        if r.lsn > upto {
            break;
        }
        report.records_scanned += 1;
        let size = record_size(r.payload.len()) as u64;
        let dropped = |drop: &mut DropSet, report: &mut CompactionReport, lsn| {
            drop.insert(lsn);
            report.events_dropped += 1;
            report.bytes_dropped += size;
        };
        if let Some(hb) =
            codec::decode_heartbeat(r.payload).map_err(|e| undecodable(view, r.lsn, e))?
        {
            let Some(slot) = runs.get_mut(hb.agent) else {
                dropped(&mut drop, &mut report, r.lsn);
                continue;
            };
            if opts.keep_all_heartbeats {
                continue;
            }
            match slot {
                Some(run) if run.pid == hb.pid => {
                    if run.last != 0 {
                        // The previous "last" is now a middle heartbeat.
                        supersede(&mut drop, &mut report, &mut batches, run, r.lsn);
                    }
                    run.last = r.lsn;
                    run.last_bytes = size;
                }
                _ => {
                    *slot = Some(Run {
                        pid: hb.pid,
                        last: 0,
                        last_bytes: 0,
                    })
                }
            }
            continue;
        }
        if codec::tag_of(r.payload) == Some(crate::registry::events::tag::HEARTBEAT_BATCH) {
            // Each beat joins its agent's run as a lone heartbeat would; the
            // record goes once every beat in it is a middle one (or beats
            // for an agent that is not kept). The batch is decoded once: a
            // bad entry fails the whole compaction, so beats handed over
            // before it leave no trace.
            let lsn = r.lsn;
            batches.insert(
                lsn,
                BatchLeft {
                    pending: 0,
                    pinned: opts.keep_all_heartbeats,
                    bytes: size,
                },
            );
            codec::for_each_batched(r.payload, |beat| {
                let Some(slot) = runs.get_mut(beat.agent) else {
                    return;
                };
                match slot {
                    Some(run) if run.pid == beat.pid => {
                        if run.last != 0 {
                            supersede(&mut drop, &mut report, &mut batches, run, lsn);
                        }
                        run.last = lsn;
                        run.last_bytes = size;
                    }
                    _ => {
                        *slot = Some(Run {
                            pid: beat.pid,
                            last: 0,
                            last_bytes: 0,
                        });
                        batches.get_mut(&lsn).expect("inserted above").pinned = true;
                        return;
                    }
                }
                batches.get_mut(&lsn).expect("inserted above").pending += 1;
            })
            .map_err(|e| undecodable(view, lsn, e))?;
            let left = batches[&lsn];
            if left.pending == 0 && !left.pinned {
                batches.remove(&lsn);
                dropped(&mut drop, &mut report, lsn);
            }
            continue;
        }
        let ev: Event = codec::decode(r.payload).map_err(|e| undecodable(view, r.lsn, e))?;
        if let Some(slot) = ev.kind.subject_agent().and_then(|a| runs.get_mut(a)) {
            *slot = None;
        }
        if !kept.keeps(r.lsn, &ev) {
            dropped(&mut drop, &mut report, r.lsn);
            match &ev.kind {
                crate::registry::EventKind::MessagePosted(_) => posts_dropped += 1,
                k => {
                    if let Some(key) = k.session() {
                        sessions_dropped.insert(key.clone());
                    }
                }
            }
        }
    }
    report.events_kept = report.records_scanned - report.events_dropped;
    report.messages_dropped = posts_dropped;
    report.sessions_dropped = sessions_dropped.len() as u64;
    report.bytes_after = report.bytes_before.saturating_sub(report.bytes_dropped);
    Ok(Plan {
        drop,
        report,
        retained,
    })
}

/// Compacts the sealed records `<= state_lsn`, where `state` is the fold of
/// exactly the records `<= state_lsn` (a Store takes it under its lock right
/// after [`Log::seal_active`]). Appends may continue meanwhile; records above
/// `state_lsn` are untouched. Returns the report and the retained state
/// (= fold of the compacted records `<= state_lsn`; fold the tail onto it
/// with [`history::fold`] to get the fold of the whole compacted log).
pub fn compact(
    log: &Log,
    state: &State,
    state_lsn: Lsn,
    now: Timestamp,
    opts: &CompactOptions,
) -> Result<Compaction> {
    let started = Instant::now();
    let stats = log.stats();
    let view = log.view();
    if !opts.dry_run && log.sealed_end_lsn() <= state_lsn {
        return Err(LogError::InvalidArgument(format!(
            "cannot compact up to lsn {state_lsn}: the log is sealed only below lsn {} (call seal_active first)",
            log.sealed_end_lsn()
        )));
    }
    let Plan {
        drop: dropset,
        mut report,
        retained,
    } = plan(&view, state, state_lsn, now, opts)?;
    // Old segments stay mapped while a view holds them: let them go.
    std::mem::drop(view);
    report.generation_before = stats.generation;
    report.generation = stats.generation;
    if !opts.dry_run && report.events_dropped > 0 {
        let out = log.compact_sealed(state_lsn + 1, &mut |lsn, _| !dropset.contains(lsn))?;
        if out.compacted_end <= state_lsn {
            // No segment boundary at state_lsn + 1: the records from
            // compacted_end to state_lsn were kept whole. The log is valid
            // (a correct partial compaction) but `retained` is not its fold.
            return Err(LogError::InvalidArgument(format!(
                "compaction planned up to lsn {state_lsn} but the sealed segments end at lsn {}: the state must be taken right after seal_active",
                out.compacted_end.saturating_sub(1)
            )));
        }
        report.generation = out.generation;
        report.bytes_after = log.stats().bytes;
    }
    report.duration_ms = started.elapsed().as_millis() as u64;
    Ok(Compaction { report, retained })
}

/// Folds the records `<= upto` of a view into a fresh state
/// ([`history::fold`], errors as the log's).
pub fn fold_view(view: &LogView, upto: Lsn, max_messages: usize) -> Result<State> {
    let mut s = State::new(max_messages);
    fold_onto(&mut s, view, 0, Until::Lsn(upto))?;
    Ok(s)
}

/// [`history::fold`] of `view` after `after` onto `state`, its decode
/// errors as the log's (naming the segment, offset and LSN).
fn fold_onto(state: &mut State, view: &LogView, after: Lsn, until: Until) -> Result<Lsn> {
    history::fold_view(view, state, after, until).map_err(|e| e.into_log_error(view))
}

/// Offline/standalone compaction (no Store): seals the active segment, folds
/// the sealed log and compacts it. Returns the compaction and the fold of the
/// whole compacted log at the time of return.
pub fn compact_log(
    log: &Log,
    max_messages: usize,
    now: Timestamp,
    opts: &CompactOptions,
) -> Result<(Compaction, State)> {
    if !opts.dry_run {
        log.seal_active()?;
    }
    // Read the bound first: every record below it is published, so the view
    // taken next holds them all (later rotations only move it further).
    let upto = if opts.dry_run {
        log.last_lsn().unwrap_or(0)
    } else {
        log.sealed_end_lsn().saturating_sub(1)
    };
    let view = log.view();
    let state = fold_view(&view, upto, max_messages)?;
    let c = compact(log, &state, upto, now, opts)?;
    let mut full = c.retained.clone();
    fold_onto(&mut full, &log.view(), upto, Until::End)?;
    Ok((c, full))
}

/// When to compact automatically.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoPolicy {
    /// Compact once droppable bytes / log bytes reaches this share (default 0.5).
    pub threshold: f64,
    /// Never bother below this many log bytes.
    pub min_bytes: u64,
    /// Also compact when this many ms passed since the last compaction (if anything is droppable).
    pub every_ms: Option<i64>,
}

impl Default for AutoPolicy {
    fn default() -> Self {
        AutoPolicy {
            threshold: 0.5,
            min_bytes: 1 << 20,
            every_ms: None,
        }
    }
}

/// Why an automatic compaction is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Threshold,
    Schedule,
}

impl AutoPolicy {
    /// Whether to compact now, given an estimate and the time since the last compaction.
    pub fn due(&self, est: &DropEstimate, since_last_ms: i64) -> Option<Trigger> {
        if est.total_bytes < self.min_bytes || est.droppable_bytes == 0 {
            return None;
        }
        if est.droppable_bytes as f64 >= self.threshold * est.total_bytes as f64 {
            return Some(Trigger::Threshold);
        }
        match self.every_ms {
            Some(every) if since_last_ms >= every => Some(Trigger::Schedule),
            _ => None,
        }
    }
}

/// Automatic compaction state for `Store::maybe_compact`: an incremental
/// [`DropEstimator`] fed with the records appended since the last call (so
/// the append path pays nothing), the policy and the last run's time.
#[derive(Debug, Clone)]
pub struct AutoCompactor {
    pub policy: AutoPolicy,
    pub opts: CompactOptions,
    est: DropEstimator,
    seen: Lsn,
    last_run: Option<Timestamp>,
}

impl AutoCompactor {
    pub fn new(policy: AutoPolicy, opts: CompactOptions) -> Self {
        AutoCompactor {
            policy,
            opts,
            est: DropEstimator::default(),
            seen: 0,
            last_run: None,
        }
    }

    /// The options a triggered compaction runs with (never a dry run).
    pub fn options(&self) -> CompactOptions {
        CompactOptions {
            dry_run: false,
            ..self.opts
        }
    }

    /// Counts the records of `view` after the last one counted.
    pub fn observe(&mut self, view: &LogView) -> Result<()> {
        for r in view.iter_from(self.seen + 1) {
            let r = r?;
            self.est
                .observe(r.lsn, r.payload)
                .map_err(|e| undecodable(view, r.lsn, e))?;
            self.seen = r.lsn;
        }
        Ok(())
    }

    /// The current estimate for `state` at `now`.
    pub fn estimate(&self, state: &State, now: Timestamp) -> DropEstimate {
        self.est.estimate(state, now, &self.opts)
    }

    /// Whether a compaction is due (threshold or schedule).
    pub fn due(&self, state: &State, now: Timestamp) -> bool {
        let since = self.last_run.map_or(i64::MAX, |t| now.millis_since(t));
        self.policy.due(&self.estimate(state, now), since).is_some()
    }

    /// Recounts the (now small) compacted log after a compaction.
    pub fn compacted(&mut self, view: &LogView, now: Timestamp) -> Result<()> {
        self.est = DropEstimator::default();
        self.seen = 0;
        self.last_run = Some(now);
        self.observe(view)
    }
}

/// Estimated droppable share of the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropEstimate {
    pub total_bytes: u64,
    pub droppable_bytes: u64,
}

impl DropEstimate {
    /// Bytes that would remain after compaction: the live history.
    pub fn live_bytes(&self) -> u64 {
        self.total_bytes - self.droppable_bytes
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct AgentBytes {
    bytes: u64,
    /// Bytes of middle heartbeats of runs (collapsible).
    collapsible: u64,
    run_len: u32,
    run_pid: Option<u32>,
    run_last: u64,
}

/// Counters kept beside the fold so the auto policy can estimate the
/// droppable share without scanning the log: record bytes per agent (with
/// the collapsible heartbeat bytes), per message and per session. A
/// heartbeat costs one hash lookup and no allocation. Read receipts count
/// towards their reader.
#[derive(Debug, Clone, Default)]
pub struct DropEstimator {
    agents: HashMap<String, AgentBytes, FxBuild>,
    messages: BTreeMap<Lsn, u64>,
    sessions: BTreeMap<SessionKey, u64>,
    other: u64,
    total: u64,
}

impl DropEstimator {
    /// Counts the records of a view (e.g. after open or after a compaction).
    pub fn from_view(view: &LogView) -> Result<Self> {
        let mut e = DropEstimator::default();
        for r in view.iter() {
            let r = r?;
            e.observe(r.lsn, r.payload)
                .map_err(|err| undecodable(view, r.lsn, err))?;
        }
        Ok(e)
    }

    /// Counts one appended record.
    pub fn observe(&mut self, lsn: Lsn, payload: &[u8]) -> Result<(), DecodeError> {
        let size = record_size(payload.len()) as u64;
        self.total += size;
        if let Some(hb) = codec::decode_heartbeat(payload)? {
            let a = match self.agents.get_mut(hb.agent) {
                Some(a) => a,
                None => self.agents.entry(hb.agent.to_string()).or_default(),
            };
            a.bytes += size;
            if a.run_len > 0 && a.run_pid == hb.pid {
                if a.run_len >= 2 {
                    a.collapsible += a.run_last;
                }
                a.run_len += 1;
            } else {
                a.run_len = 1;
                a.run_pid = hb.pid;
            }
            a.run_last = size;
            return Ok(());
        }
        let ev = codec::decode(payload)?;
        self.observe_event(lsn, &ev, size);
        Ok(())
    }

    fn observe_event(&mut self, lsn: Lsn, ev: &Event, size: u64) {
        use crate::registry::EventKind;
        match &ev.kind {
            EventKind::MessagePosted(m) => {
                self.messages.insert(lsn, size);
                // A post ends its sender's heartbeat run, as in `plan`.
                if let Some(a) = self.agents.get_mut(m.from.as_str()) {
                    a.run_len = 0;
                }
            }
            k if k.session().is_some() => {
                let key = k.session().expect("session event");
                match self.sessions.get_mut(key) {
                    Some(b) => *b += size,
                    None => {
                        self.sessions.insert(key.clone(), size);
                    }
                }
            }
            k => match k.subject_agent() {
                Some(name) => {
                    let a = self.agents.entry(name.to_string()).or_default();
                    a.bytes += size;
                    a.run_len = 0;
                }
                None => self.other += size,
            },
        }
    }

    /// Estimates the droppable bytes at `now` for `state` (the current fold).
    pub fn estimate(&self, state: &State, now: Timestamp, opts: &CompactOptions) -> DropEstimate {
        let ret = crate::registry::retention(state, now, &opts.policy);
        let mut drop = 0u64;
        for (name, a) in &self.agents {
            if !state.agents().contains(name) || ret.retired_agents.contains(name) {
                drop += a.bytes;
            } else if !opts.keep_all_heartbeats {
                drop += a.collapsible;
            }
        }
        for (id, b) in &self.messages {
            if state.message(*id).is_none() || ret.expired_messages.contains(id) {
                drop += b;
            }
        }
        for (k, b) in &self.sessions {
            if !state.sessions().contains_key(k) || ret.timed_out_sessions.contains(k) {
                drop += b;
            }
        }
        DropEstimate {
            total_bytes: self.total,
            droppable_bytes: drop.min(self.total),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DropSet;
    use std::collections::HashSet;

    #[test]
    fn the_drop_set_matches_a_plain_set_under_out_of_order_inserts() {
        let mut d = DropSet::default();
        let mut model = HashSet::new();
        // A deterministic shuffle of 0..2000 (7919 is prime to 2000), minus
        // every 13th LSN (kept).
        for i in 0..2000u64 {
            let lsn = 1 + (i * 7919) % 2000;
            if lsn % 13 != 0 {
                d.insert(lsn);
                model.insert(lsn);
            }
        }
        d.insert(5);
        for lsn in 0..2100 {
            assert_eq!(d.contains(lsn), model.contains(&lsn), "lsn {lsn}");
        }
        assert_eq!(d.range_count(), 2000 / 13 + 1);
    }

    /// A year of heartbeats spans billions of LSNs: the set's size follows
    /// the kept records, not the span (a bit per LSN was 2^37 bytes here).
    #[test]
    fn the_drop_set_is_sized_by_what_is_kept_not_by_the_lsn_span() {
        let mut d = DropSet::default();
        let far = 1u64 << 40;
        d.insert(1);
        d.insert(far);
        for lsn in 2..100_000 {
            if lsn % 1000 != 0 {
                d.insert(lsn);
            }
        }
        assert!(d.contains(far) && d.contains(1) && !d.contains(far - 1));
        assert!(!d.contains(3000) && d.contains(3001));
        assert_eq!(d.range_count(), 101);
    }
}
