//! Basic behaviour of the log engine: append, batches, views, reopen,
//! durable appends with group commit, limits.

use std::sync::Arc;

use crate::support::log::*;
use agentlog::log::{verify, Durability, Log, LogOptions};
use agentlog::LogError;

#[test]
fn append_read_reopen_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (log, rep) = Log::open(dir.path(), small_opts()).unwrap();
    assert_eq!(rep.records, 0);
    assert_eq!(log.next_lsn(), 1);
    assert_eq!(log.last_lsn(), None);
    for i in 1..=2000u64 {
        assert_eq!(log.append(&payload(i), Durability::Lazy).unwrap(), i);
    }
    let stats = log.stats();
    assert!(stats.segments > 3, "{stats:?}");
    assert_eq!(stats.first_lsn, Some(1));
    assert_eq!(stats.last_lsn, Some(2000));
    let all = read_all(&log);
    assert_eq!(all.len(), 2000);
    for (i, (lsn, p)) in all.iter().enumerate() {
        assert_eq!(*lsn, i as u64 + 1);
        assert_eq!(p, &payload(*lsn));
    }
    // iter_from lands in the middle of any segment.
    let view = log.view();
    for from in [1u64, 2, 777, 1500, 2000] {
        let r = view.iter_from(from).next().unwrap().unwrap();
        assert_eq!(r.lsn, from);
        assert_eq!(r.payload, payload(from).as_slice());
    }
    assert!(view.iter_from(2001).next().is_none());
    log.close().unwrap();

    let (log, rep) = Log::open(dir.path(), small_opts()).unwrap();
    assert_eq!(rep.records, 2000);
    assert_eq!(rep.last_lsn, Some(2000));
    assert!(rep.cut.is_empty());
    assert_eq!(log.append(b"after", Durability::Durable).unwrap(), 2001);
    assert_eq!(read_all(&log).len(), 2001);
}

#[test]
fn batches_and_append_with() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), small_opts()).unwrap();
    let r = log
        .append_batch(&[b"a", b"bb", b"ccc"], Durability::Durable)
        .unwrap();
    assert_eq!(r, 1..=3);
    let lsn = log
        .append_with(5, Durability::Lazy, |b| b.copy_from_slice(b"hello"))
        .unwrap();
    assert_eq!(lsn, 4);
    let recs: Vec<_> = log
        .view()
        .iter()
        .map(|r| r.unwrap())
        .map(|r| (r.lsn, r.payload.to_vec(), r.last_in_batch))
        .collect();
    assert_eq!(
        recs,
        vec![
            (1, b"a".to_vec(), false),
            (2, b"bb".to_vec(), false),
            (3, b"ccc".to_vec(), true),
            (4, b"hello".to_vec(), true)
        ]
    );
    // A view is a snapshot: later appends are not in it.
    let v = log.view();
    log.append(b"later", Durability::Lazy).unwrap();
    assert_eq!(v.iter().count(), 4);
    assert_eq!(log.view().iter().count(), 5);
}

#[test]
fn limits_are_errors_not_truncations() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), small_opts()).unwrap();
    let big = vec![7u8; 4097];
    match log.append(&big, Durability::Lazy) {
        Err(LogError::RecordTooLarge {
            len: 4097,
            max: 4096,
        }) => {}
        other => panic!("expected RecordTooLarge, got {other:?}"),
    }
    assert!(matches!(
        log.append(b"", Durability::Lazy),
        Err(LogError::InvalidArgument(_))
    ));
    assert_eq!(log.next_lsn(), 1, "nothing was appended");
    assert!(Log::open(
        &dir.path().join("x"),
        LogOptions {
            segment_size: 5000,
            ..small_opts()
        }
    )
    .is_err());
}

#[test]
fn group_commit_many_threads() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), small_opts()).unwrap();
    let log = Arc::new(log);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut lsns = Vec::new();
                for i in 0..200u64 {
                    let p = format!("t{t}-{i}");
                    // The Store's pattern: lazy append, then wait for durability.
                    let lsn = log.append(p.as_bytes(), Durability::Lazy).unwrap();
                    log.wait_durable(lsn).unwrap();
                    assert!(log.synced_lsn() >= lsn);
                    lsns.push(lsn);
                }
                lsns
            })
        })
        .collect();
    let mut all: Vec<u64> = threads
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort();
    assert_eq!(all, (1..=1600).collect::<Vec<_>>());
    assert!(matches!(
        log.wait_durable(5000),
        Err(LogError::InvalidArgument(_))
    ));
}

#[test]
fn failed_sync_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = small_opts();
    opts.faults.fail_syncs = true;
    let (log, _) = Log::open(dir.path(), opts).unwrap();
    assert_eq!(log.append(b"lazy", Durability::Lazy).unwrap(), 1);
    let e = log.append(b"durable", Durability::Durable).unwrap_err();
    assert!(matches!(e, LogError::FsyncFailed { .. }), "{e}");
    let e = log.append(b"more", Durability::Lazy).unwrap_err();
    assert!(e.to_string().contains("must be reopened"), "{e}");
    assert!(log.sync().is_err());
    drop(log);
    // The poisoning outlives the process: during this boot the page cache
    // may hold pages that never reached the disk, so the next open refuses.
    let e = Log::open(dir.path(), small_opts()).unwrap_err();
    assert!(matches!(e, LogError::Poisoned { .. }), "{e}");
    assert!(
        e.to_string().contains("POISONED") && e.to_string().contains("Reboot"),
        "{e}"
    );
    // After a reboot (another boot id in the marker) the log recovers.
    let marker = dir.path().join("POISONED");
    let text = std::fs::read_to_string(&marker).unwrap();
    let rest: Vec<&str> = text.lines().skip(1).collect();
    std::fs::write(&marker, format!("boot another-boot\n{}\n", rest.join("\n"))).unwrap();
    let (log, rep) = Log::open(dir.path(), small_opts()).unwrap();
    assert_eq!(rep.records, 2);
    assert!(!marker.exists());
    log.append(b"ok", Durability::Durable).unwrap();
}

/// A panicking payload closure publishes nothing and leaves nothing behind:
/// later appends, a seal and reopening see a clean log.
#[test]
fn a_panicking_fill_leaves_no_garbage_past_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), small_opts()).unwrap();
    log.append(b"first", Durability::Lazy).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        log.append_with(2000, Durability::Lazy, |buf| {
            buf.fill(0xAB);
            panic!("payload encoder failed");
        })
    }));
    assert!(r.is_err());
    assert_eq!(log.append(b"second", Durability::Lazy).unwrap(), 2);
    log.close().unwrap();
    let (log, rep) = Log::open(dir.path(), small_opts()).unwrap();
    assert!(rep.cut.is_empty(), "{:?}", rep.cut);
    assert_eq!(rep.records, 2);
    log.seal_active().unwrap();
    log.close().unwrap();
    let v = verify(dir.path()).unwrap();
    assert!(v.is_clean(), "{:?}", v.bad);
    let (_log, rep) = Log::open(dir.path(), small_opts()).unwrap();
    assert!(rep.cut.is_empty(), "{:?}", rep.cut);
    assert_eq!(rep.records, 2);
}

#[test]
fn zero_filled_segments_work_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let opts = LogOptions {
        zero_fill: true,
        ..small_opts()
    };
    let (log, _) = Log::open(dir.path(), opts.clone()).unwrap();
    for i in 1..=1500u64 {
        log.append(&payload(i), Durability::Lazy).unwrap();
    }
    assert!(log.stats().segments > 2);
    log.close().unwrap();
    let (log, rep) = Log::open(dir.path(), opts).unwrap();
    assert_eq!(rep.records, 1500);
    assert_eq!(read_all(&log).last().unwrap(), &(1500, payload(1500)));
}

#[test]
fn views_taken_during_appends_are_consistent_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), small_opts()).unwrap();
    let log = Arc::new(log);
    let writer = {
        let log = log.clone();
        std::thread::spawn(move || {
            while log.next_lsn() <= 6000 {
                let n = log.next_lsn();
                if n % 7 == 0 {
                    let (a, b) = (payload(n), payload(n + 1));
                    assert_eq!(
                        log.append_batch(&[&a, &b], Durability::Lazy).unwrap(),
                        n..=n + 1
                    );
                } else {
                    assert_eq!(log.append(&payload(n), Durability::Lazy).unwrap(), n);
                }
            }
        })
    };
    let mut checks = 0;
    while !writer.is_finished() || checks == 0 {
        let v = log.view();
        let mut n = 0u64;
        for r in v.iter() {
            let r = r.unwrap();
            n += 1;
            assert_eq!(r.lsn, n);
            assert_eq!(r.payload, payload(r.lsn).as_slice());
        }
        checks += 1;
    }
    writer.join().unwrap();
    assert!(checks > 0);
}

#[test]
fn handles_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Log>();
    check::<agentlog::log::LogView>();
    check::<agentlog::log::LogReader>();
}

#[test]
fn a_batch_larger_than_a_segment_gets_a_segment_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small_opts();
    let (log, _) = Log::open(dir.path(), opts.clone()).unwrap();
    log.append(b"before", Durability::Durable).unwrap();
    // 40 records of 4000 bytes: several times the configured segment size.
    let big: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 4000]).collect();
    let refs: Vec<&[u8]> = big.iter().map(|v| v.as_slice()).collect();
    assert!(40 * 4000 > opts.segment_size as usize);
    let lsns = log.append_batch(&refs, Durability::Durable).unwrap();
    assert_eq!(lsns, 2..=41);
    log.append(b"after", Durability::Durable).unwrap();
    log.close().unwrap();
    // Reopened (recovery judges the oversized segment like any other), the
    // batch is there whole, between its neighbours.
    let (log, rep) = Log::open(dir.path(), opts).unwrap();
    assert_eq!(rep.records, 42, "{rep:?}");
    let all = read_all(&log);
    assert_eq!(all.len(), 42);
    assert_eq!(all[0].1, b"before");
    for (i, (lsn, p)) in all[1..41].iter().enumerate() {
        assert_eq!(*lsn, i as u64 + 2);
        assert_eq!(p, &big[i]);
    }
    assert_eq!(all[41].1, b"after");
    assert!(verify(dir.path()).unwrap().is_clean());
    log.close().unwrap();
}
