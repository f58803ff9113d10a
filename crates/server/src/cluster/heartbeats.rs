//! Lazy heartbeats, coalesced (docs/scaling.md §5): a host gathers the lazy
//! heartbeats it accepted during a short window into ONE stream message on
//! its own subject `al.<fleet>.hb.<host>` (event tag 15, `HeartbeatBatch`),
//! instead of paying one R3 publish, ack and three folds per heartbeat.
//!
//! Invariants:
//! * a heartbeat is validated against the local fold before it joins a
//!   batch; the batch is folded on every host as its heartbeats in order,
//!   each by the fold's rules for a heartbeat at that time (a late one for
//!   a finished or re-registered agent is an anomaly, as locally);
//! * a batch is sealed after [`BatchLimits::window`] from its first
//!   heartbeat, or at once when it reaches [`BatchLimits::max_beats`] or
//!   [`BatchLimits::max_bytes`]; at most [`BatchLimits::in_flight`] sealed
//!   batches await their ack, and past that heartbeats wait for room
//!   (back-pressure: memory is bounded by `in_flight + 1` batches);
//! * a batch is published without a message id (a retried batch stored
//!   twice folds to the same registry) and retried through leader changes
//!   until the node's deadline, like a durable publish;
//! * a command or durable heartbeat of the host is published only after
//!   the batch open when it came was answered ([`Batcher::seal`]), so it
//!   lands after the lazy heartbeats the host accepted before it;
//! * each heartbeat gets a [`HeartbeatTicket`] that resolves to the batch's
//!   stream sequence once the stream stored it and the local mirror folded
//!   it; that sequence is the heartbeat's LSN on every host.

use super::mirror::Shared;
use super::{publish_retried, ClusterError, ClusterResult};
use crate::registry::codec::{HeartbeatBatchBuilder, Origin};
use crate::registry::Lsn;
use crate::time::Timestamp;
use async_nats::jetstream::{self, message::PublishMessage};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{watch, Notify, Semaphore};

/// When a batch is sealed, and how many may await their ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// From a batch's first heartbeat until it is sealed (default 2 ms).
    pub window: Duration,
    /// Heartbeats per batch (default 2,048).
    pub max_beats: usize,
    /// Bytes of entries per batch (default 256 KiB, below NATS's 1 MiB
    /// default payload limit).
    pub max_bytes: usize,
    /// Sealed batches awaiting their ack (default 16).
    pub in_flight: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            window: Duration::from_millis(2),
            max_beats: crate::registry::commands::BATCH_BEATS_MAX,
            max_bytes: crate::registry::commands::BATCH_BYTES_MAX,
            in_flight: 16,
        }
    }
}

/// What became of a batch: its sequence once folded here, or why it failed.
type Outcome = Option<Result<Lsn, String>>;

/// A heartbeat's place in a batch.
#[derive(Debug)]
pub struct HeartbeatTicket {
    outcome: watch::Receiver<Outcome>,
}

impl HeartbeatTicket {
    /// A ticket already resolved to `lsn` (a durable heartbeat, answered
    /// only once stored and folded).
    pub(super) fn ready(lsn: Lsn) -> HeartbeatTicket {
        HeartbeatTicket {
            outcome: watch::channel(Some(Ok(lsn))).1,
        }
    }

    /// The batch's stream sequence (the heartbeat's LSN), once the stream
    /// stored the batch and the local mirror folded it.
    pub async fn wait(mut self) -> ClusterResult<Lsn> {
        let done = self.outcome.wait_for(Option::is_some).await;
        match done.as_deref() {
            Ok(Some(Ok(seq))) => Ok(*seq),
            Ok(Some(Err(e))) => Err(ClusterError::HeartbeatBatch(e.clone())),
            _ => Err(ClusterError::HeartbeatBatch(
                "the node stopped before the batch was published".into(),
            )),
        }
    }
}

/// The batch being filled.
struct Open {
    beats: HeartbeatBatchBuilder,
    outcome: watch::Sender<Outcome>,
}

impl Open {
    fn new() -> Open {
        Open {
            beats: HeartbeatBatchBuilder::default(),
            outcome: watch::channel(None).0,
        }
    }
}

/// The host's heartbeat batcher: shared by the accepting callers and the
/// flusher task ([`run`]).
pub(crate) struct Batcher {
    open: Mutex<Open>,
    limits: BatchLimits,
    /// Wakes the flusher: a batch's first heartbeat, a full batch, a flush.
    wake: Notify,
    /// Wakes callers waiting for room: the open batch was taken.
    room: Notify,
    in_flight: Arc<Semaphore>,
    /// Highest sequence of a batch stored and folded here.
    acked: AtomicU64,
    /// Heartbeats of batches that failed (accepted, never stored).
    failed: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Batcher {
    pub fn new(limits: BatchLimits) -> Batcher {
        let limits = BatchLimits {
            max_beats: limits.max_beats.max(1),
            in_flight: limits.in_flight.max(1),
            ..limits
        };
        Batcher {
            open: Mutex::new(Open::new()),
            limits,
            wake: Notify::new(),
            room: Notify::new(),
            in_flight: Arc::new(Semaphore::new(limits.in_flight)),
            acked: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    fn is_full(&self, open: &Open) -> bool {
        open.beats.len() >= self.limits.max_beats || open.beats.bytes() >= self.limits.max_bytes
    }

    /// Adds a (validated) heartbeat to the open batch, waiting while it is
    /// full (back-pressure).
    pub async fn push(
        &self,
        at: Timestamp,
        agent: &str,
        pid: Option<u32>,
        origin: Option<Origin>,
    ) -> HeartbeatTicket {
        loop {
            let room = {
                let mut open = lock(&self.open);
                if !self.is_full(&open) {
                    open.beats.push(at, agent, pid, origin);
                    let outcome = open.outcome.subscribe();
                    if open.beats.len() == 1 || self.is_full(&open) {
                        self.wake.notify_one();
                    }
                    return HeartbeatTicket { outcome };
                }
                // Registered before the lock is released: the flusher takes
                // the batch under the lock, then wakes every such waiter.
                self.room.notified()
            };
            room.await;
        }
    }

    /// Heartbeats accepted whose batch failed (logged; a lazy heartbeat's
    /// loss window).
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Seals the open batch now and waits until it was answered, so a
    /// command published next lands after the heartbeats this host accepted
    /// before it (as on one connection before batching). A failed batch is
    /// already logged and counted.
    pub async fn seal(&self) {
        let pending = {
            let open = lock(&self.open);
            (!open.beats.is_empty()).then(|| open.outcome.subscribe())
        };
        if let Some(outcome) = pending {
            self.wake.notify_one();
            let _ = (HeartbeatTicket { outcome }).wait().await;
        }
    }

    /// Seals the open batch now and waits until every batch sealed so far
    /// was answered; the highest sequence stored and folded here.
    pub async fn flush(&self) -> Lsn {
        self.seal().await;
        // Every permit back = nothing in flight.
        let all = self.limits.in_flight as u32;
        if let Ok(p) = self.in_flight.acquire_many(all).await {
            drop(p);
        }
        self.acked.load(Ordering::Relaxed)
    }

    fn take(&self) -> Option<(Vec<u8>, usize, watch::Sender<Outcome>)> {
        let mut open = lock(&self.open);
        if open.beats.is_empty() {
            return None;
        }
        let count = open.beats.len();
        let payload = open.beats.take_payload();
        let outcome = std::mem::replace(&mut open.outcome, watch::channel(None).0);
        drop(open);
        self.room.notify_waiters();
        Some((payload, count, outcome))
    }
}

/// The flusher: seals batches (window, size or flush) and publishes each
/// asynchronously, at most `in_flight` awaiting their ack. Runs until the
/// node aborts it.
pub(crate) async fn run(
    batcher: Arc<Batcher>,
    shared: Arc<Shared>,
    js: jetstream::Context,
    subject: async_nats::Subject,
    deadline: Duration,
) {
    loop {
        batcher.wake.notified().await;
        let full = batcher.is_full(&lock(&batcher.open));
        if !full {
            // The window runs from the batch's first heartbeat; a full
            // batch or a flush ends it early.
            let _ = tokio::time::timeout(batcher.limits.window, batcher.wake.notified()).await;
        }
        let Ok(permit) = batcher.in_flight.clone().acquire_owned().await else {
            return;
        };
        let Some((payload, count, outcome)) = batcher.take() else {
            continue;
        };
        let (batcher, shared, js, subject) =
            (batcher.clone(), shared.clone(), js.clone(), subject.clone());
        tokio::spawn(async move {
            let payload = bytes::Bytes::from(payload);
            let msg = || PublishMessage::build().payload(payload.clone());
            // No resend on a reconnect: a batch has no message id, so only
            // a timed-out attempt is retried (docs/scaling.md §5).
            let stored = match publish_retried(&js, &subject, msg, deadline, None).await {
                Ok(ack) => shared
                    .wait_applied(ack.sequence, deadline)
                    .await
                    .map(|()| ack.sequence)
                    .map_err(|e| e.to_string()),
                Err(e) => Err(format!("publish on {subject}: {e}")),
            };
            // Before the permit goes back: a flush that sees every permit
            // back may close the node, which needs the mirror state alone.
            drop(shared);
            match &stored {
                Ok(seq) => {
                    batcher.acked.fetch_max(*seq, Ordering::Relaxed);
                }
                Err(e) => {
                    batcher.failed.fetch_add(count as u64, Ordering::Relaxed);
                    tracing::warn!(heartbeats = count, error = %e, "heartbeat batch failed");
                }
            }
            outcome.send_replace(Some(stored));
            drop(permit);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A durable heartbeat's ticket is answered without a batch.
    #[tokio::test]
    async fn a_ready_ticket_resolves_at_once() {
        assert_eq!(HeartbeatTicket::ready(42).wait().await.unwrap(), 42);
    }
}
