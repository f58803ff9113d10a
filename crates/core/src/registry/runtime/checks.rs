//! Validation of the runtime commands: endpoint fields, attach (with its
//! renewal and take-over), detach, the sweep's lease expiry and the
//! daemon's outage records. Like every `check_*`, these read the state and
//! return the events to append; nothing here changes it.
//!
//! Rules: at most one controller — a second client is refused with the
//! holder and its expiry named, and `take_over` replaces the holder only
//! once its lease has expired (as judged at the command's time). A client
//! attaching again in the same role renews its lease. A lease bound to a
//! daemon peer's uid is renewed or released only by that uid or an
//! administrator (the daemon's owner uid, root); a command run without a
//! daemon (`Caller::uid == None`) is the store's owner by definition.

use super::{Actor, EndpointUpdates, Lease, LeaseRole, OutageEnd, ReleaseReason, RuntimeEvent};
use crate::registry::commands::TEXT_MAX;
use crate::registry::error::{check_text, LeaseUids, RegistryError};
use crate::registry::events::{Event, EventKind};
use crate::registry::state::State;
use crate::time::Timestamp;

/// Longest client id, capability and model/title text, in bytes.
pub const CLIENT_MAX: usize = 128;
pub const CAPABILITY_MAX: usize = 64;
/// Most capabilities one endpoint lists.
pub const CAPABILITIES_MAX: usize = 32;
/// Default and longest lease.
pub const DEFAULT_LEASE_TTL_MS: i64 = 60_000;
pub const MAX_LEASE_TTL_MS: i64 = 7 * 24 * 3600 * 1000;

/// Who runs a lease command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caller {
    /// The daemon peer's uid (the process's own without a daemon); `None`:
    /// unknown, which the library's callers may pass to mean the owner.
    pub uid: Option<u32>,
    pub pid: Option<u32>,
    /// The daemon's owner uid or root: may renew and release any lease.
    pub admin: bool,
}

impl Caller {
    fn actor(&self) -> Actor {
        Actor::Peer { uid: self.uid }
    }

    /// May renew or release `lease`.
    pub fn may_manage(&self, lease: &Lease) -> bool {
        self.uid.is_none() || self.admin || lease.uid == self.uid
    }
}

/// An `attach` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attach {
    pub agent: String,
    pub client: String,
    pub role: LeaseRole,
    pub ttl_ms: i64,
    /// Replace an expired controller lease.
    pub take_over: bool,
    pub caller: Caller,
    /// The running tally (last failure, count) of an open outage, which the
    /// daemon's prober keeps in memory; the end event records it.
    pub outage_tally: Option<(Timestamp, u64)>,
}

fn runtime_event(at: Timestamp, e: RuntimeEvent) -> Event {
    Event {
        at,
        kind: EventKind::Runtime(e),
    }
}

/// Checks endpoint field values (bounded, control-free text).
pub fn check_endpoint_fields(f: &EndpointUpdates) -> Result<(), RegistryError> {
    let text = |field, v: &Option<Option<String>>, max| match v {
        Some(Some(t)) => check_text(field, t, max),
        _ => Ok(()),
    };
    text("endpoint", &f.endpoint, TEXT_MAX)?;
    text("model", &f.model, TEXT_MAX)?;
    text("title", &f.title, TEXT_MAX)?;
    text("persistence location", &f.persistence_location, TEXT_MAX)?;
    if let Some(caps) = &f.capabilities {
        if caps.len() > CAPABILITIES_MAX {
            return Err(RegistryError::TooLong {
                field: "capabilities (entries)",
                len: caps.len(),
                max: CAPABILITIES_MAX,
            });
        }
        for c in caps {
            check_text("capability", c, CAPABILITY_MAX)?;
        }
    }
    Ok(())
}

/// The `EndpointSet` event for `agent`, without looking at the state: for
/// a registration batch, where the agent exists only once the registration
/// before it is folded. `None` when `fields` changes nothing.
pub fn endpoint_event(
    agent: &str,
    fields: EndpointUpdates,
    at: Timestamp,
) -> Result<Option<Event>, RegistryError> {
    if fields.is_empty() {
        return Ok(None);
    }
    check_endpoint_fields(&fields)?;
    Ok(Some(runtime_event(
        at,
        RuntimeEvent::EndpointSet {
            agent: agent.to_string(),
            fields,
        },
    )))
}

impl State {
    /// An existing agent's endpoint field changes.
    pub fn check_endpoint(
        &self,
        agent: &str,
        fields: EndpointUpdates,
        at: Timestamp,
    ) -> Result<Option<Event>, RegistryError> {
        self.existing(agent)?;
        endpoint_event(agent, fields, at)
    }

    /// An attach: a new lease, a renewal of the caller's own, or (with
    /// `take_over`) an expired controller replaced. An open outage ends
    /// with it (a client reached the agent).
    pub fn check_attach(&self, req: &Attach, at: Timestamp) -> Result<Vec<Event>, RegistryError> {
        let a = self.existing(&req.agent)?;
        if a.is_finished() {
            return Err(RegistryError::Finished {
                agent: req.agent.clone(),
                status: a.status,
            });
        }
        check_text("client id", &req.client, CLIENT_MAX)?;
        if req.ttl_ms <= 0 {
            return Err(RegistryError::NotPositive {
                field: "lease ttl",
                value: req.ttl_ms,
            });
        }
        if req.ttl_ms > MAX_LEASE_TTL_MS {
            return Err(RegistryError::TooLong {
                field: "lease ttl (ms)",
                len: usize::try_from(req.ttl_ms).unwrap_or(usize::MAX),
                max: MAX_LEASE_TTL_MS as usize,
            });
        }
        let expires_at = at.add_millis(req.ttl_ms);
        let rt = self.runtime.get(&req.agent);
        let mut events = Vec::with_capacity(3);
        if let Some(own) = rt.and_then(|r| r.lease(&req.client, req.role)) {
            self.authorize(&req.agent, own, &req.caller)?;
            events.push(runtime_event(
                at,
                RuntimeEvent::LeaseRenewed {
                    agent: req.agent.clone(),
                    client: req.client.clone(),
                    role: req.role,
                    expires_at,
                    by: req.caller.actor(),
                },
            ));
        } else {
            if req.role == LeaseRole::Controller {
                if let Some(held) = rt.and_then(|r| r.controller.as_ref()) {
                    if !held.is_expired(at) && req.take_over {
                        return Err(RegistryError::TakeOverTooEarly {
                            agent: req.agent.clone(),
                            holder: held.client.clone(),
                            expires_at: held.expires_at,
                        });
                    }
                    if !held.is_expired(at) {
                        return Err(RegistryError::ControllerHeld {
                            agent: req.agent.clone(),
                            holder: held.client.clone(),
                            expires_at: held.expires_at,
                        });
                    }
                    if !req.take_over {
                        return Err(RegistryError::ControllerExpired {
                            agent: req.agent.clone(),
                            holder: held.client.clone(),
                            expired_at: held.expires_at,
                        });
                    }
                    events.push(runtime_event(
                        at,
                        RuntimeEvent::LeaseReleased {
                            agent: req.agent.clone(),
                            client: held.client.clone(),
                            role: LeaseRole::Controller,
                            reason: ReleaseReason::TakenOver,
                            by: req.caller.actor(),
                        },
                    ));
                }
            }
            events.push(runtime_event(
                at,
                RuntimeEvent::LeaseAcquired {
                    agent: req.agent.clone(),
                    client: req.client.clone(),
                    role: req.role,
                    uid: req.caller.uid,
                    pid: req.caller.pid,
                    expires_at,
                },
            ));
        }
        if let Some(o) = rt.and_then(|r| r.outage.as_ref()).filter(|o| o.is_open()) {
            let (last, count) = req.outage_tally.unwrap_or((o.last_failure, o.failures));
            events.push(runtime_event(
                at,
                RuntimeEvent::OutageEnded {
                    agent: req.agent.clone(),
                    last_failure: last.max(o.last_failure),
                    failures: count.max(o.failures),
                    ended_by: OutageEnd::Attach,
                },
            ));
        }
        Ok(events)
    }

    /// Releases `client`'s lease (of `role`, or whichever it holds: its
    /// controller lease first).
    pub fn check_detach(
        &self,
        agent: &str,
        client: &str,
        role: Option<LeaseRole>,
        caller: &Caller,
        at: Timestamp,
    ) -> Result<Event, RegistryError> {
        self.existing(agent)?;
        let rt = self.runtime.get(agent);
        let roles: &[LeaseRole] = match &role {
            Some(r) => std::slice::from_ref(r),
            None => &[LeaseRole::Controller, LeaseRole::Observer],
        };
        let lease = roles
            .iter()
            .find_map(|r| rt.and_then(|rt| rt.lease(client, *r)))
            .ok_or_else(|| RegistryError::NoLease {
                agent: agent.to_string(),
                client: client.to_string(),
            })?;
        self.authorize(agent, lease, caller)?;
        Ok(runtime_event(
            at,
            RuntimeEvent::LeaseReleased {
                agent: agent.to_string(),
                client: client.to_string(),
                role: lease.role,
                reason: ReleaseReason::Detached,
                by: caller.actor(),
            },
        ))
    }

    fn authorize(&self, agent: &str, lease: &Lease, caller: &Caller) -> Result<(), RegistryError> {
        if caller.may_manage(lease) {
            return Ok(());
        }
        Err(RegistryError::LeaseNotYours {
            agent: agent.to_string(),
            client: lease.client.clone(),
            uids: Box::new(LeaseUids {
                bound: lease.uid,
                caller: caller.uid,
            }),
        })
    }

    /// The leases expired at `now`, released by the sweep (agents in name
    /// order, controller first).
    pub fn expired_leases(&self, now: Timestamp) -> Vec<Event> {
        let mut out = Vec::new();
        for (agent, rt) in self.runtime.iter() {
            for l in rt.leases().filter(|l| l.is_expired(now)) {
                out.push(runtime_event(
                    now,
                    RuntimeEvent::LeaseReleased {
                        agent: agent.clone(),
                        client: l.client.clone(),
                        role: l.role,
                        reason: ReleaseReason::Expired,
                        by: Actor::Sweep,
                    },
                ));
            }
        }
        out
    }

    /// The start of an outage of `agent`'s endpoint, unless one is open
    /// already or the endpoint changed since the probe read it.
    pub fn check_outage_start(
        &self,
        agent: &str,
        endpoint: &str,
        error: &str,
        at: Timestamp,
    ) -> Option<Event> {
        let rt = self.runtime.get(agent)?;
        if rt.endpoint.as_deref() != Some(endpoint)
            || rt.outage.as_ref().is_some_and(|o| o.is_open())
        {
            return None;
        }
        // The error text comes from the OS or the peer: bounded, one line.
        let error: String = error
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(512)
            .collect();
        Some(runtime_event(
            at,
            RuntimeEvent::OutageStarted {
                agent: agent.to_string(),
                endpoint: endpoint.to_string(),
                error,
            },
        ))
    }

    /// The end of `agent`'s open outage, if it has one.
    pub fn check_outage_end(
        &self,
        agent: &str,
        last_failure: Timestamp,
        failures: u64,
        at: Timestamp,
    ) -> Option<Event> {
        let o = self.runtime.get(agent)?.outage.as_ref()?;
        o.is_open().then(|| {
            runtime_event(
                at,
                RuntimeEvent::OutageEnded {
                    agent: agent.to_string(),
                    last_failure: last_failure.max(o.last_failure),
                    failures: failures.max(o.failures),
                    ended_by: OutageEnd::Probe,
                },
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registration;

    fn state() -> State {
        let mut s = State::default();
        let e = s
            .check_register(Registration::new("a", "claude", "/w"), Timestamp(1))
            .unwrap();
        s.apply(1, &e);
        s
    }

    fn attach(client: &str, role: LeaseRole, uid: Option<u32>) -> Attach {
        Attach {
            agent: "a".into(),
            client: client.into(),
            role,
            ttl_ms: 1000,
            take_over: false,
            caller: Caller {
                uid,
                pid: None,
                admin: false,
            },
            outage_tally: None,
        }
    }

    fn apply_all(s: &mut State, lsn: &mut u64, events: &[Event]) {
        for e in events {
            *lsn += 1;
            s.apply(*lsn, e);
        }
    }

    #[test]
    fn one_controller_many_observers_renewal_take_over_and_expiry() {
        let mut s = state();
        let mut lsn = 1;
        let e = s
            .check_attach(
                &attach("c1", LeaseRole::Controller, Some(10)),
                Timestamp(100),
            )
            .unwrap();
        apply_all(&mut s, &mut lsn, &e);
        let err = s
            .check_attach(
                &attach("c2", LeaseRole::Controller, Some(11)),
                Timestamp(200),
            )
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("c1") && text.contains("1970-01-01T00:00:01.100Z"),
            "{text}"
        );
        let mut take = attach("c2", LeaseRole::Controller, Some(11));
        take.take_over = true;
        assert!(
            s.check_attach(&take, Timestamp(200)).is_err(),
            "not expired yet"
        );
        for c in ["o1", "o2"] {
            let e = s
                .check_attach(&attach(c, LeaseRole::Observer, Some(11)), Timestamp(300))
                .unwrap();
            apply_all(&mut s, &mut lsn, &e);
        }
        assert_eq!(s.runtime("a").unwrap().observers.len(), 2);
        // Uid 12 may not renew uid 10's lease; uid 10 may.
        let err = s
            .check_attach(
                &attach("c1", LeaseRole::Controller, Some(12)),
                Timestamp(400),
            )
            .unwrap_err();
        assert!(matches!(err, RegistryError::LeaseNotYours { .. }), "{err}");
        let e = s
            .check_attach(
                &attach("c1", LeaseRole::Controller, Some(10)),
                Timestamp(400),
            )
            .unwrap();
        assert!(matches!(
            e[0].kind,
            EventKind::Runtime(RuntimeEvent::LeaseRenewed { .. })
        ));
        apply_all(&mut s, &mut lsn, &e);
        assert_eq!(
            s.runtime("a")
                .unwrap()
                .controller
                .as_ref()
                .unwrap()
                .expires_at,
            Timestamp(1400)
        );
        // Expired, not swept: a plain attach is told to take over.
        let err = s
            .check_attach(
                &attach("c2", LeaseRole::Controller, Some(11)),
                Timestamp(1500),
            )
            .unwrap_err();
        assert!(
            matches!(err, RegistryError::ControllerExpired { .. }),
            "{err}"
        );
        let e = s.check_attach(&take, Timestamp(1500)).unwrap();
        assert_eq!(e.len(), 2);
        apply_all(&mut s, &mut lsn, &e);
        assert_eq!(
            s.runtime("a").unwrap().controller.as_ref().unwrap().client,
            "c2"
        );
        // The sweep expires the observers (1300) and, later, the controller.
        let swept = s.expired_leases(Timestamp(1600));
        assert_eq!(swept.len(), 2);
        apply_all(&mut s, &mut lsn, &swept);
        assert!(s.runtime("a").unwrap().observers.is_empty());
        assert_eq!(s.expired_leases(Timestamp(2500)).len(), 1);
        assert_eq!(s.anomalies(), 0);
    }

    #[test]
    fn outages_open_once_and_an_attach_ends_one_with_the_running_tally() {
        let mut s = state();
        let mut lsn = 1;
        let e = s
            .check_endpoint(
                "a",
                EndpointUpdates {
                    endpoint: Some(Some("unix:/s".into())),
                    ..Default::default()
                },
                Timestamp(10),
            )
            .unwrap()
            .unwrap();
        apply_all(&mut s, &mut lsn, &[e]);
        assert!(s
            .check_outage_start("a", "unix:/other", "x", Timestamp(20))
            .is_none());
        let e = s
            .check_outage_start("a", "unix:/s", "refused\nagain", Timestamp(20))
            .unwrap();
        apply_all(&mut s, &mut lsn, &[e]);
        assert!(s
            .check_outage_start("a", "unix:/s", "x", Timestamp(30))
            .is_none());
        let mut req = attach("ui", LeaseRole::Observer, None);
        req.outage_tally = Some((Timestamp(40), 5));
        let e = s.check_attach(&req, Timestamp(50)).unwrap();
        assert_eq!(e.len(), 2);
        apply_all(&mut s, &mut lsn, &e);
        let o = s.runtime("a").unwrap().outage.clone().unwrap();
        assert_eq!(
            (
                o.first_failure,
                o.last_failure,
                o.failures,
                o.ended_at,
                o.ended_by
            ),
            (
                Timestamp(20),
                Timestamp(40),
                5,
                Some(Timestamp(50)),
                Some(OutageEnd::Attach)
            )
        );
        assert!(!o.error.contains('\n'));
        assert!(s
            .check_outage_end("a", Timestamp(60), 1, Timestamp(60))
            .is_none());
        assert_eq!(s.anomalies(), 0);
    }

    #[test]
    fn detach_is_bound_to_the_lease_uid_or_an_admin() {
        let mut s = state();
        let mut lsn = 1;
        let e = s
            .check_attach(&attach("o1", LeaseRole::Observer, Some(10)), Timestamp(100))
            .unwrap();
        apply_all(&mut s, &mut lsn, &e);
        let other = Caller {
            uid: Some(11),
            pid: None,
            admin: false,
        };
        assert!(s
            .check_detach("a", "o1", None, &other, Timestamp(200))
            .is_err());
        let admin = Caller {
            admin: true,
            ..other
        };
        let e = s
            .check_detach("a", "o1", None, &admin, Timestamp(200))
            .unwrap();
        apply_all(&mut s, &mut lsn, &[e]);
        assert!(s.runtime("a").is_none());
        assert!(matches!(
            s.check_detach("a", "o1", None, &admin, Timestamp(300)),
            Err(RegistryError::NoLease { .. })
        ));
    }
}
