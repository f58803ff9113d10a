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
//! replica is **stale** once no probe succeeded for [`STALE_AFTER`] (judged
//! when asked, too: a process paused past the bound is stale at its first
//! read, before its probe runs again), or while its mirror is **behind**:
//! it has not folded the stream's last sequence as a probe saw it
//! [`LAG_AFTER`] ago, or, after contact came back, as the first probe then
//! saw it (a host that was cut off or paused answers marked until it caught
//! up; issue 27). Invariants: `stale_since` is set only while stale, and is
//! never earlier than `last_contact`; the probe is one request a second and
//! never touches the stream's messages.
//!
//! Why a probe and not the acks of this host's writes: an idle host writes
//! nothing, and its readers are the ones who need to know the mirror may be
//! behind. Why not fail writes fast while stale: the mark cannot tell a
//! lasting loss of quorum from a leader election after one server died
//! (4–9 s here, during which no leader answers either), and a write retried
//! through an election is stored once and answered; failing it would turn
//! every election into errors (docs/scaling.md §8).

use crate::registry::Lsn;
use crate::time::Timestamp;
use async_nats::jetstream::stream;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How often the stream's quorum is probed.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long one probe may take before it counts as a miss.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// No contact for this long makes the replica stale.
pub const STALE_AFTER: Duration = Duration::from_secs(3);
/// A mirror that has not folded the stream's last sequence of this long ago
/// is behind, hence stale.
pub const LAG_AFTER: Duration = Duration::from_secs(2);

/// What a replica knows about its contact with the stream's quorum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Staleness {
    /// When the replica was marked stale (`None` while fresh).
    pub stale_since: Option<Timestamp>,
    /// The last probe that reached a quorum (or the node's start).
    pub last_contact: Timestamp,
    /// While the mirror is behind: how many sequences it lacks of what it
    /// must have folded to be fresh.
    pub behind: Option<Lsn>,
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
    /// The stream's last sequence as recent probes saw it, oldest first.
    seen: VecDeque<(Instant, Lsn)>,
    /// After contact came back: the sequence the mirror must fold first.
    catch_up_to: Lsn,
}

/// Shared between the probe task and the node's readers.
#[derive(Debug)]
pub(crate) struct Liveness {
    /// No contact for `STALE_AFTER`, as the probe last judged it.
    stale: AtomicBool,
    /// The monotonic clock's origin for `last_contact_ns`.
    origin: Instant,
    /// The last contact, in nanoseconds after `origin`: judged when asked.
    last_contact_ns: AtomicU64,
    /// The sequence the mirror must have folded to be fresh (0: any).
    must_reach: AtomicU64,
    /// The mirror's last folded sequence.
    applied: watch::Receiver<Lsn>,
    contact: Mutex<Contact>,
}

impl Liveness {
    /// Starts fresh: joining the cluster (the stream was created or found)
    /// is a contact. `applied` follows the mirror.
    pub fn new(applied: watch::Receiver<Lsn>) -> Liveness {
        let origin = Instant::now();
        Liveness {
            stale: AtomicBool::new(false),
            origin,
            last_contact_ns: AtomicU64::new(0),
            must_reach: AtomicU64::new(0),
            applied,
            contact: Mutex::new(Contact {
                last: (origin, Timestamp::now()),
                stale_since: None,
                seen: VecDeque::new(),
                catch_up_to: 0,
            }),
        }
    }

    fn contact_age(&self) -> Duration {
        let last = Duration::from_nanos(self.last_contact_ns.load(Ordering::Relaxed));
        self.origin.elapsed().saturating_sub(last)
    }

    /// How many sequences the mirror lacks of what it must have folded.
    fn behind(&self) -> Option<Lsn> {
        let must = self.must_reach.load(Ordering::Relaxed);
        let applied = *self.applied.borrow();
        (applied < must).then(|| must - applied)
    }

    /// Stale: no contact for `STALE_AFTER`, or behind. Lock-free: every
    /// reply of a replica asks it.
    pub fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Relaxed)
            || self.contact_age() >= STALE_AFTER
            || self.behind().is_some()
    }

    pub fn get(&self) -> Staleness {
        let c = self.contact.lock().unwrap_or_else(|e| e.into_inner());
        let behind = self.behind();
        let lost = self.stale.load(Ordering::Relaxed) || self.contact_age() >= STALE_AFTER;
        let stale_since = match c.stale_since {
            Some(t) => Some(t),
            // Judged now, before the probe: when the bound passed.
            None if lost => Some(c.last.1.add_millis(STALE_AFTER.as_millis() as i64)),
            None if behind.is_some() => Some(Timestamp::now()),
            None => None,
        };
        Staleness {
            stale_since,
            last_contact: c.last.1,
            behind,
        }
    }

    /// A probe reached a quorum, the stream's last sequence being `last`.
    fn reached(&self, last: Lsn) {
        let mut c = self.contact.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if self.stale.load(Ordering::Relaxed) || now.duration_since(c.last.0) >= STALE_AFTER {
            // Back in contact: fresh once the mirror folded what is there.
            c.catch_up_to = last;
        }
        c.last = (now, Timestamp::now());
        self.last_contact_ns
            .store((now - self.origin).as_nanos() as u64, Ordering::Relaxed);
        self.stale.store(false, Ordering::Relaxed);
        c.seen.push_back((now, last));
        // The newest sample at least `LAG_AFTER` old is the bar; older
        // ones are below it.
        while c.seen.len() > 1 && now.duration_since(c.seen[1].0) >= LAG_AFTER {
            c.seen.pop_front();
        }
        let lag_bar = c
            .seen
            .front()
            .filter(|(t, _)| now.duration_since(*t) >= LAG_AFTER)
            .map_or(0, |&(_, seq)| seq);
        let applied = *self.applied.borrow();
        if applied >= c.catch_up_to {
            c.catch_up_to = 0;
        }
        self.must_reach
            .store(lag_bar.max(c.catch_up_to), Ordering::Relaxed);
        match (self.behind(), c.stale_since) {
            (Some(_), None) => c.stale_since = Some(Timestamp::now()),
            (None, Some(_)) => c.stale_since = None,
            _ => {}
        }
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
            Ok(Ok(last)) => liveness.reached(last),
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

/// One probe: the stream's info, judged for a quorum in contact; the
/// stream's last sequence.
async fn quorum_reachable(stream: &mut stream::Stream) -> Result<Lsn, String> {
    let info = stream.info().await.map_err(|e| e.to_string())?;
    let replicas = info.config.num_replicas.max(1);
    let last = info.state.last_sequence;
    // A stream that is not clustered answers from its one server.
    let Some(cluster) = &info.cluster else {
        return Ok(last);
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
        Ok(last)
    } else {
        Err(format!(
            "{in_contact} of {replicas} replicas in contact (leader {:?})",
            cluster.leader
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_behind_the_stream_is_stale_until_it_folds_what_was_there() {
        let (tx, rx) = watch::channel(10);
        let l = Liveness::new(rx);
        assert!(!l.is_stale());
        l.reached(10);
        assert!(!l.is_stale(), "caught up");
        // The stream moved on; a sample is the bar only once LAG_AFTER old.
        l.reached(500);
        assert!(!l.is_stale(), "too recent to judge");
        {
            let mut c = l.contact.lock().unwrap();
            let back = Instant::now() - LAG_AFTER;
            c.seen.iter_mut().for_each(|(t, _)| *t = back);
        }
        l.reached(900);
        let s = l.get();
        assert!(l.is_stale() && s.behind == Some(490), "{s:?}");
        assert!(s.stale_since.is_some());
        tx.send_replace(500);
        assert!(!l.is_stale(), "judged when asked: folded the bar");
        assert_eq!(l.get().behind, None);
    }

    #[test]
    fn contact_lost_past_the_bound_is_stale_when_asked_and_fresh_after_catching_up() {
        let (tx, rx) = watch::channel(7);
        let l = Liveness::new(rx);
        // As a process paused for longer than the bound: no probe ran.
        l.last_contact_ns.store(0, Ordering::Relaxed);
        {
            let mut c = l.contact.lock().unwrap();
            c.last.0 = Instant::now() - STALE_AFTER;
        }
        let origin_shift = l.origin.elapsed() + STALE_AFTER;
        // Contact age as if the last contact was STALE_AFTER ago.
        let l = Liveness {
            origin: Instant::now() - origin_shift,
            ..l
        };
        assert!(l.is_stale(), "stale before any probe ran");
        assert!(l.get().stale_since.is_some());
        // Contact again, the stream 355 ahead: stale until folded.
        l.reached(362);
        assert!(l.is_stale());
        assert_eq!(l.get().behind, Some(355));
        tx.send_replace(362);
        assert!(!l.is_stale());
        l.reached(362);
        assert_eq!(l.get().stale_since, None);
    }
}
