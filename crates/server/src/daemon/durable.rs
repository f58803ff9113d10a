//! Group commit for the hot path's durable heartbeats, across connections
//! and within one: a connection appends inline and holds the replies
//! ([`Held`]) until the one sync task ([`Syncer`]) reports an fsync that
//! covers the highest LSN held. A single blocking call at a time waits for
//! the log's fsync, covering every record appended before it started, so
//! many connections (and a pipelined batch on one) share each fsync without
//! a blocking thread per request.
//!
//! Invariant: no held reply reaches the connection's output before the
//! fsync that covers it; if that fsync fails, each held durable reply is
//! replaced by the error the general path would have sent for it. A failed
//! sync is not retried for the same LSNs (a poisoned log fails every sync):
//! the task waits for a write beyond them, so it never spins.

use super::ErrorReply;
use crate::registry::Lsn;
use crate::store::{Store, StoreError};
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{watch, Notify};

/// How far the log is known durable, and the last failed sync.
#[derive(Debug, Clone)]
struct Synced {
    upto: Lsn,
    failed: Option<(Lsn, ErrorReply)>,
}

/// Scheduler rounds the sync task gives other connections before an fsync,
/// while each round brings new durable writes.
const GATHER_ROUNDS: usize = 8;

/// The daemon's sync task and the connections' way to wait for it.
pub(crate) struct Syncer {
    /// Highest LSN a connection waits for.
    wanted: AtomicU64,
    kick: Notify,
    synced: watch::Sender<Synced>,
    /// Blocking syncs started (a test's view of the spin it must not do).
    rounds: AtomicU64,
}

impl Syncer {
    pub fn new(synced: Lsn) -> Syncer {
        Syncer {
            wanted: AtomicU64::new(synced),
            kick: Notify::new(),
            synced: watch::Sender::new(Synced {
                upto: synced,
                failed: None,
            }),
            rounds: AtomicU64::new(0),
        }
    }

    /// Waits until `lsn` is durable; the error is the failed sync's.
    pub async fn durable(&self, lsn: Lsn) -> Result<(), ErrorReply> {
        let mut rx = self.synced.subscribe();
        if rx.borrow().upto >= lsn {
            return Ok(());
        }
        self.wanted.fetch_max(lsn, Ordering::AcqRel);
        self.kick.notify_one();
        let covered = |s: &Synced| s.upto >= lsn || s.failed.as_ref().is_some_and(|f| f.0 >= lsn);
        let outcome = match rx.wait_for(covered).await {
            Ok(s) if s.upto >= lsn => Ok(()),
            Ok(s) => Err(s.failed.clone().expect("covered by a failure").1),
            Err(_) => Err(ErrorReply::new(
                super::code::SHUTTING_DOWN,
                "the daemon stopped before the write was durable",
                1,
            )),
        };
        outcome
    }

    /// The sync task (runs until aborted at shutdown).
    pub async fn run(self: Arc<Self>, store: Arc<Store>) {
        // The highest LSN a sync failed for: its waiters have their error.
        let mut failed_at: Lsn = 0;
        loop {
            let mut target = self.wanted.load(Ordering::Acquire);
            if target <= self.synced.borrow().upto.max(failed_at) {
                self.kick.notified().await;
                continue;
            }
            // Let the connections already woken append first (a burst of
            // requests arrives together), so this fsync covers them too.
            for _ in 0..GATHER_ROUNDS {
                tokio::task::yield_now().await;
                let now = self.wanted.load(Ordering::Acquire);
                if now == target {
                    break;
                }
                target = now;
            }
            let s = store.clone();
            self.rounds.fetch_add(1, Ordering::Relaxed);
            let done = tokio::task::spawn_blocking(move || s.log().wait_durable(target)).await;
            if !matches!(done, Ok(Ok(()))) {
                failed_at = target;
            }
            self.synced.send_modify(|s| match done {
                Ok(Ok(())) => s.upto = s.upto.max(target),
                Ok(Err(e)) => {
                    let e = StoreError::from(e);
                    s.failed = Some((target, ErrorReply::from_error(&e, false)));
                }
                Err(e) => {
                    let msg = format!("internal error running the request: {e}");
                    s.failed = Some((target, ErrorReply::new(super::code::FAILED, msg, 1)));
                }
            });
        }
    }
}

/// Reply lines a connection holds back until an fsync covers them.
#[derive(Default)]
pub(crate) struct Held {
    bytes: Vec<u8>,
    /// Each held line's end in `bytes`, and its id when it acknowledges a
    /// durable write (to answer with the error if the sync fails).
    lines: Vec<(usize, Option<Value>)>,
    /// Highest LSN a held reply acknowledges durably.
    lsn: Lsn,
}

/// Held bytes beyond which a connection settles before reading on.
const MAX_HELD: usize = 64 << 10;

impl Held {
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Holds `line`; `durable` is the id and LSN of the write it
    /// acknowledges durably. Whether the connection should settle now.
    pub fn hold(&mut self, line: &[u8], durable: Option<(Value, Lsn)>) -> bool {
        self.bytes.extend_from_slice(line);
        let id = durable.map(|(id, lsn)| {
            self.lsn = self.lsn.max(lsn);
            id
        });
        self.lines.push((self.bytes.len(), id));
        self.bytes.len() >= MAX_HELD
    }

    /// Waits for the fsync covering the held replies and writes them to
    /// `w` in order (the durable ones as errors if the sync failed).
    pub async fn settle<W: AsyncWrite + Unpin>(
        &mut self,
        syncer: &Syncer,
        w: &mut W,
    ) -> std::io::Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        let synced = if self.lsn > 0 {
            syncer.durable(self.lsn).await
        } else {
            Ok(())
        };
        match synced {
            Ok(()) => w.write_all(&self.bytes).await?,
            Err(e) => {
                let mut start = 0;
                for (end, id) in self.lines.drain(..) {
                    match id {
                        Some(id) => super::conn::send(w, &super::conn::error_doc(id, &e)).await?,
                        None => w.write_all(&self.bytes[start..end]).await?,
                    }
                    start = end;
                }
            }
        }
        self.bytes.clear();
        self.lines.clear();
        self.lsn = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreOptions;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn held_replies_go_out_in_order_after_the_covering_sync() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path(), StoreOptions::default()).unwrap());
        store
            .register(crate::registry::Registration::new("a", "claude", "/"), None)
            .unwrap();
        let lsn = store.heartbeat("a", None, None).unwrap();
        let syncer = Arc::new(Syncer::new(store.log().synced_lsn()));
        let task = tokio::spawn(syncer.clone().run(store.clone()));
        let mut held = Held::default();
        assert!(!held.hold(b"one\n", None));
        assert!(!held.hold(b"two\n", Some((Value::from(2), lsn))));
        let mut out = Vec::new();
        held.settle(&syncer, &mut out).await.unwrap();
        assert_eq!(out, b"one\ntwo\n");
        assert!(store.log().synced_lsn() >= lsn);
        assert!(held.is_empty());
        task.abort();
    }

    /// A failed sync is answered, then not retried in a loop: the task
    /// waits for a later write (which fails at once on a poisoned log).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_sync_is_not_retried_in_a_spin() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = StoreOptions::default();
        opts.log.faults.fail_syncs = true;
        let store = Arc::new(Store::open(dir.path(), opts).unwrap());
        let syncer = Arc::new(Syncer::new(store.log().synced_lsn()));
        let task = tokio::spawn(syncer.clone().run(store.clone()));
        let reg = crate::registry::Registration::new("a", "claude", "/");
        assert!(store.register(reg, None).is_err(), "the sync must fail");
        let lsn = store.log().last_lsn().expect("the register was appended");
        assert!(syncer.durable(lsn).await.is_err());
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(
            syncer.rounds.load(Ordering::Relaxed),
            1,
            "the sync task spun"
        );
        // A later waiter gets the same answer at once, with no new round.
        assert!(syncer.durable(lsn).await.is_err());
        assert_eq!(syncer.rounds.load(Ordering::Relaxed), 1);
        task.abort();
    }
}
