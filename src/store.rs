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

use crate::log::{Durability, Log, LogOptions, LogView, RecoveryReport};
use crate::model::{Agent, Status};
use crate::registry::codec::{self, DecodeError};
use crate::registry::history::{self, ScanError, Until};
use crate::registry::{
    Event, EventKind, FieldUpdates, Lsn, Message, PostMessage, PostOutcome, ProcessProbe,
    Registration, RegistrationKind, RegistryError, SessionKey, SessionOp, State, SweepPolicy,
};
use crate::time::Timestamp;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The command was refused; nothing was appended.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Log(#[from] crate::Error),
    /// A record that does not decode (e.g. written by a newer agentlog).
    #[error("log {dir}: event at lsn {lsn}: {source}")]
    Decode {
        dir: PathBuf,
        lsn: Lsn,
        #[source]
        source: DecodeError,
    },
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
    /// semantics: reopen a log with the value it was written with.
    pub max_messages: usize,
    /// Lease used by [`Store::sweep`].
    pub sweep: SweepPolicy,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            log: LogOptions::default(),
            heartbeat_durability: Durability::Lazy,
            command_durability: Durability::Durable,
            max_messages: crate::registry::state::DEFAULT_MAX_MESSAGES,
            sweep: SweepPolicy::default(),
        }
    }
}

/// A point of the log for [`Store::state_at`].
pub type At = Until;

struct Inner {
    state: State,
    /// Last LSN folded into `state`.
    applied: Lsn,
    /// Reused encode buffer (no allocation per heartbeat).
    buf: Vec<u8>,
}

/// The event-sourced registry. See the module docs.
pub struct Store {
    dir: PathBuf,
    log: Log,
    inner: RwLock<Inner>,
    opts: StoreOptions,
    recovery: RecoveryReport,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("dir", &self.dir).finish()
    }
}

fn now_or(at: Option<Timestamp>) -> Timestamp {
    at.unwrap_or_else(Timestamp::now)
}

impl Store {
    /// Opens (or creates) the store in `dir` and folds its whole log.
    pub fn open(dir: &Path, opts: StoreOptions) -> StoreResult<Store> {
        Self::open_from(dir, opts, None)
    }

    /// Opens the store resuming the fold from `base` = (state at LSN, LSN),
    /// e.g. a snapshot; only records after that LSN are folded.
    pub fn open_from(
        dir: &Path,
        opts: StoreOptions,
        base: Option<(State, Lsn)>,
    ) -> StoreResult<Store> {
        let (log, recovery) = Log::open(&dir.join("log"), opts.log.clone())?;
        let (mut state, after) = base.unwrap_or_else(|| (State::new(opts.max_messages), 0));
        let applied = history::fold_view(&log.view(), &mut state, after, Until::End)
            .map_err(|e| scan_err(dir, e))?;
        Ok(Store {
            dir: dir.to_path_buf(),
            log,
            inner: RwLock::new(Inner {
                state,
                applied,
                buf: Vec::with_capacity(256),
            }),
            opts,
            recovery,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn options(&self) -> &StoreOptions {
        &self.opts
    }
    /// What log recovery found on open.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }
    /// The underlying log (for export, snapshot and compaction hooks; append
    /// only through the store, or the state will not see the records).
    pub fn log(&self) -> &Log {
        &self.log
    }

    fn read(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }
    fn write(&self) -> RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
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
        let lsns: Vec<Lsn> = match events {
            [] => Vec::new(),
            [e] => {
                codec::encode_into(e, &mut g.buf);
                vec![self.log.append(&g.buf, Durability::Lazy)?]
            }
            many => {
                let payloads: Vec<Vec<u8>> = many.iter().map(codec::encode).collect();
                let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
                self.log.append_batch(&refs, Durability::Lazy)?.collect()
            }
        };
        for (lsn, e) in lsns.iter().zip(events) {
            g.state.apply(*lsn, e);
            g.applied = *lsn;
        }
        Ok(lsns)
    }

    fn finish(&self, last: Option<Lsn>, d: Durability) -> StoreResult<()> {
        if let (Some(lsn), Durability::Durable) = (last, d) {
            self.log.wait_durable(lsn)?;
        }
        Ok(())
    }

    /// Validates with `check`, then appends and applies the event(s) it
    /// returns; waits for durability per the command setting.
    fn command(
        &self,
        check: impl FnOnce(&State) -> Result<Vec<Event>, RegistryError>,
    ) -> StoreResult<Vec<Lsn>> {
        let lsns = {
            let mut g = self.write();
            let events = check(&g.state)?;
            self.append_apply(&mut g, &events)?
        };
        self.finish(lsns.last().copied(), self.opts.command_durability)?;
        Ok(lsns)
    }

    fn one(&self, check: impl FnOnce(&State) -> Result<Event, RegistryError>) -> StoreResult<Lsn> {
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
            let e = s.check_register(reg, at)?;
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
        let lsn = {
            let mut g = self.write();
            let slot = g.state.check_heartbeat(agent, pid)?;
            let g = &mut *g;
            codec::encode_heartbeat_into(&mut g.buf, at, agent, pid);
            let lsn = self.log.append(&g.buf, Durability::Lazy)?;
            g.state.apply_heartbeat_at(slot, at, pid);
            g.applied = lsn;
            lsn
        };
        self.finish(Some(lsn), self.opts.heartbeat_durability)?;
        Ok(lsn)
    }

    pub fn set_status(
        &self,
        agent: &str,
        status: Status,
        message: Option<String>,
        at: Option<Timestamp>,
    ) -> StoreResult<Lsn> {
        let at = now_or(at);
        self.one(|s| s.check_set_status(agent, status, message, at))
    }

    pub fn update_fields(
        &self,
        agent: &str,
        fields: FieldUpdates,
        at: Option<Timestamp>,
    ) -> StoreResult<Lsn> {
        let at = now_or(at);
        self.one(|s| s.check_update(agent, fields, at))
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
            crate::registry::error::check_text(
                "agent name",
                &agent.name,
                crate::registry::commands::NAME_MAX,
            )?;
            Ok(Event {
                at,
                kind: EventKind::AgentImported(Box::new(agent)),
            })
        })
    }

    /// Posts a message; returns its id (the LSN of the post, or the first
    /// post's id for an idempotent retry, which appends nothing).
    pub fn post_message(&self, post: PostMessage, at: Option<Timestamp>) -> StoreResult<Lsn> {
        let at = now_or(at);
        let mut existing = None;
        let lsns = self.command(|s| match s.check_post(post, at)? {
            PostOutcome::Append(e) => Ok(vec![e]),
            PostOutcome::Existing(id) => {
                existing = Some(id);
                Ok(Vec::new())
            }
        })?;
        Ok(existing.unwrap_or_else(|| lsns[0]))
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
        let lsns =
            self.command(|s| Ok(s.check_session(op, key, ttl_ms, at)?.into_iter().collect()))?;
        Ok(lsns.first().copied())
    }

    /// Sweeps at `now` (default: the clock): lease expiry and process
    /// identity. The changes are appended as one batch; returns them.
    pub fn sweep(
        &self,
        now: Option<Timestamp>,
        probe: &dyn ProcessProbe,
    ) -> StoreResult<Vec<(Lsn, Event)>> {
        let now = now_or(now);
        let mut changes = Vec::new();
        let lsns = self.command(|s| {
            changes = crate::registry::sweep(s, now, &self.opts.sweep, probe);
            Ok(changes.clone())
        })?;
        Ok(lsns.into_iter().zip(changes).collect())
    }

    /// Every event concerning `agent` in log order (see `registry::history`).
    pub fn history(&self, agent: &str) -> StoreResult<Vec<(Lsn, Event)>> {
        history::scan_history(&self.view(), agent).map_err(|e| scan_err(&self.dir, e))
    }

    /// The state after folding the log up to `at`.
    pub fn state_at(&self, at: At) -> StoreResult<State> {
        let mut state = State::new(self.opts.max_messages);
        history::fold_view(&self.view(), &mut state, 0, at).map_err(|e| scan_err(&self.dir, e))?;
        Ok(state)
    }

    /// A view of the records applied so far (a consistent prefix).
    pub fn view(&self) -> LogView {
        self.log.view()
    }

    /// Makes everything appended so far durable.
    pub fn sync(&self) -> StoreResult<()> {
        Ok(self.log.sync()?)
    }

    /// Syncs and closes the log (releasing its lock).
    pub fn close(self) -> StoreResult<()> {
        Ok(self.log.close()?)
    }
}

// ---- Compaction (issue 5; owned by src/compact.rs, kept separate here) ----

impl Store {
    /// Compacts the log online at `now` (see `crate::compact`): under the
    /// lock, seal the active segment and clone the state at the last LSN L;
    /// plan and rewrite the sealed records <= L while commands go on; then,
    /// under the lock again, replace the state by the retained state with
    /// the records appended meanwhile folded on, so state == fold(log).
    pub fn compact(
        &self,
        now: Timestamp,
        opts: &crate::compact::CompactOptions,
    ) -> StoreResult<crate::compact::CompactionReport> {
        let (state, upto) = {
            let g = self.write();
            if !opts.dry_run {
                self.log.seal_active()?;
            }
            (g.state.clone(), g.applied)
        };
        let c = crate::compact::compact(&self.log, &state, upto, now, opts)?;
        if c.report.generation != c.report.generation_before {
            let mut g = self.write();
            let mut s = c.retained;
            crate::compact::catch_up(&mut s, &self.log.view(), self.log.dir(), upto)?;
            g.state = s;
        }
        Ok(c.report)
    }

    /// The auto-compaction hook: call it periodically (e.g. after each
    /// sealed segment or every few seconds). It counts the records appended
    /// since the last call (off the append path), and compacts when `auto`'s
    /// policy says the droppable share is high enough or the schedule is due.
    pub fn maybe_compact(
        &self,
        auto: &mut crate::compact::AutoCompactor,
        now: Timestamp,
    ) -> StoreResult<Option<crate::compact::CompactionReport>> {
        auto.observe(&self.log.view(), self.log.dir())?;
        if !self.with_state(|s, _| auto.due(s, now)) {
            return Ok(None);
        }
        let report = self.compact(now, &auto.options())?;
        auto.compacted(&self.log.view(), self.log.dir(), now)?;
        Ok(Some(report))
    }
}

fn scan_err(dir: &Path, e: ScanError) -> StoreError {
    match e {
        ScanError::Decode { lsn, source } => StoreError::Decode {
            dir: dir.to_path_buf(),
            lsn,
            source,
        },
        ScanError::Log(e) => StoreError::Log(e),
    }
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
