//! What the accept loops (the socket's and HTTP's) do when `accept` fails.
//!
//! Invariant: a failing `accept` never spins. An error about one connection
//! (reset or aborted before it was taken) is skipped at once; any other (out
//! of file descriptors, out of memory) waits before the next try, 10 ms
//! doubling to 1 s while it lasts, and is logged once a second at most with
//! the count since the last line, so fd exhaustion shows in the log and
//! costs no CPU.

use std::io;
use std::time::Duration;
use tokio::time::Instant;

const FIRST: Duration = Duration::from_millis(10);
const MOST: Duration = Duration::from_secs(1);

/// The back-off state of one accept loop.
pub(crate) struct Backoff {
    what: &'static str,
    delay: Duration,
    unlogged: u64,
    logged_at: Option<Instant>,
}

impl Backoff {
    pub fn new(what: &'static str) -> Self {
        Backoff {
            what,
            delay: FIRST,
            unlogged: 0,
            logged_at: None,
        }
    }

    /// An accept succeeded: the next failure starts from the shortest wait.
    pub fn succeeded(&mut self) {
        self.delay = FIRST;
    }

    /// An accept failed with `e`: logs it (rate-limited) and waits.
    pub async fn failed(&mut self, e: &io::Error) {
        if matches!(
            e.kind(),
            io::ErrorKind::ConnectionAborted
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::Interrupted
        ) {
            return;
        }
        self.unlogged += 1;
        let now = Instant::now();
        if self
            .logged_at
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            tracing::warn!(
                "{}: accept failed {} time(s): {e}; retrying in {} ms (out of file \
                 descriptors? see `serve --max-connections` and `ulimit -n`)",
                self.what,
                self.unlogged,
                self.delay.as_millis()
            );
            self.unlogged = 0;
            self.logged_at = Some(now);
        }
        tokio::time::sleep(self.delay).await;
        self.delay = (self.delay * 2).min(MOST);
    }
}
