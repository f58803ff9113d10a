//! HTTP connections, bounded: the accept loop and one hyper HTTP/1.1
//! connection per client, in place of `axum::serve` (which has neither a
//! connection cap nor timeouts).
//!
//! Invariants:
//! - At most `http_max_connections` HTTP connections are open; one more is
//!   answered `503` (one non-blocking write, no task) and closed, so a flood
//!   of idle connections from any local user cannot take the daemon's file
//!   descriptors (the socket's connections have their own caps).
//! - A request's headers must arrive within `http_idle_timeout`, which also
//!   closes a kept-alive connection that sends no next request: slow and
//!   idle clients go.
//! - A response write that makes no progress for `write_timeout` ends the
//!   connection ([`crate::daemon::deadline`]): an event stream nobody reads
//!   holds its memory that long at most.
//! - Request heads are buffered up to 64 KiB; no request body is read.
//! - At shutdown each connection finishes the response in hand (an event
//!   stream ends with `end`) within the drain bound, then closes.

use super::super::accept::Backoff;
use super::super::deadline::Timed;
use super::super::server::Shared;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};

/// Largest request head buffered.
const MAX_HEAD: usize = 64 << 10;

/// Open HTTP connections, decremented when one ends.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Accepts until the daemon shuts down.
pub(super) async fn accept_loop(
    listener: TcpListener,
    app: Router,
    shared: Arc<Shared>,
    open: Arc<AtomicUsize>,
) {
    let mut stop = shared.shutdown.clone();
    let mut backoff = Backoff::new("the HTTP listener");
    loop {
        let accepted = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((s, _)) => {
                backoff.succeeded();
                s
            }
            Err(e) => {
                backoff.failed(&e).await;
                continue;
            }
        };
        let n = open.fetch_add(1, Ordering::AcqRel);
        let slot = Slot(open.clone());
        if n >= shared.opts.http_max_connections {
            refuse(&stream, n);
            continue;
        }
        tokio::spawn(serve_one(stream, app.clone(), shared.clone(), slot));
    }
}

/// One non-blocking `503` and close: a refusal costs no task and no wait.
fn refuse(stream: &TcpStream, n: usize) {
    let body = serde_json::json!({"error": {
        "code": super::super::code::TOO_MANY_CONNECTIONS,
        "message": format!("too many HTTP connections ({n} open): try again later"),
        "exit": 1,
    }})
    .to_string();
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(reply.as_bytes());
    metrics::counter!(super::REFUSED, "reason" => "too_many_http_connections").increment(1);
}

async fn serve_one(stream: TcpStream, app: Router, shared: Arc<Shared>, slot: Slot) {
    let io = TokioIo::new(Timed::new(stream, shared.opts.write_timeout));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.opts.http_idle_timeout)
        .max_buf_size(MAX_HEAD);
    let conn = builder.serve_connection(io, TowerToHyperService::new(app));
    tokio::pin!(conn);
    let mut stop = shared.shutdown.clone();
    let stopping = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stopping => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(shared.opts.drain, conn).await;
        }
    }
    drop(slot);
}
