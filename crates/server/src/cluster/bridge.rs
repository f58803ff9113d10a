//! The mirror's bridge between a consumer that failed and its replacement
//! (issue 27: failover within the stale bound). Creating a consumer is an
//! assignment by the meta leader, so after the server leading the meta
//! group died or hung it waits for that group's election (4–9 s in NATS's
//! Raft). A direct get is answered by any replica of the stream
//! (`allow_direct`), leader or not, and a replica holds only what its
//! quorum committed, in stream order: so meanwhile the mirror folds by
//! direct gets, and a write waiting for its fold waits for no election it
//! does not need. Invariant: everything is folded by the mirror's one task
//! (`mirror::run`), in stream order, each sequence once.

use async_nats::jetstream::stream::{DirectGetErrorKind, Stream};
use std::time::Duration;

use super::mirror::{fold, MirrorError, Shared};

/// How long a direct get may take: one the client sent to a server that
/// stopped answering must not hold the mirror for the requests' 2 s; the
/// next poll asks again, on whichever server the client reached.
const DIRECT_GET_TIMEOUT: Duration = Duration::from_millis(500);

/// How often the mirror folds by direct gets while no consumer delivers.
const BRIDGE_POLL: Duration = Duration::from_millis(50);

/// Runs `done` to its end while folding by direct gets every
/// [`BRIDGE_POLL`]: the bridge between a consumer that failed and its
/// replacement. Creating a consumer is an assignment by the meta leader, so
/// after the server leading the meta group died or hung it waits for an
/// election (4–9 s in NATS's Raft); a direct get is answered by any replica
/// of the stream (`allow_direct`), leader or not, so the mirror, and every
/// write waiting for its fold, goes on meanwhile (issue 27, failover within
/// the stale bound). Fails only on a fatal fold.
pub(super) async fn bridged<T>(
    what: &str,
    shared: &Shared,
    stream: &Stream,
    done: impl std::future::Future<Output = T>,
) -> Result<T, MirrorError> {
    tokio::pin!(done);
    let started = std::time::Instant::now();
    let mut folded = 0;
    loop {
        tokio::select! {
            biased;
            out = &mut done => {
                if started.elapsed() >= BRIDGE_POLL {
                    tracing::info!(
                        folded,
                        after = ?started.elapsed(),
                        "{what}: folded meanwhile by direct gets"
                    );
                }
                return Ok(out);
            }
            _ = tokio::time::sleep(BRIDGE_POLL) => {}
        }
        match fold_direct(shared, stream).await {
            Ok(n) => folded += n,
            Err(MirrorError::Transient(e)) => tracing::debug!(error = %e, "direct get"),
            Err(fatal) => return Err(fatal),
        }
    }
}

/// Folds, by direct gets from whichever replica answers, every message
/// after the applied sequence that replica holds (a replica holds only
/// what its quorum committed, in stream order; sequences it no longer
/// holds, deleted by compaction, are skipped as the consumer skips them);
/// how many it folded.
pub(super) async fn fold_direct(shared: &Shared, stream: &Stream) -> Result<usize, MirrorError> {
    let wildcard = shared.subjects.wildcard();
    let mut folded = 0;
    loop {
        let from = shared.store.applied_lsn() + 1;
        let get = stream.direct_get_next_for_subject(wildcard.as_str(), Some(from));
        let msg = match tokio::time::timeout(DIRECT_GET_TIMEOUT, get).await {
            Err(_) if folded > 0 => return Ok(folded),
            Err(_) => {
                return Err(MirrorError::Transient(format!(
                    "direct get from {from}: no answer within {DIRECT_GET_TIMEOUT:?}"
                )))
            }
            Ok(got) => got,
        };
        let msg = match msg {
            Ok(msg) => msg,
            Err(e) if matches!(e.kind(), DirectGetErrorKind::NotFound) => return Ok(folded),
            Err(_) if folded > 0 => return Ok(folded),
            Err(e) => {
                return Err(MirrorError::Transient(format!(
                    "direct get from {from}: {e}"
                )))
            }
        };
        let mut last = None;
        let outcome = fold(
            shared,
            stream,
            msg.sequence,
            msg.subject.as_str(),
            &msg.payload,
            &mut last,
        )
        .await;
        if let Some(seq) = last {
            shared.announce(seq);
        }
        outcome?;
        folded += 1;
    }
}
