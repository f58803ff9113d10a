//! Heartbeat batches (event tag 15, FORMAT.md "Heartbeat batches"): the
//! lazy heartbeats one replica coalesced into one stream message
//! (docs/scaling.md §5). Hand-written twins of the bincode layout of
//! `Vec<BatchedHeartbeat>` for the hot paths: building a batch appends each
//! heartbeat's bytes (no `Event`), and folding one borrows every entry
//! from the payload (no allocation). A batch is decoded whole before any of
//! it is folded: one bad entry refuses the record. The fold decodes each
//! entry once ([`for_each_batched`]), into its reusable scratch.

use super::codec::decode_heartbeat;
use super::codec::{
    body_err, get_varint, put_header, put_varint, split, DecodeError, Origin, HEADER_LEN,
};
use super::events::tag;
use crate::time::Timestamp;

/// The entries of a heartbeat batch being built ([`EventKind::HeartbeatBatch`](super::EventKind::HeartbeatBatch)):
/// each appended as the bincode of one [`BatchedHeartbeat`](super::BatchedHeartbeat), hand-written
/// for the heartbeat hot path (tested against [`encode`](super::encode)).
#[derive(Debug, Default)]
pub struct HeartbeatBatchBuilder {
    entries: Vec<u8>,
    count: usize,
    latest: Option<Timestamp>,
}

impl HeartbeatBatchBuilder {
    pub fn push(&mut self, at: Timestamp, agent: &str, pid: Option<u32>, origin: Option<Origin>) {
        let b = &mut self.entries;
        put_varint(b, agent.len() as u64);
        b.extend_from_slice(agent.as_bytes());
        put_option_varint(b, pid.map(u64::from));
        put_varint(b, zigzag(at.as_millis()));
        match origin {
            None => b.push(0),
            Some(o) => {
                b.push(1);
                put_varint(b, u64::from(o.uid));
                put_varint(b, u64::from(o.pid));
            }
        }
        self.count += 1;
        self.latest = Some(self.latest.map_or(at, |l| l.max(at)));
    }

    pub fn len(&self) -> usize {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Bytes of the entries so far (the payload adds at most 18).
    pub fn bytes(&self) -> usize {
        self.entries.len()
    }

    /// The batch's payload: tag 15, the latest beat's time, the entries.
    /// Leaves the builder empty (its buffer kept for the next batch).
    pub fn take_payload(&mut self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(HEADER_LEN + 9 + self.entries.len());
        put_header(
            &mut buf,
            tag::HEARTBEAT_BATCH,
            self.latest.unwrap_or_default(),
        );
        put_varint(&mut buf, self.count as u64);
        buf.extend_from_slice(&self.entries);
        self.entries.clear();
        self.count = 0;
        self.latest = None;
        buf
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put_option_varint(buf: &mut Vec<u8>, v: Option<u64>) {
    match v {
        None => buf.push(0),
        Some(v) => {
            buf.push(1);
            put_varint(buf, v);
        }
    }
}

/// One heartbeat of a batch, borrowed from the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchedHeartbeatRef<'a> {
    pub at: Timestamp,
    pub agent: &'a str,
    pub pid: Option<u32>,
    pub origin: Option<Origin>,
}

/// A heartbeat batch whose every entry decoded: the fold's allocation-free
/// path for tag 15 ([`decode_heartbeat_batch`]).
#[derive(Debug, Clone, Copy)]
pub struct HeartbeatBatchRef<'a> {
    pub at: Timestamp,
    pub count: u64,
    entries: &'a [u8],
}

impl<'a> HeartbeatBatchRef<'a> {
    /// The entries in order (each decoded when the batch was).
    pub fn iter(&self) -> impl Iterator<Item = BatchedHeartbeatRef<'a>> + 'a {
        let (b, mut pos) = (self.entries, 0);
        std::iter::from_fn(move || next_batched(b, &mut pos).ok().flatten())
    }
}

/// Decodes a heartbeat batch borrowing from `payload`, checking every entry
/// (a batch is folded whole or refused); `Ok(None)` for another kind.
pub fn decode_heartbeat_batch(
    payload: &[u8],
) -> Result<Option<HeartbeatBatchRef<'_>>, DecodeError> {
    for_each_batched(payload, |_| {})
}

/// Decodes a heartbeat batch once, handing `each` every entry in order as
/// it decodes, then checks the count; `Ok(None)` for another kind. An error
/// can come after some entries were handed over: a caller that applies a
/// batch whole keeps them until this returns `Ok` (the fold's
/// `FoldScratch`).
pub fn for_each_batched<'a>(
    payload: &'a [u8],
    mut each: impl FnMut(BatchedHeartbeatRef<'a>),
) -> Result<Option<HeartbeatBatchRef<'a>>, DecodeError> {
    let (t, at, b, _) = split(payload)?;
    if t != tag::HEARTBEAT_BATCH {
        return Ok(None);
    }
    let mut pos = 0;
    let count = get_varint(b, &mut pos).ok_or_else(|| body_err(t, "bad heartbeat count"))?;
    let entries = &b[pos..];
    let mut at_entry = 0;
    let mut seen = 0u64;
    while let Some(beat) = next_batched(entries, &mut at_entry)? {
        each(beat);
        seen += 1;
    }
    if seen != count {
        return Err(body_err(
            t,
            format_args!("batch says {count} heartbeats, holds {seen}"),
        ));
    }
    Ok(Some(HeartbeatBatchRef { at, count, entries }))
}

/// The entry at `pos` (advancing it), `None` at the end of `b`.
fn next_batched<'a>(
    b: &'a [u8],
    pos: &mut usize,
) -> Result<Option<BatchedHeartbeatRef<'a>>, DecodeError> {
    if *pos == b.len() {
        return Ok(None);
    }
    let start = *pos;
    let bad = |what: &str| {
        body_err(
            tag::HEARTBEAT_BATCH,
            format_args!("{what} (entry at body byte {start})"),
        )
    };
    let mut p = start;
    let len = get_varint(b, &mut p).ok_or_else(|| bad("bad agent name length"))?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| p.checked_add(l))
        .filter(|&e| e <= b.len())
        .ok_or_else(|| bad("agent name runs past the end"))?;
    let agent = std::str::from_utf8(&b[p..end]).map_err(|_| bad("agent name is not UTF-8"))?;
    p = end;
    let u32_field = |p: &mut usize| -> Result<u32, DecodeError> {
        // A u32 is never written with the u64 marker; bincode refuses it, so must we.
        if b.get(*p) == Some(&253) {
            return Err(bad("u32 out of range"));
        }
        let v = get_varint(b, p).ok_or_else(|| bad("bad u32"))?;
        u32::try_from(v).map_err(|_| bad("u32 out of range"))
    };
    let pid = match b.get(p) {
        Some(0) => {
            p += 1;
            None
        }
        Some(1) => {
            p += 1;
            Some(u32_field(&mut p)?)
        }
        _ => return Err(bad("bad pid option tag")),
    };
    let at = Timestamp(unzigzag(
        get_varint(b, &mut p).ok_or_else(|| bad("bad time"))?,
    ));
    let origin = match b.get(p) {
        Some(0) => {
            p += 1;
            None
        }
        Some(1) => {
            p += 1;
            let uid = u32_field(&mut p)?;
            let pid = u32_field(&mut p)?;
            Some(Origin { uid, pid })
        }
        _ => return Err(bad("bad origin option tag")),
    };
    *pos = p;
    Ok(Some(BatchedHeartbeatRef {
        at,
        agent,
        pid,
        origin,
    }))
}

/// How many heartbeats a payload records: 1 for a heartbeat, the entries
/// of a batch, 0 for anything else.
pub fn heartbeat_count(payload: &[u8]) -> Result<u64, DecodeError> {
    if decode_heartbeat(payload)?.is_some() {
        return Ok(1);
    }
    Ok(decode_heartbeat_batch(payload)?.map_or(0, |b| b.count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::codec::{decode, encode};
    use crate::registry::{BatchedHeartbeat, Event, EventKind};

    #[test]
    fn heartbeat_batch_fast_path_matches_the_generic_codec() {
        let beats = [
            ("a", Some(7), Timestamp(1_796_040_000_123), None),
            (
                "long-name-é",
                None,
                Timestamp(-3),
                Some(Origin {
                    uid: 0,
                    pid: 1 << 20,
                }),
            ),
            ("a", Some(u32::MAX), Timestamp(1_796_040_000_120), None),
        ];
        let mut b = HeartbeatBatchBuilder::default();
        for (agent, pid, at, origin) in beats {
            b.push(at, agent, pid, origin);
        }
        assert_eq!((b.len(), b.is_empty()), (3, false));
        let payload = b.take_payload();
        assert!(b.is_empty() && b.bytes() == 0);
        let want = Event {
            // The batch's time is its latest heartbeat's.
            at: Timestamp(1_796_040_000_123),
            kind: EventKind::HeartbeatBatch {
                beats: beats
                    .iter()
                    .map(|&(agent, pid, at, origin)| BatchedHeartbeat {
                        agent: agent.into(),
                        pid,
                        at,
                        origin,
                    })
                    .collect(),
            },
        };
        assert_eq!(payload, encode(&want));
        let fast = decode_heartbeat_batch(&payload).unwrap().unwrap();
        assert_eq!(fast.count, 3);
        let got: Vec<_> = fast
            .iter()
            .map(|h| (h.agent, h.pid, h.at, h.origin))
            .collect();
        assert_eq!(got, beats.to_vec());
        assert_eq!(heartbeat_count(&payload).unwrap(), 3);
        assert!(decode_heartbeat_batch(&encode(&Event {
            at: Timestamp(1),
            kind: EventKind::Heartbeat {
                agent: "a".into(),
                pid: None
            }
        }))
        .unwrap()
        .is_none());
        // A count that disagrees with the entries, or a cut entry, is refused.
        let mut lying = payload.clone();
        lying[HEADER_LEN] = 4;
        let e = decode_heartbeat_batch(&lying).unwrap_err().to_string();
        assert!(e.contains("batch says 4 heartbeats, holds 3"), "{e}");
        let cut = &payload[..payload.len() - 1];
        let e = decode_heartbeat_batch(cut).unwrap_err().to_string();
        assert!(e.contains("HeartbeatBatch event body (tag 15)"), "{e}");
        assert!(decode(cut).is_err());
    }
}
