//! [`Store`]: the registry kept as events in the log engine.
//!
//! `open` recovers the log in `<dir>/log/` and folds it (or resumes from a
//! snapshot's (state, LSN) with [`Store::open_from`]). A command locks the
//! state, validates, encodes, appends `Lazy` and applies — all under one lock,
//! so log order is apply order — then unlocks and, if the command is durable,
//! waits for its LSN outside the lock (group commit with other threads).
//! Heartbeats are `Lazy` by default and encoded into a reused buffer; every
//! other command is `Durable` by default. Every command takes an optional
//! explicit event time (default: the clock). `Store` is `Send + Sync`.
//!
//! Checkpoints (`checkpoint`): `open` resumes from the newest trusted
//! snapshot in `<dir>/snapshots/`; a background thread snapshots every N
//! events or T seconds (and exports `registry.json` with each snapshot when
//! configured), `close` snapshots (a short-lived store without the thread,
//! [`StoreOptions::short_lived`]: only when a trigger is due), and
//! [`Store::snapshot`] does it on demand.
//! Export and import of schema-v4 `registry.json` live in `interop`.

use crate::layout::StoreLayout;
use crate::log::{Durability, Log, LogOptions, LogView, RecoveryReport};
use crate::model::{Agent, Status};
use crate::registry::codec::{self, DecodeError};
pub use crate::registry::history::Until;
use crate::registry::history::{self, ScanError};
use crate::registry::{
    Event, EventKind, FieldUpdates, FoldScratch, Lsn, Message, PostMessage, PostOutcome,
    ProcessProbe, Registration, RegistrationKind, RegistryError, SessionKey, SessionOp, State,
    SweepPolicy,
};
use crate::time::Timestamp;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::Instant;

mod agents;
mod checkpoint;
mod compaction;
pub mod config;
mod interop;
mod origin;
mod read_only;
mod replica;
mod runtime;
mod stamps;
mod statefiles;
mod wait;

pub use checkpoint::{
    OpenReport, OpenTimings, SkippedSnapshot, SnapshotPayload, SNAPSHOT_EVENTS_PER_AGENT,
};
pub use interop::{ImportReport, Published};
pub use origin::{current_access, current_origin, with_access, with_origin, PeerAccess};
pub use read_only::{ReadOnlyStore, ReadState};
pub use replica::{replica_of, Check, CommandSink, REPLICA_FILE};
pub use runtime::caller_here;
pub use statefiles::StateProblem;
pub use wait::Waited;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The command was refused; nothing was appended.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Log(#[from] crate::log::LogError),
    /// A replicated record that does not decode (e.g. written by a newer
    /// agentlog), refused before it reaches the log. One read back from the
    /// log is [`crate::log::LogError::Corrupt`], naming its segment and offset.
    #[error("log {dir}: event at lsn {lsn}: {source}")]
    Decode {
        dir: PathBuf,
        lsn: Lsn,
        #[source]
        source: DecodeError,
    },
    #[error(transparent)]
    Snapshot(#[from] crate::snapshot::SnapshotError),
    #[error(transparent)]
    Export(#[from] crate::export::ExportError),
    #[error(transparent)]
    Import(#[from] crate::import::ImportError),
    /// An imported row names an agent this store holds and that has not
    /// finished; nothing was imported.
    #[error("{}: row {row}: agent `{agent}` is already registered here and {status} (not finished); nothing was imported", file.display())]
    ImportConflict {
        file: PathBuf,
        row: usize,
        agent: String,
        status: Status,
    },
    /// An imported row whose name the store would refuse; nothing was imported.
    #[error("{}: row {row}: {source}; nothing was imported", file.display())]
    ImportRow {
        file: PathBuf,
        row: usize,
        #[source]
        source: RegistryError,
    },
    /// The replicated mode refused or failed the command (what and why).
    #[error("replicated store: {0}")]
    Replication(String),
    /// `export(None, ..)` with no `StoreOptions::export_path`.
    #[error("no export path given and StoreOptions::export_path is not set")]
    NoExportPath,
}

pub type StoreResult<T> = std::result::Result<T, StoreError>;

/// Store settings.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub log: LogOptions,
    /// Durability of heartbeats (default `Lazy`).
    pub heartbeat_durability: Durability,
    /// Durability of every other command (default `Durable`).
    pub command_durability: Durability,
    /// Live-message cap of the fold (default 200). Part of the fold's
    /// semantics: a cap persisted in `<dir>/config.json` ([`config`])
    /// overrides this on open, so a log is folded with the cap it was
    /// written with.
    pub max_messages: usize,
    /// Lease used by [`Store::sweep`].
    pub sweep: SweepPolicy,
    /// Snapshot after this many events since the last one, or 50 events per
    /// registered agent if that is more (0 = never by count). Default
    /// [`DEFAULT_SNAPSHOT_EVERY_EVENTS`] (see that constant for the
    /// measurement behind it, and [`SNAPSHOT_EVENTS_PER_AGENT`]).
    pub snapshot_every_events: u64,
    /// Snapshot when this many seconds passed and there is anything new
    /// (0 = never by time). Default [`DEFAULT_SNAPSHOT_EVERY_SECS`].
    pub snapshot_every_secs: u64,
    /// Snapshot files kept, newest first (default 3; 0 counts as 1).
    pub snapshots_kept: usize,
    /// Publish schema-v4 `registry.json` here with every snapshot (default
    /// none); also the default target of [`Store::export`].
    pub export_path: Option<PathBuf>,
    /// Automatic exports refuse (instead of leaving out, with a warning)
    /// agents an existing reader cannot accept.
    pub export_strict: bool,
    /// The schema automatic exports and [`Store::export`] write (default 4;
    /// `agentlog serve` takes the store's `init --schema`).
    pub export_schema: crate::schemas::Schema,
    /// Run the count and time triggers on a background thread, and snapshot
    /// on every clean close that has something new (default true: a
    /// long-lived store). Off, no thread is started and `close` snapshots
    /// only when a trigger is due: the events since the last snapshot reach
    /// the count, or its file is older than the time (or there is none).
    pub snapshot_thread: bool,
}

impl StoreOptions {
    /// Options for a process that opens the store for one command and
    /// closes it (the CLI without a daemon): no background threads, a quick
    /// log open ([`LogOptions::short_lived`]) and a snapshot on close only
    /// when a trigger is due.
    pub fn short_lived() -> StoreOptions {
        StoreOptions {
            log: LogOptions::short_lived(),
            snapshot_thread: false,
            ..StoreOptions::default()
        }
    }
}

/// Default of [`StoreOptions::snapshot_every_events`]. Measured with
/// `cargo bench --bench store_open` (table in FORMAT.md, "Snapshots in the
/// store"): a reopen folds ~1.2 M events/s on the loaded 2-core box, so a
/// tail of at most 50,000 events folds in ~50 ms; a 10,000-agent snapshot
/// costs ~33 ms of background work, of which appenders wait only for the
/// ~9 ms state clone.
pub const DEFAULT_SNAPSHOT_EVERY_EVENTS: u64 = 50_000;
/// Default of [`StoreOptions::snapshot_every_secs`]: a quiet store still gets
/// its recent changes checkpointed (and exported) within a minute.
pub const DEFAULT_SNAPSHOT_EVERY_SECS: u64 = 60;
/// Default of [`StoreOptions::snapshots_kept`].
pub const DEFAULT_SNAPSHOTS_KEPT: usize = 3;

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            log: LogOptions::default(),
            heartbeat_durability: Durability::Lazy,
            command_durability: Durability::Durable,
            max_messages: crate::registry::state::DEFAULT_MAX_MESSAGES,
            sweep: SweepPolicy::default(),
            snapshot_every_events: DEFAULT_SNAPSHOT_EVERY_EVENTS,
            snapshot_every_secs: DEFAULT_SNAPSHOT_EVERY_SECS,
            snapshots_kept: DEFAULT_SNAPSHOTS_KEPT,
            export_path: None,
            export_strict: false,
            export_schema: crate::schemas::Schema::V4,
            snapshot_thread: true,
        }
    }
}

struct Inner {
    state: State,
    /// Last LSN folded into `state`.
    applied: Lsn,
    /// The log generation `state` belongs to. Changed together with `state`
    /// (under this lock) when a compaction swaps in the retained state, so
    /// a snapshot never pairs a new generation with a pre-retention state.
    generation: u64,
    /// Reused encode buffer (no allocation per heartbeat).
    buf: Vec<u8>,
    /// Reused decode space of a replicated heartbeat batch.
    scratch: FoldScratch,
}

/// What the store and its snapshot thread share.
struct Core {
    dir: PathBuf,
    log: Log,
    inner: RwLock<Inner>,
    opts: StoreOptions,
    report: OpenReport,
    /// Applied LSN at which appenders nudge the snapshot thread (`u64::MAX`:
    /// not armed). One relaxed load per append.
    next_snapshot: AtomicU64,
    snap: checkpoint::SnapShared,
    /// Where commands go in the replicated mode ([`replica`]); weak, so the
    /// store never keeps its cluster node (which owns the store) alive.
    sink: OnceLock<Weak<dyn CommandSink>>,
    /// The fleet this store is a replica of (`<dir>/replica.json`).
    replica_of: OnceLock<String>,
    /// The published files last seen clean (`stamps`).
    stamps: stamps::Stamps,
}

impl Core {
    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }
    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// The event-sourced registry. See the module docs.
pub struct Store {
    core: Arc<Core>,
    snapshotter: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.core.dir)
            .finish()
    }
}

fn now_or(at: Option<Timestamp>) -> Timestamp {
    at.unwrap_or_else(Timestamp::now)
}

impl Store {
    /// Opens (or creates) the store in `dir`: recovers the log, resumes from
    /// the newest trusted snapshot (see `checkpoint`) and folds the log
    /// after it. [`Store::open_report`] tells what was used.
    pub fn open(dir: &Path, mut opts: StoreOptions) -> StoreResult<Store> {
        apply_config(dir, &mut opts)?;
        let started = Instant::now();
        let (log, recovery) = Log::open(&StoreLayout::new(dir).log(), opts.log.clone())?;
        let log_open = started.elapsed();
        let (base, skipped) = checkpoint::load_base(dir, &log, &opts);
        let timings = OpenTimings {
            log_open,
            snapshot_load: started.elapsed() - log_open,
            ..Default::default()
        };
        Self::finish_open(dir, opts, (log, recovery), base, skipped, timings)
    }

    /// Opens the store resuming the fold from `base` = (state at LSN, LSN)
    /// given by the caller (no snapshot file is read); only records after
    /// that LSN are folded. `None` folds the whole log.
    pub fn open_from(
        dir: &Path,
        mut opts: StoreOptions,
        base: Option<(State, Lsn)>,
    ) -> StoreResult<Store> {
        apply_config(dir, &mut opts)?;
        let started = Instant::now();
        let opened = Log::open(&StoreLayout::new(dir).log(), opts.log.clone())?;
        let timings = OpenTimings {
            log_open: started.elapsed(),
            ..Default::default()
        };
        let base = base.map(|(state, lsn)| checkpoint::Base {
            state,
            lsn,
            info: None,
        });
        Self::finish_open(dir, opts, opened, base, Vec::new(), timings)
    }

    fn finish_open(
        dir: &Path,
        opts: StoreOptions,
        (log, recovery): (Log, RecoveryReport),
        base: Option<checkpoint::Base>,
        skipped_snapshots: Vec<SkippedSnapshot>,
        mut timings: OpenTimings,
    ) -> StoreResult<Store> {
        let fold_started = Instant::now();
        let (mut state, after, snapshot) = match base {
            Some(b) => (b.state, b.lsn, b.info.map(|i| (b.lsn, i))),
            None => (State::new(opts.max_messages), 0, None),
        };
        let view = log.view();
        let folded = history::fold(&view, &mut state, after, Until::End, &mut |_| {})
            .map_err(|e| scan_err(&view, e))?;
        let (applied, events_folded) = (folded.last, folded.events);
        timings.fold = fold_started.elapsed();
        let report = OpenReport {
            timings,
            recovery,
            snapshot_lsn: snapshot.as_ref().map(|(lsn, _)| *lsn),
            snapshot: snapshot.map(|(_, info)| info),
            base_lsn: after,
            events_folded,
            skipped_snapshots,
        };
        let generation = log.stats().generation;
        let replica_of = OnceLock::new();
        if let Some(fleet) = replica::replica_of(dir)? {
            let _ = replica_of.set(fleet);
        }
        let core = Arc::new(Core {
            dir: dir.to_path_buf(),
            log,
            inner: RwLock::new(Inner {
                state,
                applied,
                generation,
                buf: Vec::with_capacity(256),
                scratch: FoldScratch::default(),
            }),
            next_snapshot: AtomicU64::new(u64::MAX),
            snap: checkpoint::SnapShared::new(report.snapshot_lsn),
            sink: OnceLock::new(),
            replica_of,
            stamps: stamps::Stamps::default(),
            opts,
            report,
        });
        let snapshotter = checkpoint::start(&core);
        Ok(Store { core, snapshotter })
    }

    pub fn dir(&self) -> &Path {
        &self.core.dir
    }
    pub fn options(&self) -> &StoreOptions {
        &self.core.opts
    }
    /// What log recovery found on open.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.core.report.recovery
    }
    /// What `open` used: log recovery, the snapshot resumed from, how many
    /// events were folded after it, and the snapshots that were not trusted.
    pub fn open_report(&self) -> &OpenReport {
        &self.core.report
    }
    /// The underlying log (for export, snapshot and compaction hooks; append
    /// only through the store, or the state will not see the records).
    pub fn log(&self) -> &Log {
        &self.core.log
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.core.read()
    }
    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.core.write()
    }

    /// Nudges the snapshot thread once `lsn` reaches the armed threshold.
    #[inline]
    fn after_append(&self, lsn: Lsn) {
        if lsn >= self.core.next_snapshot.load(Ordering::Relaxed) {
            checkpoint::nudge(&self.core);
        }
    }

    /// A clone of the current state.
    pub fn state(&self) -> State {
        self.read().state.clone()
    }
    /// Runs `f` over the current state under the read lock; also gives the
    /// last applied LSN (a snapshot writer saves both).
    pub fn with_state<R>(&self, f: impl FnOnce(&State, Lsn) -> R) -> R {
        let g = self.read();
        f(&g.state, g.applied)
    }
    /// The last LSN folded into the state.
    pub fn applied_lsn(&self) -> Lsn {
        self.read().applied
    }

    /// Appends the events (one record, or one batch) and applies them under
    /// the held lock; returns their LSNs.
    fn append_apply(&self, g: &mut Inner, events: &[Event]) -> StoreResult<Vec<Lsn>> {
        let started = crate::telemetry::start();
        let lsns: Vec<Lsn> = match events {
            [] => Vec::new(),
            [e] => {
                codec::encode_into(e, &mut g.buf);
                origin::stamp(&mut g.buf);
                vec![self.core.log.append(&g.buf, Durability::Lazy)?]
            }
            many => {
                let payloads: Vec<Vec<u8>> = many
                    .iter()
                    .map(|e| {
                        let mut p = codec::encode(e);
                        origin::stamp(&mut p);
                        p
                    })
                    .collect();
                let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
                self.core
                    .log
                    .append_batch(&refs, Durability::Lazy)?
                    .collect()
            }
        };
        for (lsn, e) in lsns.iter().zip(events) {
            g.state.apply(*lsn, e);
            g.applied = *lsn;
        }
        if let Some(&last) = lsns.last() {
            self.after_append(last);
        }
        crate::telemetry::appended(started, events.iter().map(|e| e.kind.tag()));
        Ok(lsns)
    }

    fn finish(&self, last: Option<Lsn>, d: Durability) -> StoreResult<()> {
        if let (Some(lsn), Durability::Durable) = (last, d) {
            self.core.log.wait_durable(lsn)?;
        }
        Ok(())
    }

    /// Validates with `check`, then appends and applies the event(s) it
    /// returns; waits for durability per the command setting. A replica
    /// hands the command to its sink instead (which may run `check` again
    /// after a lost race).
    fn command(
        &self,
        mut check: impl FnMut(&State) -> Result<Vec<Event>, RegistryError> + Send,
    ) -> StoreResult<Vec<Lsn>> {
        if let Some(sink) = self.sink()? {
            let done = sink.command(current_origin(), &mut |s| Ok(check(s)?))?;
            return Ok(done.into_iter().map(|(lsn, _)| lsn).collect());
        }
        self.command_local(check)
    }

    /// [`Store::command`] on this store's own log.
    fn command_local(
        &self,
        check: impl FnOnce(&State) -> Result<Vec<Event>, RegistryError>,
    ) -> StoreResult<Vec<Lsn>> {
        let lsns = {
            let mut g = self.write();
            let events = check(&g.state)?;
            self.append_apply(&mut g, &events)?
        };
        self.finish(lsns.last().copied(), self.core.opts.command_durability)?;
        Ok(lsns)
    }

    fn one(
        &self,
        mut check: impl FnMut(&State) -> Result<Event, RegistryError> + Send,
    ) -> StoreResult<Lsn> {
        let lsns = self.command(|s| check(s).map(|e| vec![e]))?;
        Ok(lsns[0])
    }

    /// Registers (new name, renewal, or new life); see `State::check_register`.
    pub fn register(
        &self,
        reg: Registration,
        at: Option<Timestamp>,
    ) -> StoreResult<(Lsn, RegistrationKind)> {
        let at = now_or(at);
        let mut kind = RegistrationKind::New;
        let lsn = self.one(|s| {
            let e = s.check_register(reg.clone(), at)?;
            if let EventKind::AgentRegistered { kind: k, .. } = &e.kind {
                kind = *k;
            }
            Ok(e)
        })?;
        Ok((lsn, kind))
    }

    /// A heartbeat: validated, encoded into the reused buffer and appended
    /// without allocating.
    pub fn heartbeat(
        &self,
        agent: &str,
        pid: Option<u32>,
        at: Option<Timestamp>,
    ) -> StoreResult<Lsn> {
        let at = now_or(at);
        if let Some(sink) = self.sink()? {
            let durable = self.core.opts.heartbeat_durability == Durability::Durable;
            return sink.heartbeat(current_origin(), agent, pid, at, durable);
        }
        let (lsn, started) = {
            let mut g = self.write();
            let started = crate::telemetry::start();
            let slot = g.state.check_heartbeat(agent, pid)?;
            let g = &mut *g;
            codec::encode_heartbeat_into(&mut g.buf, at, agent, pid);
            origin::stamp(&mut g.buf);
            let lsn = self.core.log.append(&g.buf, Durability::Lazy)?;
            g.state.apply_heartbeat_at(slot, lsn, at, pid);
            g.applied = lsn;
            self.after_append(lsn);
            (lsn, started)
        };
        crate::telemetry::appended(started, [crate::registry::tag::HEARTBEAT]);
        self.finish(Some(lsn), self.core.opts.heartbeat_durability)?;
        Ok(lsn)
    }

    /// Whether [`Store::heartbeat`] of `agent` may wait on the file system
    /// now: it is durable, or its append may switch segments or wait for a
    /// switch under way ([`crate::log::Log::append_may_wait`]). An async
    /// caller runs such a heartbeat off its worker.
    pub fn heartbeat_may_block(&self, agent: &str) -> bool {
        // Above any heartbeat's encoding (time, pid, origin stamp): a bound
        // too high only moves the last few of a segment off the worker.
        const ENCODING: usize = 256;
        self.core.opts.heartbeat_durability == Durability::Durable
            || self.core.log.append_may_wait(agent.len() + ENCODING)
    }

    pub fn set_status(
        &self,
        agent: &str,
        status: Status,
        message: Option<String>,
        at: Option<Timestamp>,
    ) -> StoreResult<Lsn> {
        let at = now_or(at);
        self.one(|s| s.check_set_status(agent, status, message.clone(), at))
    }

    pub fn update_fields(
        &self,
        agent: &str,
        fields: FieldUpdates,
        at: Option<Timestamp>,
    ) -> StoreResult<Lsn> {
        let at = now_or(at);
        self.one(|s| s.check_update(agent, fields.clone(), at))
    }

    pub fn remove(&self, agent: &str, at: Option<Timestamp>) -> StoreResult<Lsn> {
        let at = now_or(at);
        self.one(|s| s.check_remove(agent, at))
    }

    /// Brings in a whole agent row (schema-v4 import): replaces any agent of
    /// that name.
    pub fn import_agent(&self, agent: Agent, at: Option<Timestamp>) -> StoreResult<Lsn> {
        let at = now_or(at);
        self.one(|_| {
            crate::registry::validate_agent(&agent)?;
            Ok(Event {
                at,
                kind: EventKind::AgentImported(Box::new(agent.clone())),
            })
        })
    }

    /// Posts a message; returns its id (the LSN of the post, or the first
    /// post's id for an idempotent retry, which appends nothing). When the
    /// store holds `max_messages` live messages, the oldest are dropped by a
    /// `MessagesDropped` event appended in the same batch, before the post.
    pub fn post_message(&self, post: PostMessage, at: Option<Timestamp>) -> StoreResult<Lsn> {
        let at = now_or(at);
        let mut existing = None;
        // A post that overflows the cap is preceded, in the same batch, by
        // the `MessagesDropped` event naming what it evicts.
        let lsns = self.command(|s| match s.check_post(post.clone(), at)? {
            PostOutcome::Append(e) => {
                existing = None;
                let stamp = s.delivery_stamp(&e);
                Ok(s.cap_drops(at)
                    .into_iter()
                    .chain(stamp)
                    .chain([e])
                    .collect())
            }
            PostOutcome::Existing(id) => {
                existing = Some(id);
                Ok(Vec::new())
            }
        })?;
        Ok(existing.unwrap_or_else(|| lsns[lsns.len() - 1]))
    }

    /// The unread messages of `reader` at `now` (default: the clock);
    /// appends nothing.
    pub fn unread(
        &self,
        reader: &str,
        project_root: Option<&str>,
        now: Option<Timestamp>,
    ) -> StoreResult<Vec<Message>> {
        let now = now_or(now);
        let g = self.read();
        Ok(g.state
            .unread(reader, project_root, now)?
            .into_iter()
            .cloned()
            .collect())
    }

    /// Returns the unread messages and appends their read receipt.
    pub fn read_messages(
        &self,
        reader: &str,
        project_root: Option<&str>,
        at: Option<Timestamp>,
    ) -> StoreResult<Vec<Message>> {
        let at = now_or(at);
        let mut msgs = Vec::new();
        self.command(|s| {
            let (m, e) = s.check_read(reader, project_root, at)?;
            msgs = m;
            Ok(e.into_iter().collect())
        })?;
        Ok(msgs)
    }

    /// Marks messages read; returns how many were newly marked.
    pub fn mark_read(
        &self,
        reader: &str,
        ids: &[Lsn],
        at: Option<Timestamp>,
    ) -> StoreResult<usize> {
        let at = now_or(at);
        let mut n = 0;
        self.command(|s| {
            let e = s.check_mark_read(reader, ids, at)?;
            if let Some(Event {
                kind: EventKind::MessagesRead { ids, .. },
                ..
            }) = &e
            {
                n = ids.len();
            }
            Ok(e.into_iter().collect())
        })?;
        Ok(n)
    }

    /// Logical-session presence; `None` when nothing was appended (closing
    /// an absent session).
    pub fn session(
        &self,
        op: SessionOp,
        key: SessionKey,
        ttl_ms: Option<i64>,
        at: Option<Timestamp>,
    ) -> StoreResult<Option<Lsn>> {
        let at = now_or(at);
        let lsns = self.command(|s| {
            Ok(s.check_session(op, key.clone(), ttl_ms, at)?
                .into_iter()
                .collect())
        })?;
        Ok(lsns.first().copied())
    }

    /// Sweeps at `now` (default: the clock): lease expiry and process
    /// identity. The changes are appended as one batch; returns them. A
    /// replica sweeps as its periodic sweep does (docs/scaling.md §7): under
    /// the fleet's sweeper lease, lease expiry only, each change published
    /// on its own, conditionally on its agent.
    pub fn sweep(
        &self,
        now: Option<Timestamp>,
        probe: &dyn ProcessProbe,
    ) -> StoreResult<Vec<(Lsn, Event)>> {
        let now = now_or(now);
        if let Some(sink) = self.sink()? {
            return sink.sweep(current_origin(), now);
        }
        let mut changes = Vec::new();
        let lsns = self.command_local(|s| {
            changes = crate::registry::sweep(s, now, &self.core.opts.sweep, probe);
            Ok(changes.clone())
        })?;
        Ok(lsns.into_iter().zip(changes).collect())
    }

    /// Every event concerning `agent` in log order (see `registry::history`).
    pub fn history(&self, agent: &str) -> StoreResult<Vec<(Lsn, Event)>> {
        let view = self.view();
        history::scan_history(&view, agent).map_err(|e| scan_err(&view, e))
    }

    /// The state after folding the log up to `until`.
    pub fn state_at(&self, until: Until) -> StoreResult<State> {
        let mut state = State::new(self.core.opts.max_messages);
        let view = self.view();
        history::fold_view(&view, &mut state, 0, until).map_err(|e| scan_err(&view, e))?;
        Ok(state)
    }

    /// A view of the records applied so far (a consistent prefix).
    pub fn view(&self) -> LogView {
        self.core.log.view()
    }

    /// Makes everything appended so far durable.
    pub fn sync(&self) -> StoreResult<()> {
        Ok(self.core.log.sync()?)
    }

    /// Clean close: stops the snapshot thread, snapshots (and exports, when
    /// configured) if anything changed since the last snapshot (without the
    /// thread, [`StoreOptions::snapshot_thread`]: only when a trigger is
    /// due), then syncs and closes the log (releasing its lock).
    ///
    /// The close-time snapshot is an optimisation (a faster next open), never
    /// part of what the caller's commands committed: when it fails (a full
    /// disk, `snapshots/` unusable) the failure is logged as a warning and
    /// returned in [`CloseReport::snapshot_error`], and `close` still
    /// succeeds. Only a failure to make the log durable is an error.
    pub fn close(self) -> StoreResult<CloseReport> {
        self.close_keeping(true)
    }

    /// [`Store::close`] for a process that exits right after it (the
    /// one-shot CLI): the same snapshot, sync and lock release, but the
    /// folded state is left for the exit to reclaim instead of being freed
    /// allocation by allocation (at 1,000 agents that drop was 11 % of a
    /// one-shot `heartbeat`'s instructions, `valgrind --tool=callgrind`).
    /// Each call leaks that state: never in a process that goes on.
    pub fn close_before_exit(self) -> StoreResult<CloseReport> {
        self.close_keeping(false)
    }

    fn close_keeping(mut self, free_state: bool) -> StoreResult<CloseReport> {
        checkpoint::stop(&self.core, self.snapshotter.take());
        let closing = if self.core.opts.snapshot_thread {
            checkpoint::snapshot_if_new(&self.core)
        } else {
            checkpoint::snapshot_if_due(&self.core)
        };
        let snapshot_error = closing.err().map(|e| {
            tracing::warn!(
                dir = %self.core.dir.display(),
                error = %e,
                "close-time snapshot failed (everything committed is in the log; the next open folds it)"
            );
            e
        });
        if !free_state {
            std::mem::forget(std::mem::take(&mut self.core.write().state));
        }
        let core = Arc::clone(&self.core);
        drop(self);
        match Arc::try_unwrap(core) {
            Ok(core) => core.log.close()?,
            // Unreachable (the thread was joined), but never skip the sync.
            Err(core) => core.log.sync()?,
        }
        Ok(CloseReport { snapshot_error })
    }
}

/// What a clean [`Store::close`] could not do without failing the close.
#[derive(Debug, Default)]
pub struct CloseReport {
    /// The close-time snapshot (or its export) failed; already logged as a
    /// warning. The log holds everything committed.
    pub snapshot_error: Option<StoreError>,
}

impl Drop for Store {
    /// Stops the snapshot thread without a snapshot (not a clean close).
    fn drop(&mut self) {
        checkpoint::stop(&self.core, self.snapshotter.take());
    }
}

/// A cap persisted in the store's `config.json` overrides
/// [`StoreOptions::max_messages`]: the log must fold with the cap it was
/// written with.
fn apply_config(dir: &Path, opts: &mut StoreOptions) -> StoreResult<()> {
    if let Some(n) = config::stored_max_messages(dir)? {
        opts.max_messages = n;
    }
    Ok(())
}

/// A fold or scan of `view` that stopped, as the log's error: an event that
/// does not decode is damage named by its segment file, byte offset and LSN
/// (the one mapping, [`ScanError::into_log_error`]).
fn scan_err(view: &LogView, e: ScanError) -> StoreError {
    StoreError::Log(e.into_log_error(view))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Store>();
    }
}
