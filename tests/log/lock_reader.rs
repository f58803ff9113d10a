//! The writer lock and the lock-free reader following the writer.

use std::time::Duration;

use crate::support::log::*;
use agentlog::log::{Durability, Log, LogOptions, LogReader};
use agentlog::LogError;

#[test]
fn second_writer_is_refused_naming_the_pid() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), small_opts()).unwrap();
    match Log::open(dir.path(), small_opts()) {
        Err(LogError::Locked { pid, path }) => {
            assert_eq!(pid, std::process::id());
            assert_eq!(path, dir.path().join("LOCK"));
            let msg = LogError::Locked { pid, path }.to_string();
            assert!(msg.contains(&pid.to_string()), "{msg}");
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    // With a timeout, the second writer waits for the first to let go.
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        log.append(b"first", Durability::Durable).unwrap();
        log.close().unwrap();
    });
    let opts = LogOptions {
        lock_timeout: Some(Duration::from_secs(20)),
        ..small_opts()
    };
    let (log2, rep) = Log::open(dir.path(), opts).unwrap();
    release.join().unwrap();
    assert_eq!(rep.records, 1);
    assert_eq!(log2.append(b"second", Durability::Lazy).unwrap(), 2);
    // A short timeout expires with the error.
    let opts = LogOptions {
        lock_timeout: Some(Duration::from_millis(30)),
        ..small_opts()
    };
    assert!(matches!(
        Log::open(dir.path(), opts),
        Err(LogError::Locked { .. })
    ));
}

#[test]
fn reader_follows_the_tail_across_segments_and_generations() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), small_opts()).unwrap();
    for lsn in 1..=10u64 {
        log.append(&payload(lsn), Durability::Lazy).unwrap();
    }
    let mut r = LogReader::open(dir.path()).unwrap();
    assert_eq!(r.last_lsn(), Some(10));
    let seen: Vec<u64> = r.view().iter().map(|x| x.unwrap().lsn).collect();
    assert_eq!(seen, (1..=10).collect::<Vec<_>>());

    // A batch appended by the writer shows up whole after refresh.
    log.append_batch(&[b"b1", b"b2"], Durability::Lazy).unwrap();
    r.refresh().unwrap();
    assert_eq!(r.last_lsn(), Some(12));

    // Many segments later, the reader still follows.
    for lsn in 13..=3000u64 {
        log.append(&payload(lsn), Durability::Lazy).unwrap();
        if lsn % 700 == 0 {
            r.refresh().unwrap();
            assert_eq!(r.last_lsn(), Some(lsn));
        }
    }
    r.refresh().unwrap();
    assert_eq!(r.last_lsn(), Some(3000));
    let v = r.view();
    let all: Vec<_> = v.iter().map(|x| x.unwrap()).collect();
    assert_eq!(all.len(), 3000);
    assert_eq!(all[2999].payload, payload(3000).as_slice());
    assert_eq!(v.iter_from(1234).next().unwrap().unwrap().lsn, 1234);

    // Compaction: the reader moves to the new generation; its old view stays readable.
    let before = r.view();
    let out = log
        .compact_sealed(u64::MAX, &mut |lsn, _| lsn % 2 == 0)
        .unwrap();
    assert_eq!(out.generation, 1);
    r.refresh().unwrap();
    assert_eq!(r.generation(), 1);
    let after: Vec<u64> = r.view().iter().map(|x| x.unwrap().lsn).collect();
    let writer: Vec<u64> = log.view().iter().map(|x| x.unwrap().lsn).collect();
    assert!(
        after == writer,
        "reader and writer disagree after compaction"
    );
    assert!(after
        .iter()
        .filter(|&&l| l < out.compacted_end)
        .all(|l| l % 2 == 0));
    assert!(after.iter().filter(|&&l| l >= out.compacted_end).count() > 0);
    assert_eq!(
        before.iter().count(),
        3000,
        "an old view keeps its (deleted) segments"
    );
    // And it keeps following after the switch.
    log.append(b"tail", Durability::Lazy).unwrap();
    r.refresh().unwrap();
    assert_eq!(r.last_lsn(), Some(3001));
}

#[test]
fn reader_never_shows_an_unterminated_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), small_opts()).unwrap();
    log.append(b"one", Durability::Lazy).unwrap();
    log.append_batch(&[b"two", b"three", b"four"], Durability::Lazy)
        .unwrap();
    log.close().unwrap();
    // Tear off the batch's last record behind the writer's back.
    let seg = &main_segments(dir.path())[0];
    let mut b = std::fs::read(seg).unwrap();
    let last = 64 + 2 * rec_size(3) + rec_size(5);
    b[last..last + rec_size(4)].fill(0);
    std::fs::write(seg, &b).unwrap();
    let r = LogReader::open(dir.path()).unwrap();
    let seen: Vec<Vec<u8>> = r
        .view()
        .iter()
        .map(|x| x.unwrap().payload.to_vec())
        .collect();
    assert_eq!(seen, vec![b"one".to_vec()]);
}

/// A reader that maps the active segment before any record lands, then
/// refreshes after the writer appended and sealed it: sealing used to shrink
/// the file under the reader's map, and the reader's look at the footer
/// place (the end of its map) died of SIGBUS. Sealing now keeps the length.
#[test]
fn reader_survives_a_seal_of_the_segment_it_maps() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), small_opts()).unwrap();
    let mut reader = LogReader::open(dir.path()).unwrap();
    assert_eq!(reader.last_lsn(), None);
    log.append(b"one", Durability::Durable).unwrap();
    log.append(b"two", Durability::Durable).unwrap();
    log.seal_active().unwrap();
    reader.refresh().unwrap();
    assert_eq!(reader.last_lsn(), Some(2));
    log.append(b"three", Durability::Durable).unwrap();
    reader.refresh().unwrap();
    let got: Vec<Vec<u8>> = reader
        .view()
        .iter()
        .map(|r| r.unwrap().payload.to_vec())
        .collect();
    assert_eq!(got, [&b"one"[..], b"two", b"three"]);
    log.close().unwrap();
}
