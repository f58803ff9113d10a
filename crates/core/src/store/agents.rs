//! The store's side of the seeds' remaining agent operations: registration
//! through a transport, display names, transport reconnects, paged reads and
//! one agent's description. Each command goes the way of every other one
//! (validate against the state, append, fold under the store lock); the
//! queries read the folded state under the read lock and append nothing.

use super::{now_or, Store, StoreResult};
use crate::model::TransportClient;
use crate::registry::labels::{transport_event, AgentUpdate};
use crate::registry::queries::{AgentSummary, PageLimits, UnreadPage};
use crate::registry::{EventKind, Lsn, Registration, RegistrationKind, TransportCause};
use crate::time::Timestamp;

impl Store {
    /// Registers an agent attached through a transport serving `client`: one
    /// batch of the registration and its `TransportClientSet`, so no reader
    /// sees the agent without its transport. Returns the registration's LSN.
    pub fn register_via_transport(
        &self,
        reg: Registration,
        client: TransportClient,
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
            let t = transport_event(&name, client.clone(), TransportCause::Registration, at)?;
            Ok(vec![e, t])
        })?;
        Ok((lsns[0], kind))
    }

    /// Updates fields and labels of an agent in one batch; returns the LSNs
    /// of its events (fields, display name, transport client, as given).
    pub fn update_agent(
        &self,
        agent: &str,
        update: AgentUpdate,
        at: Option<Timestamp>,
    ) -> StoreResult<Vec<Lsn>> {
        let at = now_or(at);
        self.command(|s| s.check_agent_update(agent, update.clone(), at))
    }

    /// Sets (`Some`) or clears (`None`) an agent's display name.
    pub fn set_display_name(
        &self,
        agent: &str,
        display_name: Option<String>,
        at: Option<Timestamp>,
    ) -> StoreResult<Lsn> {
        let at = now_or(at);
        self.one(|s| s.check_display_name(agent, display_name.clone(), at))
    }

    /// Records a reconnect of the agent's transport client (`None`
    /// detaches the transport).
    pub fn set_transport_client(
        &self,
        agent: &str,
        client: Option<TransportClient>,
        at: Option<Timestamp>,
    ) -> StoreResult<Lsn> {
        let at = now_or(at);
        self.one(|s| s.check_transport_client(agent, client.clone(), TransportCause::Reconnect, at))
    }

    /// The first page of `reader`'s unread mail at `now` (default: the
    /// clock); appends nothing. Deliver it, then [`Store::mark_read`] its ids.
    pub fn unread_page(
        &self,
        reader: &str,
        project_root: Option<&str>,
        limits: PageLimits,
        now: Option<Timestamp>,
    ) -> StoreResult<UnreadPage> {
        let now = now_or(now);
        Ok(self
            .read()
            .state
            .unread_page(reader, project_root, now, limits)?)
    }

    /// One agent's row with its unread (at `now`, default the clock) and
    /// sent message counts; `RegistryError::NotFound` for an unknown name.
    pub fn agent_summary(&self, name: &str, now: Option<Timestamp>) -> StoreResult<AgentSummary> {
        let now = now_or(now);
        Ok(self.read().state.summary(name, now)?)
    }
}
