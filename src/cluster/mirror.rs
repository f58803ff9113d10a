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
//! Sequences the stream's compaction deleted are held locally by `Purged`
//! fillers; on folding a compaction marker the mirror compacts the local
//! log up to it before it announces the marker or folds anything after it
//! (docs/scaling.md §6).

use crate::registry::{codec, tag, Lsn};
use crate::store::{Store, StoreError};
use async_nats::jetstream::consumer::{pull, DeliverPolicy};
use async_nats::jetstream::stream::Stream;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;

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
}

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
        Ok(Shared {
            store,
            subjects,
            folded: Mutex::new(folded),
            applied,
            failure: Mutex::new(None),
        })
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

    /// Waits until the mirror folded `seq`, at most `deadline`.
    pub async fn wait_applied(&self, seq: Lsn, deadline: Duration) -> ClusterResult<()> {
        let mut rx = self.applied.subscribe();
        let reached = tokio::time::timeout(deadline, rx.wait_for(|a| *a >= seq)).await;
        if let Some(f) = self.failure() {
            return Err(ClusterError::Mirror(f));
        }
        match reached {
            Ok(Ok(_)) => Ok(()),
            _ => Err(ClusterError::Lagging {
                dir: self.store.dir().display().to_string(),
                seq,
                applied: *self.applied.borrow(),
                waited: deadline,
            }),
        }
    }

    /// Corrects a subject's last sequence to what the stream says (after a
    /// compaction deleted the record the map named; see
    /// `ClusterNode::refresh_subject`). Only ever lowers it: a higher value
    /// is a record the mirror folded since the stream was asked.
    pub fn correct_folded(&self, subject: &str, last: Lsn) {
        let mut folded = lock(&self.folded);
        match folded.get_mut(subject) {
            Some(seq) if *seq > last => *seq = last,
            _ => {}
        }
    }

    /// Applies one stream message; announces it on `applied` unless
    /// `announce` is false (a compaction marker is announced once the
    /// local log is compacted up to it).
    fn apply(
        &self,
        seq: Lsn,
        subject: &str,
        payload: &[u8],
        announce: bool,
    ) -> Result<(), StoreError> {
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
        if announce {
            self.applied.send_replace(seq);
        }
        Ok(())
    }
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
    let report = tokio::task::spawn_blocking(move || store.compact_mirrored(seq, at))
        .await
        .map_err(|e| format!("local compaction task: {e}"))?
        .map_err(|e| format!("local compaction up to the marker at {seq}: {e}"))?;
    tracing::info!(
        marker = seq,
        dropped = report.events_dropped,
        bytes_after = report.bytes_after,
        "compacted the local log after the stream's compaction"
    );
    Ok(())
}

/// The mirror loop: runs until the task is aborted, or a record cannot be
/// applied (recorded in [`Shared::failure`]; commands then refuse).
pub(crate) async fn run(shared: Arc<Shared>, stream: Stream) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let start = shared.store.applied_lsn() + 1;
        match consume_from(&shared, &stream, start).await {
            Ok(()) => backoff = Duration::from_millis(50),
            Err(MirrorError::Transient(e)) => {
                tracing::warn!(start, error = %e, "mirror consumer failed; recreating");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(MirrorError::Fatal(e)) => {
                tracing::error!(error = %e, "mirror stopped");
                *lock(&shared.failure) = Some(e);
                return;
            }
        }
    }
}

/// How long the consumer may be quiet before the mirror asks the stream
/// whether it is behind.
const STALL_CHECK: Duration = Duration::from_secs(1);

enum MirrorError {
    Transient(String),
    Fatal(String),
}

async fn consume_from(shared: &Shared, stream: &Stream, start: Lsn) -> Result<(), MirrorError> {
    let transient = |e: &dyn std::fmt::Display| MirrorError::Transient(e.to_string());
    let consumer = stream
        .create_consumer(pull::OrderedConfig {
            deliver_policy: DeliverPolicy::ByStartSequence {
                start_sequence: start,
            },
            ..Default::default()
        })
        .await
        .map_err(|e| transient(&e))?;
    let mut messages = consumer.messages().await.map_err(|e| transient(&e))?;
    loop {
        let msg = match tokio::time::timeout(STALL_CHECK, messages.next()).await {
            Ok(Some(msg)) => msg.map_err(|e| transient(&e))?,
            Ok(None) => return Ok(()),
            Err(_) => {
                // Quiet for a while: fine if the stream has nothing newer;
                // otherwise the consumer is stuck (its server died and the
                // client has not noticed yet), so recreate it.
                let applied = shared.store.applied_lsn();
                let mut s = stream.clone();
                match tokio::time::timeout(STALL_CHECK, s.info()).await {
                    Ok(Ok(info)) if info.state.last_sequence <= applied => continue,
                    Ok(Ok(info)) => {
                        return Err(MirrorError::Transient(format!(
                            "consumer stalled at sequence {applied}, stream at {}",
                            info.state.last_sequence
                        )))
                    }
                    Ok(Err(e)) => return Err(transient(&e)),
                    Err(_) => return Err(MirrorError::Transient("stream info timed out".into())),
                }
            }
        };
        let seq = msg.info().map_err(|e| transient(&e))?.stream_sequence;
        let applied = shared.store.applied_lsn();
        if seq <= applied {
            continue; // redelivered after a consumer reset
        }
        let fatal = |e: &dyn std::fmt::Display| {
            MirrorError::Fatal(format!(
                "stream {} sequence {seq} (subject {}): {e}",
                stream.cached_info().config.name,
                msg.subject
            ))
        };
        let marker = is_tag(&msg.payload, tag::STREAM_COMPACTED);
        shared
            .apply(seq, msg.subject.as_str(), &msg.payload, !marker)
            .map_err(|e| fatal(&e))?;
        if marker {
            compact_local(shared, seq, &msg.payload)
                .await
                .map_err(|e| fatal(&e))?;
            shared.applied.send_replace(seq);
        }
    }
}
