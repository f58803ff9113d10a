//! Publishing to the stream with its ack: a publish retried through leader
//! changes and reconnects until a deadline, each attempt built alike (same
//! `Nats-Msg-Id`, so the stream stores it once); "wrong last sequence" (a
//! lost race, docs/scaling.md §2) is returned at once, never retried here.

use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::{self, message::PublishMessage};
use async_nats::Subject;
use std::time::{Duration, Instant};

/// Publishes the message `msg` builds and waits for the stream's ack,
/// retrying through leader changes and reconnects (each attempt built
/// alike: same message id, so stored once) until `deadline`. "Wrong last
/// sequence" is returned at once.
pub(crate) async fn publish_retried(
    js: &jetstream::Context,
    subject: &Subject,
    msg: impl Fn() -> PublishMessage,
    deadline: Duration,
) -> Result<jetstream::publish::PublishAck, PublishError> {
    let started = Instant::now();
    let mut backoff = Duration::from_millis(20);
    loop {
        let attempt = match js.send_publish(subject.clone(), msg()).await {
            Ok(ack) => ack.await,
            Err(e) => Err(e),
        };
        match attempt {
            Ok(ack) => return Ok(ack),
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
                tracing::debug!(subject = subject.as_str(), error = %e, "publish retried");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
}
