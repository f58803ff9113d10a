//! Sweeps across hosts (docs/scaling.md §7). A pid means something only on
//! the host its agent registered on, so every registration a replica
//! publishes records the replica's host id ([`stamp_host`]), and a host's
//! process probe is asked only about its own agents
//! ([`HostLocalProbe`]). The holder of the fleet's sweeper lease sweeps
//! every agent's lease (time only) and the process identity of its own
//! agents; every other host checks only the process identity of its own
//! agents. An agent of a host that is gone is then swept by lease expiry
//! alone, by the lease holder.
//!
//! Every change is published conditionally on its agent's subject and
//! decided again on the state it is conditional on, so a sweep racing a
//! heartbeat, another host's sweep or a stale holder loses and re-checks:
//! no agent is swept twice.

use super::{ClusterNode, ClusterResult, SweepLease};
use crate::model::Agent;
use crate::registry::codec::Origin;
use crate::registry::sweep::{process_identity_check, sweep_agent};
use crate::registry::{Event, EventKind, HostLocalProbe, Lsn};
use crate::time::Timestamp;

/// Records `host` in a registration about to be published (a replica's
/// registrations are tag 18, FORMAT.md); other events are left alone.
pub(super) fn stamp_host(event: &mut Event, host: &str) {
    if let EventKind::AgentRegistered { host: h, .. } = &mut event.kind {
        *h = Some(host.to_string());
    }
}

impl ClusterNode {
    /// Sweeps at `now`: as the holder of `lease` (taken or renewed here),
    /// every agent's lease and this host's agents' process identity;
    /// otherwise this host's agents' process identity only. Returns the
    /// changes this host published.
    pub async fn sweep(
        &self,
        lease: &SweepLease,
        now: Timestamp,
    ) -> ClusterResult<Vec<(Lsn, Event)>> {
        self.sweep_as(lease, Some(own_origin()), now).await
    }

    /// [`ClusterNode::sweep`] with the events' origin: the daemon's own for
    /// its periodic sweep, the requester's for an explicit one
    /// ([`ClusterNode::sweep_requested`]).
    pub(crate) async fn sweep_as(
        &self,
        lease: &SweepLease,
        origin: Option<Origin>,
        now: Timestamp,
    ) -> ClusterResult<Vec<(Lsn, Event)>> {
        let holder = lease.acquire_or_renew().await?;
        let decide = |a: &Agent| self.sweep_decision(holder, a, now);
        let planned: Vec<String> = self.shared.store.with_state(|s, _| {
            s.agents()
                .iter()
                .filter_map(decide)
                .filter_map(|e| e.kind.subject_agent().map(str::to_string))
                .collect()
        });
        let mut done = Vec::new();
        for agent in planned {
            let (event, lsn) = self
                .decide(origin, |s| {
                    let e = s.agent(&agent).and_then(decide);
                    Ok((e.clone(), e))
                })
                .await?;
            if let (Some(e), Some(lsn)) = (event, lsn) {
                done.push((lsn, e));
            }
        }
        Ok(done)
    }

    /// What this host's sweep at `now` does to `agent`: the whole rule as
    /// the lease holder, the process identity alone otherwise; either way
    /// only this host's agents are probed.
    fn sweep_decision(&self, holder: bool, agent: &Agent, now: Timestamp) -> Option<Event> {
        let probe = HostLocalProbe {
            host: &self.opts.host_id,
            inner: &self.opts.probe,
        };
        if holder {
            sweep_agent(agent, now, &self.opts.sweep, &probe)
        } else {
            process_identity_check(agent, now, &probe)
        }
    }
}

/// This process as the origin of the events it decides on its own (sweeps).
/// Who this process is, as a record's origin: the daemon stamps it on
/// what it does on its own (periodic sweeps, auto-compaction).
pub(crate) fn own_origin() -> Origin {
    Origin {
        uid: rustix::process::geteuid().as_raw(),
        pid: std::process::id(),
    }
}
