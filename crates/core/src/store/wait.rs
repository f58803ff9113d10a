//! Waiting for mail without a daemon: [`ReadOnlyStore::wait_for_unread`]
//! follows the log's tail from the registry the read-only store folded.
//!
//! It folds only the records appended after that: it polls the newest
//! segment's mapped bytes ([`crate::log::LogReader::tail_moved`], no system
//! call), refreshes the reader only when they moved (or once a second, to
//! notice a compaction), and sleeps 1 ms doubling to 8 ms between idle polls.
//! It never rereads the whole registry in a loop. Takes no writer lock.

use super::read_only::ReadOnlyStore;
use super::{scan_err, StoreError};
use crate::log::Lsn;
use crate::registry::history::{self, Until};
use crate::registry::State;
use crate::time::Timestamp;
use std::time::{Duration, Instant};

/// Shortest and longest sleep between two idle polls of the tail.
const POLL_MIN: Duration = Duration::from_millis(1);
const POLL_MAX: Duration = Duration::from_millis(8);
/// A full reader refresh at least this often, even if the tail looks still
/// (a compaction switches generations without writing the newest segment).
const REFRESH_EVERY: Duration = Duration::from_secs(1);

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// The agent has unread mail; the state folded up to this LSN shows it.
    Mail {
        lsn: Lsn,
    },
    TimedOut,
}

/// The registry folded so far and the reader that follows the log.
struct Follower {
    store: ReadOnlyStore,
    state: State,
    applied: Lsn,
}

impl Follower {
    /// Refreshes the reader and folds what was appended; true if anything was.
    fn catch_up(&mut self) -> Result<bool, StoreError> {
        self.store.refresh()?;
        let before = self.applied;
        let view = self.store.view();
        self.applied = history::fold_view(&view, &mut self.state, self.applied, Until::End)
            .map_err(|e| scan_err(&view, e))?;
        Ok(self.applied != before)
    }

    fn has_mail(
        &self,
        agent: &str,
        project_root: Option<&str>,
        now: Option<Timestamp>,
    ) -> Result<bool, StoreError> {
        let now = now.unwrap_or_else(Timestamp::now);
        Ok(!self.state.unread(agent, project_root, now)?.is_empty())
    }
}

impl ReadOnlyStore {
    /// Blocks until `agent` has unread mail (as of `now`, default the clock
    /// at each check) or `timeout` passes, following this store's log.
    /// `waiting` is called once, when the first check found nothing and the
    /// wait really begins. An unknown agent is an error at once; one removed
    /// during the wait ends it with that error.
    pub fn wait_for_unread(
        self,
        agent: &str,
        project_root: Option<&str>,
        now: Option<Timestamp>,
        timeout: Duration,
        mut waiting: impl FnMut(),
    ) -> Result<Waited, StoreError> {
        let deadline = Instant::now() + timeout;
        let read = self.state()?;
        let mut f = Follower {
            store: self,
            state: read.state,
            applied: read.lsn,
        };
        if f.has_mail(agent, project_root, now)? {
            return Ok(Waited::Mail { lsn: f.applied });
        }
        waiting();
        let mut pause = POLL_MIN;
        let mut refreshed = Instant::now();
        loop {
            let moved = f.store.log().tail_moved();
            if moved || refreshed.elapsed() >= REFRESH_EVERY {
                refreshed = Instant::now();
                if f.catch_up()? {
                    pause = POLL_MIN;
                    if f.has_mail(agent, project_root, now)? {
                        return Ok(Waited::Mail { lsn: f.applied });
                    }
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // Expiry is judged by time too: a last check at the deadline.
                return Ok(if f.has_mail(agent, project_root, now)? {
                    Waited::Mail { lsn: f.applied }
                } else {
                    Waited::TimedOut
                });
            }
            std::thread::sleep(pause.min(left));
            pause = (pause * 2).min(POLL_MAX);
        }
    }
}
