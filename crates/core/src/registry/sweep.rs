//! Sweep: lease expiry and process identity, as status-change events.
//!
//! Pure: the process identity comes from a [`ProcessProbe`] the caller
//! passes in (the `/proc` probe, which does I/O and means something only on
//! the agent's own host, is `crate::probe::ProcProbe`, outside the registry).
//!
//! Then every attach lease (controller or observer) expired at `now` is
//! released, actor the sweep (`registry::runtime`).
//!
//! For every agent that is not finished, in registration order:
//! 1. Process identity (when the agent has a pid and the probe can tell):
//!    the pid is gone, or its start time differs from `pid_start_time` →
//!    `exited`, "process identity no longer matches", cause `process_gone`.
//! 2. Otherwise, lease: if it is not `idle` and `now - last_active` exceeds
//!    the lease (default 120 s) → `idle` "no heartbeat within the lease" when
//!    it is *attached to a transport / long-lived host*, else `exited`
//!    "worker lease expired; register again before continuing"; cause
//!    `lease_expired` (a heartbeat from the same pid revives either).
//!    A `last_active` more than [`MAX_FUTURE_SKEW_MS`] after `now` proves
//!    nothing (a stamp from a wrong clock or a forced `--at`): the lease
//!    counts as expired, so no future stamp makes an agent immune.
//!
//! Transport-attached (decided from the seed, where agents registered
//! through an MCP transport go idle rather than finished): a transport client
//! is recorded (`register --transport-client`), or `host_mode` is
//! `interactive`, or an `mcp_channel_id` is recorded, or `agent_type` is
//! `mcp`.
//!
//! Across hosts (docs/scaling.md §7) a pid means something only on the host
//! the agent registered on: [`HostLocalProbe`] answers for the agents whose
//! registration recorded this host and has no opinion (`Unknown`) on every
//! other one, so their sweep falls back to the lease rule; and
//! [`sweep_process_identity`] is the half of the sweep a host that does not
//! hold the sweeper lease runs over its own agents.

use super::events::{Event, EventKind};
use super::state::State;
use crate::model::{Agent, HostMode, Status, StatusCause};
use crate::time::{Timestamp, MAX_FUTURE_SKEW_MS};

pub const DEFAULT_LEASE_MS: i64 = 120_000;
pub const MSG_LEASE_IDLE: &str = "no heartbeat within the lease";
pub const MSG_LEASE_EXPIRED: &str = "worker lease expired; register again before continuing";
pub const MSG_PROCESS_GONE: &str = "process identity no longer matches";
/// The status message `agentlog mcp` records (status `idle`) for each agent
/// its session registered when the MCP client goes away: the transport is
/// closed although the host process may live on, so the agent's presence
/// has ended (`queries::presence`, [`Presence::TransportClosed`]).
///
/// [`Presence::TransportClosed`]: super::queries::Presence::TransportClosed
pub const MSG_TRANSPORT_CLOSED: &str = "disconnected: the MCP session ended";

/// What a probe knows about a pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessState {
    /// Running, with its start time (clock ticks since boot) when known.
    Running(Option<u64>),
    /// No such process.
    Gone,
    /// Cannot tell (no permission, not Linux, probing disabled).
    Unknown,
}

/// Answers "is this pid alive, and since when?" (the sweep's input).
pub trait ProcessProbe {
    fn probe(&self, pid: u32) -> ProcessState;

    /// What the probe knows about `agent`'s process: its pid probed, or
    /// `Unknown` without a pid. A probe that answers only for some agents
    /// (by host) overrides this.
    fn probe_agent(&self, agent: &Agent) -> ProcessState {
        agent
            .pid
            .map_or(ProcessState::Unknown, |pid| self.probe(pid))
    }
}

/// A probe of one host: it answers through `inner` for the agents whose
/// latest registration recorded `host`, and has no opinion (`Unknown`) on
/// any other agent, a pid number on another host being meaningless here.
/// Agents without a recorded host (a local store's, a log from before hosts
/// were recorded) are not this host's either.
pub struct HostLocalProbe<'a> {
    pub host: &'a str,
    pub inner: &'a dyn ProcessProbe,
}

impl ProcessProbe for HostLocalProbe<'_> {
    /// A bare pid names no host: no opinion.
    fn probe(&self, _pid: u32) -> ProcessState {
        ProcessState::Unknown
    }

    fn probe_agent(&self, agent: &Agent) -> ProcessState {
        match (&agent.host, agent.pid) {
            (Some(h), Some(pid)) if h == self.host => self.inner.probe(pid),
            _ => ProcessState::Unknown,
        }
    }
}

/// A probe that never knows: sweeps apply the lease rule only.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProbe;

impl ProcessProbe for NoProbe {
    fn probe(&self, _pid: u32) -> ProcessState {
        ProcessState::Unknown
    }
}

/// A probe answering from a table (tests, simulations); unlisted pids are
/// gone.
#[derive(Debug, Clone, Default)]
pub struct FakeProbe {
    pub running: std::collections::HashMap<u32, Option<u64>>,
}

impl ProcessProbe for FakeProbe {
    fn probe(&self, pid: u32) -> ProcessState {
        match self.running.get(&pid) {
            Some(&start) => ProcessState::Running(start),
            None => ProcessState::Gone,
        }
    }
}

/// Sweep settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepPolicy {
    pub lease_ms: i64,
}

impl Default for SweepPolicy {
    fn default() -> Self {
        SweepPolicy {
            lease_ms: DEFAULT_LEASE_MS,
        }
    }
}

/// Whether the agent is attached to a transport / long-lived host.
pub fn is_transport_attached(a: &Agent) -> bool {
    a.transport_client.is_some()
        || a.host_mode == Some(HostMode::Interactive)
        || a.mcp_channel_id.is_some()
        || a.agent_type.as_deref() == Some("mcp")
}

fn change(a: &Agent, now: Timestamp, status: Status, msg: &str, cause: StatusCause) -> Event {
    Event {
        at: now,
        kind: EventKind::StatusChanged {
            agent: a.name.clone(),
            status,
            message: Some(msg.to_string()),
            cause,
        },
    }
}

/// The status changes a sweep at `now` makes, in registration order.
pub fn sweep(
    state: &State,
    now: Timestamp,
    policy: &SweepPolicy,
    probe: &dyn ProcessProbe,
) -> Vec<Event> {
    let mut events: Vec<Event> = state
        .agents()
        .iter()
        .filter_map(|a| sweep_agent(a, now, policy, probe))
        .collect();
    // Attach leases past their expiry end here too, each its own event with
    // the sweep as actor (`registry::runtime`).
    events.extend(state.expired_leases(now));
    events
}

/// The process-identity half of the sweep, for the agents `probe` answers
/// for: what a host that does not hold the sweeper lease runs over its own
/// agents (docs/scaling.md §7). In registration order.
pub fn sweep_process_identity(
    state: &State,
    now: Timestamp,
    probe: &dyn ProcessProbe,
) -> Vec<Event> {
    state
        .agents()
        .iter()
        .filter_map(|a| process_identity_check(a, now, probe))
        .collect()
}

/// `exited` with cause `process_gone` when the probe says the agent's
/// process is gone or another process holds its pid; `None` when it is not
/// finished and the probe has no such answer.
pub fn process_identity_check(
    a: &Agent,
    now: Timestamp,
    probe: &dyn ProcessProbe,
) -> Option<Event> {
    if a.is_finished() {
        return None;
    }
    let gone = match probe.probe_agent(a) {
        ProcessState::Gone => true,
        ProcessState::Running(Some(start)) => a.pid_start_time.is_some_and(|r| r != start),
        ProcessState::Running(None) | ProcessState::Unknown => false,
    };
    gone.then(|| {
        change(
            a,
            now,
            Status::Exited,
            MSG_PROCESS_GONE,
            StatusCause::ProcessGone,
        )
    })
}

/// The status change a sweep at `now` makes to one agent, if any.
pub fn sweep_agent(
    a: &Agent,
    now: Timestamp,
    policy: &SweepPolicy,
    probe: &dyn ProcessProbe,
) -> Option<Event> {
    if a.is_finished() {
        return None;
    }
    if let Some(gone) = process_identity_check(a, now, probe) {
        return Some(gone);
    }
    // A `last_active` stamped past now (beyond the clock-skew bound) counts as
    // expired: a future heartbeat must not make an agent immune to the lease.
    let lease_over = now.millis_since(a.last_active) > policy.lease_ms
        || a.last_active.is_beyond(now, MAX_FUTURE_SKEW_MS);
    if a.status != Status::Idle && lease_over {
        return Some(if is_transport_attached(a) {
            change(
                a,
                now,
                Status::Idle,
                MSG_LEASE_IDLE,
                StatusCause::LeaseExpired,
            )
        } else {
            change(
                a,
                now,
                Status::Exited,
                MSG_LEASE_EXPIRED,
                StatusCause::LeaseExpired,
            )
        });
    }
    None
}
