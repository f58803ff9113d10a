//! The store's side of the runtime facts (`registry::runtime`): a
//! registration with its endpoint fields, attach and detach, and the
//! daemon's outage records. Each goes the way of every command: validated
//! against the state, appended (one batch when it is several events, so no
//! reader sees half of it) and folded under the store lock.

use super::{now_or, Store, StoreResult};
use crate::model::TransportClient;
use crate::registry::labels::transport_event;
use crate::registry::runtime::checks::{endpoint_event, Attach, Caller};
use crate::registry::runtime::{EndpointUpdates, LeaseRole};
use crate::registry::{EventKind, Lsn, Registration, RegistrationKind, TransportCause};
use crate::time::Timestamp;

impl Store {
    /// Registers an agent with its transport client and endpoint fields, if
    /// any, as one batch: the registration first. Returns its LSN and kind.
    pub fn register_with(
        &self,
        reg: Registration,
        client: Option<TransportClient>,
        endpoint: EndpointUpdates,
        at: Option<Timestamp>,
    ) -> StoreResult<(Lsn, RegistrationKind)> {
        let at = now_or(at);
        let mut kind = RegistrationKind::New;
        let lsns = self.command(|s| {
            let name = reg.name.clone();
            let e = s.check_register(reg.clone(), at)?;
            if let EventKind::AgentRegistered { kind: k, .. } = &e.kind {
                kind = *k;
            }
            let mut events = vec![e];
            if let Some(c) = &client {
                events.push(transport_event(
                    &name,
                    c.clone(),
                    TransportCause::Registration,
                    at,
                )?);
            }
            events.extend(endpoint_event(&name, endpoint.clone(), at)?);
            Ok(events)
        })?;
        Ok((lsns[0], kind))
    }

    /// Attaches (or renews) a lease; see `State::check_attach`. Returns the
    /// LSNs of its events (a take-over's release, the lease, an outage's end).
    pub fn attach(&self, req: &Attach, at: Option<Timestamp>) -> StoreResult<Vec<Lsn>> {
        let at = now_or(at);
        self.command(|s| s.check_attach(req, at))
    }

    /// Releases `client`'s lease on `agent`; see `State::check_detach`.
    pub fn detach(
        &self,
        agent: &str,
        client: &str,
        role: Option<LeaseRole>,
        caller: &Caller,
        at: Option<Timestamp>,
    ) -> StoreResult<Lsn> {
        let at = now_or(at);
        self.one(|s| s.check_detach(agent, client, role, caller, at))
    }

    /// Records the start of an outage of `agent`'s `endpoint` (nothing when
    /// one is open or the endpoint changed meanwhile).
    pub fn outage_started(
        &self,
        agent: &str,
        endpoint: &str,
        error: &str,
        at: Option<Timestamp>,
    ) -> StoreResult<Option<Lsn>> {
        let at = now_or(at);
        let lsns = self.command(|s| {
            Ok(s.check_outage_start(agent, endpoint, error, at)
                .into_iter()
                .collect())
        })?;
        Ok(lsns.first().copied())
    }

    /// Records the end of `agent`'s open outage (nothing when none is open).
    pub fn outage_ended(
        &self,
        agent: &str,
        last_failure: Timestamp,
        failures: u64,
        at: Option<Timestamp>,
    ) -> StoreResult<Option<Lsn>> {
        let at = now_or(at);
        let lsns = self.command(|s| {
            Ok(s.check_outage_end(agent, last_failure, failures, at)
                .into_iter()
                .collect())
        })?;
        Ok(lsns.first().copied())
    }
}

/// The caller of a command run on this thread: the daemon peer recorded by
/// `with_origin` (its uid and pid) and `with_access` (whether it
/// administers the daemon); without a daemon, this process (its effective
/// uid and pid), which holds the store's writer lock and so administers it.
/// Either way a lease is bound to the uid that took it, and a command reads
/// the same whether or not a daemon ran it for its owner.
pub fn caller_here() -> Caller {
    match super::current_origin() {
        Some(o) => Caller {
            uid: Some(o.uid),
            pid: Some(o.pid).filter(|&p| p != 0),
            admin: super::current_access().is_some_and(|a| a.admin),
        },
        None => Caller {
            uid: Some(rustix::process::geteuid().as_raw()),
            pid: Some(std::process::id()),
            admin: true,
        },
    }
}
