//! The cluster node as the store's [`CommandSink`]: the daemon runs the
//! CLI's command code against its local store, and a replica's store hands
//! every command here, so it is decided against the fold and published
//! through the stream (docs/scaling.md §4, "The daemon").
//!
//! The store calls from a blocking thread (the daemon runs commands on
//! tokio's blocking pool); the node's futures run on its runtime through
//! `block_in_place` + `Handle::block_on`, which is also safe on a worker of a
//! multi-thread runtime. The store's state lock is never held across a call
//! (the mirror needs it to fold what the call waits for).

use super::{ClusterError, ClusterNode};
use crate::log::Durability;
use crate::registry::codec::Origin;
use crate::registry::{Event, Lsn};
use crate::store::{Check, CommandSink, StoreError, StoreResult};
use crate::time::Timestamp;

impl From<ClusterError> for StoreError {
    fn from(e: ClusterError) -> StoreError {
        match e {
            ClusterError::Registry(e) => StoreError::Registry(e),
            ClusterError::Store(e) => e,
            other => StoreError::Replication(other.to_string()),
        }
    }
}

impl ClusterNode {
    fn block_on<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        tokio::task::block_in_place(|| self.runtime.block_on(f))
    }
}

impl CommandSink for ClusterNode {
    fn command(
        &self,
        origin: Option<Origin>,
        check: &mut Check<'_>,
    ) -> StoreResult<Vec<(Lsn, Event)>> {
        Ok(self.block_on(self.publish_decided(origin, check))?)
    }

    fn heartbeat(
        &self,
        origin: Option<Origin>,
        agent: &str,
        pid: Option<u32>,
        at: Timestamp,
        durable: bool,
    ) -> StoreResult<Lsn> {
        let mode = if durable {
            Durability::Durable
        } else {
            Durability::Lazy
        };
        let beat = async {
            let ticket = self.heartbeat(origin, agent, pid, Some(at), mode).await?;
            ticket.wait().await
        };
        Ok(self.block_on(beat)?)
    }

    fn sweep(&self, origin: Option<Origin>, now: Timestamp) -> StoreResult<Vec<(Lsn, Event)>> {
        Ok(self.block_on(self.sweep_requested(origin, now))?)
    }

    fn compact(
        &self,
        origin: Option<Origin>,
        now: Timestamp,
        opts: &crate::compact::CompactOptions,
    ) -> StoreResult<crate::compact::CompactionReport> {
        Ok(self.block_on(self.compact_stream(origin, now, opts))?)
    }
}
