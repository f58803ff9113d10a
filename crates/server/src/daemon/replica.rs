//! The daemon in the replicated mode (`agentlog serve --nats URLS --stream
//! FLEET`, docs/scaling.md §4 "The daemon"): the served store is the local
//! mirror of the fleet's stream, and every write is decided against the
//! fold and published through the stream by a [`ClusterNode`].
//!
//! Wiring, and the invariants it keeps:
//! * the node is installed as the store's command sink, so the CLI's
//!   command code, which the daemon runs on the blocking pool, writes
//!   through the stream unchanged; reads are served from the mirror;
//! * heartbeats on the connection tasks (the daemon's one heartbeat path,
//!   [`super::heartbeat`]) never block a worker: a lazy one joins the
//!   host's heartbeat batch, a durable one awaits its own publish, and the
//!   reply waits in the connection's [`Pipeline`] (many in flight per
//!   connection, answered in order);
//! * every record the mirror folds (this host's writes and other hosts')
//!   wakes the watchers and waiting reads;
//! * the periodic sweep of leases runs only on the host holding the fleet's
//!   sweeper lease (an explicit `sweep` goes the same way, through the
//!   store's sink); every host checks its own agents' processes;
//!   `compact`, explicit or the daemon's auto-compaction, compacts the
//!   fleet's stream (`cluster::compact`); snapshots and `registry.json` stay
//!   local to each host;
//! * ownership: the daemon owns the node, the node owns the store, the store
//!   holds the sink weakly; at shutdown every clone of the store is dropped
//!   before the node closes it (snapshot, sync, unlock).

use super::server::Shared;
use super::{ErrorReply, ServeError, ServeResult};
use crate::cluster::{
    ClusterError, ClusterNode, ClusterOptions, HeartbeatTicket, LeaseKey, SweepLease,
};
use crate::registry::Lsn;
use crate::store::{CommandSink, Store, StoreError};
use crate::time::Timestamp;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;

/// How `serve --nats` joins the cluster.
#[derive(Debug, Clone)]
pub struct ReplicaOptions {
    pub cluster: ClusterOptions,
    /// Lifetime of the sweeper lease when not renewed (`--lease-ttl`).
    pub lease_ttl: Duration,
}

/// The daemon's replication: the node and the sweeper lease.
pub(crate) struct Replica {
    node: Arc<ClusterNode>,
    lease: SweepLease,
    /// What the local log held when the daemon started (it mirrors the
    /// stream from the next sequence).
    resumed_at: Lsn,
    lease_ttl: Duration,
    /// Periodic sweep rounds run (whether or not this host held the lease).
    sweep_rounds: AtomicU64,
}

impl Replica {
    /// Marks `store` as a replica of the fleet, starts its node (the mirror
    /// resumes from the local log's last LSN + 1), installs the node as the
    /// store's command sink and opens the sweeper lease.
    pub async fn start(store: Store, opts: ReplicaOptions) -> ServeResult<Replica> {
        let fleet = opts.cluster.fleet.clone();
        let dir = store.dir().display().to_string();
        store
            .mark_replica(&fleet)
            .map_err(ServeError::store(format!(
                "cannot serve {dir} as a replica"
            )))?;
        let resumed_at = store.applied_lsn();
        let (host, replicas) = (opts.cluster.host_id.clone(), opts.cluster.replicas);
        let node = ClusterNode::start(store, opts.cluster)
            .await
            .map_err(ServeError::cluster(format!(
                "joining fleet `{fleet}` for {dir}"
            )))?;
        let node = Arc::new(node);
        let sink: Weak<dyn CommandSink> = Arc::downgrade(&node) as Weak<dyn CommandSink>;
        (node.store().set_command_sink(sink))
            .map_err(ServeError::store(format!("serving {dir} as a replica")))?;
        let lease_ttl = opts.lease_ttl;
        let lease = SweepLease::open(
            node.jetstream(),
            &fleet,
            &host,
            LeaseKey::Sweeper,
            lease_ttl,
            replicas,
        )
        .await
        .map_err(ServeError::cluster(format!(
            "opening the sweeper lease of fleet `{fleet}`"
        )))?;
        Ok(Replica {
            node,
            lease,
            resumed_at,
            lease_ttl,
            sweep_rounds: AtomicU64::new(0),
        })
    }

    /// The served store (the mirror): drop every clone before [`Replica::close`].
    pub fn store(&self) -> Arc<Store> {
        self.node.shared_store()
    }

    /// What `hello` and the startup line report.
    pub fn describe(&self) -> Value {
        let o = self.node.options();
        let contact = self.node.staleness();
        json!({
            "fleet": o.fleet,
            "stream": self.node.subjects().stream_name(),
            "host": o.host_id,
            "resumed_at": self.resumed_at,
            "applied": self.node.applied(),
            "connected": self.node.connected(),
            "nats_server": self.node.server_name(),
            "stale": contact.is_stale(),
            "stale_since": contact.stale_since.map(Timestamp::to_rfc3339_millis),
            "last_contact": contact.last_contact.to_rfc3339_millis(),
            "behind": contact.behind,
            "refused": self.refused(),
            "open": self.node.store().open_report().events_folded,
            "sweeper": self.lease.held(),
            "sweep_rounds": self.sweep_rounds.load(Ordering::Relaxed),
        })
    }

    /// The stream records this replica's mirror refused and went past
    /// (docs/scaling.md §4, "Refused records"): `{seq, subject, bytes,
    /// reason}` each, oldest first.
    pub fn refused(&self) -> Value {
        json!(self.node.refused())
    }

    /// The mark a stale replica adds to its replies (PROTOCOL.md):
    /// `{"since", "last_contact"}`; `None` while in contact with a quorum.
    pub fn stale_mark(&self) -> Option<Value> {
        if !self.node.is_stale() {
            return None;
        }
        // One snapshot: contact may come back since the check above.
        let contact = self.node.staleness();
        let since = contact.stale_since?;
        Some(json!({
            "since": since.to_rfc3339_millis(),
            "last_contact": contact.last_contact.to_rfc3339_millis(),
        }))
    }

    /// The node a connection applies heartbeats through
    /// ([`super::heartbeat::HeartbeatSink`]): without blocking a worker.
    pub fn node(&self) -> &ClusterNode {
        &self.node
    }

    /// The duties of a replica: wake `committed` on every record the mirror
    /// folds, and (with `sweep_every`) sweep: the whole fleet while holding
    /// the lease, this host's agents' processes otherwise (docs/scaling.md
    /// §7), trying or renewing the lease at least three times per lease
    /// lifetime.
    pub fn start_duties(self: &Arc<Self>, shared: &Arc<Shared>) -> Vec<JoinHandle<()>> {
        let mut duties = Vec::new();
        let mut applied = self.node.applied_watch();
        let wake = shared.clone();
        duties.push(tokio::spawn(async move {
            while applied.changed().await.is_ok() {
                wake.committed.notify_waiters();
            }
        }));
        if let Some(every) = shared.opts.sweep_every {
            let period = every
                .min(self.lease_ttl / 3)
                .max(Duration::from_millis(100));
            let me = self.clone();
            duties.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    match me.node.sweep(&me.lease, Timestamp::now()).await {
                        Ok(changes) if !changes.is_empty() => {
                            tracing::info!(swept = changes.len(), holder = me.lease.held(), "swept")
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!("periodic sweep failed: {e}"),
                    }
                    me.sweep_rounds.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        duties
    }

    /// Gives the lease up and closes the node (and with it the store):
    /// snapshot, sync, unlock. If a request still holds the store, syncs it
    /// instead.
    pub async fn close(self) -> ServeResult<()> {
        let released = self.lease.release().await;
        let closed = match Arc::try_unwrap(self.node) {
            Ok(node) => (node.close().await).map_err(ServeError::cluster("closing the replica")),
            Err(node) => (node.store().sync()).map_err(ServeError::store("syncing the replica")),
        };
        released.map_err(ServeError::cluster("releasing the sweeper lease"))?;
        closed
    }
}

pub(crate) fn reply_error(e: ClusterError) -> ErrorReply {
    ErrorReply::from_error(&StoreError::from(e), false)
}

/// Lazy heartbeats a connection sent to a replica whose replies wait for
/// their batch: many in flight per connection, answered in request order.
#[derive(Default)]
pub(crate) struct Pipeline {
    queue: VecDeque<Waiting>,
    /// Every waiting reply's bytes up to its LSN, back to back.
    prefixes: Vec<u8>,
}

struct Waiting {
    id: Value,
    prefix: std::ops::Range<usize>,
    ticket: HeartbeatTicket,
}

impl Pipeline {
    /// Replies that may wait on one connection before it stops reading and
    /// answers them.
    pub const MAX: usize = 4096;

    pub fn is_full(&self) -> bool {
        self.queue.len() >= Self::MAX
    }

    /// Queues the reply of `id`; `write_prefix` writes its bytes up to the
    /// LSN, which the ticket gives.
    pub fn push(
        &mut self,
        id: Value,
        ticket: HeartbeatTicket,
        write_prefix: impl FnOnce(&mut Vec<u8>),
    ) {
        let start = self.prefixes.len();
        write_prefix(&mut self.prefixes);
        self.queue.push_back(Waiting {
            id,
            prefix: start..self.prefixes.len(),
            ticket,
        });
    }

    /// Waits for each queued reply in order and writes it to `out`.
    pub async fn settle<W: AsyncWrite + Unpin>(&mut self, out: &mut W) -> std::io::Result<()> {
        let mut line = Vec::with_capacity(128);
        while let Some(w) = self.queue.pop_front() {
            line.clear();
            match w.ticket.wait().await {
                Ok(lsn) => {
                    line.extend_from_slice(&self.prefixes[w.prefix]);
                    serde_json::to_writer(&mut line, &lsn).expect("a number always serializes");
                    line.extend_from_slice(b"}}\n");
                }
                Err(e) => {
                    let doc = super::conn::error_doc(w.id, &reply_error(e));
                    serde_json::to_writer(&mut line, &doc).expect("a JSON value always serializes");
                    line.push(b'\n');
                }
            }
            out.write_all(&line).await?;
        }
        self.prefixes.clear();
        Ok(())
    }
}
