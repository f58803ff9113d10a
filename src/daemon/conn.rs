//! One connection: read a line, answer it, in order, until the client closes,
//! idles out, sends an over-long line, or the daemon shuts down. Responses
//! are buffered and flushed whenever no further request is already buffered,
//! so pipelined requests cost one write. Operation methods run on the
//! blocking pool (a durable write waits for its fsync there, sharing it with
//! other connections).
//!
//! The hot path is the heartbeat of an agent fleet: a line that is exactly
//! `{"id", "method": "heartbeat", "params": {"name", "pid"?, "at"?,
//! "durable"?}}` is decoded without building a JSON tree, appended inline
//! (microseconds), and answered by writing the reply's bytes straight into
//! the output, byte for byte what the general path sends. A durable one's
//! reply is held until the daemon's sync task reports an fsync covering it
//! (`durable`: one fsync for every connection waiting, and for a whole
//! pipelined batch). Lines already in the read buffer are taken without
//! arming the idle timer, and watchers are woken once per drained buffer
//! rather than once per heartbeat. Anything else about a line (another
//! method, an unknown key, a `null`, a bad time, a time more than 5 minutes
//! after the clock) takes the general path, which answers it exactly as
//! before, after the held replies.
//!
//! On a replica a lazy heartbeat joins the host's heartbeat batch and its
//! reply waits in the connection's [`super::replica::Pipeline`] for the
//! batch's sequence, so one connection keeps many in flight; the replies
//! go out in request order whenever no further request is buffered.

use super::deadline::Timed;
use super::durable::Held;
use super::frame::{self, Frame};
use super::server::Shared;
use super::{code, ErrorReply, Peer, PROTOCOL_VERSION};
use crate::registry::Lsn;
use crate::store::{with_access, with_origin, PeerAccess};
use crate::time::Timestamp;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::borrow::Cow;
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
    let mut reply = Vec::with_capacity(128);
    let mut wake = Wake {
        committed: &shared.committed,
        pending: false,
    };
    let mut held = Held::default();
    let mut pipeline = super::replica::Pipeline::default();
    loop {
        let buffered = rd.buffer().contains(&b'\n');
        if !buffered || pipeline.is_full() {
            wake.now();
            if pipeline.settle(&mut wr).await.is_err()
                || held.settle(&shared.syncer, &mut wr).await.is_err()
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
                if pipeline.settle(&mut wr).await.is_ok() {
                    let _ = wr.flush().await;
                }
                return;
            }
            Ok(Ok(Frame::TooLong)) => {
                if pipeline.settle(&mut wr).await.is_err()
                    || held.settle(&shared.syncer, &mut wr).await.is_err()
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
            if let Some(hb) = HotHeartbeat::decode(&line) {
                reply.clear();
                if let Some(replica) = &shared.replica {
                    // A replica's lazy heartbeat joins the host's batch and
                    // its reply waits in the pipeline (answered in order
                    // when no request is buffered); a durable one waits for
                    // its own ack after those. No worker is blocked; the
                    // mirror wakes the watchers.
                    let lazy = if hb.durable {
                        None
                    } else {
                        let (name, pid, at) = (&hb.name, hb.pid, hb.at);
                        Some(replica.heartbeat_lazy(peer.origin(), name, pid, at).await)
                    };
                    if let Some(Ok(ticket)) = lazy {
                        let id = hb.id.clone();
                        pipeline.push(id, ticket, |out| hb.write_ok_prefix(out));
                        continue;
                    }
                    // Answered after the heartbeats before it; a durable
                    // one is published only once their batches are stored.
                    if pipeline.settle(&mut wr).await.is_err() {
                        return;
                    }
                    match lazy {
                        Some(Err(e)) => hb.write_error(&e, &mut reply),
                        _ => hb.answer_replicated(replica, &peer, &mut reply).await,
                    }
                    if wr.write_all(&reply).await.is_err() {
                        return;
                    }
                    continue;
                }
                let durable_id = hb.durable.then(|| hb.id.clone());
                let lsn = hb.answer(&shared.store, &peer, &mut reply);
                wake.pending |= lsn.is_some();
                let written = match (durable_id, lsn) {
                    (Some(id), Some(lsn)) => {
                        if !held.hold(&reply, Some((id, lsn))) {
                            continue;
                        }
                        held.settle(&shared.syncer, &mut wr).await
                    }
                    _ if !held.is_empty() => {
                        if !held.hold(&reply, None) {
                            continue;
                        }
                        held.settle(&shared.syncer, &mut wr).await
                    }
                    _ => wr.write_all(&reply).await,
                };
                if written.is_err() {
                    return;
                }
                continue;
            }
        }
        if pipeline.settle(&mut wr).await.is_err()
            || held.settle(&shared.syncer, &mut wr).await.is_err()
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
        if req.method == "watch" {
            wake.now();
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

/// A lazy heartbeat request line in the one shape the hot path takes (see
/// the module doc); every field borrowed from the line where it can be.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HotRequest<'a> {
    #[serde(default)]
    id: Value,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: HotParams<'a>,
}

/// `null` is not "absent" for the general path (it is a usage error there),
/// so an optional field here takes only a value of its type.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HotParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default, deserialize_with = "present")]
    pid: Option<u32>,
    #[serde(default, borrow, deserialize_with = "present")]
    at: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    durable: Option<bool>,
}

fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// `at`, unless it lies more than [`crate::time::MAX_FUTURE_SKEW_MS`] after
/// the clock: the hot path leaves such a heartbeat to the general path, and
/// there [`FastHeartbeat::run`] refuses it (`force_time` and `clock` are the
/// dispatcher's, which bounds them the same way), against the clock the
/// dispatcher reads (`$AGENTLOG_NOW` when set, else the system clock).
fn in_bounds(at: Timestamp) -> Option<Timestamp> {
    let clock = crate::time::process_clock();
    (!at.is_beyond(clock, crate::time::MAX_FUTURE_SKEW_MS)).then_some(at)
}

/// The refusal of a write time beyond [`in_bounds`], worded as the CLI's
/// (`cli::args::not_in_future`), whose flags the parameters mirror.
fn future_refusal(at: Timestamp) -> ErrorReply {
    let clock = crate::time::process_clock();
    let msg = format!(
        "--at {at} is more than {} minutes after the clock ({clock}); \
         pass --force-time if that future time is really meant",
        crate::time::MAX_FUTURE_SKEW_MS / 60_000
    );
    ErrorReply::new(code::USAGE, msg, 2)
}

pub struct HotHeartbeat<'a> {
    pub(crate) id: Value,
    pub(crate) name: Cow<'a, str>,
    pub(crate) pid: Option<u32>,
    pub(crate) at: Option<Timestamp>,
    /// Answered only once an fsync covers it ([`Held`]).
    pub(crate) durable: bool,
}

impl<'a> HotHeartbeat<'a> {
    /// The heartbeat `line` asks for, or `None` for the general path.
    pub fn decode(line: &'a [u8]) -> Option<HotHeartbeat<'a>> {
        let req: HotRequest<'a> = serde_json::from_slice(line).ok()?;
        let p = req.params;
        if req.method != "heartbeat" || p.name.is_empty() {
            return None;
        }
        let at = match p.at {
            Some(t) => Some(in_bounds(Timestamp::parse_rfc3339(&t).ok()?)?),
            None => None,
        };
        Some(HotHeartbeat {
            id: req.id,
            name: p.name,
            pid: p.pid,
            at,
            durable: p.durable == Some(true),
        })
    }

    /// Writes the success reply for `lsn`:
    /// `{"id":…,"result":{"agent":…,"lsn":…}}`, keys in the order
    /// serde_json's maps serialize them.
    pub fn write_ok(&self, lsn: Lsn, out: &mut Vec<u8>) {
        self.write_ok_prefix(out);
        serde_json::to_writer(&mut *out, &lsn).expect("a number always serializes");
        out.extend_from_slice(b"}}\n");
    }

    /// The success reply up to its LSN (the rest is `LSN}}\n`).
    fn write_ok_prefix(&self, out: &mut Vec<u8>) {
        let json = "a string or a JSON value always serializes";
        out.extend_from_slice(b"{\"id\":");
        serde_json::to_writer(&mut *out, &self.id).expect(json);
        out.extend_from_slice(b",\"result\":{\"agent\":");
        serde_json::to_writer(&mut *out, self.name.as_ref()).expect(json);
        out.extend_from_slice(b",\"lsn\":");
    }

    /// The error reply line for `e`.
    fn write_error(self, e: &ErrorReply, out: &mut Vec<u8>) {
        let mut doc =
            serde_json::to_vec(&error_doc(self.id, e)).expect("a JSON value always serializes");
        doc.push(b'\n');
        out.extend_from_slice(&doc);
    }

    /// A replica's heartbeat: published through the stream, its response
    /// line written to `out` once the mirror folded it.
    async fn answer_replicated(
        self,
        replica: &super::replica::Replica,
        peer: &Peer,
        out: &mut Vec<u8>,
    ) {
        let beat = replica
            .heartbeat(peer.origin(), &self.name, self.pid, self.at, self.durable)
            .await;
        match beat {
            Ok(lsn) => self.write_ok(lsn, out),
            Err(e) => self.write_error(&e, out),
        }
    }

    /// Appends the heartbeat (lazily) and writes its response line to `out`
    /// (what the general path would send); the LSN appended, if any.
    fn answer(self, store: &crate::store::Store, peer: &Peer, out: &mut Vec<u8>) -> Option<Lsn> {
        let beat = with_origin(peer.origin(), || {
            super::blocking::heartbeat(store, &self.name, self.pid, self.at)
        });
        match beat {
            Ok(lsn) => {
                self.write_ok(lsn, out);
                Some(lsn)
            }
            Err(e) => {
                self.write_error(&ErrorReply::from_error(&e, false), out);
                None
            }
        }
    }
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
        if let Some(hb) = FastHeartbeat::parse(&params) {
            let out = hb.run(shared, peer).await;
            shared.committed.notify_waiters();
            return out;
        }
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
        if let Some(at) = self.at.filter(|&t| in_bounds(t).is_none()) {
            return Err(future_refusal(at));
        }
        if let Some(replica) = &shared.replica {
            let lsn = replica
                .heartbeat(peer.origin(), &self.name, self.pid, self.at, self.durable)
                .await?;
            return Ok((json!({"agent": self.name, "lsn": lsn}), 0));
        }
        let store = shared.store.clone();
        let origin = peer.origin();
        let beat = move || {
            with_origin(origin, || {
                let lsn = super::blocking::heartbeat(&store, &self.name, self.pid, self.at)?;
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
            Err(e) => Err(ErrorReply::from_error(&e, false)),
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
        // A future time is refused when it runs, as the CLI refuses it.
        let p = json!({"name": "w", "at": "9999-12-31T00:00:00Z", "durable": true});
        let hb = FastHeartbeat::parse(p.as_object().unwrap()).unwrap();
        let e = future_refusal(hb.at.unwrap());
        assert_eq!((e.code.as_str(), e.exit), (code::USAGE, 2));
        assert!(e.message.contains("more than 5 minutes after the clock"));
    }

    /// The hot path takes only the plain lazy heartbeat; everything else
    /// goes to the general path, which answers it as before.
    #[test]
    fn hot_path_shape() {
        let hot = |l: &str| HotHeartbeat::decode(l.as_bytes()).is_some();
        for l in [
            r#"{"id":1,"method":"heartbeat","params":{"name":"a"}}"#,
            r#"{"method":"heartbeat","params":{"name":"a","pid":7,"durable":false}}"#,
            r#"{"id":2,"method":"heartbeat","params":{"durable":true,"name":"a"}}"#,
            r#"{"params":{"at":"2026-01-02T03:04:05Z","name":"a\u00e9"},"id":"x","method":"heartbeat"}"#,
            r#"{"id":{"k":[1,null]},"method":"heartbeat","params":{"name":"a"}}"#,
        ] {
            assert!(hot(l), "{l}");
        }
        for l in [
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","pid":null}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","durable":null}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","pid":-1}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","render":"text"}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","at":"yesterday"}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","at":"9999-12-31T00:00:00Z"}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","name":"b"}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":""}}"#,
            r#"{"id":1,"method":"heartbeat","params":null}"#,
            r#"{"id":1,"method":"heartbeat"}"#,
            r#"{"id":1,"method":"status","params":{"name":"a"}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a"},"extra":1}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a"}"#,
            "   ",
        ] {
            assert!(!hot(l), "{l}");
        }
    }

    /// A hot-path reply is byte for byte the general path's, for success
    /// and for a refusal.
    #[test]
    fn hot_path_replies_match_the_general_form() {
        use crate::registry::Registration;
        use crate::store::{Store, StoreOptions};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        store
            .register(Registration::new("w\"é", "claude", "/tmp"), None)
            .unwrap();
        let peer = Peer {
            uid: 1,
            gid: 1,
            pid: Some(2),
        };
        for (line, agent) in [
            (
                r#"{"id":"7\n","method":"heartbeat","params":{"name":"w\"\u00e9"}}"#,
                "w\"é",
            ),
            (
                r#"{"id":[1.5,{"b":1,"a":2}],"method":"heartbeat","params":{"name":"w\"é"}}"#,
                "w\"é",
            ),
            (
                r#"{"id":3,"method":"heartbeat","params":{"name":"ghost"}}"#,
                "ghost",
            ),
        ] {
            let hb = HotHeartbeat::decode(line.as_bytes()).unwrap();
            let id = hb.id.clone();
            let mut got = Vec::new();
            let appended = hb.answer(&store, &peer, &mut got).is_some();
            let general = parse(line.as_bytes()).ok().unwrap();
            assert_eq!(general.id, id);
            let want = if appended {
                let lsn = store.applied_lsn();
                json!({"id": id, "result": {"agent": agent, "lsn": lsn}})
            } else {
                let e = store.heartbeat(agent, None, None).unwrap_err();
                error_doc(id, &ErrorReply::from_error(&e, false))
            };
            let mut want = serde_json::to_vec(&want).unwrap();
            want.push(b'\n');
            assert_eq!(
                String::from_utf8(got).unwrap(),
                String::from_utf8(want).unwrap()
            );
            assert_eq!(appended, agent != "ghost");
        }
    }
}
