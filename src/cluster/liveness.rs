//! Whether this replica is in contact with a quorum of its stream
//! (docs/scaling.md §8): the `stale` mark of `hello` and of a stale
//! replica's replies (PROTOCOL.md).
//!
//! A probe asks the stream's info every [`PROBE_EVERY`] with a timeout of
//! [`PROBE_TIMEOUT`]. The answer comes from the stream's Raft leader, so an
//! answer at all proves a leader; it also lists the other replicas, and the
//! contact counts only if the leader and enough replicas seen within
//! [`STALE_AFTER`] make a majority of the stream's replicas (a leader that
//! lost its followers still answers for a while before it steps down). The
//! replica is **stale** once no probe succeeded for [`STALE_AFTER`], and
//! fresh again at the next success. Invariants: `stale_since` is set only
//! while stale, and is never earlier than `last_contact`; the probe is one
//! request a second and never touches the stream's messages.
//!
//! Why a probe and not the acks of this host's writes: an idle host writes
//! nothing, and its readers are the ones who need to know the mirror may be
//! behind. Why not fail writes fast while stale: the mark cannot tell a
//! lasting loss of quorum from a leader election after one server died
//! (4–9 s here, during which no leader answers either), and a write retried
//! through an election is stored once and answered; failing it would turn
//! every election into errors (docs/scaling.md §8).

use crate::time::Timestamp;
use async_nats::jetstream::stream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the stream's quorum is probed.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long one probe may take before it counts as a miss.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// No contact for this long makes the replica stale.
pub const STALE_AFTER: Duration = Duration::from_secs(3);

/// What a replica knows about its contact with the stream's quorum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Staleness {
    /// When the replica was marked stale (`None` while fresh).
    pub stale_since: Option<Timestamp>,
    /// The last probe that reached a quorum (or the node's start).
    pub last_contact: Timestamp,
}

impl Staleness {
    /// No quorum reached for `STALE_AFTER`: reads may be behind.
    pub fn is_stale(&self) -> bool {
        self.stale_since.is_some()
    }
}

#[derive(Debug)]
struct Contact {
    /// The last contact, on the monotonic clock (the bound) and the wall
    /// clock (what is reported).
    last: (Instant, Timestamp),
    stale_since: Option<Timestamp>,
}

/// Shared between the probe task and the node's readers.
#[derive(Debug)]
pub(crate) struct Liveness {
    /// `stale` without the lock: every reply of a replica asks it.
    stale: AtomicBool,
    contact: Mutex<Contact>,
}

impl Liveness {
    /// Starts fresh: joining the cluster (the stream was created or found)
    /// is a contact.
    pub fn new() -> Liveness {
        Liveness {
            stale: AtomicBool::new(false),
            contact: Mutex::new(Contact {
                last: (Instant::now(), Timestamp::now()),
                stale_since: None,
            }),
        }
    }

    pub fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Relaxed)
    }

    pub fn get(&self) -> Staleness {
        let c = self.contact.lock().unwrap_or_else(|e| e.into_inner());
        Staleness {
            stale_since: c.stale_since,
            last_contact: c.last.1,
        }
    }

    fn reached(&self) {
        let mut c = self.contact.lock().unwrap_or_else(|e| e.into_inner());
        c.last = (Instant::now(), Timestamp::now());
        c.stale_since = None;
        self.stale.store(false, Ordering::Relaxed);
    }

    /// A probe failed: stale once the last contact is `STALE_AFTER` old.
    fn missed(&self) {
        let mut c = self.contact.lock().unwrap_or_else(|e| e.into_inner());
        if c.stale_since.is_none() && c.last.0.elapsed() >= STALE_AFTER {
            c.stale_since = Some(Timestamp::now());
            self.stale.store(true, Ordering::Relaxed);
        }
    }
}

/// The probe task: runs until aborted.
pub(crate) async fn run(liveness: Arc<Liveness>, mut stream: stream::Stream) {
    let mut tick = tokio::time::interval(PROBE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match tokio::time::timeout(PROBE_TIMEOUT, quorum_reachable(&mut stream)).await {
            Ok(Ok(())) => liveness.reached(),
            Ok(Err(why)) => {
                tracing::debug!("stream quorum probe: {why}");
                liveness.missed();
            }
            Err(_) => {
                tracing::debug!("stream quorum probe: no answer within {PROBE_TIMEOUT:?}");
                liveness.missed();
            }
        }
    }
}

/// One probe: the stream's info, judged for a quorum in contact.
async fn quorum_reachable(stream: &mut stream::Stream) -> Result<(), String> {
    let info = stream.info().await.map_err(|e| e.to_string())?;
    let replicas = info.config.num_replicas.max(1);
    // A stream that is not clustered answers from its one server.
    let Some(cluster) = &info.cluster else {
        return Ok(());
    };
    if cluster.leader.is_none() {
        return Err("the stream has no leader".into());
    }
    let followers = cluster
        .replicas
        .iter()
        .filter(|p| p.current && !p.offline && p.active < STALE_AFTER)
        .count();
    let in_contact = 1 + followers;
    if in_contact * 2 > replicas {
        Ok(())
    } else {
        Err(format!(
            "{in_contact} of {replicas} replicas in contact (leader {:?})",
            cluster.leader
        ))
    }
}
