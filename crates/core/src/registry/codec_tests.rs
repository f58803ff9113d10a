//! The codec's unit tests (a child module of `codec`, kept in its own file
//! so the encoder and decoder read as one page): round trips of every tag,
//! refusals that name the tag, the subject prefilter and the origin trailer.

use super::*;
use crate::model::{Priority, Privacy};

#[test]
fn contains_finds_a_name_anywhere_and_only_whole() {
    let naive = |h: &[u8], n: &[u8]| n.is_empty() || h.windows(n.len()).any(|w| w == n);
    let hay = b"agent-000012 to agent-000123: hi agent-00012";
    for needle in [
        &b"agent-000123"[..],
        b"agent-000012",
        b"agent-00012",
        b"agent-000124",
        b"agent-0001234",
        b"a",
        b"i",
        b"",
        b"agent-000012 to agent-000123: hi agent-00012!",
    ] {
        assert_eq!(
            contains(hay, needle),
            naive(hay, needle),
            "{}",
            String::from_utf8_lossy(needle)
        );
    }
    assert!(!contains(b"", b"x"));
    assert!(contains(b"xx", b"xx"));
}

fn samples() -> Vec<Event> {
    let at = Timestamp(1_796_040_000_123);
    let mut reg = Registration::new("a1", "claude", "/w");
    reg.pid = Some(42);
    reg.parent = Some("boss".into());
    let key = SessionKey {
        source: "s".into(),
        workspace: "/w".into(),
        session_id: "x".into(),
    };
    let kinds = vec![
        EventKind::AgentRegistered {
            reg: Box::new(reg.clone()),
            kind: RegistrationKind::NewLife,
            host: None,
        },
        EventKind::AgentRegistered {
            reg: Box::new(reg),
            kind: RegistrationKind::New,
            host: Some("host-b".into()),
        },
        EventKind::Heartbeat {
            agent: "a1".into(),
            pid: Some(42),
        },
        EventKind::StatusChanged {
            agent: "a1".into(),
            status: Status::Idle,
            message: Some("m".into()),
            cause: StatusCause::LeaseExpired,
        },
        EventKind::FieldsUpdated {
            agent: "a1".into(),
            fields: FieldUpdates {
                pid: Some(None),
                log_path: Some(Some("/l".into())),
                ..Default::default()
            },
        },
        EventKind::AgentRemoved { agent: "a1".into() },
        EventKind::MessagePosted(PostedMessage {
            from: "a1".into(),
            to: Some("b".into()),
            category: "c".into(),
            body: "hello".into(),
            priority: Priority::High,
            privacy: Privacy::Private,
            project_root: Some("/p".into()),
            expires_at: at.add_secs(10),
            request_id: Some("r".into()),
            digest: 7,
        }),
        EventKind::MessagesRead {
            reader: "a1".into(),
            ids: vec![1, 900],
        },
        EventKind::SessionOpened {
            key: key.clone(),
            ttl_ms: 180_000,
        },
        EventKind::SessionHeartbeat {
            key: key.clone(),
            ttl_ms: 1,
        },
        EventKind::SessionClosed { key: key.clone() },
        EventKind::AgentImported(Box::new(Agent::new("a1", "codex", "/", at))),
        EventKind::MessagesDropped {
            dropped: vec![DroppedMessage {
                id: 3,
                from: "a1".into(),
                to: None,
            }],
            reason: DropReason::Cap,
        },
        EventKind::DisplayNameSet {
            agent: "a1".into(),
            display_name: Some("Reviewer ✓".into()),
        },
        EventKind::DisplayNameSet {
            agent: "a1".into(),
            display_name: None,
        },
        EventKind::TransportClientSet {
            agent: "a1".into(),
            client: Some(TransportClient::parse("cursor/1.2")),
            cause: TransportCause::Reconnect,
        },
        EventKind::TransportClientSet {
            agent: "a1".into(),
            client: None,
            cause: TransportCause::Registration,
        },
        EventKind::HeartbeatBatch {
            beats: vec![
                BatchedHeartbeat {
                    agent: "b2".into(),
                    pid: Some(70_000),
                    at: Timestamp(1_796_040_000_100),
                    origin: Some(Origin { uid: 1000, pid: 4 }),
                },
                BatchedHeartbeat {
                    agent: "a1".into(),
                    pid: None,
                    at: Timestamp(-5),
                    origin: None,
                },
            ],
        },
        EventKind::StreamCompacted {
            upto: 41,
            agents: vec!["old".into()],
            messages: vec![3, 9],
            sessions: vec![key],
        },
        EventKind::Purged,
        EventKind::ExternalChange {
            agent: "a1".into(),
            source: "state.json".into(),
            change: ExternalChange::Status {
                status: Status::Orphaned,
            },
        },
        EventKind::WorkerStateChanged {
            agent: "a1".into(),
            source: "state.json".into(),
            changes: vec![
                ("ready".into(), Some("true".into())),
                ("pty.drive_mode".into(), None),
            ],
        },
    ];
    kinds.into_iter().map(|kind| Event { at, kind }).collect()
}

#[test]
fn every_kind_round_trips_with_its_tag_and_subject_prefix() {
    let f = SubjectFilter::new("a1");
    let other = SubjectFilter::new("zz");
    for e in samples() {
        let bytes = encode(&e);
        assert_eq!(bytes[0], e.kind.wire_tag());
        assert_eq!(decode(&bytes).unwrap(), e);
        // A drop record has no subject; it may concern a1 as a dropped
        // message's sender, found by the body scan.
        assert_eq!(
            f.may_match(&bytes),
            e.kind.subject_agent() == Some("a1") || e.kind.concerns_agent("a1"),
            "{e:?}"
        );
        assert!(!other.may_match(&bytes));
    }
}

#[test]
fn display_name_bytes_match_the_format_document() {
    let e = Event {
        at: Timestamp(5),
        kind: EventKind::DisplayNameSet {
            agent: "a1".into(),
            display_name: Some("Rev".into()),
        },
    };
    let want = [
        13, 5, 0, 0, 0, 0, 0, 0, 0, 2, b'a', b'1', 1, 3, b'R', b'e', b'v',
    ];
    assert_eq!(encode(&e), want);
}

#[test]
fn heartbeat_fast_path_matches_the_generic_codec() {
    let mut buf = Vec::new();
    encode_heartbeat_into(&mut buf, Timestamp(5), "agent-7", Some(9));
    let e = Event {
        at: Timestamp(5),
        kind: EventKind::Heartbeat {
            agent: "agent-7".into(),
            pid: Some(9),
        },
    };
    assert_eq!(buf, encode(&e));
    let hb = decode_heartbeat(&buf).unwrap().unwrap();
    assert_eq!(
        (hb.at, hb.agent, hb.pid),
        (Timestamp(5), "agent-7", Some(9))
    );
    assert_eq!(decode_heartbeat(&encode(&samples()[0])).unwrap(), None);
    let cap = buf.capacity();
    encode_heartbeat_into(&mut buf, Timestamp(6), "agent-8", None);
    assert_eq!(buf.capacity(), cap, "reused buffer must not grow");
}

#[test]
fn hand_written_heartbeat_codec_is_bincode() {
    let mut buf = Vec::new();
    for len in [0usize, 1, 250, 251, 300, 70_000] {
        let name = "n".repeat(len);
        for pid in [
            None,
            Some(0),
            Some(250),
            Some(251),
            Some(65_535),
            Some(65_536),
            Some(u32::MAX),
        ] {
            encode_heartbeat_into(&mut buf, Timestamp(-3), &name, pid);
            let generic = encode(&Event {
                at: Timestamp(-3),
                kind: EventKind::Heartbeat {
                    agent: name.clone(),
                    pid,
                },
            });
            assert_eq!(buf, generic, "len {len} pid {pid:?}");
            let hb = decode_heartbeat(&generic).unwrap().unwrap();
            assert_eq!((hb.agent, hb.pid), (name.as_str(), pid));
            for n in HEADER_LEN..buf.len() {
                assert!(decode_heartbeat(&buf[..n]).is_err());
            }
        }
    }
    // A pid varint wider than u32, and invalid UTF-8, are refused.
    let mut wide = vec![tag::HEARTBEAT, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'a', 1, 253];
    wide.extend_from_slice(&u64::MAX.to_le_bytes());
    assert!(decode_heartbeat(&wide).is_err() && decode(&wide).is_err());
    let utf = [tag::HEARTBEAT, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0];
    assert!(decode_heartbeat(&utf).is_err() && decode(&utf).is_err());
}

#[test]
fn bad_payloads_give_clear_errors() {
    assert_eq!(decode(&[]).unwrap_err(), DecodeError::Empty);
    let e = decode(&[200, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap_err();
    assert!(
        e.to_string()
            .contains("event tag 200 written by a newer agentlog"),
        "{e}"
    );
    assert_eq!(decode(&[0]).unwrap_err(), DecodeError::ZeroTag);
    let e = decode(&[tag::HEARTBEAT, 1, 2]).unwrap_err();
    assert!(
        e.to_string().contains("Heartbeat event (tag 2) truncated"),
        "{e}"
    );
    // A valid header and a body that is not a heartbeat.
    let mut bad = vec![tag::HEARTBEAT, 0, 0, 0, 0, 0, 0, 0, 0, 250, b'x'];
    let e = decode(&bad).unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot decode Heartbeat event body (tag 2)"),
        "{e}"
    );
    assert!(decode_heartbeat(&bad).is_err());
    // Trailing bytes are refused too.
    bad = encode(&samples()[1]);
    bad.push(0);
    assert!(decode(&bad).unwrap_err().to_string().contains("trailing"));
    // Every truncation of every sample is an error, never a panic.
    for e in samples() {
        let bytes = encode(&e);
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err());
        }
    }
}

#[test]
fn origin_trailer_round_trips_and_old_payloads_have_none() {
    let o = Origin {
        uid: 1000,
        pid: 4242,
    };
    for e in samples() {
        let plain = encode(&e);
        assert_eq!(origin(&plain), None);
        let mut stamped = plain.clone();
        push_origin(&mut stamped, o);
        assert_eq!(stamped[0], plain[0] | ORIGIN_FLAG);
        assert_eq!(stamped.len(), plain.len() + ORIGIN_LEN);
        assert_eq!(decode(&stamped).unwrap(), e);
        assert_eq!(origin(&stamped), Some(o));
        assert_eq!(decode_header(&stamped).unwrap().0, e.kind.wire_tag());
        if let Some(name) = e.kind.subject_agent() {
            assert!(SubjectFilter::new(name).may_match(&stamped));
        }
    }
    let mut hb = Vec::new();
    encode_heartbeat_into(&mut hb, Timestamp(5), "w1", Some(7));
    push_origin(&mut hb, o);
    let r = decode_heartbeat(&hb).unwrap().unwrap();
    assert_eq!((r.agent, r.pid), ("w1", Some(7)));
    // A flagged payload too short for its trailer is reported, not misread.
    let short = [tag::HEARTBEAT | ORIGIN_FLAG, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    assert!(decode(&short)
        .unwrap_err()
        .to_string()
        .contains("origin trailer truncated"));
}
