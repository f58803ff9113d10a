//! An explicit `agentlog sweep` through a replica's daemon (docs/scaling.md
//! §7): the same path as the periodic sweep ([`ClusterNode::sweep`]), under
//! the fleet's sweeper lease, so one host sweeps the fleet whichever way a
//! sweep is asked for. The lease is taken if free, renewed if this host holds
//! it (through the daemon's own handle or not); held by another host, the
//! sweep is refused, naming it: that host sweeps.

use super::{ClusterError, ClusterNode, ClusterResult, LeaseKey, SweepLease};
use crate::registry::codec::Origin;
use crate::registry::{Event, Lsn};
use crate::store::StoreError;
use crate::time::Timestamp;
use std::time::Duration;

/// The lease's lifetime when the bucket is created here (a daemon creates
/// it at start with its `--lease-ttl`).
const LEASE_TTL: Duration = Duration::from_secs(15);

impl ClusterNode {
    /// Sweeps at `now` on behalf of `origin` if this host holds (or takes)
    /// the fleet's sweeper lease; refused otherwise.
    pub async fn sweep_requested(
        &self,
        origin: Option<Origin>,
        now: Timestamp,
    ) -> ClusterResult<Vec<(Lsn, Event)>> {
        let o = &self.opts;
        let lease = SweepLease::open(
            &self.js,
            &o.fleet,
            &o.host_id,
            LeaseKey::Sweeper,
            LEASE_TTL,
            o.replicas,
        )
        .await?;
        if !lease.acquire_or_renew().await? {
            let holder = lease
                .holder()
                .await?
                .unwrap_or_else(|| "another host".into());
            return Err(ClusterError::Store(StoreError::Replication(format!(
                "host {holder} holds the sweeper lease of fleet `{}` and sweeps it; \
                 nothing was swept here (sweep through {holder}'s daemon)",
                o.fleet
            ))));
        }
        self.sweep_as(&lease, origin, now).await
    }
}
