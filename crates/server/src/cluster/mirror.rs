//! The local log as a mirror of the stream (docs/scaling.md §4).
//!
//! One ordered consumer per node delivers every stored message in sequence
//! order from `applied + 1`; each is appended to the local store at LSN =
//! its stream sequence ([`Store::append_replicated`]) and folded. The
//! per-subject last sequences that conditional publishes expect (every
//! subject but the heartbeat batches', which nothing expects) are updated
//! under the same lock as the store, so a validator never pairs an older
//! state with a newer expectation. A consumer that fails (a NATS node died,
//! a reconnect) is recreated from `applied + 1`: nothing is applied twice.
//! Until its replacement delivers, the mirror folds by direct gets, which
//! any replica answers without a leader (a new consumer waits for the meta
//! leader: an election after its server died or hung; issue 27).
//! Sequences the stream's compaction deleted are held locally by `Purged`
//! fillers; on folding a compaction marker the mirror compacts the local
//! log up to it before it announces the marker or folds anything after it
//! (docs/scaling.md §6).
//!
//! Refused records (docs/scaling.md §4): a stream record this build cannot
//! decode is never a reason to stop. The mirror holds its sequence by a
//! `Purged` filler, still counts it as its subject's last sequence (the
//! stream holds it there), records it in [`REFUSED_FILE`] in the store's
//! directory and in [`Shared::refused`] (`hello`, `/readyz`), logs it as an
//! error, and folds on. Every host applies the same rule to the same bytes,
//! so a fresh host refuses the same records and never inherits a stop; the
//! operator's recovery is in the docs (upgrade, or delete the record from
//! the stream, then rebuild the mirror from an empty directory). Only
//! failures of this host (its disk, its log) still stop the mirror.
//!
//! Waking: the mirror folds every message the consumer already holds
//! (up to [`FOLD_BATCH`]) before it announces the last one, and a command
//! waiting for its sequence is woken by itself ([`Shared::wait_applied`]),
//! not by every record folded: at thousands of records a second, a broadcast
//! to every waiter cost more than the fold.

use crate::registry::{codec, tag, Lsn};
use crate::store::{Store, StoreError};
use crate::time::Timestamp;
use async_nats::jetstream::consumer::{pull, DeliverPolicy};
use async_nats::jetstream::stream::Stream;
use bytes::Bytes;
use futures_util::{FutureExt, StreamExt};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

use super::bridge::{bridged, fold_direct};
use super::subjects::FleetSubjects;
use super::{ClusterError, ClusterResult};

/// What the mirror task and the node's commands share.
pub(crate) struct Shared {
    pub store: Arc<Store>,
    pub subjects: FleetSubjects,
    /// Subject → last stream sequence folded. Held while a record is
    /// applied and while a command validates (see the module docs).
    folded: Mutex<HashMap<String, Lsn>>,
    pub applied: watch::Sender<Lsn>,
    /// Set when the mirror stopped for good (a record it cannot apply).
    failure: Mutex<Option<String>>,
    /// Callers waiting for a sequence, each woken once when it is folded
    /// (or when the mirror stops); a handful at a time, so a scan is cheap.
    waiters: Mutex<Vec<(Lsn, oneshot::Sender<()>)>>,
    /// Where every folded record is copied, if someone follows them
    /// ([`Shared::tap`]); `tapped` spares the lock when no one does.
    tap: Mutex<Option<mpsc::Sender<(Lsn, Bytes)>>>,
    tapped: AtomicBool,
    /// Records of the stream this build could not apply (see the module
    /// docs), as [`REFUSED_FILE`] holds them.
    refused: Mutex<Vec<RefusedRecord>>,
}

/// Where a replica lists the stream records it refused, one JSON object a
/// line ([`RefusedRecord`]); it outlives restarts, and an empty directory
/// (a rebuilt mirror) starts without it.
pub const REFUSED_FILE: &str = "replica-refused.jsonl";

/// A stream record the mirror could not apply and skipped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RefusedRecord {
    /// Its stream sequence (held locally by a `Purged` filler).
    pub seq: Lsn,
    pub subject: String,
    /// Its size in bytes.
    pub bytes: usize,
    /// Why it could not be applied (the decoder's error).
    pub reason: String,
}

/// A record folded by the mirror: its stream sequence and payload.
pub type Folded = (Lsn, Bytes);

/// Records a tap holds for its reader before the tap is ended (a few
/// seconds of the fastest stream at a few dozen MiB at most).
pub const TAP_CAPACITY: usize = 65_536;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Rebuilds the per-subject sequences by scanning (not folding) the local
    /// log once: one decode per record, no state.
    pub fn new(store: Arc<Store>, subjects: FleetSubjects) -> Result<Shared, StoreError> {
        let mut folded = HashMap::new();
        let view = store.view();
        for rec in view.iter_from(0) {
            let rec = rec?;
            if is_tag(rec.payload, tag::PURGED) {
                continue; // a local filler, not on any subject of the stream
            }
            let event = codec::decode(rec.payload).map_err(|source| StoreError::Decode {
                dir: store.dir().to_path_buf(),
                lsn: rec.lsn,
                source,
            })?;
            if event.kind.tag() != tag::HEARTBEAT_BATCH {
                folded.insert(subjects.of(&event.kind), rec.lsn);
            }
        }
        let (applied, _) = watch::channel(store.applied_lsn());
        let refused = read_refused(store.dir())?;
        Ok(Shared {
            store,
            subjects,
            folded: Mutex::new(folded),
            applied,
            failure: Mutex::new(None),
            waiters: Mutex::new(Vec::new()),
            tap: Mutex::new(None),
            tapped: AtomicBool::new(false),
            refused: Mutex::new(refused),
        })
    }

    /// The stream records this replica refused (see the module docs).
    pub fn refused(&self) -> Vec<RefusedRecord> {
        lock(&self.refused).clone()
    }

    /// The last folded sequence of `subject` (0: none).
    pub fn folded_of(&self, subject: &str) -> Lsn {
        lock(&self.folded).get(subject).copied().unwrap_or(0)
    }

    /// Refuses the record at `seq` (see the module docs): a filler in the
    /// local log, its subject's sequence moved, a line in [`REFUSED_FILE`]
    /// and an error in the log. An error only if this host cannot write.
    fn refuse(
        &self,
        seq: Lsn,
        subject: &str,
        payload: &[u8],
        reason: String,
    ) -> Result<(), String> {
        let record = RefusedRecord {
            seq,
            subject: subject.to_string(),
            bytes: payload.len(),
            reason,
        };
        tracing::error!(
            seq,
            subject,
            bytes = payload.len(),
            reason = %record.reason,
            "refused a stream record this build cannot apply; the mirror goes on without it \
             (docs/scaling.md §4, \"Refused records\")"
        );
        let at = codec::decode_header(payload).map_or(Timestamp(0), |(_, at)| at);
        {
            let mut folded = lock(&self.folded);
            self.store
                .append_refused(seq, at)
                .map_err(|e| format!("holding refused record {seq}: {e}"))?;
            if !is_tag(payload, tag::HEARTBEAT_BATCH) {
                folded.insert(subject.to_string(), seq);
            }
        }
        let path = self.store.dir().join(REFUSED_FILE);
        let mut line = serde_json::to_vec(&record).expect("a record serializes");
        line.push(b'\n');
        use std::io::Write;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(&line))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        lock(&self.refused).push(record);
        Ok(())
    }

    /// Runs `f` with the per-subject sequences locked: the state it reads
    /// through the store cannot move while it runs.
    pub fn with_folded<R>(&self, f: impl FnOnce(&HashMap<String, Lsn>) -> R) -> R {
        f(&lock(&self.folded))
    }

    pub fn into_store(self) -> Arc<Store> {
        self.store
    }

    pub fn failure(&self) -> Option<String> {
        lock(&self.failure).clone()
    }

    /// Waits until the mirror folded `seq`, at most `deadline`. The caller
    /// registers under the waiters' lock after reading `applied`, and the
    /// mirror publishes `applied` before it takes that lock to wake, so a
    /// fold between the two is never missed.
    pub async fn wait_applied(&self, seq: Lsn, deadline: Duration) -> ClusterResult<()> {
        let woken = {
            let mut waiters = lock(&self.waiters);
            if *self.applied.borrow() >= seq || lock(&self.failure).is_some() {
                None
            } else {
                let (tx, rx) = oneshot::channel();
                waiters.push((seq, tx));
                Some(rx)
            }
        };
        if let Some(rx) = woken {
            // Dropped unsent = the mirror stopped: the failure says why.
            let _ = tokio::time::timeout(deadline, rx).await;
        }
        if let Some(f) = self.failure() {
            return Err(ClusterError::Mirror(f));
        }
        let applied = *self.applied.borrow();
        if applied >= seq {
            return Ok(());
        }
        Err(ClusterError::Lagging {
            dir: self.store.dir().display().to_string(),
            seq,
            applied,
            waited: deadline,
        })
    }

    /// Announces that everything up to `seq` is folded: `applied` moves,
    /// and the callers waiting for `seq` or less are woken (those that gave
    /// up are dropped on the way).
    pub(super) fn announce(&self, seq: Lsn) {
        self.applied.send_replace(seq);
        let mut waiters = lock(&self.waiters);
        let mut i = 0;
        while i < waiters.len() {
            if waiters[i].0 <= seq || waiters[i].1.is_closed() {
                let (_, tx) = waiters.swap_remove(i);
                let _ = tx.send(());
            } else {
                i += 1;
            }
        }
    }

    /// Records the mirror's stop, wakes every waiter to read it and ends
    /// the tap.
    fn stop(&self, why: String) {
        *lock(&self.failure) = Some(why);
        lock(&self.waiters).clear();
        // A follower sees its channel end.
        *lock(&self.tap) = None;
        self.tapped.store(false, Ordering::Release);
    }

    /// Every record folded from now on, in stream order. One follower at a
    /// time: a new tap replaces the old one, and a dropped receiver ends it.
    /// Bounded to [`TAP_CAPACITY`] records: the mirror never waits for its
    /// reader, and a reader that falls that far behind has its tap ended
    /// (the channel closes, as when the mirror stops) rather than the queue
    /// growing without bound; it may tap again and read the gap from the
    /// log.
    pub fn tap(&self) -> mpsc::Receiver<Folded> {
        let (tx, rx) = mpsc::channel(TAP_CAPACITY);
        *lock(&self.tap) = Some(tx);
        self.tapped.store(true, Ordering::Release);
        rx
    }

    fn copy_to_tap(&self, seq: Lsn, payload: &Bytes) {
        let mut tap = lock(&self.tap);
        if let Some(tx) = tap.as_ref() {
            match tx.try_send((seq, payload.clone())) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::warn!(
                        "the mirror's follower fell {TAP_CAPACITY} records behind at \
                         sequence {seq}: its tap is ended"
                    );
                    *tap = None;
                    self.tapped.store(false, Ordering::Release);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    *tap = None;
                    self.tapped.store(false, Ordering::Release);
                }
            }
        }
    }

    /// Corrects a subject's last sequence to what the stream's leader
    /// answered (`last`), asked after the map said `asked_at` (see
    /// `ClusterNode::refresh_subject`). Only if the map has not moved since:
    /// then `last` is newer knowledge than the map (a compaction deleted the
    /// record it named, or it missed one), and a record stored after the
    /// answer moves the map again when folded. If the mirror folded a
    /// record of the subject meanwhile, that record is newer than the
    /// answer, and the map is kept: lowering it below what the mirror
    /// folded would make every later publish on the subject lose, on every
    /// host that did so, until a record no one expects lands (issue 27).
    pub fn correct_folded(&self, subject: &str, asked_at: Lsn, last: Lsn) -> bool {
        let mut folded = lock(&self.folded);
        let now = folded.get(subject).copied().unwrap_or(0);
        if now != asked_at || now == last {
            return false;
        }
        folded.insert(subject.to_string(), last);
        true
    }

    /// Applies one stream message (announced by the caller, see
    /// [`Shared::announce`]) and copies it to the tap if one is set.
    fn apply(&self, seq: Lsn, subject: &str, payload: &Bytes) -> Result<(), StoreError> {
        {
            let mut folded = lock(&self.folded);
            self.store.append_replicated(seq, payload)?;
            // Heartbeat batches are never published conditionally.
            let batch =
                payload.first().map(|t| t & !codec::ORIGIN_FLAG) == Some(tag::HEARTBEAT_BATCH);
            match folded.get_mut(subject) {
                _ if batch => {}
                Some(last) => *last = seq,
                None => {
                    folded.insert(subject.to_string(), seq);
                }
            }
        }
        if self.tapped.load(Ordering::Acquire) {
            self.copy_to_tap(seq, payload);
        }
        Ok(())
    }
}

/// The refused records listed in `dir`'s [`REFUSED_FILE`] (none if absent).
fn read_refused(dir: &std::path::Path) -> Result<Vec<RefusedRecord>, StoreError> {
    let path = dir.join(REFUSED_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(agentlog_core::LogError::io(&path, e).into()),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                StoreError::Replication(format!("{} line {}: {e}", path.display(), i + 1))
            })
        })
        .collect()
}

/// Whether an encoded event has tag `t` (origin flag aside).
pub(super) fn is_tag(payload: &[u8], t: u8) -> bool {
    payload
        .first()
        .is_some_and(|b| b & !codec::ORIGIN_FLAG == t)
}

/// After the mirror folded a compaction marker at `seq`: compacts the
/// local log up to it at the marker's time (a blocking rewrite, run off the
/// runtime's workers; the mirror waits, so nothing is appended meanwhile).
async fn compact_local(shared: &Shared, seq: Lsn, payload: &[u8]) -> Result<(), String> {
    let at = codec::decode(payload).map_err(|e| e.to_string())?.at;
    let store = shared.store.clone();
    // The mirror folds nothing while this runs: its time bounds how fast a
    // replica catches up under back-to-back compactions (issue 27).
    let started = std::time::Instant::now();
    let report = tokio::task::spawn_blocking(move || store.compact_mirrored(seq, at))
        .await
        .map_err(|e| format!("local compaction task: {e}"))?
        .map_err(|e| format!("local compaction up to the marker at {seq}: {e}"))?;
    tracing::info!(
        marker = seq,
        dropped = report.events_dropped,
        bytes_after = report.bytes_after,
        took = ?started.elapsed(),
        rewrite_ms = report.duration_ms,
        "compacted the local log after the stream's compaction"
    );
    Ok(())
}

/// The mirror loop: runs until the task is aborted, or a record cannot be
/// applied (recorded in [`Shared::failure`]; commands then refuse). While
/// no consumer delivers (between a failure and its replacement), the mirror
/// folds by direct gets (`bridge`).
pub(crate) async fn run(shared: Arc<Shared>, stream: Stream) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let start = shared.store.applied_lsn() + 1;
        let outcome = match consume_from(&shared, &stream, start).await {
            Ok(()) => {
                backoff = Duration::from_millis(50);
                Ok(())
            }
            Err(MirrorError::Transient(e)) => {
                tracing::warn!(start, error = %e, "mirror consumer failed; recreating");
                let wait = backoff;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                bridged("mirror backoff", &shared, &stream, tokio::time::sleep(wait)).await
            }
            Err(fatal) => Err(fatal),
        };
        if let Err(MirrorError::Fatal(e)) = outcome {
            tracing::error!(error = %e, "mirror stopped");
            shared.stop(e);
            return;
        }
    }
}

/// How long the consumer may be quiet before the mirror asks a replica
/// whether it is behind.
const STALL_CHECK: Duration = Duration::from_millis(500);

/// Most messages folded between two announcements: those the consumer
/// already holds, so a waiter is never kept for a message not yet here.
const FOLD_BATCH: usize = 32;

/// Why the consumer loop ended: a transient failure (the consumer is
/// recreated, bridged meanwhile) or a fatal one (the mirror stops).
pub(super) enum MirrorError {
    Transient(String),
    Fatal(String),
}

async fn consume_from(shared: &Shared, stream: &Stream, start: Lsn) -> Result<(), MirrorError> {
    let transient = |e: &dyn std::fmt::Display| MirrorError::Transient(e.to_string());
    let mut creating = {
        let stream = stream.clone();
        tokio::spawn(async move {
            let consumer = stream
                .create_consumer(pull::OrderedConfig {
                    deliver_policy: DeliverPolicy::ByStartSequence {
                        start_sequence: start,
                    },
                    ..Default::default()
                })
                .await
                .map_err(|e| e.to_string())?;
            consumer.messages().await.map_err(|e| e.to_string())
        })
    };
    let created = match bridged("mirror consumer created", shared, stream, &mut creating).await {
        Ok(created) => created,
        Err(fatal) => {
            creating.abort();
            return Err(fatal);
        }
    };
    let mut messages = created
        .map_err(|e| transient(&e))?
        .map_err(|e| MirrorError::Transient(format!("create consumer from {start}: {e}")))?;
    loop {
        let msg = match tokio::time::timeout(STALL_CHECK, messages.next()).await {
            Ok(Some(msg)) => msg.map_err(|e| transient(&e))?,
            Ok(None) => return Ok(()),
            Err(_) => {
                // Quiet for a while: fine if no replica holds anything
                // newer; otherwise the consumer is stuck (its server died
                // or hangs, the client moved), so fold what a replica
                // holds and recreate it.
                match fold_direct(shared, stream).await? {
                    0 => continue,
                    n => {
                        return Err(MirrorError::Transient(format!(
                            "consumer stalled: a replica held {n} more messages"
                        )))
                    }
                }
            }
        };
        // Fold what the consumer already holds, then announce once.
        let mut last = None;
        let mut next = Some(msg);
        let mut folded = 0;
        let mut ended = false;
        let outcome = loop {
            let Some(msg) = next.take() else {
                break Ok(());
            };
            let seq = match msg.info() {
                Ok(info) => info.stream_sequence,
                Err(e) => break Err(transient(&e)),
            };
            if let Err(e) = fold(
                shared,
                stream,
                seq,
                msg.subject.as_str(),
                &msg.payload,
                &mut last,
            )
            .await
            {
                break Err(e);
            }
            folded += 1;
            if folded < FOLD_BATCH {
                match messages.next().now_or_never() {
                    Some(Some(Ok(m))) => next = Some(m),
                    Some(Some(Err(e))) => break Err(transient(&e)),
                    Some(None) => ended = true,
                    None => {}
                }
            }
        };
        if let Some(seq) = last {
            shared.announce(seq);
        }
        outcome?;
        if ended {
            return Ok(());
        }
    }
}

/// Folds one message; `last` is the highest sequence folded and not yet
/// announced. A compaction marker is announced only once the local log is
/// compacted up to it (what precedes it is announced first).
pub(super) async fn fold(
    shared: &Shared,
    stream: &Stream,
    seq: Lsn,
    subject: &str,
    payload: &Bytes,
    last: &mut Option<Lsn>,
) -> Result<(), MirrorError> {
    if seq <= shared.store.applied_lsn() {
        return Ok(()); // redelivered after a consumer reset, or bridged
    }
    let fatal = |e: &dyn std::fmt::Display| {
        MirrorError::Fatal(format!(
            "stream {} sequence {seq} (subject {}): {e}",
            stream.cached_info().config.name,
            subject
        ))
    };
    let marker = is_tag(payload, tag::STREAM_COMPACTED);
    if marker {
        if let Some(before) = last.take() {
            shared.announce(before);
        }
    }
    // A segment switch (msync, fsyncs) under `folded`'s lock, off the worker.
    let may_wait = shared.store.log().append_may_wait(payload.len());
    match crate::daemon::blocking::off_worker(may_wait, || shared.apply(seq, subject, payload)) {
        Ok(()) => {}
        // The record itself is the problem, on every host alike: refused,
        // and the mirror goes on (see the module docs).
        Err(StoreError::Decode { source, .. }) => {
            shared
                .refuse(seq, subject, payload, source.to_string())
                .map_err(|e| fatal(&e))?;
            *last = Some(seq);
            return Ok(());
        }
        Err(e) => return Err(fatal(&e)),
    }
    if marker {
        compact_local(shared, seq, payload)
            .await
            .map_err(|e| fatal(&e))?;
        shared.announce(seq);
    } else {
        *last = Some(seq);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreOptions;

    fn shared(dir: &std::path::Path) -> Arc<Shared> {
        let store = Store::open(dir, StoreOptions::short_lived()).unwrap();
        Arc::new(Shared::new(Arc::new(store), FleetSubjects::new("t").unwrap()).unwrap())
    }

    #[tokio::test]
    async fn a_waiter_is_woken_by_its_own_sequence_and_by_a_stop() {
        let dir = tempfile::tempdir().unwrap();
        let s = shared(dir.path());
        let long = Duration::from_secs(30);
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.wait_applied(3, long).await }
        });
        // Registered (the task ran up to its wait), then a lower sequence
        // wakes nothing: it stays registered.
        let registered = async {
            while lock(&s.waiters).is_empty() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(long, registered).await.unwrap();
        s.announce(2);
        assert_eq!(lock(&s.waiters).len(), 1);
        assert!(!waiter.is_finished());
        s.announce(3);
        waiter.await.unwrap().unwrap();
        assert!(lock(&s.waiters).is_empty());
        // Already folded: no wait at all. Never folded: lagging, named.
        s.wait_applied(2, long).await.unwrap();
        let e = s.wait_applied(9, Duration::from_millis(1)).await;
        assert!(
            matches!(
                e,
                Err(ClusterError::Lagging {
                    seq: 9,
                    applied: 3,
                    ..
                })
            ),
            "{e:?}"
        );
        // The one that gave up is dropped by the next announcement.
        s.announce(4);
        assert!(lock(&s.waiters).is_empty());
        // A stop wakes a waiter with the reason, and refuses new ones.
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.wait_applied(10, long).await }
        });
        let registered = async {
            while lock(&s.waiters).is_empty() {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(long, registered).await.unwrap();
        s.stop("record 5 cannot be applied".into());
        let e = waiter.await.unwrap().unwrap_err().to_string();
        assert!(e.contains("record 5 cannot be applied"), "{e}");
        let e = s.wait_applied(10, long).await.unwrap_err().to_string();
        assert!(e.contains("record 5 cannot be applied"), "{e}");
    }

    fn status(agent: &str, n: u8) -> Vec<u8> {
        codec::encode(&crate::registry::Event {
            at: Timestamp::from_secs(1_900_000_000),
            kind: crate::registry::EventKind::StatusChanged {
                agent: agent.into(),
                status: crate::model::Status::Busy,
                message: Some(format!("step {n}")),
                cause: crate::model::StatusCause::Command,
            },
        })
    }

    #[test]
    fn a_subject_is_never_lowered_below_a_record_folded_since_the_stream_was_asked() {
        let dir = tempfile::tempdir().unwrap();
        let s = shared(dir.path());
        let subject = s.subjects.agent("a");
        let reg = codec::encode(&crate::registry::Event {
            at: Timestamp::from_secs(1_900_000_000),
            kind: crate::registry::EventKind::AgentRegistered {
                reg: Box::new(crate::registry::Registration::new("a", "claude", "/w")),
                kind: crate::registry::RegistrationKind::New,
                host: None,
            },
        });
        s.apply(1, &subject, &Bytes::from(reg)).unwrap();
        s.apply(5, &subject, &Bytes::from(status("a", 1))).unwrap();
        // A lost race: the map said 5 when the leader was asked, and it
        // answered 5; another host's record at 7 was folded meanwhile.
        let asked_at = s.folded_of(&subject);
        s.apply(7, &subject, &Bytes::from(status("a", 2))).unwrap();
        assert!(!s.correct_folded(&subject, asked_at, 5));
        assert_eq!(s.folded_of(&subject), 7, "kept: the record at 7 is newer");
        // A compaction purged the subject: the map had not moved, so the
        // leader's answer (nothing left) replaces it.
        assert!(s.correct_folded(&subject, 7, 0));
        assert_eq!(s.folded_of(&subject), 0);
        // A map that missed a record is raised to it.
        assert!(s.correct_folded(&subject, 0, 7));
        assert_eq!(s.folded_of(&subject), 7);
    }

    #[test]
    fn a_refused_record_moves_its_subject_and_is_listed_in_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let s = shared(dir.path());
        let subject = s.subjects.ctl();
        const ALIEN: [u8; 10] = [99, 0, 0, 0, 0, 0, 0, 0, 0, 7];
        let alien = ALIEN;
        let e = s
            .apply(4, &subject, &Bytes::from_static(&ALIEN))
            .unwrap_err();
        let StoreError::Decode { source, .. } = e else {
            panic!("{e}")
        };
        s.refuse(4, &subject, &alien, source.to_string()).unwrap();
        assert_eq!((s.folded_of(&subject), s.store.applied_lsn()), (4, 4));
        let listed = read_refused(dir.path()).unwrap();
        assert_eq!(listed, s.refused());
        assert_eq!((listed[0].seq, listed[0].bytes), (4, alien.len()));
        assert!(listed[0].reason.contains("tag 99"), "{:?}", listed[0]);
        // The next record folds as usual.
        s.apply(5, &s.subjects.agent("a"), &Bytes::from(status("a", 1)))
            .unwrap();
        assert_eq!(s.store.applied_lsn(), 5);
    }

    #[test]
    fn the_tap_gets_each_record_until_its_reader_goes() {
        let dir = tempfile::tempdir().unwrap();
        let s = shared(dir.path());
        // No reader: nothing is kept.
        s.copy_to_tap(1, &Bytes::from_static(b"a"));
        let mut rx = s.tap();
        s.copy_to_tap(2, &Bytes::from_static(b"b"));
        s.copy_to_tap(3, &Bytes::from_static(b"c"));
        assert_eq!(rx.try_recv().unwrap(), (2, Bytes::from_static(b"b")));
        assert_eq!(rx.try_recv().unwrap(), (3, Bytes::from_static(b"c")));
        assert!(rx.try_recv().is_err());
        drop(rx);
        s.copy_to_tap(4, &Bytes::from_static(b"d"));
        assert!(!s.tapped.load(Ordering::Acquire) && lock(&s.tap).is_none());
        // A reader that falls the whole capacity behind loses its tap: the
        // queue never grows past the bound, and the reader sees the end.
        let mut rx = s.tap();
        for seq in 0..=TAP_CAPACITY as Lsn {
            s.copy_to_tap(seq, &Bytes::from_static(b"e"));
        }
        assert!(!s.tapped.load(Ordering::Acquire) && lock(&s.tap).is_none());
        for seq in 0..TAP_CAPACITY as Lsn {
            assert_eq!(rx.try_recv().unwrap().0, seq);
        }
        assert!(matches!(
            rx.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
        // A stopped mirror ends its tap.
        let mut rx = s.tap();
        s.stop("gone".into());
        assert!(matches!(
            rx.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }
}
