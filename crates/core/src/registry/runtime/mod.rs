//! The runtime side of an agent (the runtime-registry seed, issue 29): how
//! to reach it (endpoint, capabilities, model, title, persistence location,
//! supervisor pid), who is attached to it (at most one controller lease, any
//! number of observer leases) and whether its endpoint answers (its latest
//! outage).
//!
//! All of it is registry-only: no schema-v4 row has these fields, so the
//! export never writes them. It changes only through its own events (tags
//! 19–24, [`RuntimeEvent`]), each with the subject agent's name as the first
//! body field (the history prefilter relies on it) and, for leases, who
//! acted ([`Actor`]). [`RuntimeMap::apply`] folds them: pure, no clock,
//! never failing (an event naming a missing agent, client or outage changes
//! nothing and is reported to the caller, which counts an anomaly).
//! Invariants: at most one controller per agent; observers keyed by client
//! id, so a client holds at most one lease of each role; an entry exists
//! only for a registered agent (removal and retirement drop it).
//! Validation lives in `checks.rs`, the seed's reconciled view in `view.rs`.

pub mod checks;
pub mod json;
pub mod view;

use super::codec::{body_err, DecodeError};
use super::events::tag;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Endpoint field changes: `None` leaves a field alone, `Some(None)`
/// clears it, `Some(Some(v))` sets it (`capabilities`: `Some(vec![])`
/// clears the list).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointUpdates {
    /// Opaque text safe to display (`http://…`, `unix:/path`, …).
    pub endpoint: Option<Option<String>>,
    /// Transports the endpoint offers (`http`, `acp`, …).
    pub capabilities: Option<Vec<String>>,
    pub model: Option<Option<String>>,
    pub title: Option<Option<String>>,
    /// Where the agent's durable session lives.
    pub persistence_location: Option<Option<String>>,
    /// A supervising process's pid: shown, never used as authority.
    pub supervisor: Option<Option<u32>>,
}

impl EndpointUpdates {
    pub fn is_empty(&self) -> bool {
        *self == EndpointUpdates::default()
    }
}

/// What a lease lets its client do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseRole {
    /// Drives the agent; at most one at a time.
    Controller,
    /// Watches it; any number.
    Observer,
}

impl LeaseRole {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseRole::Controller => "controller",
            LeaseRole::Observer => "observer",
        }
    }
}

/// One client's attachment to an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub client: String,
    pub role: LeaseRole,
    /// The daemon peer's uid the lease is bound to (`None`: made without a
    /// daemon, by whoever could open the store).
    pub uid: Option<u32>,
    /// That peer's pid when it attached (informative only).
    pub pid: Option<u32>,
    pub acquired_at: Timestamp,
    pub expires_at: Timestamp,
}

impl Lease {
    /// Expired at `now` (a lease ending exactly at `now` is expired).
    pub fn is_expired(&self, now: Timestamp) -> bool {
        self.expires_at <= now
    }
}

/// Who changed a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Actor {
    /// A command; `uid` is the daemon peer's (`None`: no daemon).
    Peer { uid: Option<u32> },
    /// The sweep, expiring leases past their time.
    Sweep,
}

/// Why a lease ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseReason {
    /// `detach`.
    Detached,
    /// Past its expiry, at a sweep.
    Expired,
    /// An expired controller lease replaced by `attach --take-over`.
    TakenOver,
}

/// What ended an outage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutageEnd {
    /// The daemon's probe reached the endpoint again.
    Probe,
    /// A client attached: the strongest evidence that the agent is reachable.
    Attach,
}

/// An agent's latest outage: recorded when it starts and when it ends, not
/// on every failed probe (the daemon counts those in memory meanwhile).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outage {
    /// The endpoint that did not answer.
    pub endpoint: String,
    /// Why the first probe failed.
    pub error: String,
    pub first_failure: Timestamp,
    /// As of the outage's end (its start while it lasts).
    pub last_failure: Timestamp,
    /// Failed probes, as of the outage's end (1 while it lasts).
    pub failures: u64,
    pub ended_at: Option<Timestamp>,
    pub ended_by: Option<OutageEnd>,
}

impl Outage {
    pub fn is_open(&self) -> bool {
        self.ended_at.is_none()
    }
}

/// The runtime facts of one agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRuntime {
    pub endpoint: Option<String>,
    pub capabilities: Vec<String>,
    pub model: Option<String>,
    pub title: Option<String>,
    pub persistence_location: Option<String>,
    pub supervisor: Option<u32>,
    pub controller: Option<Lease>,
    /// By client id.
    pub observers: BTreeMap<String, Lease>,
    pub outage: Option<Outage>,
}

impl AgentRuntime {
    /// The lease `client` holds in `role`, if any.
    pub fn lease(&self, client: &str, role: LeaseRole) -> Option<&Lease> {
        match role {
            LeaseRole::Controller => self.controller.as_ref().filter(|l| l.client == client),
            LeaseRole::Observer => self.observers.get(client),
        }
    }

    /// Every lease, controller first, then observers by client id.
    pub fn leases(&self) -> impl Iterator<Item = &Lease> {
        self.controller.iter().chain(self.observers.values())
    }

    fn is_empty(&self) -> bool {
        *self == AgentRuntime::default()
    }
}

/// A runtime event (tags 19–24). Times not in the body are the event's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RuntimeEvent {
    /// Tag 19: endpoint fields set or cleared (`register`/`update`).
    EndpointSet {
        agent: String,
        fields: EndpointUpdates,
    },
    /// Tag 20: a client attached; the lease starts at the event's time.
    LeaseAcquired {
        agent: String,
        client: String,
        role: LeaseRole,
        uid: Option<u32>,
        pid: Option<u32>,
        expires_at: Timestamp,
    },
    /// Tag 21: a lease's expiry moved.
    LeaseRenewed {
        agent: String,
        client: String,
        role: LeaseRole,
        expires_at: Timestamp,
        by: Actor,
    },
    /// Tag 22: a lease ended.
    LeaseReleased {
        agent: String,
        client: String,
        role: LeaseRole,
        reason: ReleaseReason,
        by: Actor,
    },
    /// Tag 23: the endpoint stopped answering; the first failure is the
    /// event's time.
    OutageStarted {
        agent: String,
        endpoint: String,
        error: String,
    },
    /// Tag 24: the endpoint answers again (or a client attached).
    OutageEnded {
        agent: String,
        last_failure: Timestamp,
        failures: u64,
        ended_by: OutageEnd,
    },
}

impl RuntimeEvent {
    pub const fn tag(&self) -> u8 {
        match self {
            RuntimeEvent::EndpointSet { .. } => tag::ENDPOINT_SET,
            RuntimeEvent::LeaseAcquired { .. } => tag::LEASE_ACQUIRED,
            RuntimeEvent::LeaseRenewed { .. } => tag::LEASE_RENEWED,
            RuntimeEvent::LeaseReleased { .. } => tag::LEASE_RELEASED,
            RuntimeEvent::OutageStarted { .. } => tag::OUTAGE_STARTED,
            RuntimeEvent::OutageEnded { .. } => tag::OUTAGE_ENDED,
        }
    }

    /// The agent the event is about.
    pub fn agent(&self) -> &str {
        match self {
            RuntimeEvent::EndpointSet { agent, .. }
            | RuntimeEvent::LeaseAcquired { agent, .. }
            | RuntimeEvent::LeaseRenewed { agent, .. }
            | RuntimeEvent::LeaseReleased { agent, .. }
            | RuntimeEvent::OutageStarted { agent, .. }
            | RuntimeEvent::OutageEnded { agent, .. } => agent,
        }
    }

    /// Whether the event changes an attachment (what `watch --changes`
    /// reports as a lease change).
    pub fn is_lease_change(&self) -> bool {
        matches!(
            self,
            RuntimeEvent::LeaseAcquired { .. }
                | RuntimeEvent::LeaseRenewed { .. }
                | RuntimeEvent::LeaseReleased { .. }
        )
    }

    /// Appends the body (FORMAT.md, tags 19–24) to `buf`.
    pub(crate) fn encode_body(&self, buf: &mut Vec<u8>) {
        use super::codec::put_body;
        match self {
            RuntimeEvent::EndpointSet { agent, fields } => put_body(buf, &(agent, fields)),
            RuntimeEvent::LeaseAcquired {
                agent,
                client,
                role,
                uid,
                pid,
                expires_at,
            } => put_body(buf, &(agent, client, role, uid, pid, expires_at)),
            RuntimeEvent::LeaseRenewed {
                agent,
                client,
                role,
                expires_at,
                by,
            } => put_body(buf, &(agent, client, role, expires_at, by)),
            RuntimeEvent::LeaseReleased {
                agent,
                client,
                role,
                reason,
                by,
            } => put_body(buf, &(agent, client, role, reason, by)),
            RuntimeEvent::OutageStarted {
                agent,
                endpoint,
                error,
            } => put_body(buf, &(agent, endpoint, error)),
            RuntimeEvent::OutageEnded {
                agent,
                last_failure,
                failures,
                ended_by,
            } => put_body(buf, &(agent, last_failure, failures, ended_by)),
        }
    }

    /// Decodes the body of tag `t` (19–24).
    pub(crate) fn decode_body(t: u8, b: &[u8]) -> Result<RuntimeEvent, DecodeError> {
        use super::codec::body;
        Ok(match t {
            tag::ENDPOINT_SET => {
                let (agent, fields) = body(t, b)?;
                RuntimeEvent::EndpointSet { agent, fields }
            }
            tag::LEASE_ACQUIRED => {
                let (agent, client, role, uid, pid, expires_at) = body(t, b)?;
                RuntimeEvent::LeaseAcquired {
                    agent,
                    client,
                    role,
                    uid,
                    pid,
                    expires_at,
                }
            }
            tag::LEASE_RENEWED => {
                let (agent, client, role, expires_at, by) = body(t, b)?;
                RuntimeEvent::LeaseRenewed {
                    agent,
                    client,
                    role,
                    expires_at,
                    by,
                }
            }
            tag::LEASE_RELEASED => {
                let (agent, client, role, reason, by) = body(t, b)?;
                RuntimeEvent::LeaseReleased {
                    agent,
                    client,
                    role,
                    reason,
                    by,
                }
            }
            tag::OUTAGE_STARTED => {
                let (agent, endpoint, error) = body(t, b)?;
                RuntimeEvent::OutageStarted {
                    agent,
                    endpoint,
                    error,
                }
            }
            tag::OUTAGE_ENDED => {
                let (agent, last_failure, failures, ended_by) = body(t, b)?;
                RuntimeEvent::OutageEnded {
                    agent,
                    last_failure,
                    failures,
                    ended_by,
                }
            }
            other => return Err(body_err(other, "not a runtime event tag")),
        })
    }
}

/// The runtime facts of every agent that has any, by agent name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeMap {
    by_agent: BTreeMap<String, AgentRuntime>,
}

impl RuntimeMap {
    pub fn get(&self, agent: &str) -> Option<&AgentRuntime> {
        self.by_agent.get(agent)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &AgentRuntime)> {
        self.by_agent.iter()
    }

    /// Drops an agent's facts (it was removed or retired).
    pub fn forget(&mut self, agent: &str) {
        self.by_agent.remove(agent);
    }

    /// Keeps the agents for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.by_agent.retain(|name, _| keep(name));
    }

    /// Folds one event of an existing agent at time `at`; false if it could
    /// not take effect (no such lease, no open outage): an anomaly.
    pub fn apply(&mut self, at: Timestamp, event: &RuntimeEvent) -> bool {
        let agent = event.agent();
        let rt = self.by_agent.entry(agent.to_string()).or_default();
        let applied = fold_into(rt, at, event);
        if rt.is_empty() {
            self.by_agent.remove(agent);
        }
        applied
    }
}

fn fold_into(rt: &mut AgentRuntime, at: Timestamp, event: &RuntimeEvent) -> bool {
    match event {
        RuntimeEvent::EndpointSet { fields, .. } => {
            let EndpointUpdates {
                endpoint,
                capabilities,
                model,
                title,
                persistence_location,
                supervisor,
            } = fields;
            if let Some(v) = endpoint {
                rt.endpoint.clone_from(v);
            }
            if let Some(v) = capabilities {
                rt.capabilities.clone_from(v);
            }
            if let Some(v) = model {
                rt.model.clone_from(v);
            }
            if let Some(v) = title {
                rt.title.clone_from(v);
            }
            if let Some(v) = persistence_location {
                rt.persistence_location.clone_from(v);
            }
            if let Some(v) = supervisor {
                rt.supervisor = *v;
            }
            true
        }
        RuntimeEvent::LeaseAcquired {
            client,
            role,
            uid,
            pid,
            expires_at,
            ..
        } => {
            let lease = Lease {
                client: client.clone(),
                role: *role,
                uid: *uid,
                pid: *pid,
                acquired_at: at,
                expires_at: *expires_at,
            };
            match role {
                LeaseRole::Controller => rt.controller = Some(lease),
                LeaseRole::Observer => {
                    rt.observers.insert(client.clone(), lease);
                }
            }
            true
        }
        RuntimeEvent::LeaseRenewed {
            client,
            role,
            expires_at,
            ..
        } => {
            let lease = match role {
                LeaseRole::Controller => rt.controller.as_mut().filter(|l| &l.client == client),
                LeaseRole::Observer => rt.observers.get_mut(client),
            };
            match lease {
                Some(l) => {
                    l.expires_at = *expires_at;
                    true
                }
                None => false,
            }
        }
        RuntimeEvent::LeaseReleased { client, role, .. } => match role {
            LeaseRole::Controller
                if rt.controller.as_ref().is_some_and(|l| &l.client == client) =>
            {
                rt.controller = None;
                true
            }
            LeaseRole::Controller => false,
            LeaseRole::Observer => rt.observers.remove(client).is_some(),
        },
        RuntimeEvent::OutageStarted {
            endpoint, error, ..
        } => {
            rt.outage = Some(Outage {
                endpoint: endpoint.clone(),
                error: error.clone(),
                first_failure: at,
                last_failure: at,
                failures: 1,
                ended_at: None,
                ended_by: None,
            });
            true
        }
        RuntimeEvent::OutageEnded {
            last_failure,
            failures,
            ended_by,
            ..
        } => match rt.outage.as_mut().filter(|o| o.is_open()) {
            Some(o) => {
                o.last_failure = *last_failure;
                o.failures = *failures;
                o.ended_at = Some(at);
                o.ended_by = Some(*ended_by);
                true
            }
            None => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::codec::{decode, encode};
    use crate::registry::events::{Event, EventKind};

    fn ev(at: i64, r: RuntimeEvent) -> Event {
        Event {
            at: Timestamp(at),
            kind: EventKind::Runtime(r),
        }
    }

    #[test]
    fn lease_acquired_bytes_match_the_format_document() {
        let e = ev(
            5,
            RuntimeEvent::LeaseAcquired {
                agent: "a1".into(),
                client: "c".into(),
                role: LeaseRole::Controller,
                uid: Some(0),
                pid: None,
                expires_at: Timestamp(1000),
            },
        );
        let bytes = encode(&e);
        let want = [
            0x14, 5, 0, 0, 0, 0, 0, 0, 0, 2, b'a', b'1', 1, b'c', 0, 1, 0, 0, 0xfb, 0xd0, 0x07,
        ];
        assert_eq!(bytes, want);
        assert_eq!(decode(&bytes).unwrap(), e);
    }

    #[test]
    fn every_runtime_event_round_trips_and_names_its_agent_first() {
        let agent = || "agent-x".to_string();
        let all = [
            RuntimeEvent::EndpointSet {
                agent: agent(),
                fields: EndpointUpdates {
                    endpoint: Some(Some("unix:/s".into())),
                    capabilities: Some(vec!["http".into()]),
                    model: Some(None),
                    title: None,
                    persistence_location: Some(Some("/p".into())),
                    supervisor: Some(Some(7)),
                },
            },
            RuntimeEvent::LeaseRenewed {
                agent: agent(),
                client: "c".into(),
                role: LeaseRole::Observer,
                expires_at: Timestamp(-3),
                by: Actor::Peer { uid: Some(1000) },
            },
            RuntimeEvent::LeaseReleased {
                agent: agent(),
                client: "c".into(),
                role: LeaseRole::Observer,
                reason: ReleaseReason::Expired,
                by: Actor::Sweep,
            },
            RuntimeEvent::OutageStarted {
                agent: agent(),
                endpoint: "http://h/".into(),
                error: "refused".into(),
            },
            RuntimeEvent::OutageEnded {
                agent: agent(),
                last_failure: Timestamp(9),
                failures: 300,
                ended_by: OutageEnd::Attach,
            },
        ];
        for r in all {
            let t = r.tag();
            let e = ev(1, r);
            let bytes = encode(&e);
            assert_eq!(bytes[0], t);
            assert_eq!(&bytes[9..17], b"\x07agent-x", "subject prefix of tag {t}");
            assert_eq!(decode(&bytes).unwrap(), e);
            // A trailing byte is refused, naming the kind.
            let mut longer = bytes.clone();
            longer.push(0);
            let err = decode(&longer).unwrap_err().to_string();
            assert!(err.contains(tag::name(t)), "{err}");
        }
    }

    #[test]
    fn the_fold_keeps_one_controller_and_counts_what_cannot_apply() {
        let mut m = RuntimeMap::default();
        let acquire = |client: &str, role| RuntimeEvent::LeaseAcquired {
            agent: "a".into(),
            client: client.into(),
            role,
            uid: None,
            pid: None,
            expires_at: Timestamp(100),
        };
        assert!(m.apply(Timestamp(1), &acquire("c1", LeaseRole::Controller)));
        assert!(m.apply(Timestamp(2), &acquire("c2", LeaseRole::Controller)));
        assert!(m.apply(Timestamp(2), &acquire("o1", LeaseRole::Observer)));
        let rt = m.get("a").unwrap();
        assert_eq!(rt.controller.as_ref().unwrap().client, "c2");
        assert_eq!(rt.controller.as_ref().unwrap().acquired_at, Timestamp(2));
        let release = |client: &str| RuntimeEvent::LeaseReleased {
            agent: "a".into(),
            client: client.into(),
            role: LeaseRole::Controller,
            reason: ReleaseReason::Detached,
            by: Actor::Sweep,
        };
        assert!(!m.apply(Timestamp(3), &release("c1")), "not the holder");
        assert!(m.apply(Timestamp(3), &release("c2")));
        let end = RuntimeEvent::OutageEnded {
            agent: "a".into(),
            last_failure: Timestamp(3),
            failures: 2,
            ended_by: OutageEnd::Probe,
        };
        assert!(!m.apply(Timestamp(4), &end), "no open outage");
        assert_eq!(m.get("a").unwrap().observers.len(), 1);
    }
}
