//! Read-only agent questions without a daemon: wait for mail by following
//! the log's tail, describe one agent, and transport presence.
//!
//! Each starts from [`super::current`] (the newest trusted snapshot plus the
//! log after it) and takes no writer lock. [`wait_for_unread`] then folds
//! only the records appended after that: it polls the newest segment's
//! mapped bytes ([`LogReader::tail_moved`], no system call), refreshes the
//! reader only when they moved (or once a second, to notice a compaction),
//! and sleeps 1 ms doubling to 8 ms between idle polls. It never rereads the
//! registry in a loop, unlike the seed's mtime polling of `registry.json`.

use super::{current, read_only, Result};
use crate::registry::history::{self, Until};
use crate::registry::queries::{presence, AgentSummary, Presence};
use crate::registry::sweep::is_transport_attached;
use crate::registry::{Lsn, ProcessProbe, RegistryError, State};
use crate::store::ReadOnlyStore;
use crate::time::Timestamp;
use std::path::Path;
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
    fn open(dir: &Path) -> Result<Follower> {
        // As `current` does, keeping the store to follow the tail with.
        let store = read_only(dir)?;
        let read = store.state()?;
        Ok(Follower {
            store,
            state: read.state,
            applied: read.lsn,
        })
    }

    /// Refreshes the reader and folds what was appended; true if anything was.
    fn catch_up(&mut self) -> Result<bool> {
        self.store.refresh()?;
        let before = self.applied;
        self.applied = history::fold_view(
            &self.store.view(),
            &mut self.state,
            self.applied,
            Until::End,
        )?;
        Ok(self.applied != before)
    }

    fn has_mail(
        &self,
        agent: &str,
        project_root: Option<&str>,
        now: Option<Timestamp>,
    ) -> Result<bool> {
        let now = now.unwrap_or_else(Timestamp::now);
        Ok(!self.state.unread(agent, project_root, now)?.is_empty())
    }
}

/// Blocks until `agent` has unread mail (as of `now`, default the clock at
/// each check) or `timeout` passes. `waiting` is called once, when the first
/// check found nothing and the wait really begins. An unknown agent is an
/// error at once; one removed during the wait ends it with that error.
pub fn wait_for_unread(
    dir: &Path,
    agent: &str,
    project_root: Option<&str>,
    now: Option<Timestamp>,
    timeout: Duration,
    mut waiting: impl FnMut(),
) -> Result<Waited> {
    let deadline = Instant::now() + timeout;
    let mut f = Follower::open(dir)?;
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

/// One agent's row, life, unread (at `now`) and sent counts and the LSN of
/// its last event, from the snapshot and the tail only; `NotFound` for an
/// unknown name.
pub fn show(dir: &Path, name: &str, now: Timestamp) -> Result<AgentSummary> {
    let (state, _) = current(dir, &mut ())?;
    Ok(state.summary(name, now)?)
}

/// Whether `name`'s transport is live (see `registry::queries::presence`).
pub fn agent_presence(dir: &Path, name: &str, probe: &dyn ProcessProbe) -> Result<Presence> {
    let (state, _) = current(dir, &mut ())?;
    let a = state.agent(name).ok_or_else(|| RegistryError::NotFound {
        agent: name.to_string(),
    })?;
    Ok(presence(a, probe))
}

/// The presence of every transport-attached agent (a transport client
/// recorded, an interactive host, an MCP channel or type: the agents a
/// lapsed lease makes `idle`), in registration order.
pub fn transport_presence(dir: &Path, probe: &dyn ProcessProbe) -> Result<Vec<(String, Presence)>> {
    let (state, _) = current(dir, &mut ())?;
    Ok(state
        .agents()
        .iter()
        .filter(|a| is_transport_attached(a))
        .map(|a| (a.name.clone(), presence(a, probe)))
        .collect())
}
