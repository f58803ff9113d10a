//! Event payload encoding: `[tag: u8][at: i64 little-endian][body]`.
//!
//! The body is bincode 2 (`config::standard()`, serde) of a per-tag tuple or
//! struct whose first field is the subject agent's name for agent events, so
//! `payload[9..]` starts with the name's bincode form (a one-byte length for
//! names up to 250 bytes, which command validation enforces, then the UTF-8
//! bytes). [`SubjectFilter`] compares those bytes without decoding. Decoding
//! never panics: an unknown tag is "written by a newer agentlog", a body that
//! does not decode (or leaves trailing bytes) names its tag. The byte layout
//! is specified in FORMAT.md, section "Events".
//!
//! Origin trailer (format step of the daemon): a payload whose tag byte has
//! [`ORIGIN_FLAG`] set ends with [`ORIGIN_LEN`] bytes naming who asked for
//! the event (peer uid and pid, little-endian u32 each). Builds before it
//! read such a tag as "written by a newer agentlog"; this build reads both.

use super::events::{
    tag, BatchedHeartbeat, DropReason, DroppedMessage, Event, EventKind, ExternalChange,
    FieldUpdates, Lsn, PostedMessage, Registration, RegistrationKind, RuntimeEvent, SessionKey,
    TransportCause,
};
use crate::model::{Agent, Status, StatusCause, TransportClient};
use crate::time::Timestamp;
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use super::batch::{
    decode_heartbeat_batch, for_each_batched, heartbeat_count, BatchedHeartbeatRef,
    HeartbeatBatchBuilder, HeartbeatBatchRef,
};

/// Bytes before the body: tag and event time.
pub const HEADER_LEN: usize = 9;
/// Tag-byte bit: the payload ends with an origin trailer.
pub const ORIGIN_FLAG: u8 = 0x80;
/// Length of the origin trailer: uid and pid, u32 little-endian each.
pub const ORIGIN_LEN: usize = 8;

/// Who asked for an event: the daemon's peer credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Origin {
    pub uid: u32,
    pub pid: u32,
}

/// Marks the encoded payload in `buf` as asked for by `origin`: sets the tag
/// flag and appends the trailer.
pub fn push_origin(buf: &mut Vec<u8>, origin: Origin) {
    if let Some(t) = buf.first_mut() {
        *t |= ORIGIN_FLAG;
    }
    buf.extend_from_slice(&origin.uid.to_le_bytes());
    buf.extend_from_slice(&origin.pid.to_le_bytes());
}

/// The origin recorded in a payload, if any (a malformed payload has none;
/// [`decode`] reports it).
pub fn origin(payload: &[u8]) -> Option<Origin> {
    split(payload).ok().and_then(|(_, _, _, o)| o)
}

/// The event tag of a payload (origin flag cleared), unchecked: to pick a
/// decoder, which checks it. `None` for an empty payload.
pub fn tag_of(payload: &[u8]) -> Option<u8> {
    payload.first().map(|b| b & !ORIGIN_FLAG)
}

/// Tag (flag cleared), time, body and origin of a payload.
pub(super) type Parts<'a> = (u8, Timestamp, &'a [u8], Option<Origin>);

pub(super) fn split(payload: &[u8]) -> Result<Parts<'_>, DecodeError> {
    let (t, at) = decode_header(payload)?;
    if payload[0] & ORIGIN_FLAG == 0 {
        return Ok((t, at, &payload[HEADER_LEN..], None));
    }
    let Some(end) = payload
        .len()
        .checked_sub(ORIGIN_LEN)
        .filter(|&e| e >= HEADER_LEN)
    else {
        return Err(body_err(t, "origin trailer truncated"));
    };
    let word = |i: usize| u32::from_le_bytes(payload[i..i + 4].try_into().expect("4 bytes"));
    let origin = Origin {
        uid: word(end),
        pid: word(end + 4),
    };
    Ok((t, at, &payload[HEADER_LEN..end], Some(origin)))
}

/// Why a payload could not be turned into an [`Event`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("empty event payload")]
    Empty,
    #[error("event tag {tag} written by a newer agentlog (this build knows tags 1..={max})")]
    UnknownTag { tag: u8, max: u8 },
    #[error("invalid event tag 0")]
    ZeroTag,
    #[error("{name} event (tag {tag}) truncated: {len} bytes, header needs {HEADER_LEN}")]
    Truncated {
        tag: u8,
        name: &'static str,
        len: usize,
    },
    #[error("cannot decode {name} event body (tag {tag}): {reason}")]
    Body {
        tag: u8,
        name: &'static str,
        reason: String,
    },
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

pub(super) fn put_body<T: Serialize>(buf: &mut Vec<u8>, body: &T) {
    // Serializing these plain data types into a Vec has no failure mode
    // (no maps with non-string keys, no unsized sequences, no I/O).
    bincode::serde::encode_into_std_write(body, buf, config())
        .expect("encoding an event body into a Vec cannot fail");
}

pub(super) fn put_header(buf: &mut Vec<u8>, t: u8, at: Timestamp) {
    buf.clear();
    buf.push(t);
    buf.extend_from_slice(&at.as_millis().to_le_bytes());
}

/// Encodes `event` into `buf` (cleared first). With a reused buffer this does
/// not allocate once the buffer is large enough.
pub fn encode_into(event: &Event, buf: &mut Vec<u8>) {
    put_header(buf, event.kind.wire_tag(), event.at);
    match &event.kind {
        EventKind::AgentRegistered {
            reg,
            kind,
            host: None,
        } => put_body(buf, &(reg.as_ref(), kind)),
        EventKind::AgentRegistered {
            reg,
            kind,
            host: Some(host),
        } => put_body(buf, &(reg.as_ref(), kind, host)),
        EventKind::Heartbeat { agent, pid } => put_body(buf, &(agent.as_str(), pid)),
        EventKind::StatusChanged {
            agent,
            status,
            message,
            cause,
        } => put_body(buf, &(agent, status, message, cause)),
        EventKind::FieldsUpdated { agent, fields } => put_body(buf, &(agent, fields)),
        EventKind::AgentRemoved { agent } => put_body(buf, &(agent,)),
        EventKind::MessagePosted(m) => put_body(buf, m),
        EventKind::MessagesRead { reader, ids } => put_body(buf, &(reader, ids)),
        EventKind::SessionOpened { key, ttl_ms } | EventKind::SessionHeartbeat { key, ttl_ms } => {
            put_body(buf, &(key, ttl_ms))
        }
        EventKind::SessionClosed { key } => put_body(buf, &(key,)),
        EventKind::AgentImported(a) => put_body(buf, a.as_ref()),
        EventKind::MessagesDropped { dropped, reason } => put_body(buf, &(dropped, reason)),
        EventKind::DisplayNameSet {
            agent,
            display_name,
        } => put_body(buf, &(agent, display_name)),
        EventKind::TransportClientSet {
            agent,
            client,
            cause,
        } => put_body(buf, &(agent, client, cause)),
        EventKind::HeartbeatBatch { beats } => put_body(buf, beats),
        EventKind::StreamCompacted {
            upto,
            agents,
            messages,
            sessions,
        } => put_body(buf, &(upto, agents, messages, sessions)),
        EventKind::Purged => put_body(buf, &()),
        EventKind::ExternalChange {
            agent,
            source,
            change,
        } => put_body(buf, &(agent, source, change)),
        EventKind::WorkerStateChanged {
            agent,
            source,
            changes,
        } => put_body(buf, &(agent, source, changes)),
        EventKind::Runtime(r) => r.encode_body(buf),
    }
}

/// Encodes `event` into a new buffer.
pub fn encode(event: &Event) -> Vec<u8> {
    let mut buf = Vec::with_capacity(64);
    encode_into(event, &mut buf);
    buf
}

/// The heartbeat hot path: encodes a heartbeat without building an
/// [`Event`]. Hand-written, byte-identical to the bincode body `(name, pid)`
/// (tested against [`encode`]), because it runs once per heartbeat.
pub fn encode_heartbeat_into(buf: &mut Vec<u8>, at: Timestamp, agent: &str, pid: Option<u32>) {
    put_header(buf, tag::HEARTBEAT, at);
    put_varint(buf, agent.len() as u64);
    buf.extend_from_slice(agent.as_bytes());
    match pid {
        None => buf.push(0),
        Some(p) => {
            buf.push(1);
            put_varint(buf, u64::from(p));
        }
    }
}

/// bincode 2 `standard()` varint.
#[inline]
pub(super) fn put_varint(buf: &mut Vec<u8>, v: u64) {
    if v < 251 {
        buf.push(v as u8);
    } else if v <= u64::from(u16::MAX) {
        buf.push(251);
        buf.extend_from_slice(&(v as u16).to_le_bytes());
    } else if v <= u64::from(u32::MAX) {
        buf.push(252);
        buf.extend_from_slice(&(v as u32).to_le_bytes());
    } else {
        buf.push(253);
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

#[inline]
pub(super) fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *b.get(*pos)?;
    *pos += 1;
    let width = match first {
        0..=250 => return Some(u64::from(first)),
        251 => 2,
        252 => 4,
        253 => 8,
        _ => return None,
    };
    let bytes = b.get(*pos..*pos + width)?;
    *pos += width;
    let mut le = [0u8; 8];
    le[..width].copy_from_slice(bytes);
    Some(u64::from_le_bytes(le))
}

/// The tag (origin flag cleared) and time of a payload, checking the tag is
/// known.
pub fn decode_header(payload: &[u8]) -> Result<(u8, Timestamp), DecodeError> {
    let raw = *payload.first().ok_or(DecodeError::Empty)?;
    let t = raw & !ORIGIN_FLAG;
    if t == 0 {
        return Err(DecodeError::ZeroTag);
    }
    if !tag::is_known(t) {
        // The byte as written, so the message matches what older builds say.
        return Err(DecodeError::UnknownTag {
            tag: raw,
            max: tag::MAX_KNOWN,
        });
    }
    let at: [u8; 8] = payload
        .get(1..HEADER_LEN)
        .and_then(|s| s.try_into().ok())
        .ok_or(DecodeError::Truncated {
            tag: t,
            name: tag::name(t),
            len: payload.len(),
        })?;
    Ok((t, Timestamp(i64::from_le_bytes(at))))
}

pub(super) fn body_err(t: u8, reason: impl std::fmt::Display) -> DecodeError {
    DecodeError::Body {
        tag: t,
        name: tag::name(t),
        reason: reason.to_string(),
    }
}

pub(super) fn body<T: DeserializeOwned>(t: u8, bytes: &[u8]) -> Result<T, DecodeError> {
    let (v, used) = crate::bounded_decode::decode_from_slice(bytes).map_err(|e| body_err(t, e))?;
    if used != bytes.len() {
        return Err(body_err(
            t,
            format_args!("{} trailing bytes after the body", bytes.len() - used),
        ));
    }
    Ok(v)
}

/// Decodes a payload into an [`Event`].
pub fn decode(payload: &[u8]) -> Result<Event, DecodeError> {
    let (t, at, b, _) = split(payload)?;
    let kind = match t {
        tag::AGENT_REGISTERED => {
            let (reg, kind): (Registration, RegistrationKind) = body(t, b)?;
            EventKind::AgentRegistered {
                reg: Box::new(reg),
                kind,
                host: None,
            }
        }
        tag::AGENT_REGISTERED_ON_HOST => {
            let (reg, kind, host): (Registration, RegistrationKind, String) = body(t, b)?;
            EventKind::AgentRegistered {
                reg: Box::new(reg),
                kind,
                host: Some(host),
            }
        }
        tag::HEARTBEAT => {
            let (agent, pid): (String, Option<u32>) = body(t, b)?;
            EventKind::Heartbeat { agent, pid }
        }
        tag::STATUS_CHANGED => {
            let (agent, status, message, cause): (String, Status, Option<String>, StatusCause) =
                body(t, b)?;
            EventKind::StatusChanged {
                agent,
                status,
                message,
                cause,
            }
        }
        tag::FIELDS_UPDATED => {
            let (agent, fields): (String, FieldUpdates) = body(t, b)?;
            EventKind::FieldsUpdated { agent, fields }
        }
        tag::AGENT_REMOVED => {
            let (agent,): (String,) = body(t, b)?;
            EventKind::AgentRemoved { agent }
        }
        tag::MESSAGE_POSTED => EventKind::MessagePosted(body::<PostedMessage>(t, b)?),
        tag::MESSAGES_READ => {
            let (reader, ids): (String, Vec<Lsn>) = body(t, b)?;
            EventKind::MessagesRead { reader, ids }
        }
        tag::SESSION_OPENED => {
            let (key, ttl_ms): (SessionKey, i64) = body(t, b)?;
            EventKind::SessionOpened { key, ttl_ms }
        }
        tag::SESSION_HEARTBEAT => {
            let (key, ttl_ms): (SessionKey, i64) = body(t, b)?;
            EventKind::SessionHeartbeat { key, ttl_ms }
        }
        tag::SESSION_CLOSED => {
            let (key,): (SessionKey,) = body(t, b)?;
            EventKind::SessionClosed { key }
        }
        tag::AGENT_IMPORTED => EventKind::AgentImported(Box::new(body::<Agent>(t, b)?)),
        tag::MESSAGES_DROPPED => {
            let (dropped, reason): (Vec<DroppedMessage>, DropReason) = body(t, b)?;
            EventKind::MessagesDropped { dropped, reason }
        }
        tag::DISPLAY_NAME_SET => {
            let (agent, display_name): (String, Option<String>) = body(t, b)?;
            EventKind::DisplayNameSet {
                agent,
                display_name,
            }
        }
        tag::TRANSPORT_CLIENT_SET => {
            let (agent, client, cause): (String, Option<TransportClient>, TransportCause) =
                body(t, b)?;
            EventKind::TransportClientSet {
                agent,
                client,
                cause,
            }
        }
        tag::HEARTBEAT_BATCH => EventKind::HeartbeatBatch {
            beats: body::<Vec<BatchedHeartbeat>>(t, b)?,
        },
        tag::STREAM_COMPACTED => {
            let (upto, agents, messages, sessions): (Lsn, Vec<String>, Vec<Lsn>, Vec<SessionKey>) =
                body(t, b)?;
            EventKind::StreamCompacted {
                upto,
                agents,
                messages,
                sessions,
            }
        }
        tag::EXTERNAL_CHANGE => {
            let (agent, source, change): (String, String, ExternalChange) = body(t, b)?;
            EventKind::ExternalChange {
                agent,
                source,
                change,
            }
        }
        tag::WORKER_STATE_CHANGED => {
            let (agent, source, changes): (String, String, Vec<(String, Option<String>)>) =
                body(t, b)?;
            EventKind::WorkerStateChanged {
                agent,
                source,
                changes,
            }
        }
        tag::PURGED => {
            body::<()>(t, b)?;
            EventKind::Purged
        }
        t if tag::is_runtime(t) => EventKind::Runtime(RuntimeEvent::decode_body(t, b)?),
        _ => unreachable!("decode_header rejects unknown tags"),
    };
    Ok(Event { at, kind })
}

/// A heartbeat decoded without allocating: the fold's fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatRef<'a> {
    pub at: Timestamp,
    pub agent: &'a str,
    pub pid: Option<u32>,
}

/// Decodes a heartbeat payload borrowing the name from `payload`; `Ok(None)`
/// when the payload is another kind. Hand-written twin of the bincode
/// decoder (the fold's hot path).
pub fn decode_heartbeat(payload: &[u8]) -> Result<Option<HeartbeatRef<'_>>, DecodeError> {
    let (t, at, b, _) = split(payload)?;
    if t != tag::HEARTBEAT {
        return Ok(None);
    }
    let bad = |what: &str| body_err(t, what);
    let mut pos = 0;
    let len = get_varint(b, &mut pos).ok_or_else(|| bad("bad agent name length"))?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| pos.checked_add(l))
        .filter(|&e| e <= b.len())
        .ok_or_else(|| bad("agent name runs past the end"))?;
    let agent = std::str::from_utf8(&b[pos..end]).map_err(|_| bad("agent name is not UTF-8"))?;
    pos = end;
    let pid = match b.get(pos) {
        Some(0) => {
            pos += 1;
            None
        }
        Some(1) => {
            pos += 1;
            // A u32 is never written with the u64 marker; bincode refuses it, so must we.
            if b.get(pos) == Some(&253) {
                return Err(bad("pid out of range"));
            }
            let p = get_varint(b, &mut pos).ok_or_else(|| bad("bad pid"))?;
            Some(u32::try_from(p).map_err(|_| bad("pid out of range"))?)
        }
        _ => return Err(bad("bad pid option tag")),
    };
    if pos != b.len() {
        return Err(bad("trailing bytes after the body"));
    }
    Ok(Some(HeartbeatRef { at, agent, pid }))
}

/// Byte prefilter for one agent's history: true when the payload's subject
/// agent is `name` (exact for agent events), or when the event might concern
/// it another way (a message or registration mentioning the name's bytes,
/// which the caller then decodes to decide).
#[derive(Debug, Clone)]
pub struct SubjectFilter {
    prefix: Vec<u8>,
    name: Vec<u8>,
}

impl SubjectFilter {
    pub fn new(name: &str) -> Self {
        let mut prefix = Vec::with_capacity(name.len() + 9);
        put_body(&mut prefix, &name);
        SubjectFilter {
            prefix,
            name: name.as_bytes().to_vec(),
        }
    }

    /// `true` if the payload may concern the agent; `false` means it surely
    /// does not. Unknown tags and short payloads pass (the caller decodes
    /// and reports them).
    pub fn may_match(&self, payload: &[u8]) -> bool {
        let Some(&t) = payload.first() else {
            return true;
        };
        let t = t & !ORIGIN_FLAG;
        if !tag::is_known(t) || payload.len() < HEADER_LEN {
            return true;
        }
        let b = &payload[HEADER_LEN..];
        if b.starts_with(&self.prefix) && tag::has_subject_agent(t) {
            return true;
        }
        match t {
            // Recipient or parent (or a dropped message's sender or
            // recipient): somewhere later in the body.
            tag::MESSAGE_POSTED
            | tag::AGENT_REGISTERED
            | tag::AGENT_REGISTERED_ON_HOST
            | tag::MESSAGES_DROPPED
            | tag::HEARTBEAT_BATCH => contains(b, &self.name),
            _ => false,
        }
    }
}

/// Whether `needle` occurs in `hay`. Candidates are found by the needle's
/// last byte and checked by its first before the whole compare: agent names
/// share prefixes (`agent-…`) far more often than endings, so few
/// candidates reach the compare.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    let (Some(&first), Some(&last)) = (needle.first(), needle.last()) else {
        return true;
    };
    let n = needle.len();
    if hay.len() < n {
        return false;
    }
    hay[n - 1..]
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c == last)
        .any(|(s, _)| hay[s] == first && &hay[s..s + n] == needle)
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
