//! The encoder and the bounded decoder agree (issue 27): every event the
//! writers may produce, up to the largest size each of its limits allows,
//! decodes. The limits: names [`NAME_MAX`], texts [`TEXT_MAX`], message
//! bodies [`BODY_MAX`] and their category and request id, session keys
//! ([`SOURCE_MAX`], [`WORKSPACE_MAX`], [`SESSION_ID_MAX`]), a heartbeat
//! batch ([`BATCH_BEATS_MAX`] and [`BATCH_BYTES_MAX`], the cluster batcher's
//! defaults), and the lists a record
//! carries (a compaction marker, a read receipt, a cap drop) up to what fits
//! in the servers' largest message, 1 MiB by default, or more. Lists are
//! filled with their worst case for the decoder's limit: values whose
//! varint is one byte, each of which bincode counts as eight.

use super::codec::{decode, encode, Origin};
use super::commands::{BATCH_BEATS_MAX, BATCH_BYTES_MAX, NAME_MAX, TEXT_MAX};
use super::events::{
    BatchedHeartbeat, DropReason, DroppedMessage, Event, EventKind, Lsn, PostedMessage,
    Registration, RegistrationKind, SessionKey,
};
use super::messages::{BODY_MAX, CATEGORY_MAX, REQUEST_ID_MAX};
use super::sessions::{SESSION_ID_MAX, SOURCE_MAX, WORKSPACE_MAX};
use crate::model::{Priority, Privacy, Status, StatusCause};
use crate::time::Timestamp;
use proptest::prelude::*;

/// The servers' default largest message: what a marker, a receipt or a
/// drop record is bounded by when published.
const MAX_PAYLOAD: usize = 1 << 20;

/// A string of `len` bytes (ASCII, from `seed`).
fn text(len: usize, seed: u64) -> String {
    (0..len)
        .map(|i| char::from(b'a' + ((seed as usize + i) % 26) as u8))
        .collect()
}

/// Sizes from 0 to `max`, the maximum itself one time in three.
fn size(max: usize) -> impl Strategy<Value = usize> {
    prop_oneof![1 => 0..=max, 2 => Just(max)]
}

/// Small LSNs (one-byte varints) or any, `n` of them.
fn lsns(n: usize, seed: u64, small: bool) -> Vec<Lsn> {
    (0..n as u64)
        .map(|i| {
            if small {
                (seed + i) % 250
            } else {
                seed.wrapping_mul(i + 1)
            }
        })
        .collect()
}

fn key(s: usize, w: usize, id: usize, seed: u64) -> SessionKey {
    SessionKey {
        source: text(s, seed),
        workspace: text(w, seed + 1),
        session_id: text(id, seed + 2),
    }
}

fn at(seed: u64) -> Timestamp {
    Timestamp(1_796_040_000_000 + (seed % 1_000_000) as i64)
}

fn round_trips(kind: EventKind, seed: u64) -> Result<(), TestCaseError> {
    let e = Event { at: at(seed), kind };
    let mut bytes = encode(&e);
    let back = decode(&bytes)
        .map_err(|err| TestCaseError::fail(format!("{} bytes: {err}", bytes.len())))?;
    prop_assert_eq!(&back, &e);
    super::codec::push_origin(&mut bytes, Origin { uid: 1, pid: 2 });
    prop_assert_eq!(
        decode(&bytes).map_err(|err| TestCaseError::fail(err.to_string()))?,
        e
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_compaction_marker_filling_the_largest_message_decodes(
        seed in any::<u64>(),
        small in prop_oneof![3 => Just(true), 1 => Just(false)],
        share in 0usize..=3,
        name_len in 1usize..=NAME_MAX,
    ) {
        // One kind of name takes the whole message, or the three share it.
        let budget = MAX_PAYLOAD - 64;
        let (mut agents, mut messages, mut sessions) = (Vec::new(), Vec::new(), Vec::new());
        let per = if share == 3 { budget / 3 } else { budget };
        if share == 0 || share == 3 {
            let cost = name_len + 1 + usize::from(name_len > 250) * 2;
            agents = (0..per / cost).map(|i| text(name_len, seed + i as u64)).collect();
        }
        if share == 1 || share == 3 {
            let cost = if small { 1 } else { 9 };
            messages = lsns(per / cost, seed, small);
        }
        if share == 2 || share == 3 {
            let k = key(1, 1, 1, seed);
            sessions = vec![k; per / 6];
        }
        round_trips(EventKind::StreamCompacted { upto: seed, agents, messages, sessions }, seed)?;
    }

    #[test]
    fn receipts_and_cap_drops_of_the_largest_size_decode(
        seed in any::<u64>(),
        small in any::<bool>(),
        n in size(MAX_PAYLOAD / 4),
        name_len in 1usize..=NAME_MAX,
    ) {
        round_trips(
            EventKind::MessagesRead { reader: text(name_len, seed), ids: lsns(n, seed, small) },
            seed,
        )?;
        let dropped = (0..n / (2 * name_len + 8))
            .map(|i| DroppedMessage {
                id: (seed + i as u64) % 250,
                from: text(name_len, seed),
                to: (i % 2 == 0).then(|| text(name_len, seed + 1)),
            })
            .collect();
        round_trips(EventKind::MessagesDropped { dropped, reason: DropReason::Cap }, seed)?;
    }

    #[test]
    fn a_full_heartbeat_batch_decodes(
        seed in any::<u64>(),
        name_len in prop_oneof![Just(1usize), 1usize..=NAME_MAX],
        origins in any::<bool>(),
    ) {
        let per_beat = name_len + 20;
        let n = BATCH_BEATS_MAX.min(BATCH_BYTES_MAX / per_beat).max(1);
        let beats = (0..n)
            .map(|i| BatchedHeartbeat {
                agent: text(name_len, seed + i as u64),
                pid: (i % 3 != 0).then_some(i as u32),
                at: Timestamp((seed % 200) as i64),
                origin: origins.then_some(Origin { uid: 0, pid: i as u32 % 200 }),
            })
            .collect();
        round_trips(EventKind::HeartbeatBatch { beats }, seed)?;
    }

    #[test]
    fn agent_events_at_their_text_limits_decode(
        seed in any::<u64>(),
        name in size(NAME_MAX),
        body in size(BODY_MAX),
        t in size(TEXT_MAX),
        s in size(SOURCE_MAX),
        w in size(WORKSPACE_MAX),
        id in size(SESSION_ID_MAX),
    ) {
        let name = text(name.max(1), seed);
        let mut reg = Registration::new(&name, &text(NAME_MAX, seed), &text(t, seed));
        reg.parent = Some(text(NAME_MAX, seed + 3));
        round_trips(EventKind::AgentRegistered {
            reg: Box::new(reg),
            kind: RegistrationKind::NewLife,
            host: Some(text(NAME_MAX, seed)),
        }, seed)?;
        round_trips(EventKind::StatusChanged {
            agent: name.clone(),
            status: Status::Busy,
            message: Some(text(t, seed)),
            cause: StatusCause::Command,
        }, seed)?;
        round_trips(EventKind::MessagePosted(PostedMessage {
            from: name.clone(),
            to: Some(text(NAME_MAX, seed)),
            category: text(CATEGORY_MAX, seed),
            body: text(body, seed),
            priority: Priority::High,
            privacy: Privacy::Private,
            project_root: Some(text(t, seed)),
            expires_at: at(seed),
            request_id: Some(text(REQUEST_ID_MAX, seed)),
            digest: seed,
        }), seed)?;
        let k = key(s, w, id, seed);
        round_trips(EventKind::SessionOpened { key: k.clone(), ttl_ms: seed as i64 }, seed)?;
        round_trips(EventKind::SessionClosed { key: k }, seed)?;
    }
}
