//! Bad input through the real log: an unknown event tag and an undecodable
//! payload (with a valid checksum) give clear errors naming the segment,
//! offset and LSN, never a panic; an event naming a missing agent is a counted anomaly.

use crate::support::store::*;
use agentlog::log::{Durability, Log};
use agentlog::registry::codec::encode_heartbeat_into;
use agentlog::registry::*;
use agentlog::store::{ReadOnlyStore, Store, StoreError};
use agentlog::LogError;
use std::path::{Path, PathBuf};

fn store_with_raw(records: &[Vec<u8>]) -> (tempfile::TempDir, Result<Store, StoreError>) {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), lazy_opts()).unwrap();
        store
            .register(Registration::new("a", "claude", "/w"), Some(T0))
            .unwrap();
        store.close().unwrap();
    }
    let (log, _) = Log::open(&dir.path().join("log"), lazy_opts().log).unwrap();
    for r in records {
        log.append(r, Durability::Durable).unwrap();
    }
    log.close().unwrap();
    let opened = Store::open(dir.path(), lazy_opts());
    (dir, opened)
}

#[test]
fn unknown_tag_is_a_newer_writer() {
    let mut rec = vec![200u8];
    rec.extend_from_slice(&T0.as_millis().to_le_bytes());
    rec.extend_from_slice(b"future");
    let (_d, r) = store_with_raw(&[rec]);
    let e = r.unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(e, StoreError::Log(LogError::Corrupt { lsn: Some(2), .. })),
        "{e:?}"
    );
    assert!(
        msg.contains("lsn 2") && msg.contains("event tag 200 written by a newer agentlog"),
        "{msg}"
    );
}

/// A valid header (and, once appended, checksum) around a status-change
/// body cut short.
fn cut_status_change() -> Vec<u8> {
    let mut rec = vec![tag::STATUS_CHANGED];
    rec.extend_from_slice(&T0.as_millis().to_le_bytes());
    rec.extend_from_slice(&[1, b'a', 99, 0xff]);
    rec
}

/// The first segment of the store in `dir`, and the byte offset of its
/// record 2, which follows record 1 (the registration) after the segment
/// header.
fn second_record(dir: &Path) -> (PathBuf, u64) {
    use agentlog::internals::{record_size, LEN_MASK, SEG_HDR};
    let segment = crate::support::log::main_segments(&dir.join("log")).remove(0);
    let bytes = std::fs::read(&segment).unwrap();
    let len1 = u32::from_le_bytes(bytes[SEG_HDR..SEG_HDR + 4].try_into().unwrap()) & LEN_MASK;
    let at = (SEG_HDR + record_size(len1 as usize)) as u64;
    assert_eq!(
        u64::from_le_bytes(bytes[at as usize + 8..at as usize + 16].try_into().unwrap()),
        2
    );
    (segment, at)
}

/// A record whose checksum holds but whose event does not decode is named
/// where it lies, by the writer's open and by the read-only store alike:
/// the segment file, the record's byte offset and its LSN (not the store
/// folder).
#[test]
fn store_folds_name_the_segment_and_offset_of_an_undecodable_event() {
    let (d, r) = store_with_raw(&[cut_status_change()]);
    let (segment, at) = second_record(d.path());
    let name = segment.file_name().unwrap().to_str().unwrap();
    let writer = r.unwrap_err().to_string();
    let reader = ReadOnlyStore::open(d.path(), &lazy_opts())
        .unwrap()
        .state()
        .unwrap_err()
        .to_string();
    for msg in [writer, reader] {
        assert!(
            msg.contains(name)
                && msg.contains(&format!("offset {at}, lsn 2"))
                && msg.contains("cannot decode StatusChanged event body (tag 3)"),
            "{msg}"
        );
    }
}

#[test]
fn undecodable_body_names_its_tag_and_lsn() {
    let (_d, r) = store_with_raw(&[cut_status_change()]);
    let msg = r.unwrap_err().to_string();
    assert!(
        msg.contains("lsn 2") && msg.contains("cannot decode StatusChanged event body (tag 3)"),
        "{msg}"
    );
    // Empty and truncated payloads, too.
    let (_d, r) = store_with_raw(&[vec![tag::HEARTBEAT, 1, 2]]);
    assert!(r
        .unwrap_err()
        .to_string()
        .contains("Heartbeat event (tag 2) truncated"));
}

#[test]
fn event_naming_a_missing_agent_is_an_anomaly() {
    let mut hb = Vec::new();
    encode_heartbeat_into(&mut hb, T0, "nobody", Some(4));
    let removed = encode(&Event {
        at: T0,
        kind: EventKind::AgentRemoved {
            agent: "ghost".into(),
        },
    });
    let mut ok = Vec::new();
    encode_heartbeat_into(&mut ok, T0.add_secs(1), "a", None);
    let (_d, r) = store_with_raw(&[hb, removed, ok]);
    let store = r.unwrap();
    let s = store.state();
    assert_eq!(s.anomalies(), 2);
    assert_eq!(s.agent("a").unwrap().last_active, T0.add_secs(1));
    // History still works and names the bad agent's events.
    assert_eq!(store.history("nobody").unwrap().len(), 1);
}

#[test]
fn refused_commands_append_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), lazy_opts()).unwrap();
    let e = store.heartbeat("ghost", None, Some(T0)).unwrap_err();
    assert_eq!(e.to_string(), "agent `ghost` not found");
    assert!(matches!(
        e,
        StoreError::Registry(RegistryError::NotFound { .. })
    ));
    let e = store
        .post_message(PostMessage::new("ghost", None, "c", "b"), Some(T0))
        .unwrap_err();
    assert!(e.to_string().contains("ghost"));
    assert_eq!(store.log().last_lsn(), None);
    // An idempotent retry returns the first id and appends nothing.
    store
        .register(Registration::new("a", "claude", "/w"), Some(T0))
        .unwrap();
    let mut p = PostMessage::new("a", None, "c", "b");
    p.request_id = Some("k".into());
    let id = store.post_message(p.clone(), Some(T0)).unwrap();
    let last = store.log().last_lsn();
    assert_eq!(store.post_message(p.clone(), Some(T0)).unwrap(), id);
    assert_eq!(store.log().last_lsn(), last);
    p.body = "changed".into();
    assert!(store
        .post_message(p, Some(T0))
        .unwrap_err()
        .to_string()
        .contains("reused with different content"));
}

/// Compaction names an undecodable event where it lies: its segment file
/// and byte offset, not the log folder at offset 0.
#[test]
fn compaction_names_the_segment_and_offset_of_an_undecodable_event() {
    let (d, r) = store_with_raw(&[vec![200u8, 1, 2, 3, 4, 5, 6, 7, 8]]);
    assert!(r.is_err());
    let (log, _) = Log::open(&d.path().join("log"), lazy_opts().log).unwrap();
    let opts = agentlog::compact::CompactOptions {
        dry_run: true,
        ..Default::default()
    };
    let e = agentlog::compact::compact_log(&log, 100, T0.add_secs(60), &opts).unwrap_err();
    let LogError::Corrupt {
        segment,
        offset,
        lsn,
        reason,
    } = e
    else {
        panic!("{e:?}");
    };
    let (want, at) = second_record(d.path());
    assert_eq!(
        (segment.file_name(), offset, lsn),
        (want.file_name(), at, Some(2)),
        "{reason}"
    );
    assert!(reason.contains("event tag 200"), "{reason}");
}
