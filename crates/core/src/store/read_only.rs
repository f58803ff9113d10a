//! [`ReadOnlyStore`]: a store opened for reading from another process,
//! beside a live writer or after a crash, without the writer lock and
//! without changing any file (like redb's `ReadOnlyDatabase`).
//!
//! It applies the writer's own rules, each written once: the log is judged
//! by the writer's recovery classifier (`LogReader`: damage is refused, a
//! torn tail of the newest segment is shown up to its start and reported),
//! and the snapshot to resume from is chosen by the one trust rule
//! (`checkpoint::trusted_snapshot`). Reading costs one snapshot load and one
//! pass over the log after it.

use super::checkpoint::{trusted_snapshot, TrustRule};
use super::{SkippedSnapshot, StoreOptions};
use crate::layout::StoreLayout;
use crate::log::{LogReader, LogView, Lsn, TornTail};
use crate::registry::history::{self, Until};
use crate::registry::State;
use std::path::Path;

/// A store opened read-only.
#[derive(Debug)]
pub struct ReadOnlyStore {
    layout: StoreLayout,
    log: LogReader,
    max_messages: usize,
}

/// The registry as a read-only store sees it.
#[derive(Debug, Clone)]
pub struct ReadState {
    pub state: State,
    /// The last LSN folded (0: none).
    pub lsn: Lsn,
    /// The snapshot resumed from, if one was trusted.
    pub snapshot_lsn: Option<Lsn>,
    /// Snapshot files not trusted, and why.
    pub skipped_snapshots: Vec<SkippedSnapshot>,
}

impl ReadOnlyStore {
    /// Opens the store in `dir` for reading; refuses a damaged log, naming
    /// the segment, offset and expected LSN.
    pub fn open(dir: &Path, opts: &StoreOptions) -> crate::log::Result<ReadOnlyStore> {
        let layout = StoreLayout::new(dir);
        let log = LogReader::open_with(&layout.log(), opts.log.quick_open)?;
        Ok(ReadOnlyStore {
            layout,
            log,
            max_messages: opts.max_messages,
        })
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        self.layout.root()
    }

    /// The log as read.
    pub fn log(&self) -> &LogReader {
        &self.log
    }

    /// The records read (whole batches only).
    pub fn view(&self) -> LogView {
        self.log.view()
    }

    /// The newest segment's torn tail, if the log ends in one.
    pub fn torn_tail(&self) -> Option<&TornTail> {
        self.log.torn_tail()
    }

    /// See what was appended since (follows rotations and compactions).
    pub fn refresh(&mut self) -> crate::log::Result<()> {
        self.log.refresh()
    }

    /// The current registry: the newest trusted snapshot at or below the
    /// log's last LSN, plus the records after it.
    /// An event that does not decode is refused as damage, naming its
    /// segment, offset and LSN.
    pub fn state(&self) -> crate::log::Result<ReadState> {
        self.state_with(&mut |_| {})
    }

    /// [`ReadOnlyStore::state`], reporting the fold's progress: the LSN it
    /// starts after, then the LSN reached now and then.
    pub fn state_with(&self, progress: &mut dyn FnMut(Lsn)) -> crate::log::Result<ReadState> {
        let rule = TrustRule {
            last_lsn: self.log.last_lsn().unwrap_or(0),
            generation: self.log.generation(),
            max_messages: self.max_messages,
        };
        let (base, skipped_snapshots) = trusted_snapshot(&self.layout.snapshots(), &rule, false);
        let snapshot_lsn = base.as_ref().map(|b| b.lsn);
        let (mut state, after) = match base {
            Some(b) => (b.state, b.lsn),
            None => (State::new(self.max_messages), 0),
        };
        let view = self.log.view();
        let folded = history::fold(&view, &mut state, after, Until::End, progress)
            .map_err(|e| e.into_log_error(&view))?;
        Ok(ReadState {
            state,
            lsn: folded.last,
            snapshot_lsn,
            skipped_snapshots,
        })
    }
}
