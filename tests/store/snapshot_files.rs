//! Snapshot files: round trip, keep-N pruning, and damaged snapshots (every
//! byte flipped, truncations, future versions, wrong LSN, wrong type) skipped
//! with a reason in favour of the next older one.

use agentlog::internals::snapshot::{self, SkipReason, FORMAT_VERSION, HEADER_LEN, MAGIC};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct State {
    agents: BTreeMap<String, (u32, Option<String>)>,
    seq: u64,
}

fn state(n: u64) -> State {
    State {
        agents: (0..n)
            .map(|i| {
                (
                    format!("agent-{i}"),
                    (i as u32, (i % 2 == 0).then(|| "x".repeat(i as usize))),
                )
            })
            .collect(),
        seq: n,
    }
}

fn newest(dir: &Path) -> (u64, State, Vec<SkipReason>) {
    let l = snapshot::load_newest::<State>(dir)
        .unwrap()
        .expect("a usable snapshot");
    assert_eq!(l.info.lsn, l.lsn);
    (
        l.lsn,
        l.state,
        l.skipped.into_iter().map(|(_, r)| r).collect(),
    )
}

#[test]
fn write_then_load_newest_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    assert!(snapshot::load_newest::<State>(&dir.path().join("missing"))
        .unwrap()
        .is_none());
    let info = snapshot::write(dir.path(), 7, &state(3), 3).unwrap();
    assert_eq!(info.path, dir.path().join("snap-00000000000000000007.bin"));
    assert_eq!(info.len, std::fs::metadata(&info.path).unwrap().len());
    snapshot::write(dir.path(), 12, &state(5), 3).unwrap();
    let (lsn, st, skipped) = newest(dir.path());
    assert_eq!((lsn, st, skipped), (12, state(5), vec![]));
    // Strays are ignored: other names, and a leftover temp file.
    std::fs::write(dir.path().join("snap-junk.bin"), b"x").unwrap();
    std::fs::write(dir.path().join(".snap-00000000000000000099.bin.tmp"), b"x").unwrap();
    let lsns: Vec<u64> = snapshot::list(dir.path())
        .unwrap()
        .iter()
        .map(|s| s.lsn)
        .collect();
    assert_eq!(lsns, vec![7, 12]);
}

#[test]
fn only_the_newest_keep_snapshots_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    for lsn in [5u64, 1, 9, 3, 20, 14] {
        snapshot::write(dir.path(), lsn, &state(lsn), 3).unwrap();
    }
    let lsns: Vec<u64> = snapshot::list(dir.path())
        .unwrap()
        .iter()
        .map(|s| s.lsn)
        .collect();
    assert_eq!(lsns, vec![9, 14, 20]);
    // keep = 0 still keeps the one just written.
    snapshot::write(dir.path(), 21, &state(1), 0).unwrap();
    let lsns: Vec<u64> = snapshot::list(dir.path())
        .unwrap()
        .iter()
        .map(|s| s.lsn)
        .collect();
    assert_eq!(lsns, vec![21]);
}

#[test]
fn every_flipped_byte_is_detected_and_the_older_snapshot_used() {
    let dir = tempfile::tempdir().unwrap();
    snapshot::write(dir.path(), 10, &state(4), 5).unwrap();
    let newer = snapshot::write(dir.path(), 20, &state(6), 5).unwrap();
    let good = std::fs::read(&newer.path).unwrap();
    for at in 0..good.len() {
        let mut bad = good.clone();
        bad[at] ^= 1 << (at % 8);
        std::fs::write(&newer.path, &bad).unwrap();
        let (lsn, st, skipped) = newest(dir.path());
        assert_eq!((lsn, &st), (10, &state(4)), "flip at byte {at} was trusted");
        assert_eq!(skipped.len(), 1, "byte {at}");
    }
    std::fs::write(&newer.path, &good).unwrap();
    assert_eq!(newest(dir.path()).0, 20);
}

#[test]
fn truncated_snapshots_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    snapshot::write(dir.path(), 10, &state(4), 5).unwrap();
    let newer = snapshot::write(dir.path(), 20, &state(6), 5).unwrap();
    let good = std::fs::read(&newer.path).unwrap();
    for len in [0, 5, 11, 12, HEADER_LEN - 1, HEADER_LEN, good.len() - 1] {
        std::fs::write(&newer.path, &good[..len]).unwrap();
        let (lsn, _, skipped) = newest(dir.path());
        assert_eq!(lsn, 10, "truncated to {len}");
        let why = skipped[0].to_string();
        assert!(
            matches!(
                skipped[0],
                SkipReason::Truncated { .. } | SkipReason::LengthMismatch { .. }
            ),
            "{len}: {why}"
        );
    }
    // Appended garbage is damage too.
    let mut longer = good.clone();
    longer.extend_from_slice(b"tail");
    std::fs::write(&newer.path, &longer).unwrap();
    assert!(matches!(
        newest(dir.path()).2[0],
        SkipReason::LengthMismatch { .. }
    ));
}

/// Rewrites the header's version field and recomputes the checksum, as a
/// newer build writing a different format would.
fn with_version(bytes: &[u8], version: u32) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[8..12].copy_from_slice(&version.to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&b[..32]);
    h.update(&b[HEADER_LEN..]);
    let crc = h.finalize();
    b[32..36].copy_from_slice(&crc.to_le_bytes());
    b
}

#[test]
fn a_future_version_is_skipped_with_a_clear_reason() {
    let dir = tempfile::tempdir().unwrap();
    snapshot::write(dir.path(), 10, &state(4), 5).unwrap();
    let newer = snapshot::write(dir.path(), 20, &state(6), 5).unwrap();
    let good = std::fs::read(&newer.path).unwrap();
    assert_eq!(good[..8], MAGIC);
    std::fs::write(&newer.path, with_version(&good, FORMAT_VERSION + 1)).unwrap();
    let (lsn, _, skipped) = newest(dir.path());
    assert_eq!(lsn, 10);
    assert_eq!(
        skipped,
        vec![SkipReason::FutureVersion {
            found: FORMAT_VERSION + 1
        }]
    );
    let msg = skipped[0].to_string();
    assert!(
        msg.contains(&format!(
            "format version {} is newer than this build reads ({FORMAT_VERSION})",
            FORMAT_VERSION + 1
        )),
        "{msg}"
    );
    // Version 1 (before the registry-only row fields) is refolded, not misread.
    std::fs::write(&newer.path, with_version(&good, 1)).unwrap();
    assert_eq!(
        newest(dir.path()).2,
        vec![SkipReason::UnknownVersion { found: 1 }]
    );
    // Version 0 never existed.
    std::fs::write(&newer.path, with_version(&good, 0)).unwrap();
    assert_eq!(
        newest(dir.path()).2,
        vec![SkipReason::UnknownVersion { found: 0 }]
    );
}

#[test]
fn wrong_lsn_wrong_type_and_all_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let ten = snapshot::write(dir.path(), 10, &state(4), 5).unwrap();
    let twenty = snapshot::write(dir.path(), 20, &state(6), 5).unwrap();
    // A file renamed to claim another LSN is not trusted.
    let moved = dir.path().join(snapshot::file_name(30));
    std::fs::copy(&twenty.path, &moved).unwrap();
    let (lsn, _, skipped) = newest(dir.path());
    assert_eq!(lsn, 20);
    assert_eq!(
        skipped,
        vec![SkipReason::LsnMismatch {
            header: 20,
            name: 30
        }]
    );
    std::fs::remove_file(&moved).unwrap();

    // Intact bytes that do not decode as the requested state type.
    let odd = snapshot::write(dir.path(), 25, &vec![(300u16, "not a State")], 5).unwrap();
    let (lsn, _, skipped) = newest(dir.path());
    assert_eq!(lsn, 20);
    assert!(
        matches!(skipped[..], [SkipReason::Decode(_)]),
        "{skipped:?}"
    );
    std::fs::remove_file(&odd.path).unwrap();

    // Everything damaged: no snapshot, the caller refolds the whole log.
    for info in [&ten, &twenty] {
        let mut b = std::fs::read(&info.path).unwrap();
        let last = b.len() - 1;
        b[last] ^= 0x80;
        std::fs::write(&info.path, b).unwrap();
    }
    assert!(snapshot::load_newest::<State>(dir.path())
        .unwrap()
        .is_none());
}
