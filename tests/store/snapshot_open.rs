//! Store checkpoints: open resumes from the newest trusted snapshot and folds
//! only the tail; damaged, too-new and other-generation snapshots are not
//! trusted; snapshot + tail == full fold for random histories.

use crate::support::store::*;
use agentlog::internals::snapshot;
use agentlog::registry::*;
use agentlog::store::{Store, StoreOptions};
use proptest::prelude::*;
use std::path::Path;
use std::time::{Duration, Instant};

const NAMES: [&str; 4] = ["ada", "bob", "cy", "dee"];

/// Snapshots only when the test asks (no count/time trigger).
fn manual_opts() -> StoreOptions {
    StoreOptions {
        snapshot_every_events: 0,
        snapshot_every_secs: 0,
        ..lazy_opts()
    }
}

/// `n` mixed commands starting at step `from`; returns how many succeeded.
fn run(store: &Store, from: u32, n: u32) -> u32 {
    let mut ok = 0;
    for i in from..from + n {
        let at = T0.add_millis(i64::from(i) * 500);
        ok += u32::from(mixed_command(
            store,
            i % 10,
            NAMES[(i % 4) as usize],
            NAMES[((i / 4) % 4) as usize],
            1 + i % 3,
            at,
        ));
    }
    ok
}

fn last_lsn(store: &Store) -> u64 {
    store.log().last_lsn().unwrap_or(0)
}

/// Reopen without a clean close (a clean close would snapshot the tail).
fn crash_reopen(store: Store, dir: &Path) -> Store {
    store.sync().unwrap();
    drop(store);
    Store::open(dir, manual_opts()).unwrap()
}

fn flip_bit(path: &Path, byte: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = byte.min(bytes.len() - 1);
    bytes[at] ^= 0x10;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn open_after_a_snapshot_folds_only_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), manual_opts()).unwrap();
    assert_eq!(store.open_report().snapshot_lsn, None);
    run(&store, 0, 200);
    let info = store.snapshot().unwrap();
    let snap_lsn = store.applied_lsn();
    assert_eq!(info.lsn, snap_lsn);
    run(&store, 200, 100);
    let tail = last_lsn(&store) - snap_lsn;
    assert!(tail > 0);
    let before = store.state();

    let store = crash_reopen(store, dir.path());
    let r = store.open_report();
    assert_eq!(r.snapshot_lsn, Some(snap_lsn));
    assert_eq!(r.base_lsn, snap_lsn);
    assert_eq!(r.events_folded, tail);
    assert!(r.skipped_snapshots.is_empty(), "{:?}", r.skipped_snapshots);
    assert_eq!(store.state(), before);
    assert_eq!(store.state(), refold(&store));

    // A clean close snapshots the tail: the next open folds nothing.
    let end = store.applied_lsn();
    store.close().unwrap();
    let store = Store::open(dir.path(), manual_opts()).unwrap();
    assert_eq!(store.open_report().snapshot_lsn, Some(end));
    assert_eq!(store.open_report().events_folded, 0);
    assert_eq!(store.state(), before);
}

#[test]
fn a_flipped_bit_skips_the_snapshot_and_the_state_still_equals_a_full_refold() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), manual_opts()).unwrap();
    run(&store, 0, 120);
    let older = store.snapshot().unwrap();
    run(&store, 120, 120);
    let newer = store.snapshot().unwrap();
    run(&store, 240, 40);
    let full = store.state();
    drop(store);

    // Damage the newer one in its payload: the older one is used instead.
    flip_bit(&newer.path, snapshot::HEADER_LEN + 7);
    let store = Store::open(dir.path(), manual_opts()).unwrap();
    let r = store.open_report().clone();
    assert_eq!(r.snapshot_lsn, Some(older.lsn));
    assert_eq!(r.skipped_snapshots.len(), 1, "{:?}", r.skipped_snapshots);
    assert_eq!(r.skipped_snapshots[0].path, newer.path);
    assert!(
        r.skipped_snapshots[0].reason.contains("checksum"),
        "{:?}",
        r.skipped_snapshots
    );
    assert_eq!(store.state(), full);
    assert_eq!(store.state(), refold(&store));
    drop(store);

    // Damage the older one too (its header LSN): a full refold.
    flip_bit(&older.path, 17);
    let store = Store::open(dir.path(), manual_opts()).unwrap();
    let r = store.open_report();
    assert_eq!(r.snapshot_lsn, None);
    assert_eq!(r.skipped_snapshots.len(), 2, "{:?}", r.skipped_snapshots);
    assert_eq!(r.events_folded, last_lsn(&store));
    assert_eq!(store.state(), full);
}

#[test]
fn a_snapshot_beyond_the_logs_end_is_set_aside_and_an_older_one_used() {
    // Store A runs further than store B; A's snapshot is planted in B, as if
    // B's log had lost the tail that snapshot covered.
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let sa = Store::open(a.path(), manual_opts()).unwrap();
    run(&sa, 0, 300);
    let far = sa.snapshot().unwrap();
    drop(sa);
    let sb = Store::open(b.path(), manual_opts()).unwrap();
    run(&sb, 0, 100);
    let near = sb.snapshot().unwrap();
    let full = sb.state();
    let end = last_lsn(&sb);
    assert!(far.lsn > end, "{} > {end}", far.lsn);
    drop(sb);
    let planted = b
        .path()
        .join("snapshots")
        .join(snapshot::file_name(far.lsn));
    std::fs::copy(&far.path, &planted).unwrap();

    let sb = Store::open(b.path(), manual_opts()).unwrap();
    let r = sb.open_report();
    assert_eq!(r.snapshot_lsn, Some(near.lsn));
    assert_eq!(r.skipped_snapshots.len(), 1);
    assert!(
        r.skipped_snapshots[0]
            .reason
            .contains("beyond the log's last lsn"),
        "{:?}",
        r.skipped_snapshots
    );
    assert_eq!(sb.state(), full);
    // Set aside, so it cannot pass for valid once new appends reach its LSN.
    assert!(!planted.exists());
    let mut aside = planted.into_os_string();
    aside.push(".untrusted");
    assert!(Path::new(&aside).exists());
}

#[derive(serde::Serialize)]
struct Payload<'a> {
    generation: u64,
    state: &'a State,
}

#[test]
fn a_snapshot_of_another_generation_or_fold_setting_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), manual_opts()).unwrap();
    run(&store, 0, 150);
    let lsn = store.applied_lsn();
    let state = store.state();
    let generation = store.log().stats().generation;
    drop(store);
    let snaps = dir.path().join("snapshots");
    let payload = Payload {
        generation: generation + 1,
        state: &state,
    };
    snapshot::write(&snaps, lsn, &payload, 3).unwrap();
    let store = Store::open(dir.path(), manual_opts()).unwrap();
    let r = store.open_report();
    assert_eq!(r.snapshot_lsn, None);
    assert!(
        r.skipped_snapshots[0].reason.contains("generation"),
        "{:?}",
        r.skipped_snapshots
    );
    assert_eq!(store.state(), state);
    drop(store);

    // Right generation, but the store now folds with another message cap.
    let payload = Payload {
        generation,
        state: &state,
    };
    snapshot::write(&snaps, lsn, &payload, 3).unwrap();
    let opts = StoreOptions {
        max_messages: 3,
        ..manual_opts()
    };
    let store = Store::open(dir.path(), opts).unwrap();
    assert_eq!(store.open_report().snapshot_lsn, None);
    assert_eq!(store.state(), refold(&store));
    drop(store);
    let store = Store::open(dir.path(), manual_opts()).unwrap();
    assert_eq!(store.open_report().snapshot_lsn, Some(lsn));
    assert_eq!(store.state(), state);
}

#[test]
fn snapshots_are_taken_every_n_events_and_only_the_newest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        snapshot_every_events: 40,
        snapshots_kept: 2,
        ..manual_opts()
    };
    let store = Store::open(dir.path(), opts).unwrap();
    let mut next = 0;
    let snaps = store.snapshot_dir();
    // The snapshot thread runs asynchronously: keep appending until it has
    // written three (a liveness wait, bounded generously; nothing is timed).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 3 {
        assert!(Instant::now() < deadline, "no snapshots: {seen:?}");
        run(&store, next, 20);
        next += 20;
        std::thread::sleep(Duration::from_millis(5));
        for s in snapshot::list(&snaps).unwrap() {
            seen.insert(s.lsn);
        }
    }
    for pair in seen.iter().collect::<Vec<_>>().windows(2) {
        assert!(pair[1] - pair[0] >= 40, "{seen:?}");
    }
    let state = store.state();
    // Dropping joins the snapshot thread: no write (whose pruning follows
    // its rename) is in flight any more.
    drop(store);
    let listed = snapshot::list(&snaps).unwrap();
    assert!(listed.len() <= 2, "{listed:?}");
    let store = Store::open(dir.path(), manual_opts()).unwrap();
    assert_eq!(
        store.open_report().snapshot_lsn,
        listed.last().map(|s| s.lsn)
    );
    assert_eq!(store.state(), state);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// For random histories and a snapshot at a random point, reopening
    /// gives exactly the full fold, folding only the records after it.
    #[test]
    fn snapshot_plus_tail_equals_the_full_fold(
        picks in proptest::collection::vec((0u32..10, 0usize..4, 0usize..4, 1u32..4), 1..80),
        cut in 0usize..80,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), manual_opts()).unwrap();
        let cut = cut.min(picks.len());
        let mut snap_lsn = None;
        for (i, (pick, a, o, pid)) in picks.iter().enumerate() {
            if i == cut {
                snap_lsn = Some(store.snapshot().unwrap().lsn);
            }
            let at = T0.add_millis(i as i64 * 700);
            mixed_command(&store, *pick, NAMES[*a], NAMES[*o], *pid, at);
        }
        let snap_lsn = snap_lsn.unwrap_or_else(|| store.snapshot().unwrap().lsn);
        let end = last_lsn(&store);
        let live = store.state();
        let store = crash_reopen(store, dir.path());
        let r = store.open_report();
        prop_assert_eq!(r.snapshot_lsn, Some(snap_lsn));
        prop_assert_eq!(r.events_folded, end - snap_lsn);
        prop_assert_eq!(store.state(), refold(&store));
        prop_assert_eq!(store.state(), live);
    }
}

#[test]
fn a_quiet_store_is_snapshotted_after_snapshot_every_secs() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        snapshot_every_secs: 1,
        ..manual_opts()
    };
    let store = Store::open(dir.path(), opts).unwrap();
    run(&store, 0, 30);
    let lsn = store.applied_lsn();
    // Nothing more is appended: only the timer can write this snapshot
    // (a liveness wait, bounded generously; nothing is timed).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !snapshot::list(&store.snapshot_dir())
        .unwrap()
        .iter()
        .any(|s| s.lsn == lsn)
    {
        assert!(Instant::now() < deadline, "no timed snapshot at lsn {lsn}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(store);
    let store = Store::open(dir.path(), manual_opts()).unwrap();
    assert_eq!(store.open_report().snapshot_lsn, Some(lsn));
    assert_eq!(store.open_report().events_folded, 0);
}

/// A short-lived store (the one-shot CLI) starts no thread and snapshots on
/// close only when a trigger is due: the first close of a store without a
/// snapshot, then only once the count is reached (the time trigger is far).
#[test]
fn a_short_lived_store_snapshots_on_close_only_when_a_trigger_is_due() {
    let d = tempfile::tempdir().unwrap();
    let opts = || StoreOptions {
        snapshot_every_events: 400,
        snapshot_every_secs: 3600,
        ..StoreOptions::short_lived()
    };
    let snaps = |dir: &Path| snapshot::list(&dir.join("snapshots")).unwrap_or_default();
    let s = Store::open(d.path(), opts()).unwrap();
    assert!(!s.log().has_background_thread());
    run(&s, 0, 10);
    s.close().unwrap();
    let first = snaps(d.path());
    assert_eq!(first.len(), 1, "no snapshot yet: the first close takes one");
    // Below the count, within the time: the closes take none.
    for k in 1..4 {
        let s = Store::open(d.path(), opts()).unwrap();
        run(&s, k * 10, 10);
        s.close().unwrap();
        assert_eq!(snaps(d.path()), first, "close {k} took a snapshot");
    }
    // The count reached (50 events per agent is less than 400 here).
    let s = Store::open(d.path(), opts()).unwrap();
    s.register(Registration::new("zed", "claude", "/w"), Some(T0))
        .unwrap();
    for i in 0..420 {
        s.heartbeat("zed", None, Some(T0.add_millis(i + 1)))
            .unwrap();
    }
    let applied = s.applied_lsn();
    assert!(applied - first[0].lsn >= 400, "{applied}");
    s.close().unwrap();
    let now = snaps(d.path());
    assert_eq!(now.last().map(|i| i.lsn), Some(applied), "{now:?}");
    // A long-lived store keeps snapshotting on every close with news.
    let long = StoreOptions {
        snapshot_thread: true,
        log: agentlog::log::LogOptions::default(),
        ..opts()
    };
    let s = Store::open(d.path(), long).unwrap();
    run(&s, 600, 3);
    let applied = s.applied_lsn();
    s.close().unwrap();
    assert_eq!(snaps(d.path()).last().map(|i| i.lsn), Some(applied));
}
