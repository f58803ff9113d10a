//! One heartbeat path for the daemon: the request's one decoder
//! ([`HeartbeatRequest`], which borrows the agent's name from the request
//! line), the [`HeartbeatSink`] it is applied through (the local [`Store`],
//! or a replica's [`ClusterNode`]), and its reply, written into a buffer the
//! connection reuses, byte for byte what a JSON tree of it would serialize
//! to. The connection ([`super::conn`]) only decides when a reply may go
//! out: at once, after an fsync ([`super::durable::Held`]) or after a
//! replica's batch was stored ([`super::replica::Pipeline`]).
//!
//! The parameters are those of `agentlog heartbeat NAME [--pid N] [--at T]
//! [--force-time]` and the protocol's own (`durable`, `clock`, `render`,
//! `json`: PROTOCOL.md). Values are read as the CLI grammar reads them
//! through the daemon (a `pid` may be a number or a decimal string, as the
//! CLI sends it). A request the decoder does not take gets the refusal the
//! CLI grammar gives it ([`super::Dispatch::refusal`]), or, where that
//! grammar would have coerced the value (`"name": 5`), a usage error naming
//! what the decoder expected. The plain heartbeat of an agent fleet, `{"id",
//! "method": "heartbeat", "params": {"name", "pid"?, "at"?, "durable"?}}`,
//! is decoded and answered without allocating.

use super::{code, Dispatch, ErrorReply};
use crate::cluster::{ClusterNode, HeartbeatTicket};
use crate::log::Durability;
use crate::registry::codec::Origin;
use crate::registry::Lsn;
use crate::store::{with_origin, Store};
use crate::time::{Timestamp, MAX_FUTURE_SKEW_MS};
use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::future::Future;

/// A request line that is a heartbeat whose parameters the decoder takes;
/// any other line (another method, a key of its own at the top level, a
/// duplicate key) is parsed by the general path, which hands a heartbeat's
/// parameters to [`HeartbeatRequest::from_params`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatLine<'a> {
    #[serde(default)]
    pub id: Value,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    pub params: HeartbeatRequest<'a>,
}

impl<'a> HeartbeatLine<'a> {
    /// The heartbeat `line` asks for, or `None` for the general path.
    pub fn decode(line: &'a [u8]) -> Option<HeartbeatLine<'a>> {
        let l: HeartbeatLine<'a> = serde_json::from_slice(line).ok()?;
        (l.method == "heartbeat").then_some(l)
    }
}

/// The parameters of one heartbeat. `null` is no value here (the CLI
/// grammar refuses it too): an optional parameter is absent or of its type.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest<'a> {
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    #[serde(default, deserialize_with = "pid")]
    pub pid: Option<u32>,
    /// The event time (default: the clock when it is appended).
    #[serde(default, deserialize_with = "time")]
    pub at: Option<Timestamp>,
    /// Store an `at` more than 5 minutes after the clock.
    #[serde(default)]
    pub force_time: bool,
    /// Answered only once an fsync (a replica: its own publish) covers it.
    #[serde(default)]
    pub durable: bool,
    /// The client's clock, which bounds `at` in place of the daemon's.
    #[serde(default, deserialize_with = "time")]
    pub clock: Option<Timestamp>,
    /// `render: "text"`: the CLI's output instead of the result.
    #[serde(default, rename = "render", deserialize_with = "is_text")]
    text: bool,
    /// With `text`, the output of `--json`.
    #[serde(default, deserialize_with = "is_true")]
    json: bool,
}

/// A `pid` as the CLI grammar reads `--pid`: a whole number, given as a
/// JSON number or as a decimal string (the CLI sends its arguments as
/// strings).
fn pid<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    struct Pid;
    impl Visitor<'_> for Pid {
        type Value = u32;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a pid: a whole number from 0 to 4294967295")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u32, E> {
            u32::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u32, E> {
            u32::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<u32, E> {
            // clap's integer parser: an i64 (a sign allowed), then the range.
            (v.parse::<i64>().ok())
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
        }
    }
    d.deserialize_any(Pid).map(Some)
}

/// An RFC 3339 time, as the CLI's `--at` parses it.
fn time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
    let text = Cow::<str>::deserialize(d)?;
    Timestamp::parse_rfc3339(&text)
        .map(Some)
        .map_err(|e| de::Error::custom(format!("`{text}` is not an RFC 3339 time: {e}")))
}

/// `render`: only `"text"` means anything (the dispatcher's rule).
fn is_text<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Value::deserialize(d)? == "text")
}

/// `json`: only `true` means anything (the dispatcher's rule).
fn is_true<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Value::deserialize(d)? == Value::Bool(true))
}

impl<'a> HeartbeatRequest<'a> {
    /// The heartbeat in a request's parsed `params`.
    pub fn from_params(params: &'a Map<String, Value>) -> serde_json::Result<Self> {
        HeartbeatRequest::deserialize(params)
    }

    /// Whether the reply is the plain result `{"agent", "lsn"}` (not the
    /// CLI's text): the shape a replica's pipeline answers.
    pub fn plain(&self) -> bool {
        !self.text
    }

    fn mode(&self) -> Durability {
        if self.durable {
            Durability::Durable
        } else {
            Durability::Lazy
        }
    }

    /// The event time, refused (as the CLI refuses it, in its words) when
    /// it lies more than 5 minutes after the clock without `force_time`.
    /// The clock is the client's `clock`, else the daemon's (its
    /// `$AGENTLOG_NOW` at start, else the system clock).
    fn checked_at(&self) -> Result<Option<Timestamp>, ErrorReply> {
        let Some(at) = self.at.filter(|_| !self.force_time) else {
            return Ok(self.at);
        };
        // Read only for an `at`: the plain heartbeat needs no clock.
        let clock = self.clock.unwrap_or_else(crate::time::process_clock);
        if !at.is_beyond(clock, MAX_FUTURE_SKEW_MS) {
            return Ok(Some(at));
        }
        let msg = format!(
            "--at {at} is more than {} minutes after the clock ({clock}); \
             pass --force-time if that future time is really meant",
            MAX_FUTURE_SKEW_MS / 60_000
        );
        Err(ErrorReply::new(code::USAGE, msg, 2))
    }

    /// Checks the time and applies the heartbeat of `origin` through `sink`.
    pub async fn apply<S: HeartbeatSink>(
        &self,
        sink: &S,
        origin: Origin,
    ) -> Result<Beat, ErrorReply> {
        self.checked_at()?;
        sink.beat(origin, self).await
    }

    /// Writes the success reply line for `lsn`. The plain result is
    /// `{"id":…,"result":{"agent":…,"lsn":…}}` (keys in the order
    /// serde_json's maps serialize them), written without a JSON tree; the
    /// CLI's text comes from `dispatch`, exactly as the command prints it.
    pub fn write_ok(&self, id: &Value, lsn: Lsn, dispatch: &dyn Dispatch, out: &mut Vec<u8>) {
        if self.text {
            let text = dispatch.applied_text(&self.name, lsn, "heartbeat", self.json);
            let doc = json!({"id": id, "result": {"text": text, "stderr": ""}});
            serde_json::to_writer(&mut *out, &doc).expect("a JSON value always serializes");
            out.push(b'\n');
            return;
        }
        write_result(id, &self.name, lsn, out);
    }
}

/// The plain success reply line: `{"id":…,"result":{"agent":…,"lsn":…}}`.
pub fn write_result(id: &Value, agent: &str, lsn: Lsn, out: &mut Vec<u8>) {
    write_ok_prefix(id, agent, out);
    serde_json::to_writer(&mut *out, &lsn).expect("a number always serializes");
    out.extend_from_slice(b"}}\n");
}

/// The plain success reply up to its LSN (the rest is `LSN}}\n`).
pub fn write_ok_prefix(id: &Value, agent: &str, out: &mut Vec<u8>) {
    let json = "a string or a JSON value always serializes";
    out.extend_from_slice(b"{\"id\":");
    serde_json::to_writer(&mut *out, id).expect(json);
    out.extend_from_slice(b",\"result\":{\"agent\":");
    serde_json::to_writer(&mut *out, agent).expect(json);
    out.extend_from_slice(b",\"lsn\":");
}

/// The error reply line for `e`.
pub fn write_error(id: Value, e: &ErrorReply, out: &mut Vec<u8>) {
    let doc = super::conn::error_doc(id, e);
    serde_json::to_writer(&mut *out, &doc).expect("a JSON value always serializes");
    out.push(b'\n');
}

/// The refusal of a heartbeat whose `params` the decoder does not take:
/// the CLI grammar's words when it refuses them too (what the daemon has
/// always answered), else the decoder's.
pub(crate) fn refusal(dispatch: &dyn Dispatch, params: &Map<String, Value>) -> ErrorReply {
    if let Some(e) = dispatch.refusal("heartbeat", params) {
        return e;
    }
    let why = match HeartbeatRequest::from_params(params) {
        Err(e) => e.to_string(),
        Ok(_) => "only a peer that may write sends heartbeats".to_string(),
    };
    ErrorReply::new(code::USAGE, format!("heartbeat: {why}"), 2)
}

/// When a heartbeat's reply may go out.
pub enum Beat {
    /// Appended locally at this LSN: now.
    Appended(Lsn),
    /// Appended locally at this LSN: once an fsync covers it.
    Fsync(Lsn),
    /// Published through a replica's stream: once the ticket resolves (a
    /// durable heartbeat's already has).
    Published(HeartbeatTicket),
}

/// Where a decoded heartbeat is applied: the local store or a replica's
/// cluster node. Neither blocks a worker thread: a local append is inline
/// (microseconds), a replica's publish is awaited.
pub trait HeartbeatSink {
    /// Appends the heartbeat `hb` of `origin`, whose time was checked
    /// (validated first: an unknown agent, a wrong pid are refused, nothing
    /// appended).
    fn beat(
        &self,
        origin: Origin,
        hb: &HeartbeatRequest<'_>,
    ) -> impl Future<Output = Result<Beat, ErrorReply>> + Send;
}

impl HeartbeatSink for Store {
    /// Appended lazily either way: a durable heartbeat's reply waits for
    /// the daemon's shared fsync ([`super::durable`]), not for its own.
    fn beat(
        &self,
        origin: Origin,
        hb: &HeartbeatRequest<'_>,
    ) -> impl Future<Output = Result<Beat, ErrorReply>> + Send {
        let beat = with_origin(origin, || {
            super::blocking::heartbeat(self, &hb.name, hb.pid, hb.at)
        });
        std::future::ready(match beat {
            Ok(lsn) if hb.durable => Ok(Beat::Fsync(lsn)),
            Ok(lsn) => Ok(Beat::Appended(lsn)),
            Err(e) => Err(ErrorReply::from_error(&e, false)),
        })
    }
}

impl HeartbeatSink for ClusterNode {
    /// A lazy heartbeat joins the host's batch; a durable one is its own
    /// publish ([`ClusterNode::heartbeat`]).
    fn beat(
        &self,
        origin: Origin,
        hb: &HeartbeatRequest<'_>,
    ) -> impl Future<Output = Result<Beat, ErrorReply>> + Send {
        let (agent, pid, at, mode) = (&*hb.name, hb.pid, hb.at, hb.mode());
        async move {
            let ticket = self.heartbeat(Some(origin), agent, pid, at, mode).await;
            ticket
                .map(Beat::Published)
                .map_err(super::replica::reply_error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registration;
    use crate::store::StoreOptions;

    fn decoded(line: &str) -> Option<HeartbeatLine<'_>> {
        HeartbeatLine::decode(line.as_bytes())
    }

    /// The line decoder takes a heartbeat whose parameters it can read
    /// whole; anything else is the general path's (which parses the line,
    /// then decodes a heartbeat's `params` with the same decoder).
    #[test]
    fn the_decoder_takes_heartbeats_only() {
        for l in [
            r#"{"id":1,"method":"heartbeat","params":{"name":"a"}}"#,
            r#"{"method":"heartbeat","params":{"name":"a","pid":7,"durable":false}}"#,
            r#"{"id":2,"method":"heartbeat","params":{"durable":true,"name":"a"}}"#,
            r#"{"params":{"at":"2026-01-02T03:04:05Z","name":"a\u00e9"},"id":"x","method":"heartbeat"}"#,
            r#"{"id":{"k":[1,null]},"method":"heartbeat","params":{"name":"a"}}"#,
            // What the CLI sends: strings, its clock, its text.
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","pid":"7","at":"2026-01-02T03:04:05Z","force_time":true,"clock":"2026-01-02T03:00:00Z","render":"text","json":true}}"#,
            // Refused when applied, in the CLI's words (below).
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","at":"9999-12-31T00:00:00Z"}}"#,
        ] {
            assert!(decoded(l).is_some(), "{l}");
        }
        for l in [
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","pid":null}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","durable":null}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","pid":-1}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","pid":"x7"}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","pid":1.5}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","colour":"red"}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","at":"yesterday"}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","clock":5}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a","name":"b"}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":5}}"#,
            r#"{"id":1,"method":"heartbeat","params":null}"#,
            r#"{"id":1,"method":"heartbeat"}"#,
            r#"{"id":1,"method":"status","params":{"name":"a"}}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a"},"extra":1}"#,
            r#"{"id":1,"method":"heartbeat","params":{"name":"a"}"#,
            "   ",
        ] {
            assert!(decoded(l).is_none(), "{l}");
        }
        // The parsed form decodes to the same request.
        let line = r#"{"id":1,"method":"heartbeat","params":{"name":"a","pid":"7","durable":true,"render":"html"},"extra":1}"#;
        let req = crate::daemon::conn::parse(line.as_bytes()).ok().unwrap();
        let hb = HeartbeatRequest::from_params(&req.params).unwrap();
        assert_eq!((hb.name.as_ref(), hb.pid, hb.durable), ("a", Some(7), true));
        assert!(hb.plain() && matches!(hb.name, Cow::Borrowed(_)));
        let p = json!({"name": "a", "render": "text"});
        assert!(!HeartbeatRequest::from_params(p.as_object().unwrap())
            .unwrap()
            .plain());
    }

    /// A time more than 5 minutes after the clock (the client's `clock`
    /// when sent) is refused as the CLI refuses it, unless `force_time`.
    #[test]
    fn future_times_are_bounded_by_the_clock() {
        let req = |p: Value| {
            let p = p.as_object().unwrap().clone();
            let hb = HeartbeatRequest::from_params(&p).unwrap();
            hb.checked_at()
        };
        let far = "9999-12-31T00:00:00Z";
        let e = req(json!({"name": "w", "at": far, "durable": true})).unwrap_err();
        assert_eq!((e.code.as_str(), e.exit), (code::USAGE, 2));
        assert!(
            e.message.starts_with("--at 9999-12-31T00:00:00"),
            "{}",
            e.message
        );
        assert!(e.message.contains("more than 5 minutes after the clock"));
        assert!(e.message.contains("pass --force-time"));
        let forced = req(json!({"name": "w", "at": far, "force_time": true})).unwrap();
        assert_eq!(forced, Timestamp::parse_rfc3339(far).ok());
        let clock =
            json!({"name": "w", "at": "2031-01-01T00:04:00Z", "clock": "2031-01-01T00:00:00Z"});
        assert!(req(clock).unwrap().is_some());
        let late =
            json!({"name": "w", "at": "2031-01-01T00:06:00Z", "clock": "2031-01-01T00:00:00Z"});
        let e = req(late).unwrap_err();
        assert!(e.message.contains("(2031-01-01T00:00:00"), "{}", e.message);
    }

    /// The reply written from bytes is byte for byte the JSON tree's, for
    /// a success and for a refusal, applied through the store's sink.
    #[tokio::test]
    async fn replies_match_the_json_form() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        store
            .register(Registration::new("w\"é", "claude", "/tmp"), None)
            .unwrap();
        let origin = crate::daemon::Peer {
            uid: 1,
            gid: 1,
            pid: Some(2),
        }
        .origin();
        for (line, agent) in [
            (
                r#"{"id":"7\n","method":"heartbeat","params":{"name":"w\"\u00e9"}}"#,
                "w\"é",
            ),
            (
                r#"{"id":[1.5,{"b":1,"a":2}],"method":"heartbeat","params":{"name":"w\"é","durable":true}}"#,
                "w\"é",
            ),
            (
                r#"{"id":3,"method":"heartbeat","params":{"name":"ghost"}}"#,
                "ghost",
            ),
        ] {
            let hb = HeartbeatLine::decode(line.as_bytes()).unwrap();
            let mut got = Vec::new();
            let (want, appended) = match hb.params.apply(&store, origin).await {
                Ok(Beat::Appended(lsn) | Beat::Fsync(lsn)) => {
                    write_result(&hb.id, &hb.params.name, lsn, &mut got);
                    let lsn = store.applied_lsn();
                    (
                        json!({"id": hb.id, "result": {"agent": agent, "lsn": lsn}}),
                        true,
                    )
                }
                Ok(Beat::Published(_)) => unreachable!("a local store publishes nothing"),
                Err(e) => {
                    write_error(hb.id.clone(), &e, &mut got);
                    let e = store.heartbeat(agent, None, None).unwrap_err();
                    (
                        super::super::conn::error_doc(hb.id, &ErrorReply::from_error(&e, false)),
                        false,
                    )
                }
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
