//! Retention (docs/behaviour.md §4) as a pure function of (state, now, policy), and the
//! event-level rule the compactor uses to keep or drop records.
//!
//! Retired: a finished agent whose `last_active` is older than the presence
//! TTL (default 24 h), or that is not among the `keep_finished` (default 32)
//! most recently active finished agents (ties broken by name); removed agents
//! are already gone from the state. Gone: messages expired at `now` (capped
//! ones were dropped by the fold), sessions timed out at `now`.
//!
//! [`Kept::keeps`] says whether a record survives compaction: agent events
//! of kept agents (a heartbeat batch: while one of its agents is kept), a post whose message is kept, a read receipt whose reader
//! and at least one message are kept, session events of kept sessions. Read
//! receipts of agents that are not kept are stripped from messages by
//! [`State::retain`], so the fold of the compacted log equals the retained
//! state (the `anomalies` counter aside: events dropped by compaction can no
//! longer count as anomalies). `MessagesDropped` records name messages that
//! are gone, so they are never kept, and [`State::retain`] clears the drop
//! tally with them: `stats` counts cap drops since the last compaction.
//! A stream's compaction marker (`StreamCompacted`) is kept; `Purged`
//! fillers never are.

use super::events::{Event, EventKind, Lsn, SessionKey};
use super::state::State;
use crate::time::Timestamp;
use std::collections::{BTreeSet, HashSet};

pub const DEFAULT_PRESENCE_TTL_MS: i64 = 24 * 3600 * 1000;
pub const DEFAULT_KEEP_FINISHED: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    pub presence_ttl_ms: i64,
    pub keep_finished: usize,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            presence_ttl_ms: DEFAULT_PRESENCE_TTL_MS,
            keep_finished: DEFAULT_KEEP_FINISHED,
        }
    }
}

/// What retention removes from a state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retention {
    pub retired_agents: BTreeSet<String>,
    pub expired_messages: BTreeSet<Lsn>,
    pub timed_out_sessions: BTreeSet<SessionKey>,
}

impl Retention {
    pub fn is_empty(&self) -> bool {
        self.retired_agents.is_empty()
            && self.expired_messages.is_empty()
            && self.timed_out_sessions.is_empty()
    }
}

/// Computes what retention removes at `now`.
pub fn retention(state: &State, now: Timestamp, policy: &RetentionPolicy) -> Retention {
    let cutoff = now.add_millis(-policy.presence_ttl_ms);
    let mut recent: Vec<(&str, Timestamp)> = Vec::new();
    let mut retired = BTreeSet::new();
    for a in state.agents() {
        if !a.is_finished() {
            continue;
        }
        if a.last_active < cutoff {
            retired.insert(a.name.clone());
        } else {
            recent.push((&a.name, a.last_active));
        }
    }
    recent.sort_unstable_by(|l, r| r.1.cmp(&l.1).then_with(|| l.0.cmp(r.0)));
    for (name, _) in recent.into_iter().skip(policy.keep_finished) {
        retired.insert(name.to_string());
    }
    Retention {
        retired_agents: retired,
        expired_messages: state
            .messages()
            .iter()
            .filter(|m| m.is_expired(now))
            .map(|m| m.id)
            .collect(),
        timed_out_sessions: state
            .sessions()
            .iter()
            .filter(|(_, s)| s.is_timed_out(now))
            .map(|(k, _)| k.clone())
            .collect(),
    }
}

impl State {
    /// Applies [`retention`] at `now`; returns what it removed.
    pub fn retain(&mut self, now: Timestamp, policy: &RetentionPolicy) -> Retention {
        let r = retention(self, now, policy);
        self.remove_retired(
            |name| r.retired_agents.contains(name),
            |id| r.expired_messages.contains(&id),
            |key| r.timed_out_sessions.contains(key),
        );
        r
    }

    /// Removes what retention (or a [`EventKind::StreamCompacted`] marker)
    /// names: agents, messages and sessions; strips read receipts of agents
    /// no longer there and restarts the cap-drop tally. Names that are not
    /// in the state are ignored.
    pub(crate) fn remove_retired(
        &mut self,
        agent: impl Fn(&str) -> bool,
        message: impl Fn(Lsn) -> bool,
        session: impl Fn(&SessionKey) -> bool,
    ) {
        if self.agents.iter().any(|a| agent(&a.name)) {
            self.agents.retain(|a| !agent(&a.name));
        }
        let agents = &self.agents;
        self.runtime.retain(|name| agents.contains(name));
        self.drop_messages_where(|m| message(m.id));
        let agents = &self.agents;
        for m in &mut self.messages {
            m.read_by.retain(|reader| agents.contains(reader));
        }
        self.sessions.retain(|k, _| !session(k));
        // Drop events name messages that are gone, so compaction drops them
        // too: the tally restarts with the compacted generation.
        self.drops.clear();
    }

    /// What survives of this (already retained) state, for [`Kept::keeps`].
    pub fn kept(&self) -> Kept {
        Kept {
            agents: self.agents.iter().map(|a| a.name.clone()).collect(),
            messages: self.messages.iter().map(|m| m.id).collect(),
            sessions: self.sessions.keys().cloned().collect(),
        }
    }
}

/// The agents, messages and sessions a retained state holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kept {
    pub agents: HashSet<String>,
    pub messages: HashSet<Lsn>,
    pub sessions: HashSet<SessionKey>,
}

impl Kept {
    /// Whether the record at `lsn` survives compaction.
    pub fn keeps(&self, lsn: Lsn, event: &Event) -> bool {
        match &event.kind {
            EventKind::MessagePosted(_) => self.messages.contains(&lsn),
            EventKind::MessagesRead { reader, ids } => {
                self.agents.contains(reader) && ids.iter().any(|id| self.messages.contains(id))
            }
            EventKind::SessionOpened { key, .. }
            | EventKind::SessionHeartbeat { key, .. }
            | EventKind::SessionClosed { key } => self.sessions.contains(key),
            // A replica keeps the stream's markers, as the stream does
            // (docs/scaling.md §6); folding one again removes nothing.
            EventKind::StreamCompacted { .. } => true,
            // One record: kept while it beats for a kept agent (its beats
            // for retired ones fold as heartbeats of a missing agent).
            EventKind::HeartbeatBatch { beats } => {
                beats.iter().any(|b| self.agents.contains(&b.agent))
            }
            kind => kind
                .subject_agent()
                .is_some_and(|a| self.agents.contains(a)),
        }
    }
}
