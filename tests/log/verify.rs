//! verify reports and salvage around a damaged middle.

use std::fs;

use crate::support::log::*;
use agentlog::log::{salvage, verify, Durability, Log};
use agentlog::LogError;

#[test]
fn verify_reports_counts_and_bad_records() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), small_opts()).unwrap();
    for lsn in 1..=1000u64 {
        log.append(&payload(lsn), Durability::Lazy).unwrap();
    }
    log.close().unwrap();
    let v = verify(dir.path()).unwrap();
    assert!(v.is_clean());
    assert_eq!(v.records, 1000);
    assert_eq!((v.first_lsn, v.last_lsn), (Some(1), Some(1000)));
    assert_eq!(v.segments, main_segments(dir.path()).len());
    let data: usize = (1..=1000u64).map(|l| rec_size(payload(l).len())).sum();
    assert_eq!(v.bytes as usize, data + 64 * v.segments);

    // Damage record 10 (first segment, mid) and the header of the second segment.
    let segs = main_segments(dir.path());
    let mut b = fs::read(&segs[0]).unwrap();
    let off10: usize = 64
        + (1..10u64)
            .map(|l| rec_size(payload(l).len()))
            .sum::<usize>();
    b[off10 + 18] ^= 1;
    fs::write(&segs[0], &b).unwrap();
    let mut h = fs::read(&segs[1]).unwrap();
    h[20] ^= 0xff;
    fs::write(&segs[1], &h).unwrap();
    let v = verify(dir.path()).unwrap();
    assert!(!v.is_clean());
    let b0 = &v.bad[0];
    assert_eq!(
        (b0.segment.as_path(), b0.offset as usize, b0.lsn),
        (segs[0].as_path(), off10, Some(10))
    );
    assert!(b0.reason.contains("checksum"), "{}", b0.reason);
    assert!(
        v.bad
            .iter()
            .any(|b| b.segment == segs[1] && b.offset == 0 && b.reason.contains("header")),
        "{:?}",
        v.bad
    );
    // Open refuses, naming the segment, offset and LSN.
    match Log::open(dir.path(), small_opts()) {
        Err(LogError::Corrupt {
            segment,
            offset,
            lsn,
            ..
        }) => {
            assert_eq!(
                (segment, offset as usize, lsn),
                (segs[0].clone(), off10, Some(10))
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn salvage_copies_valid_records_around_a_damaged_middle() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let (log, _) = Log::open(&src, small_opts()).unwrap();
    for lsn in 1..=600u64 {
        log.append(&payload(lsn), Durability::Lazy).unwrap();
    }
    log.append_batch(&[b"b1", b"b2", b"b3"], Durability::Lazy)
        .unwrap(); // 601..=603
    for lsn in 604..=700u64 {
        log.append(&payload(lsn), Durability::Lazy).unwrap();
    }
    log.close().unwrap();
    // Damage lsn 300 and the middle of the batch.
    let find = |lsn: u64| -> (std::path::PathBuf, usize) {
        let segs = main_segments(&src);
        let i = segs
            .iter()
            .rposition(|p| {
                p.file_name().unwrap().to_str().unwrap()[..20]
                    .parse::<u64>()
                    .unwrap()
                    <= lsn
            })
            .unwrap();
        let first: u64 = segs[i].file_name().unwrap().to_str().unwrap()[..20]
            .parse()
            .unwrap();
        let mut off = 64;
        for l in first..lsn {
            off += rec_size(if (601..=603).contains(&l) {
                2
            } else {
                payload(l).len()
            });
        }
        (segs[i].clone(), off)
    };
    for lsn in [300u64, 602] {
        let (p, off) = find(lsn);
        let mut b = fs::read(&p).unwrap();
        b[off + 16] ^= 0x10;
        fs::write(&p, &b).unwrap();
    }
    let snapshot: Vec<Vec<u8>> = main_segments(&src)
        .iter()
        .map(|p| fs::read(p).unwrap())
        .collect();
    assert!(Log::open(&src, small_opts()).is_err());
    let dst = tmp.path().join("dst");
    let rep = salvage(&src, &dst).unwrap();
    // 700 records - lsn 300 - the whole batch 601..=603.
    assert_eq!(rep.records_copied, 696);
    assert_eq!(rep.records_skipped, 2, "{rep:?}"); // 601 and 603: valid but their batch is broken
    assert_eq!((rep.first_lsn, rep.last_lsn), (Some(1), Some(700)));
    assert!(rep.bad.iter().any(|b| b.lsn == Some(300)), "{:?}", rep.bad);
    assert!(rep.bad.iter().any(|b| b.lsn == Some(602)), "{:?}", rep.bad);
    // The source is untouched.
    let after: Vec<Vec<u8>> = main_segments(&src)
        .iter()
        .map(|p| fs::read(p).unwrap())
        .collect();
    assert!(snapshot == after, "salvage modified the source");
    // The salvaged log opens, keeps original LSNs, and continues after 700.
    let (log, r) = Log::open(&dst, small_opts()).unwrap();
    assert_eq!(r.records, 696);
    let got = read_all(&log);
    assert!(got
        .iter()
        .all(|(l, p)| *l != 300 && !(601..=603).contains(l) && *p == payload(*l)));
    assert_eq!(got.len(), 696);
    assert_eq!(log.append(b"next", Durability::Durable).unwrap(), 701);
    drop(log);
    assert!(verify(&dst).unwrap().is_clean());
    // A non-empty destination is refused.
    assert!(matches!(
        salvage(&src, &dst),
        Err(LogError::InvalidArgument(_))
    ));
}
