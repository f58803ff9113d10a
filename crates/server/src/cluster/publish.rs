//! Publishing to the stream with its ack: a publish retried through leader
//! changes and reconnects until a deadline, each attempt built alike (same
//! `Nats-Msg-Id`, so the stream stores it once); "wrong last sequence" (a
//! lost race, docs/scaling.md §2) is returned at once, never retried here.
//!
//! Before anything is published, [`check_publishable`] reads the record
//! back with the decoder every mirror runs: a record no host could apply is
//! refused here, with nothing published, instead of reaching every mirror
//! (issue 27: a compaction marker the decoder's limit refused).

use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::{self, message::PublishMessage};
use async_nats::Subject;
use std::time::{Duration, Instant};

use super::connect::Reconnects;
use super::ClusterError;
use crate::registry::codec;

/// Bytes of a message kept for its headers (`Nats-Msg-Id`, the expected
/// sequence: about 150 bytes): the servers' limit counts both.
pub const HEADER_ROOM: usize = 1024;

/// Refuses a record no host could apply: one this build's decoder (every
/// mirror's) does not read back whole, or one the servers would not take
/// (`max_payload`, headers included).
pub(crate) fn check_publishable(
    subject: &str,
    payload: &[u8],
    max_payload: usize,
) -> Result<(), ClusterError> {
    let refuse = |reason: String| ClusterError::Unpublishable {
        subject: subject.to_string(),
        bytes: payload.len(),
        reason,
    };
    if payload.len() + HEADER_ROOM > max_payload {
        return Err(refuse(format!(
            "larger than the servers' largest message ({max_payload} bytes, \
             {HEADER_ROOM} kept for headers)"
        )));
    }
    codec::decode(payload)
        .map(drop)
        .map_err(|e| refuse(format!("this build cannot decode it: {e}")))
}

/// Publishes the message `msg` builds and waits for the stream's ack,
/// retrying through leader changes and reconnects (each attempt built
/// alike: same message id, so stored once) until `deadline`. "Wrong last
/// sequence" is returned at once. With `reconnects`, an attempt still
/// waiting when the client reaches a server again is resent there at once
/// (its ack would have come from the server the client left), not after
/// its timeout.
pub(crate) async fn publish_retried(
    js: &jetstream::Context,
    subject: &Subject,
    msg: impl Fn() -> PublishMessage,
    deadline: Duration,
    reconnects: Option<&Reconnects>,
) -> Result<jetstream::publish::PublishAck, PublishError> {
    let started = Instant::now();
    let mut backoff = Duration::from_millis(20);
    let mut attempts = 0;
    let mut reconnected = reconnects.cloned();
    loop {
        attempts += 1;
        if let Some(r) = reconnected.as_mut() {
            r.borrow_and_update();
        }
        let attempt = async {
            match js.send_publish(subject.clone(), msg()).await {
                Ok(ack) => ack.await,
                Err(e) => Err(e),
            }
        };
        let moved = async {
            let changed = match reconnected.as_mut() {
                Some(r) => r.changed().await.is_ok(),
                None => false,
            };
            if !changed {
                // Not asked, or the node is closing: wait for the ack.
                std::future::pending::<()>().await
            }
        };
        let attempt = tokio::select! {
            attempt = attempt => attempt,
            () = moved => {
                if started.elapsed() < deadline {
                    tracing::debug!(
                        subject = subject.as_str(),
                        after = ?started.elapsed(),
                        "publish resent after a reconnect"
                    );
                    continue;
                }
                Err(PublishError::new(PublishErrorKind::TimedOut))
            }
        };
        match attempt {
            Ok(ack) => {
                if attempts > 1 {
                    tracing::info!(
                        subject = subject.as_str(),
                        attempts,
                        after = ?started.elapsed(),
                        "publish stored after retries"
                    );
                }
                return Ok(ack);
            }
            Err(e) => {
                let retry = matches!(
                    e.kind(),
                    PublishErrorKind::TimedOut
                        | PublishErrorKind::BrokenPipe
                        | PublishErrorKind::StreamNotFound
                        | PublishErrorKind::MaxAckPending
                        | PublishErrorKind::Other
                );
                if !retry || started.elapsed() >= deadline {
                    return Err(e);
                }
                tracing::debug!(
                    subject = subject.as_str(),
                    error = %e,
                    after = ?started.elapsed(),
                    "publish retried"
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Event, EventKind};
    use crate::time::Timestamp;

    #[test]
    fn a_record_that_does_not_read_back_or_does_not_fit_is_refused() {
        let marker = codec::encode(&Event {
            at: Timestamp::from_secs(1_900_000_000),
            kind: EventKind::StreamCompacted {
                upto: 9_000,
                agents: vec![],
                // The marker: 8,800 small LSNs.
                messages: (1..=8_800).map(|i| i % 250).collect(),
                sessions: vec![],
            },
        });
        check_publishable("al.f.ctl", &marker, 1 << 20).unwrap();
        let e = check_publishable("al.f.ctl", &marker, marker.len() + 10).unwrap_err();
        assert!(e.to_string().contains("largest message"), "{e}");
        let mut cut = marker.clone();
        cut.truncate(marker.len() - 1);
        let e = check_publishable("al.f.ctl", &cut, 1 << 20).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("al.f.ctl")
                && text.contains("cannot decode")
                && text.contains("nothing was published"),
            "{text}"
        );
    }
}
