//! One connection: read a line, answer it, in order, until the client closes,
//! idles out, sends an over-long line, or the daemon shuts down. Responses
//! are buffered and flushed whenever no further request is already buffered,
//! so pipelined requests cost one write. Operation methods run on the
//! blocking pool (a durable write waits for its fsync there, sharing it with
//! other connections); a lazy heartbeat is appended inline (microseconds).

use super::frame::{self, Frame};
use super::server::Shared;
use super::{code, ErrorReply, Peer, PROTOCOL_VERSION};
use crate::store::with_origin;
use crate::time::Timestamp;
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::UnixStream;

pub(crate) type Writer = BufWriter<OwnedWriteHalf>;

/// A parsed request line.
pub(crate) struct Request {
    pub id: Value,
    pub method: String,
    pub params: Map<String, Value>,
}

/// Parses a request line, or the error reply for it.
fn parse(line: &[u8]) -> Result<Request, (Value, ErrorReply)> {
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
pub(crate) async fn send<W: AsyncWrite + Unpin>(w: &mut W, doc: &Value) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(doc).expect("a JSON value always serializes");
    bytes.push(b'\n');
    w.write_all(&bytes).await
}

pub(crate) fn error_doc(id: Value, e: &ErrorReply) -> Value {
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

/// Serves one connection until it ends.
pub(crate) async fn run(stream: UnixStream, shared: Arc<Shared>) {
    let peer = peer_of(&stream);
    let (rd, wr) = stream.into_split();
    let mut rd = BufReader::with_capacity(64 << 10, rd);
    let mut wr = BufWriter::with_capacity(64 << 10, wr);
    let mut shutdown = shared.shutdown.clone();
    let mut line = Vec::new();
    loop {
        if rd.buffer().is_empty() && wr.flush().await.is_err() {
            return;
        }
        if *shutdown.borrow_and_update() {
            let msg = "the daemon is shutting down";
            return fail(&mut wr, ErrorReply::new(code::SHUTTING_DOWN, msg, 1)).await;
        }
        let idle = shared.opts.idle_timeout;
        let read = tokio::select! {
            biased;
            _ = shutdown.changed() => continue,
            r = tokio::time::timeout(idle, frame::read_line(&mut rd, &mut line, shared.opts.max_line)) => r,
        };
        match read {
            Err(_) => {
                let msg = format!("no request for {} s: connection closed", idle.as_secs());
                return fail(&mut wr, ErrorReply::new(code::IDLE_TIMEOUT, msg, 1)).await;
            }
            Ok(Err(_)) => return,
            Ok(Ok(Frame::Eof)) => {
                let _ = wr.flush().await;
                return;
            }
            Ok(Ok(Frame::TooLong)) => {
                let msg = format!(
                    "request line longer than {} bytes: connection closed",
                    shared.opts.max_line
                );
                return fail(&mut wr, ErrorReply::new(code::LINE_TOO_LONG, msg, 2)).await;
            }
            Ok(Ok(Frame::Line)) => {}
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
        if req.method == "watch" {
            if wr.flush().await.is_err() {
                return;
            }
            return super::watch::run(wr, req, shared, peer).await;
        }
        let sock = wr.get_ref().as_ref();
        let doc = match answer(&shared, &peer, req.method, req.params, sock).await {
            Ok((result, 0)) => json!({"id": req.id, "result": result}),
            Ok((result, exit)) => json!({"id": req.id, "result": result, "exit": exit}),
            Err(e) => error_doc(req.id, &e),
        };
        if send(&mut wr, &doc).await.is_err() {
            return;
        }
    }
}

/// Runs one request.
async fn answer(
    shared: &Arc<Shared>,
    peer: &Peer,
    method: String,
    params: Map<String, Value>,
    sock: &UnixStream,
) -> super::Outcome {
    if method == "hello" {
        return Ok((hello(shared, peer), 0));
    }
    let d = &shared.dispatch;
    if !d.knows(&method) {
        let msg = format!("unknown method `{method}` (see PROTOCOL.md)");
        return Err(ErrorReply::new(code::UNKNOWN_METHOD, msg, 2));
    }
    let writes = !d.read_only(&method);
    if writes && !shared.access.may_write(peer) {
        let msg = shared.access.refusal(peer, &method);
        return Err(ErrorReply::new(code::FORBIDDEN, msg, 1));
    }
    if method == "read" && params.contains_key("wait") {
        let out = super::watch::read_when_mail(shared, peer, params, sock).await;
        shared.committed.notify_waiters();
        return out;
    }
    if method == "heartbeat" {
        if let Some(hb) = FastHeartbeat::parse(&params) {
            let out = hb.run(shared, peer).await;
            shared.committed.notify_waiters();
            return out;
        }
    }
    let (store, dispatch, origin) = (shared.store.clone(), d.clone(), peer.origin());
    let out = tokio::task::spawn_blocking(move || {
        with_origin(origin, || dispatch.call(&store, &method, &params))
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

fn hello(shared: &Shared, peer: &Peer) -> Value {
    json!({
        "protocol": PROTOCOL_VERSION,
        "server": format!("agentlog {}", env!("CARGO_PKG_VERSION")),
        "store": {"dir": shared.store.dir(), "id": shared.store_id},
        "last_lsn": shared.store.applied_lsn(),
        "pid": std::process::id(),
        "peer": peer,
        "writer": shared.access.may_write(peer),
        "connections": shared.connections.load(Ordering::Relaxed),
        "watchers_lagged": shared.lagged.load(Ordering::Relaxed),
        "reads_waiting": shared.waiting_reads.load(Ordering::Relaxed),
    })
}

/// A plain heartbeat (`name`, optional `pid`, `at`, `durable`), run without
/// the dispatcher: the hot path of agent fleets. Anything else about the
/// parameters (an unknown key, a bad time) goes to the dispatcher, which
/// reports it exactly as the CLI would.
struct FastHeartbeat {
    name: String,
    pid: Option<u32>,
    at: Option<Timestamp>,
    durable: bool,
}

impl FastHeartbeat {
    fn parse(p: &Map<String, Value>) -> Option<FastHeartbeat> {
        let mut hb = FastHeartbeat {
            name: String::new(),
            pid: None,
            at: None,
            durable: false,
        };
        for (k, v) in p {
            match (k.as_str(), v) {
                ("name", Value::String(s)) => hb.name.clone_from(s),
                ("pid", Value::Number(n)) => hb.pid = Some(u32::try_from(n.as_u64()?).ok()?),
                ("at", Value::String(s)) => hb.at = Some(Timestamp::parse_rfc3339(s).ok()?),
                ("durable", Value::Bool(b)) => hb.durable = *b,
                _ => return None,
            }
        }
        (!hb.name.is_empty()).then_some(hb)
    }

    async fn run(self, shared: &Arc<Shared>, peer: &Peer) -> super::Outcome {
        let store = shared.store.clone();
        let origin = peer.origin();
        let beat = move || {
            with_origin(origin, || {
                let lsn = store.heartbeat(&self.name, self.pid, self.at)?;
                if self.durable {
                    store.log().wait_durable(lsn)?;
                }
                Ok::<_, crate::store::StoreError>((self.name, lsn))
            })
        };
        let out = if self.durable {
            match tokio::task::spawn_blocking(beat).await {
                Ok(r) => r,
                Err(e) => {
                    let msg = format!("internal error running the request: {e}");
                    return Err(ErrorReply::new(code::FAILED, msg, 1));
                }
            }
        } else {
            beat()
        };
        match out {
            Ok((name, lsn)) => Ok((json!({"agent": name, "lsn": lsn}), 0)),
            Err(e) => Err(ErrorReply::from_error(&e.into(), false)),
        }
    }
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
        assert!(FastHeartbeat::parse(&Map::new()).is_none());
        let p = json!({"name": "w", "pid": 5, "durable": true});
        let hb = FastHeartbeat::parse(p.as_object().unwrap()).unwrap();
        assert_eq!((hb.name.as_str(), hb.pid, hb.durable), ("w", Some(5), true));
        let p = json!({"name": "w", "render": "text"});
        assert!(FastHeartbeat::parse(p.as_object().unwrap()).is_none());
    }
}
