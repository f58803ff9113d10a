//! A stalled writer is a dead peer: [`Timed`] wraps a connection's stream so
//! that a write (or flush) that makes no progress for the write timeout fails
//! with `TimedOut`, and the connection ends. Reads pass through untouched
//! (their idle timeouts belong to the protocol: the socket's `idle_timeout`,
//! HTTP's header read timeout).
//!
//! Invariant: no connection task waits on one peer's receive window longer
//! than the write timeout, so a client that never reads (a watcher, an SSE
//! page, a pipelining client) costs at most its buffers and is gone after
//! that time; shutdown's drain is bounded by it too.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// A stream whose writes time out after `limit` without progress.
pub(crate) struct Timed<T> {
    inner: T,
    limit: Duration,
    /// Armed when a write first returns `Pending`; cleared on progress.
    stall: Option<Pin<Box<Sleep>>>,
}

impl<T> Timed<T> {
    pub fn new(inner: T, limit: Duration) -> Self {
        Timed {
            inner,
            limit,
            stall: None,
        }
    }

    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// `Ready(Err)` once the stall outlasts the limit, else `Pending` (and
    /// the timer wakes the task).
    fn stalled(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let limit = self.limit;
        let sleep = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + limit)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the peer read nothing for {:.1} s: connection closed",
                    limit.as_secs_f64()
                ),
            )),
            Poll::Pending => Poll::Pending,
        }
    }

    fn settle<R>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        match r {
            Poll::Ready(v) => {
                self.stall = None;
                Poll::Ready(v)
            }
            Poll::Pending => match self.stalled(cx) {
                Poll::Ready(e) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Timed<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Timed<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.settle(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.settle(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.settle(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.settle(cx, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A peer that never reads: the write fails after the limit, not never.
    #[tokio::test]
    async fn a_write_to_a_peer_that_never_reads_times_out() {
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        let mut w = Timed::new(a, Duration::from_millis(200));
        let started = std::time::Instant::now();
        let chunk = vec![0u8; 1 << 16];
        let err = loop {
            if let Err(e) = w.write_all(&chunk).await {
                break e;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "never timed out"
            );
        };
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(err.to_string().contains("read nothing"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
