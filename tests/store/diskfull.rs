//! A nearly full disk must not wedge the store: with less
//! free space than one segment, appends go on and `compact` (which must seal
//! the active segment, installing a successor, before it can shrink the log)
//! runs and frees space.
//!
//! On a small tmpfs (mounting needs root); where mounting fails, the log's
//! fault-injection disk budget stands in for the free space, and the test
//! says so.

use crate::support::tmpfs::{fill_leaving, try_mount};
use agentlog::compact::CompactOptions;
use agentlog::log::LogOptions;
use agentlog::registry::{PostMessage, Registration};
use agentlog::store::{Store, StoreOptions};
use agentlog::time::Timestamp;
use std::path::Path;

const SEGMENT: u64 = 4 << 20;

fn free_bytes(dir: &Path) -> u64 {
    let st = rustix::fs::statvfs(dir).expect("statvfs");
    st.f_bavail * st.f_frsize
}

fn t(ms: i64) -> Timestamp {
    Timestamp::parse_rfc3339("2026-11-30T12:00:00Z")
        .unwrap()
        .add_millis(ms)
}

#[test]
fn compact_runs_and_frees_space_when_less_than_a_segment_is_free() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mount = try_mount(&mnt, 16);
    let mut opts = StoreOptions {
        log: LogOptions {
            segment_size: SEGMENT,
            prepare_ahead: false,
            ..LogOptions::default()
        },
        snapshot_every_events: 0,
        snapshot_every_secs: 0,
        ..StoreOptions::default()
    };
    if mount.is_none() {
        println!("cannot mount a tmpfs (not root?): using the log's fault-injection disk budget");
        // Two rotations at full size, then 2 MiB: less than a segment.
        opts.log.faults.disk_budget = Some(2 * SEGMENT + (2 << 20));
    }
    let dir = mnt.join("store");
    let store = Store::open(&dir, opts).unwrap();
    for name in ["a", "b"] {
        store
            .register(Registration::new(name, "codex", "/"), Some(t(0)))
            .unwrap();
    }
    // ~2.4 segments of short-lived 32 KiB messages.
    let body = "x".repeat(32 << 10);
    for i in 0..300 {
        let mut p = PostMessage::new("a", Some("b"), "bulk", &body);
        p.ttl_ms = Some(1_000);
        store.post_message(p, Some(t(1 + i))).unwrap();
    }
    assert!(store.log().stats().segments >= 3, "the log spans segments");
    if mount.is_some() {
        fill_leaving(&mnt.join("filler"), 2 << 20);
        assert!(free_bytes(&mnt) < SEGMENT, "less than a segment is free");
    }
    let before = free_bytes(&mnt);
    // Every message expired: compaction keeps almost nothing.
    let report = store
        .compact(t(3_600_000), &CompactOptions::default())
        .expect("compaction runs when less than a segment is free");
    assert!(report.events_dropped > 0, "{report:?}");
    if mount.is_some() {
        let after = free_bytes(&mnt);
        assert!(
            after > before + SEGMENT,
            "compaction freed space: {before} -> {after}"
        );
    }
    // And the store takes writes again.
    store
        .post_message(
            PostMessage::new("a", Some("b"), "c", "after"),
            Some(t(3_600_001)),
        )
        .unwrap();
    store.close().unwrap();
}
