//! Disk full: on a small tmpfs (or, where mounting is impossible, with the
//! allocator's fault-injection budget) appends fail with `DiskFull`, and the
//! log reopens with everything acknowledged.

use crate::support::tmpfs::try_mount;
use std::path::Path;

use crate::support::log::*;
use agentlog::log::{Durability, Log, LogOptions};
use agentlog::LogError;

fn fill_until_full(dir: &Path, opts: LogOptions) -> u64 {
    let (log, _) = Log::open(dir, opts.clone()).unwrap();
    let mut acked = 0;
    let err = loop {
        match log.append(&payload(acked + 1), Durability::Durable) {
            Ok(lsn) => acked = lsn,
            Err(e) => break e,
        }
        assert!(acked < 1_000_000, "never ran out of space");
    };
    match &err {
        LogError::DiskFull { path, .. } => {
            assert!(path.starts_with(dir), "{}", path.display());
            assert!(err.to_string().contains("disk full"), "{err}");
        }
        other => panic!("expected DiskFull, got {other}"),
    }
    // Still full: the next append fails the same way, nothing is half-written.
    assert!(matches!(
        log.append(&payload(acked + 1), Durability::Durable),
        Err(LogError::DiskFull { .. })
    ));
    drop(log);
    let (log, rep) = Log::open(dir, opts).unwrap();
    assert!(rep.cut.is_empty());
    let all = read_all(&log);
    assert_eq!(all.len() as u64, acked);
    for (lsn, p) in &all {
        assert_eq!(p, &payload(*lsn));
    }
    acked
}

#[test]
fn append_until_disk_full_then_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("small");
    std::fs::create_dir_all(&mnt).unwrap();
    let opts = LogOptions {
        segment_size: 128 * 1024,
        ..small_opts()
    };
    match try_mount(&mnt, 1) {
        Some(m) => {
            eprintln!("disk full: using a 1 MiB tmpfs at {}", mnt.display());
            let acked = fill_until_full(&mnt, opts);
            assert!(acked > 100);
            drop(m);
        }
        None => {
            eprintln!("disk full: mount failed, using the allocator's fault-injection budget");
            let mut o = opts;
            o.faults.disk_budget = Some(5 * 128 * 1024);
            let acked = fill_until_full(&mnt, o);
            assert!(acked > 100);
        }
    }
    // The fault-injection path is always exercised too.
    let fast = fast_tempdir();
    let dir = fast.path().join("budget");
    let mut o = LogOptions {
        segment_size: 64 * 1024,
        ..small_opts()
    };
    o.faults.disk_budget = Some(3 * 64 * 1024);
    let acked = fill_until_full(&dir, o);
    assert!(acked > 100);
}
