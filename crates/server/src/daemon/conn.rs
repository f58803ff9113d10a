//! One connection: read a line, answer it, in order, until the client closes,
//! idles out, sends an over-long line, or the daemon shuts down. Responses
//! are buffered and flushed whenever no further request is already buffered,
//! so pipelined requests cost one write. Operation methods run on the
//! blocking pool (a durable write waits for its fsync there, sharing it with
//! other connections).
//!
//! Heartbeats, the traffic of an agent fleet, take one path
//! ([`super::heartbeat`]): a line that is a heartbeat is decoded without
//! building a JSON tree (a line of another shape, say with a top-level key
//! of its own, is parsed first and its `params` decoded the same way),
//! applied through a [`HeartbeatSink`] (the store inline, in microseconds,
//! or a replica's cluster node) and answered by writing the reply's bytes
//! straight into the output, byte for byte what a JSON tree would send. A
//! local durable one's reply is held until the daemon's sync task reports
//! an fsync covering it (`durable`: one fsync for every connection waiting,
//! and for a whole pipelined batch). Lines already in the read buffer are
//! taken without arming the idle timer, and watchers are woken once per
//! drained buffer rather than once per heartbeat.
//!
//! On a replica a lazy heartbeat joins the host's heartbeat batch and its
//! reply waits in the connection's [`super::replica::Pipeline`] for the
//! batch's sequence, so one connection keeps many in flight; the replies
//! go out in request order whenever no further request is buffered.

use super::deadline::Timed;
use super::durable::Held;
use super::frame::{self, Frame};
use super::heartbeat::{self, Beat, HeartbeatLine, HeartbeatRequest};
use super::replica::Pipeline;
use super::server::Shared;
use super::{code, ErrorReply, Peer, PROTOCOL_VERSION};
use crate::store::{with_access, with_origin, PeerAccess};
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::UnixStream;
use tokio::sync::Notify;

/// A connection's output: buffered, and failing once the peer has read
/// nothing for the write timeout ([`super::deadline`]).
pub(crate) type Writer = BufWriter<Timed<OwnedWriteHalf>>;

/// Line buffer capacity a connection keeps after a longer request.
const KEPT_LINE: usize = 16 << 10;

/// A parsed request line.
pub struct Request {
    pub id: Value,
    pub method: String,
    pub params: Map<String, Value>,
}

/// Parses a request line, or the error reply for it.
pub fn parse(line: &[u8]) -> Result<Request, (Value, ErrorReply)> {
    let doc: Value = serde_json::from_slice(line).map_err(|e| {
        let msg = format!("request is not valid JSON: {e}");
        (Value::Null, ErrorReply::new(code::PARSE_ERROR, msg, 2))
    })?;
    let Value::Object(mut obj) = doc else {
        let msg = "request must be a JSON object";
        return Err((Value::Null, ErrorReply::new(code::PARSE_ERROR, msg, 2)));
    };
    let id = obj.remove("id").unwrap_or(Value::Null);
    let bad = |msg: &str| ErrorReply::new(code::BAD_REQUEST, msg, 2);
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        Some(_) => return Err((id, bad("`method` must be a string"))),
        None => return Err((id, bad("request has no `method`"))),
    };
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => return Err((id, bad("`params` must be an object"))),
    };
    Ok(Request { id, method, params })
}

/// Appends one response line to `w`.
pub async fn send<W: AsyncWrite + Unpin>(w: &mut W, doc: &Value) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(doc).expect("a JSON value always serializes");
    bytes.push(b'\n');
    w.write_all(&bytes).await
}

pub fn error_doc(id: Value, e: &ErrorReply) -> Value {
    metrics::counter!(super::http::REFUSED, "reason" => e.code.clone()).increment(1);
    json!({"id": id, "error": e})
}

/// Sends a final error and closes.
async fn fail(w: &mut Writer, e: ErrorReply) {
    let _ = send(w, &error_doc(Value::Null, &e)).await;
    let _ = w.flush().await;
    let _ = w.shutdown().await;
}

/// The peer's credentials; a peer whose credentials cannot be read is
/// treated as an anonymous observer (uid/gid `u32::MAX`).
pub(crate) fn peer_of(stream: &UnixStream) -> Peer {
    match stream.peer_cred() {
        Ok(c) => Peer {
            uid: c.uid(),
            gid: c.gid(),
            pid: c.pid().and_then(|p| u32::try_from(p).ok()),
        },
        Err(_) => Peer {
            uid: u32::MAX,
            gid: u32::MAX,
            pid: None,
        },
    }
}

/// Wakes the watchers once for the hot-path writes since the last wake-up
/// (also when the connection ends).
struct Wake<'a> {
    committed: &'a Notify,
    pending: bool,
}

impl Wake<'_> {
    fn now(&mut self) {
        if std::mem::take(&mut self.pending) {
            self.committed.notify_waiters();
        }
    }
}

impl Drop for Wake<'_> {
    fn drop(&mut self) {
        self.now();
    }
}

/// Heartbeat replies not yet written, and the buffer one is written into.
struct Replies<'a> {
    /// The reply being written (reused: the hot path does not allocate).
    line: Vec<u8>,
    /// Local durable heartbeats' replies (and those after them), until an
    /// fsync covers them.
    held: Held,
    /// A replica's heartbeat replies, until their publish is stored.
    pipeline: Pipeline,
    wake: Wake<'a>,
}

/// Serves one connection of `peer` (who may write if `writer`: decided once,
/// at accept) until it ends.
pub(crate) async fn run(stream: UnixStream, shared: Arc<Shared>, peer: Peer, writer: bool) {
    let (rd, wr) = stream.into_split();
    let mut rd = BufReader::with_capacity(64 << 10, rd);
    let wr = Timed::new(wr, shared.opts.write_timeout);
    let mut wr = BufWriter::with_capacity(64 << 10, wr);
    let mut shutdown = shared.shutdown.clone();
    let mut line = Vec::new();
    // Who the peer is does not change: decided once per connection.
    let hot = shared.dispatch.knows("heartbeat") && writer;
    let mut out = Replies {
        line: Vec::with_capacity(128),
        held: Held::default(),
        pipeline: Pipeline::default(),
        wake: Wake {
            committed: &shared.committed,
            pending: false,
        },
    };
    loop {
        let buffered = rd.buffer().contains(&b'\n');
        if !buffered || out.pipeline.is_full() {
            out.wake.now();
            if out.pipeline.settle(&mut wr).await.is_err()
                || out.held.settle(&shared.syncer, &mut wr).await.is_err()
                || wr.flush().await.is_err()
            {
                return;
            }
        }
        if *shutdown.borrow_and_update() {
            let msg = "the daemon is shutting down";
            return fail(&mut wr, ErrorReply::new(code::SHUTTING_DOWN, msg, 1)).await;
        }
        // One long request does not keep its buffer for the connection's life.
        if line.capacity() > KEPT_LINE {
            line.clear();
            line.shrink_to(KEPT_LINE);
        }
        let idle = shared.opts.idle_timeout;
        let read = if buffered {
            // A whole line is buffered: no wait, so no timer and no select.
            Ok(frame::read_line(&mut rd, &mut line, shared.opts.max_line).await)
        } else {
            tokio::select! {
                biased;
                _ = shutdown.changed() => continue,
                r = tokio::time::timeout(idle, frame::read_line(&mut rd, &mut line, shared.opts.max_line)) => r,
            }
        };
        match read {
            Err(_) => {
                let msg = format!("no request for {} s: connection closed", idle.as_secs());
                return fail(&mut wr, ErrorReply::new(code::IDLE_TIMEOUT, msg, 1)).await;
            }
            Ok(Err(_)) => return,
            Ok(Ok(Frame::Eof)) => {
                if out.pipeline.settle(&mut wr).await.is_ok() {
                    let _ = wr.flush().await;
                }
                return;
            }
            Ok(Ok(Frame::TooLong)) => {
                if out.pipeline.settle(&mut wr).await.is_err()
                    || out.held.settle(&shared.syncer, &mut wr).await.is_err()
                {
                    return;
                }
                let msg = format!(
                    "request line longer than {} bytes: connection closed",
                    shared.opts.max_line
                );
                return fail(&mut wr, ErrorReply::new(code::LINE_TOO_LONG, msg, 2)).await;
            }
            Ok(Ok(Frame::Line)) => {}
        }
        if hot {
            if let Some(hb) = HeartbeatLine::decode(&line) {
                if serve_heartbeat(&shared, &peer, hb.id, &hb.params, &mut out, &mut wr)
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
        }
        if out.pipeline.settle(&mut wr).await.is_err()
            || out.held.settle(&shared.syncer, &mut wr).await.is_err()
        {
            return;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }

        let req = match parse(&line) {
            Ok(r) => r,
            Err((id, e)) => {
                if send(&mut wr, &error_doc(id, &e)).await.is_err() {
                    return;
                }
                continue;
            }
        };
        // A heartbeat the line decoder did not take whole (a top-level key
        // of its own, a duplicate key): its parameters, decoded the same way.
        if hot && req.method == "heartbeat" {
            if let Ok(hb) = HeartbeatRequest::from_params(&req.params) {
                if serve_heartbeat(&shared, &peer, req.id, &hb, &mut out, &mut wr)
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
        }
        if req.method == "watch" {
            out.wake.now();
            if wr.flush().await.is_err() {
                return;
            }
            return super::watch::run(wr, req, shared.clone(), peer).await;
        }
        let sock = wr.get_ref().get_ref().as_ref();
        let mut doc = match answer(&shared, &peer, writer, req.method, req.params, sock).await {
            Ok((result, 0)) => json!({"id": req.id, "result": result}),
            Ok((result, exit)) => json!({"id": req.id, "result": result, "exit": exit}),
            Err(e) => error_doc(req.id, &e),
        };
        // A stale replica's answers may be behind the stream (PROTOCOL.md).
        if let (Some(mark), Value::Object(fields)) = (
            shared.replica.as_ref().and_then(|r| r.stale_mark()),
            &mut doc,
        ) {
            if fields.contains_key("result") {
                fields.insert("stale".into(), mark);
            }
        }
        if send(&mut wr, &doc).await.is_err() {
            return;
        }
    }
}

/// The one heartbeat path: applies `req` (the request `id`'s) through the
/// store, or the node of a replica, and writes, holds or queues its reply
/// so that replies leave in request order. `Err`: the connection is gone.
async fn serve_heartbeat(
    shared: &Shared,
    peer: &Peer,
    id: Value,
    req: &HeartbeatRequest<'_>,
    out: &mut Replies<'_>,
    wr: &mut Writer,
) -> std::io::Result<()> {
    let beat = match &shared.replica {
        Some(replica) => req.apply(replica.node(), peer.origin()).await,
        None => req.apply(&*shared.store, peer.origin()).await,
    };
    let dispatch = &*shared.dispatch;
    out.line.clear();
    let durable = match beat {
        Ok(Beat::Published(ticket)) if req.plain() => {
            // Answered with the ticket's LSN, in order, when no request is
            // buffered: no worker is blocked; the mirror wakes the watchers.
            let name = &req.name;
            let prefix = |line: &mut Vec<u8>| heartbeat::write_ok_prefix(&id, name, line);
            out.pipeline.push(id.clone(), ticket, prefix);
            return Ok(());
        }
        Ok(Beat::Published(ticket)) => {
            // The CLI's text: after the replies before it.
            out.pipeline.settle(wr).await?;
            match ticket.wait().await {
                Ok(lsn) => req.write_ok(&id, lsn, dispatch, &mut out.line),
                Err(e) => {
                    let e = super::replica::reply_error(e);
                    heartbeat::write_error(id, &e, &mut out.line);
                }
            }
            None
        }
        Ok(Beat::Appended(lsn)) => {
            out.wake.pending = true;
            req.write_ok(&id, lsn, dispatch, &mut out.line);
            None
        }
        Ok(Beat::Fsync(lsn)) => {
            out.wake.pending = true;
            req.write_ok(&id, lsn, dispatch, &mut out.line);
            Some((id, lsn))
        }
        Err(e) => {
            // Answered after the replies before it.
            out.pipeline.settle(wr).await?;
            heartbeat::write_error(id, &e, &mut out.line);
            None
        }
    };
    if durable.is_none() && out.held.is_empty() {
        return wr.write_all(&out.line).await;
    }
    if out.held.hold(&out.line, durable) {
        out.held.settle(&shared.syncer, wr).await?;
    }
    Ok(())
}

/// Runs one request.
async fn answer(
    shared: &Arc<Shared>,
    peer: &Peer,
    writer: bool,
    method: String,
    params: Map<String, Value>,
    sock: &UnixStream,
) -> super::Outcome {
    if method == "hello" {
        return Ok((hello(shared, peer, writer), 0));
    }
    let d = &shared.dispatch;
    if !d.knows(&method) {
        let msg = format!("unknown method `{method}` (see PROTOCOL.md)");
        return Err(ErrorReply::new(code::UNKNOWN_METHOD, msg, 2));
    }
    let writes = !d.read_only(&method);
    let may_write = writer;
    if writes && !may_write && !d.open_to_observers(&method, &params) {
        let msg = shared.access.refusal(peer, &method);
        return Err(ErrorReply::new(code::FORBIDDEN, msg, 1));
    }
    if let Some(param) = d.path_param(&method, &params) {
        if !shared.access.may_name_paths(peer) {
            let msg = shared.access.path_refusal(peer, &method, &param);
            return Err(ErrorReply::new(code::FORBIDDEN, msg, 1));
        }
    }
    if method == "read" && params.contains_key("wait") {
        let out = super::watch::read_when_mail(shared, peer, params, sock).await;
        shared.committed.notify_waiters();
        return out;
    }
    if method == "heartbeat" {
        // The connection answers every heartbeat the decoder takes; the
        // dispatcher never runs one.
        return Err(heartbeat::refusal(&**d, &params));
    }
    let (store, dispatch, origin) = (shared.store.clone(), d.clone(), peer.origin());
    let access = PeerAccess {
        may_write,
        admin: shared.access.administers(peer),
    };
    let out = tokio::task::spawn_blocking(move || {
        with_origin(origin, || {
            with_access(access, || dispatch.call(&store, &method, &params))
        })
    })
    .await
    .unwrap_or_else(|e| {
        let msg = format!("internal error running the request: {e}");
        Err(ErrorReply::new(code::FAILED, msg, 1))
    });
    if writes {
        shared.committed.notify_waiters();
    }
    out
}

fn hello(shared: &Shared, peer: &Peer, writer: bool) -> Value {
    json!({
        "protocol": PROTOCOL_VERSION,
        "server": format!("agentlog {}", env!("CARGO_PKG_VERSION")),
        "store": {"dir": shared.store.dir(), "id": shared.store_id},
        "last_lsn": shared.store.applied_lsn(),
        "pid": std::process::id(),
        "peer": peer,
        "writer": writer,
        "connections": shared.connections.load(Ordering::Relaxed),
        "watchers_lagged": shared.lagged.load(Ordering::Relaxed),
        "http": shared.http_addr.map(|a| a.to_string()),
        "reads_waiting": shared.waiting_reads.load(Ordering::Relaxed),
        "compaction_rounds": shared.compaction_rounds.load(Ordering::Relaxed),
        "publish_rounds": shared.publish_rounds.load(Ordering::Relaxed),
        "publish_file_reads": shared.store.publish_file_reads(),
        "replica": shared.replica.as_ref().map(|r| r.describe()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_requests_and_errors() {
        let r = parse(br#"{"id":3,"method":"list","params":{"all":true}}"#)
            .ok()
            .unwrap();
        assert_eq!((r.id, r.method.as_str()), (json!(3), "list"));
        assert_eq!(r.params["all"], json!(true));
        let (id, e) = parse(b"{nope").err().unwrap();
        assert_eq!((id, e.code.as_str()), (Value::Null, code::PARSE_ERROR));
        let (id, e) = parse(br#"{"id":"x"}"#).err().unwrap();
        assert_eq!((id, e.code.as_str()), (json!("x"), code::BAD_REQUEST));
        let (_, e) = parse(br#"{"method":"list","params":[1]}"#).err().unwrap();
        assert_eq!(e.code, code::BAD_REQUEST);
    }
}
