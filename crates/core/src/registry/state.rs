//! [`State`]: the registry the fold maintains, and [`State::apply`].
//!
//! `apply` is pure and deterministic: it reads only the event and its LSN,
//! never a clock, and it never fails. An event that cannot take effect (it
//! names a missing agent, heartbeats a finished agent, …) is counted in
//! [`State::anomalies`] and otherwise ignored. A heartbeat costs one hash
//! lookup and no allocation. Messages are kept in id (= LSN) order, at most
//! `max_messages` of them; expiry is judged by event times only (a post drops
//! messages whose expiry is at or before the post's time). Sessions silent
//! past their TTL are dropped whenever a session event is applied.
//!
//! Cap drops: a post that would overflow the cap is preceded in its batch by
//! a `MessagesDropped` event naming the oldest live messages that make room,
//! so the post itself then fits. Logs written before that event existed rely
//! on the implicit cap in `apply_post`, which drops the same messages; both
//! paths count every cap drop in [`State::drops`] by (recipient, sender).

use super::agents::AgentMap;
use super::codec::{self, DecodeError};
use super::events::{
    DropReason, DroppedMessage, Event, EventKind, ExternalChange, Lsn, PostedMessage, Registration,
    RegistrationKind, SessionKey,
};
use super::runtime::{AgentRuntime, RuntimeMap};
use crate::model::{Agent, Status, StatusCause};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// Default cap on live messages.
pub const DEFAULT_MAX_MESSAGES: usize = 200;

/// A live message: the post as logged (`m.posted.from`, `m.posted.body`),
/// with its id (the LSN of its `MessagePosted` record), time and readers.
///
/// Snapshots hold it as bincode, which writes a nested struct's fields in
/// line: the bytes are those of the flat field list (snapshot format 3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub id: Lsn,
    pub posted_at: Timestamp,
    pub posted: PostedMessage,
    /// Readers other than the sender (who counts as having read it), in
    /// reading order.
    pub read_by: Vec<String>,
}

impl Message {
    pub fn is_read_by(&self, agent: &str) -> bool {
        self.posted.from == agent || self.read_by.iter().any(|r| r == agent)
    }
    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.posted.expires_at <= now
    }
}

/// A logical session's presence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub opened_at: Timestamp,
    pub last_heartbeat: Timestamp,
    pub ttl_ms: i64,
}

impl Session {
    /// Silent for longer than its TTL at `now`.
    pub fn is_timed_out(&self, now: Timestamp) -> bool {
        now.millis_since(self.last_heartbeat) > self.ttl_ms
    }
}

/// Idempotency key of a post: (sender, project root, request id).
pub type RequestKey = (String, Option<String>, String);

/// Space a fold reuses from record to record
/// ([`State::apply_payload_with`]): a heartbeat batch's beats, decoded once
/// and checked whole before any is applied. It grows to the largest batch
/// and then allocates no more.
#[derive(Debug, Default)]
pub struct FoldScratch {
    beats: Vec<ResolvedBeat>,
}

/// One decoded beat of a batch: its agent's position (`None`: no such
/// agent, an anomaly), time and pid.
#[derive(Debug, Clone, Copy)]
struct ResolvedBeat {
    slot: Option<usize>,
    at: Timestamp,
    pid: Option<u32>,
}

/// The registry: agents, messages, request ids and logical sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub(crate) agents: AgentMap,
    pub(crate) messages: VecDeque<Message>,
    pub(crate) requests: BTreeMap<RequestKey, Lsn>,
    pub(crate) sessions: BTreeMap<SessionKey, Session>,
    pub(crate) max_messages: usize,
    pub(crate) anomalies: u64,
    /// Messages the cap dropped: recipient (`None` = broadcast) → sender →
    /// count. Cumulative since the log's start (compaction keeps the drop
    /// events of live agents' messages; see `retention.rs`).
    pub(crate) drops: BTreeMap<Option<String>, BTreeMap<String, u64>>,
    /// Registry-only runtime facts (endpoints, leases, outages) by agent.
    /// Last field: snapshot format 4 appended it to format 3's payload.
    pub(crate) runtime: RuntimeMap,
}

impl Default for State {
    fn default() -> Self {
        State::new(DEFAULT_MAX_MESSAGES)
    }
}

impl State {
    /// An empty registry keeping at most `max_messages` (at least 1) messages.
    pub fn new(max_messages: usize) -> Self {
        State {
            agents: AgentMap::new(),
            messages: VecDeque::new(),
            requests: BTreeMap::new(),
            sessions: BTreeMap::new(),
            max_messages: max_messages.max(1),
            anomalies: 0,
            drops: BTreeMap::new(),
            runtime: RuntimeMap::default(),
        }
    }

    pub fn agents(&self) -> &AgentMap {
        &self.agents
    }
    /// The runtime facts of `agent` (none recorded: `None`).
    pub fn runtime(&self, agent: &str) -> Option<&AgentRuntime> {
        self.runtime.get(agent)
    }
    /// Every agent's runtime facts, by name.
    pub fn runtimes(&self) -> &RuntimeMap {
        &self.runtime
    }
    pub fn agent(&self, name: &str) -> Option<&Agent> {
        self.agents.get(name)
    }
    /// Live messages, oldest first.
    pub fn messages(&self) -> &VecDeque<Message> {
        &self.messages
    }
    pub fn message(&self, id: Lsn) -> Option<&Message> {
        self.messages
            .binary_search_by_key(&id, |m| m.id)
            .ok()
            .map(|i| &self.messages[i])
    }
    pub fn sessions(&self) -> &BTreeMap<SessionKey, Session> {
        &self.sessions
    }
    /// Request-id index: (sender, project, request id) → message id.
    pub fn requests(&self) -> &BTreeMap<RequestKey, Lsn> {
        &self.requests
    }
    pub fn max_messages(&self) -> usize {
        self.max_messages
    }
    /// Events that could not take effect (they named a missing agent, …).
    pub fn anomalies(&self) -> u64 {
        self.anomalies
    }
    /// Cap drops by recipient (`None` = broadcast), then sender.
    pub fn drops(&self) -> &BTreeMap<Option<String>, BTreeMap<String, u64>> {
        &self.drops
    }
    /// Total messages the cap dropped.
    pub fn drops_total(&self) -> u64 {
        self.drops.values().flat_map(|by| by.values()).sum()
    }
    /// The cap drops `reader` learns of: those addressed to it and the
    /// broadcasts, by sender (its own messages excluded).
    pub fn drops_for(&self, reader: &str) -> BTreeMap<&str, u64> {
        let mut out = BTreeMap::new();
        for key in [Some(reader.to_string()), None] {
            for (from, n) in self.drops.get(&key).into_iter().flatten() {
                if from != reader {
                    *out.entry(from.as_str()).or_insert(0) += n;
                }
            }
        }
        out
    }

    /// The oldest live messages a post at `at` must evict to respect the cap
    /// (after expired ones, which the post drops anyway), as the event to
    /// append just before the post; `None` when the post fits.
    pub fn cap_drops(&self, at: Timestamp) -> Option<Event> {
        let live = self.messages.iter().filter(|m| !m.is_expired(at));
        let excess = (live.clone().count() + 1).saturating_sub(self.max_messages);
        (excess > 0).then(|| Event {
            at,
            kind: EventKind::MessagesDropped {
                dropped: live
                    .take(excess)
                    .map(|m| DroppedMessage {
                        id: m.id,
                        from: m.posted.from.clone(),
                        to: m.posted.to.clone(),
                    })
                    .collect(),
                reason: DropReason::Cap,
            },
        })
    }

    fn count_drop(&mut self, m: &Message) {
        *self
            .drops
            .entry(m.posted.to.clone())
            .or_default()
            .entry(m.posted.from.clone())
            .or_insert(0) += 1;
    }

    /// Folds one decoded event.
    pub fn apply(&mut self, lsn: Lsn, event: &Event) {
        let at = event.at;
        match &event.kind {
            EventKind::AgentRegistered { reg, kind, host } => {
                self.apply_registration(lsn, at, reg, *kind, host.as_deref())
            }
            EventKind::Heartbeat { agent, pid } => self.apply_heartbeat(lsn, at, agent, *pid),
            EventKind::StatusChanged {
                agent,
                status,
                message,
                cause,
            } => {
                let found = self.agents.update(agent, |a| {
                    a.last_event_lsn = lsn;
                    a.status = *status;
                    a.status_message.clone_from(message);
                    a.status_cause = *cause;
                    // Sweeps record why an agent went quiet; they are not activity.
                    if *cause == StatusCause::Command {
                        a.last_active = at;
                    }
                });
                if !found {
                    self.anomalies += 1;
                }
            }
            EventKind::FieldsUpdated { agent, fields } => {
                let found = self.agents.update(agent, |a| {
                    a.last_event_lsn = lsn;
                    fields.apply_to(a);
                });
                if !found {
                    self.anomalies += 1;
                }
            }
            EventKind::AgentRemoved { agent } => {
                self.runtime.forget(agent);
                if self.agents.remove(agent).is_none() {
                    self.anomalies += 1;
                }
            }
            EventKind::Runtime(r) => {
                // Only a registered agent has runtime facts; they are part
                // of its entry, so they move its `last_event_lsn` (what
                // `watch` changes and `latest` report).
                let found = self.agents.update(r.agent(), |a| a.last_event_lsn = lsn);
                if !found || !self.runtime.apply(at, r) {
                    self.anomalies += 1;
                }
            }
            EventKind::MessagePosted(m) => self.apply_post(lsn, at, m),
            EventKind::MessagesRead { reader, ids } => {
                // A receipt for a message already dropped is harmless.
                for &id in ids {
                    if let Ok(i) = self.messages.binary_search_by_key(&id, |m| m.id) {
                        let m = &mut self.messages[i];
                        if !m.is_read_by(reader) {
                            m.read_by.push(reader.clone());
                        }
                    }
                }
            }
            EventKind::SessionOpened { key, ttl_ms }
            | EventKind::SessionHeartbeat { key, ttl_ms } => {
                self.prune_sessions(at);
                match self.sessions.get_mut(key) {
                    Some(s) => {
                        s.last_heartbeat = at;
                        s.ttl_ms = *ttl_ms;
                    }
                    None => {
                        self.sessions.insert(
                            key.clone(),
                            Session {
                                opened_at: at,
                                last_heartbeat: at,
                                ttl_ms: *ttl_ms,
                            },
                        );
                    }
                }
            }
            EventKind::SessionClosed { key } => {
                self.prune_sessions(at);
                self.sessions.remove(key);
            }
            EventKind::AgentImported(a) => {
                // The logged row has no registry-only fields (see
                // `model::Agent`): clear them so the live fold equals a replay.
                let mut row = a.as_ref().clone();
                self.runtime.forget(&row.name);
                row.display_name = None;
                row.transport_client = None;
                row.last_event_lsn = lsn;
                self.agents.upsert(row);
            }
            EventKind::DisplayNameSet {
                agent,
                display_name,
            } => {
                let found = self.agents.update(agent, |a| {
                    a.last_event_lsn = lsn;
                    a.display_name.clone_from(display_name);
                });
                if !found {
                    self.anomalies += 1;
                }
            }
            EventKind::TransportClientSet { agent, client, .. } => {
                let found = self.agents.update(agent, |a| {
                    a.last_event_lsn = lsn;
                    a.transport_client.clone_from(client);
                });
                if !found {
                    self.anomalies += 1;
                }
            }
            EventKind::HeartbeatBatch { beats } => {
                for b in beats {
                    self.apply_heartbeat(lsn, b.at, &b.agent, b.pid);
                }
            }
            EventKind::MessagesDropped { dropped, .. } => {
                // Ids already gone (expired, compacted) are not counted twice.
                for d in dropped {
                    if let Ok(i) = self.messages.binary_search_by_key(&d.id, |m| m.id) {
                        if let Some(old) = self.messages.remove(i) {
                            self.unindex(&old);
                            self.count_drop(&old);
                        }
                    }
                }
            }
            EventKind::StreamCompacted {
                upto,
                agents,
                messages,
                sessions,
            } => {
                // A marker need not land right after `upto`, the sequence
                // its compaction was planned at (docs/scaling.md §6): what
                // was touched since stays. An agent is removed only if its
                // last event is at or before `upto`, a session only if it
                // is still timed out at the marker's time (the plan's
                // `now`); posts never change once stored. A marker right
                // after `upto` (every marker before this rule) removes all
                // it names, as it always did. Hashed: a marker may name
                // many of each.
                use std::collections::HashSet;
                let agents: HashSet<&str> = agents
                    .iter()
                    .map(String::as_str)
                    .filter(|a| {
                        self.agents
                            .get(a)
                            .is_some_and(|x| x.last_event_lsn <= *upto)
                    })
                    .collect();
                let messages: HashSet<Lsn> = messages.iter().copied().collect();
                let sessions: HashSet<&SessionKey> = sessions
                    .iter()
                    .filter(|k| self.sessions.get(*k).is_some_and(|s| s.is_timed_out(at)))
                    .collect();
                self.remove_retired(
                    |name| agents.contains(name),
                    |id| messages.contains(&id),
                    |key| sessions.contains(key),
                );
            }
            EventKind::Purged => {}
            EventKind::ExternalChange { agent, change, .. } => {
                self.apply_external(lsn, at, agent, change)
            }
            EventKind::WorkerStateChanged { agent, changes, .. } => {
                let found = self.agents.update(agent, |a| {
                    a.last_event_lsn = lsn;
                    crate::state_json::apply(a, changes);
                });
                if !found {
                    self.anomalies += 1;
                }
            }
        }
    }

    /// Folds one record payload ([`State::apply_payload_with`] with scratch
    /// space of its own: a loop keeps one [`FoldScratch`] instead).
    pub fn apply_payload(&mut self, lsn: Lsn, payload: &[u8]) -> Result<(), DecodeError> {
        self.apply_payload_with(lsn, payload, &mut FoldScratch::default())
    }

    /// Folds one record payload; heartbeats take an allocation-free path.
    /// The tag picks the one decoder that reads the payload (its header
    /// once). A heartbeat batch is decoded once into `scratch`, each beat's
    /// agent looked up as it decodes, and applied only when the whole batch
    /// decoded: a bad entry refuses the record with nothing applied.
    pub fn apply_payload_with(
        &mut self,
        lsn: Lsn,
        payload: &[u8],
        scratch: &mut FoldScratch,
    ) -> Result<(), DecodeError> {
        match codec::tag_of(payload) {
            Some(super::events::tag::HEARTBEAT) => {
                if let Some(hb) = codec::decode_heartbeat(payload)? {
                    self.apply_heartbeat(lsn, hb.at, hb.agent, hb.pid);
                    return Ok(());
                }
            }
            Some(super::events::tag::HEARTBEAT_BATCH)
                if self.resolve_batch(payload, scratch)? =>
            {
                self.apply_resolved_batch(lsn, scratch);
                return Ok(());
            }
            _ => {}
        }
        let event = codec::decode(payload)?;
        self.apply(lsn, &event);
        Ok(())
    }

    /// Decodes a heartbeat batch once into `scratch`, each beat's agent
    /// looked up as it decodes; `Ok(false)` if `payload` is another kind.
    /// Changes nothing: a bad entry refuses the record before any beat is
    /// applied ([`State::apply_resolved_batch`] applies it).
    pub fn resolve_batch(
        &self,
        payload: &[u8],
        scratch: &mut FoldScratch,
    ) -> Result<bool, DecodeError> {
        let (beats, agents) = (&mut scratch.beats, &self.agents);
        beats.clear();
        let batch = codec::for_each_batched(payload, |hb| {
            beats.push(ResolvedBeat {
                slot: agents.position(hb.agent),
                at: hb.at,
                pid: hb.pid,
            })
        })?;
        Ok(batch.is_some())
    }

    /// The batch [`State::resolve_batch`] left in `scratch`, recorded at
    /// `lsn`: each beat folded as a heartbeat at that LSN (so one for an
    /// agent that is gone, finished or has another pid counts as an
    /// anomaly, as a late heartbeat does). No agent may have been added or
    /// removed since it was resolved: the positions are the agents' then.
    pub fn apply_resolved_batch(&mut self, lsn: Lsn, scratch: &FoldScratch) {
        for b in &scratch.beats {
            match b.slot {
                Some(slot) => self.apply_heartbeat_at(slot, lsn, b.at, b.pid),
                None => self.anomalies += 1,
            }
        }
    }

    /// A heartbeat recorded at `lsn`: one lookup, no allocation.
    #[inline]
    pub fn apply_heartbeat(&mut self, lsn: Lsn, at: Timestamp, agent: &str, pid: Option<u32>) {
        match self.agents.position(agent) {
            Some(slot) => self.apply_heartbeat_at(slot, lsn, at, pid),
            None => self.anomalies += 1,
        }
    }

    /// A heartbeat of the agent at `slot` (its registration-order position,
    /// as returned by `check_heartbeat`): reads only the dense hot fields,
    /// writes only `last_active` and `last_event_lsn` (and the status on a
    /// revival).
    #[inline]
    pub fn apply_heartbeat_at(&mut self, slot: usize, lsn: Lsn, at: Timestamp, pid: Option<u32>) {
        let Some(h) = self.agents.hot(slot) else {
            self.anomalies += 1;
            return;
        };
        if let (Some(p), Some(r)) = (pid, h.pid) {
            if p != r {
                self.anomalies += 1;
                return;
            }
        }
        let lease_set = h.cause == StatusCause::LeaseExpired;
        if h.status.is_finished() && !lease_set {
            self.anomalies += 1;
            return;
        }
        if lease_set && (h.status == Status::Idle || h.status.is_finished()) {
            self.agents.update_at(slot, |a| {
                a.status = Status::Live;
                a.status_message = None;
                a.status_cause = StatusCause::Command;
            });
        }
        self.agents.touch(slot, at, lsn);
    }

    /// What a registration of `name` would be now.
    pub fn registration_kind(&self, name: &str) -> RegistrationKind {
        match self.agents.get(name) {
            None => RegistrationKind::New,
            Some(a) if a.is_finished() => RegistrationKind::NewLife,
            Some(_) => RegistrationKind::Renewal,
        }
    }

    fn apply_registration(
        &mut self,
        lsn: Lsn,
        at: Timestamp,
        reg: &Registration,
        logged: RegistrationKind,
        host: Option<&str>,
    ) {
        let kind = self.registration_kind(&reg.name);
        if kind != logged {
            self.anomalies += 1;
        }
        let mut row = match (kind, self.agents.get(&reg.name)) {
            (RegistrationKind::Renewal, Some(old)) => {
                let mut a = old.clone();
                a.registered_at = at;
                a
            }
            (RegistrationKind::NewLife, Some(old)) => {
                let mut a = Agent::new(&reg.name, &reg.provider, &reg.cwd, at);
                a.life = old.life.saturating_add(1);
                a
            }
            _ => Agent::new(&reg.name, &reg.provider, &reg.cwd, at),
        };
        row.set_registered_fields(reg);
        row.status = Status::Live;
        row.status_message = None;
        row.status_cause = StatusCause::Command;
        row.last_active = at;
        row.last_event_lsn = lsn;
        row.host = host.map(str::to_owned);
        self.agents.upsert(row);
    }

    /// Folds a change another writer made to a published file. A row it
    /// added or changed keeps agentlog's registry-only fields (display
    /// name, transport client, host) when agentlog holds the name.
    fn apply_external(&mut self, lsn: Lsn, at: Timestamp, agent: &str, change: &ExternalChange) {
        match change {
            ExternalChange::Registered(row) | ExternalChange::Updated { row, .. } => {
                let mut row = row.as_ref().clone();
                match self.agents.get(agent) {
                    Some(old) => {
                        row.display_name.clone_from(&old.display_name);
                        row.transport_client.clone_from(&old.transport_client);
                        row.host.clone_from(&old.host);
                    }
                    None => {
                        row.display_name = None;
                        row.transport_client = None;
                        row.host = None;
                    }
                }
                row.last_event_lsn = lsn;
                self.agents.upsert(row);
            }
            ExternalChange::Status { status } => {
                let found = self.agents.update(agent, |a| {
                    a.last_event_lsn = lsn;
                    a.status = *status;
                    a.status_message = None;
                    a.status_cause = StatusCause::Import;
                    a.last_active = at;
                });
                if !found {
                    self.anomalies += 1;
                }
            }
            ExternalChange::Removed => {
                if self.agents.remove(agent).is_none() {
                    self.anomalies += 1;
                }
            }
        }
    }

    fn apply_post(&mut self, lsn: Lsn, at: Timestamp, m: &PostedMessage) {
        if self.messages.back().is_some_and(|last| last.id >= lsn) {
            // Ids must grow with the log; a replay out of order is refused.
            self.anomalies += 1;
            return;
        }
        self.drop_messages_where(|old| old.is_expired(at));
        if let Some(rid) = &m.request_id {
            self.requests
                .insert((m.from.clone(), m.project_root.clone(), rid.clone()), lsn);
        }
        self.messages.push_back(Message {
            id: lsn,
            posted_at: at,
            posted: m.clone(),
            read_by: Vec::new(),
        });

        // Only logs from before `MessagesDropped` overflow here.
        while self.messages.len() > self.max_messages {
            if let Some(old) = self.messages.pop_front() {
                self.unindex(&old);
                self.count_drop(&old);
            }
        }
    }

    /// Drops messages matching `drop`, keeping the request index in step.
    pub(crate) fn drop_messages_where(&mut self, mut drop: impl FnMut(&Message) -> bool) {
        if !self.messages.iter().any(&mut drop) {
            return;
        }
        let mut kept = VecDeque::with_capacity(self.messages.len());
        for m in std::mem::take(&mut self.messages) {
            if drop(&m) {
                self.unindex(&m);
            } else {
                kept.push_back(m);
            }
        }
        self.messages = kept;
    }

    fn unindex(&mut self, m: &Message) {
        if let Some(rid) = &m.posted.request_id {
            let key = (
                m.posted.from.clone(),
                m.posted.project_root.clone(),
                rid.clone(),
            );
            if self.requests.get(&key) == Some(&m.id) {
                self.requests.remove(&key);
            }
        }
    }

    pub(crate) fn prune_sessions(&mut self, now: Timestamp) {
        self.sessions.retain(|_, s| !s.is_timed_out(now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Priority, Privacy};
    use crate::registry::codec::HeartbeatBatchBuilder;

    const T0: Timestamp = Timestamp(1_796_040_000_000);

    fn with_agents(names: &[&str]) -> State {
        let mut s = State::default();
        for (i, name) in names.iter().enumerate() {
            let mut r = Registration::new(name, "claude", "/w");
            r.pid = Some(100 + i as u32);
            let e = s.check_register(r, T0).unwrap();
            s.apply(i as Lsn + 1, &e);
        }
        s
    }

    /// A batch folds from one decode as its decoded event folds: beats of
    /// known agents touch them, an unknown agent or another pid is an
    /// anomaly; the scratch space carries nothing from one batch to the next.
    #[test]
    fn a_batch_folds_as_its_event_does() {
        let mut b = HeartbeatBatchBuilder::default();
        b.push(T0.add_secs(1), "a", Some(100), None);
        b.push(T0.add_secs(2), "ghost", None, None);
        b.push(T0.add_secs(3), "b", Some(7), None);
        b.push(T0.add_secs(4), "b", None, None);
        let first = b.take_payload();
        b.push(T0.add_secs(5), "a", None, None);
        let second = b.take_payload();
        let mut via_event = with_agents(&["a", "b"]);
        let mut via_bytes = via_event.clone();
        let mut scratch = FoldScratch::default();
        for (lsn, payload) in [(3, &first), (4, &second)] {
            via_event.apply(lsn, &codec::decode(payload).unwrap());
            via_bytes
                .apply_payload_with(lsn, payload, &mut scratch)
                .unwrap();
        }
        assert_eq!(via_bytes, via_event);
        assert_eq!(via_bytes.anomalies(), 2);
        assert_eq!(via_bytes.agent("a").unwrap().last_active, T0.add_secs(5));
        assert_eq!(via_bytes.agent("b").unwrap().last_active, T0.add_secs(4));
    }

    /// A batch whose last entry does not decode is refused with none of its
    /// earlier beats applied.
    #[test]
    fn a_bad_batch_applies_nothing() {
        let mut b = HeartbeatBatchBuilder::default();
        b.push(T0.add_secs(1), "a", None, None);
        b.push(T0.add_secs(2), "a", None, None);
        let mut payload = b.take_payload();
        // The last byte is the second entry's origin option tag.
        *payload.last_mut().unwrap() = 7;
        let mut s = with_agents(&["a"]);
        let before = s.clone();
        let e = s
            .apply_payload_with(2, &payload, &mut FoldScratch::default())
            .unwrap_err();
        assert!(e.to_string().contains("bad origin option tag"), "{e}");
        assert_eq!(s, before);
    }

    /// A message nests its post, and a snapshot (bincode) still holds the
    /// flat field list format 3 has always held.
    #[test]
    fn a_message_encodes_as_its_flat_field_list() {
        let m = Message {
            id: 7,
            posted_at: Timestamp(1_796_040_000_000),
            posted: PostedMessage {
                from: "a".into(),
                to: Some("b".into()),
                category: "status".into(),
                body: "done".into(),
                priority: Priority::High,
                privacy: Privacy::Private,
                project_root: Some("/w".into()),
                expires_at: Timestamp(1_796_040_600_000),
                request_id: Some("k".into()),
                digest: 0xfeed,
            },
            read_by: vec!["c".into()],
        };
        let flat = (
            7u64,
            Timestamp(1_796_040_000_000),
            "a",
            Some("b"),
            "status",
            "done",
            Priority::High,
            Privacy::Private,
            Some("/w"),
            Timestamp(1_796_040_600_000),
            Some("k"),
            0xfeedu64,
            vec!["c"],
        );
        fn bytes(v: &impl Serialize) -> Vec<u8> {
            bincode::serde::encode_to_vec(v, bincode::config::standard()).unwrap()
        }
        assert_eq!(bytes(&m), bytes(&flat));
    }
}
