//! Store calls that may wait on the file system, kept off tokio's workers
//! when they will: an append that switches segments (the seal's msync, the
//! new segment's fsyncs, a hole punch) or waits for a switch under way, and
//! a durable heartbeat. Such a call runs in [`tokio::task::block_in_place`]:
//! the worker's other tasks move to another thread while this one blocks,
//! so one connection's segment switch does not stall the others. The cheap
//! common case (the record fits the active segment) stays inline: a hop to
//! another thread per heartbeat would cost more than the append itself.
//!
//! The check is a hint read without the log's lock
//! ([`crate::log::Log::append_may_wait`]): a switch begun by another thread
//! just after it still makes this append wait for the writer lock on the
//! worker, at most one switch long. On a current-thread runtime, where
//! nothing can take the worker over, the call runs inline.

use crate::registry::Lsn;
use crate::store::{Store, StoreResult};
use crate::time::Timestamp;
use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `f`, in `block_in_place` when it `may_wait` on a multi-thread
/// runtime (inline otherwise, as on a blocking thread, where
/// `block_in_place` is inline anyway).
pub(crate) fn off_worker<T>(may_wait: bool, f: impl FnOnce() -> T) -> T {
    let multi =
        Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
    if may_wait && multi {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// [`Store::heartbeat`], off the worker when it may wait on the file
/// system ([`Store::heartbeat_may_block`]).
pub(crate) fn heartbeat(
    store: &Store,
    name: &str,
    pid: Option<u32>,
    at: Option<Timestamp>,
) -> StoreResult<Lsn> {
    off_worker(store.heartbeat_may_block(name), || {
        store.heartbeat(name, pid, at)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{FaultInjection, LogOptions};
    use crate::registry::Registration;
    use crate::store::StoreOptions;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    const T: Timestamp = Timestamp(1_900_000_000_000);

    #[test]
    fn a_heartbeat_that_switches_segments_leaves_the_lone_worker_to_other_tasks() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = StoreOptions {
            log: LogOptions {
                segment_size: 32 * 1024,
                max_record_size: 4096,
                flush_interval: None,
                prepare_ahead: false,
                // A slow seal msync / directory fsync.
                faults: FaultInjection {
                    switch_delay: Some(Duration::from_millis(500)),
                    ..Default::default()
                },
                ..Default::default()
            },
            snapshot_every_events: 0,
            snapshot_every_secs: 0,
            ..Default::default()
        };
        let store = Arc::new(Store::open(tmp.path(), opts).unwrap());
        store
            .register(Registration::new("a", "claude", "/w"), Some(T))
            .unwrap();
        let mut fill = 0;
        while !store.heartbeat_may_block("a") {
            store.heartbeat("a", None, Some(T)).unwrap();
            fill += 1;
            assert!(fill < 10_000, "the segment never filled");
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (started, done) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        rt.block_on(async {
            let (s, st, d) = (store.clone(), started.clone(), done.clone());
            let beat = tokio::spawn(async move {
                st.store(true, Ordering::SeqCst);
                // The bound is generous: the last few beats of a segment
                // fit; the one that does not switches segments.
                while s.heartbeat_may_block("a") {
                    heartbeat(&s, "a", None, Some(T)).unwrap();
                }
                d.store(true, Ordering::SeqCst);
            });
            let (st, d) = (started.clone(), done.clone());
            // Another connection's task, on the runtime's only worker.
            let other = tokio::spawn(async move {
                while !st.load(Ordering::SeqCst) {
                    tokio::task::yield_now().await;
                }
                d.load(Ordering::SeqCst)
            });
            assert!(
                !other.await.unwrap(),
                "another task waited for the segment switch"
            );
            beat.await.unwrap();
        });
        assert!(done.load(Ordering::SeqCst));
        assert!(!store.heartbeat_may_block("a"), "the new segment has room");
    }
}
