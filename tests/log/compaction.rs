//! The compaction primitive: keep-predicate rewrite of sealed segments into a
//! new generation, with injected failures at every step of the switch.

use std::fs;
use std::path::Path;

use crate::support::log::*;
use agentlog::log::{verify, CompactionStep, Durability, Log, LogOptions};
use agentlog::LogError;

fn filled(dir: &Path, n: u64) -> Log {
    let (log, _) = Log::open(dir, small_opts()).unwrap();
    for lsn in 1..=n {
        log.append(&payload(lsn), Durability::Lazy).unwrap();
    }
    log
}

fn gen_dirs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().to_string())
        .filter(|n| n.starts_with("gen-"))
        .collect();
    v.sort();
    v
}

#[test]
fn keeps_original_lsns_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = filled(dir.path(), 3000);
    let sealed = log.sealed_end_lsn();
    assert!(sealed > 1000);
    let before = log.stats();
    let out = log
        .compact_sealed(1500, &mut |lsn, p| {
            assert_eq!(p, payload(lsn).as_slice());
            lsn % 4 == 0
        })
        .unwrap();
    assert_eq!(out.generation, 1);
    assert!(
        out.compacted_end <= 1500 && out.compacted_end > 1,
        "{out:?}"
    );
    assert_eq!(
        out.records_kept + out.records_dropped,
        out.compacted_end - 1
    );
    assert!(out.bytes_after < out.bytes_before);
    let expect: Vec<u64> = (1..=3000)
        .filter(|l| *l >= out.compacted_end || l % 4 == 0)
        .collect();
    let got: Vec<u64> = read_all(&log).iter().map(|r| r.0).collect();
    assert_eq!(got, expect);
    for (lsn, p) in read_all(&log) {
        assert_eq!(p, payload(lsn));
    }
    let st = log.stats();
    assert_eq!(st.generation, 1);
    assert!(st.segments < before.segments);
    assert_eq!(gen_dirs(dir.path()), vec!["gen-000001"]);
    // Main-directory segments below the compacted end are gone.
    for p in main_segments(dir.path()) {
        let first: u64 = p.file_name().unwrap().to_str().unwrap()[..20]
            .parse()
            .unwrap();
        assert!(first >= out.compacted_end);
    }
    assert_eq!(log.append(b"x", Durability::Durable).unwrap(), 3001);
    log.close().unwrap();

    let (log, rep) = Log::open(dir.path(), small_opts()).unwrap();
    assert_eq!(rep.generation, 1);
    let mut expect = expect;
    expect.push(3001);
    assert_eq!(
        read_all(&log).iter().map(|r| r.0).collect::<Vec<_>>(),
        expect
    );
    // A second generation replaces the first (and may re-filter it).
    log.seal_active().unwrap();
    let out2 = log
        .compact_sealed(u64::MAX, &mut |lsn, _| lsn % 8 == 0 || lsn > 2900)
        .unwrap();
    assert_eq!(out2.generation, 2);
    assert_eq!(out2.compacted_end, 3002);
    assert_eq!(gen_dirs(dir.path()), vec!["gen-000002"]);
    let got: Vec<u64> = read_all(&log).iter().map(|r| r.0).collect();
    let expect2: Vec<u64> = expect
        .into_iter()
        .filter(|l| l % 8 == 0 || *l > 2900)
        .collect();
    assert_eq!(got, expect2);
    assert_eq!(log.append(b"y", Durability::Durable).unwrap(), 3002);
    drop(log);
    let v = verify(dir.path()).unwrap();
    assert!(v.is_clean(), "{:?}", v.bad);
    assert_eq!(v.generation, 2);
    assert_eq!(v.records as usize, got.len() + 1);
}

#[test]
fn a_failure_at_any_step_leaves_old_or_new_never_a_mix() {
    for (step, committed) in [
        (CompactionStep::SegmentsWritten, false),
        (CompactionStep::ManifestTmpWritten, false),
        (CompactionStep::ManifestRenamed, true),
        (CompactionStep::Committed, true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        filled(dir.path(), 2000).close().unwrap();
        let mut opts = small_opts();
        opts.faults.fail_compaction_at = Some(step);
        let (log, _) = Log::open(dir.path(), opts).unwrap();
        let all = read_all(&log);
        let e = log
            .compact_sealed(u64::MAX, &mut |lsn, _| lsn % 2 == 1)
            .unwrap_err();
        assert!(e.to_string().contains("injected"), "{e}");
        drop(log);
        let (log, rep) = Log::open(dir.path(), small_opts()).unwrap();
        let got = read_all(&log);
        if committed {
            assert_eq!(rep.generation, 1, "{step:?}");
            let sealed = log.stats().compacted_end;
            let expect: Vec<_> = all
                .iter()
                .filter(|(l, _)| *l >= sealed || l % 2 == 1)
                .cloned()
                .collect();
            assert_eq!(got, expect, "{step:?}");
            assert!(
                !rep.removed.is_empty(),
                "{step:?}: the old segments are cleaned up on open"
            );
        } else {
            assert_eq!(rep.generation, 0, "{step:?}");
            assert_eq!(got, all, "{step:?}");
            assert!(
                !rep.removed.is_empty(),
                "{step:?}: the unfinished generation is removed"
            );
            assert!(gen_dirs(dir.path()).is_empty());
        }
        assert!(!dir.path().join("MANIFEST.tmp").exists());
        assert_eq!(log.append(b"z", Durability::Durable).unwrap(), 2001);
        drop(log);
        assert!(verify(dir.path()).unwrap().is_clean(), "{step:?}");
    }
}

#[test]
fn nothing_sealed_means_nothing_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), LogOptions { ..small_opts() }).unwrap();
    log.append(b"a", Durability::Lazy).unwrap();
    let out = log.compact_sealed(u64::MAX, &mut |_, _| false).unwrap();
    assert_eq!(out.generation, 0);
    assert_eq!(out.records_dropped, 0);
    assert_eq!(read_all(&log).len(), 1);
}

/// A failure after the MANIFEST rename (e.g. the directory fsync) leaves
/// memory at generation N while the disk may be at N+1: the log must refuse
/// everything until reopened. Before, a retry in the same process deleted
/// the committed generation's directory as a "leftover".
#[test]
fn a_failure_after_the_manifest_rename_poisons_the_log_and_keeps_the_committed_generation() {
    let dir = tempfile::tempdir().unwrap();
    filled(dir.path(), 2000).close().unwrap();
    let mut opts = small_opts();
    opts.faults.fail_compaction_at = Some(CompactionStep::ManifestRenamed);
    let (log, _) = Log::open(dir.path(), opts).unwrap();
    let all = read_all(&log);
    let e = log
        .compact_sealed(u64::MAX, &mut |lsn, _| lsn % 2 == 1)
        .unwrap_err();
    assert!(e.to_string().contains("injected"), "{e}");
    assert_eq!(gen_dirs(dir.path()), vec!["gen-000001"]);
    let retry = log
        .compact_sealed(u64::MAX, &mut |lsn, _| lsn % 2 == 1)
        .unwrap_err();
    assert!(matches!(retry, LogError::FsyncFailed { .. }), "{retry}");
    let append = log.append(b"x", Durability::Lazy).unwrap_err();
    assert!(matches!(append, LogError::FsyncFailed { .. }), "{append}");
    assert_eq!(gen_dirs(dir.path()), vec!["gen-000001"]);
    drop(log);
    let (log, rep) = Log::open(dir.path(), small_opts()).unwrap();
    assert_eq!(rep.generation, 1);
    let sealed = log.stats().compacted_end;
    let expect: Vec<_> = all
        .iter()
        .filter(|(l, _)| *l >= sealed || l % 2 == 1)
        .cloned()
        .collect();
    assert_eq!(read_all(&log), expect);
    assert_eq!(log.append(b"z", Durability::Durable).unwrap(), 2001);
    drop(log);
    assert!(verify(dir.path()).unwrap().is_clean());
}

/// A generation directory this process did not commit (left by a failed
/// attempt, or by anything else) is never reused or deleted by a compaction.
#[test]
fn a_new_generation_is_numbered_above_every_one_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let log = filled(dir.path(), 2000);
    let stray = dir.path().join("gen-000003");
    fs::create_dir(&stray).unwrap();
    fs::write(stray.join("keep-me"), b"x").unwrap();
    let out = log
        .compact_sealed(u64::MAX, &mut |lsn, _| lsn % 2 == 1)
        .unwrap();
    assert_eq!(out.generation, 4);
    assert!(stray.join("keep-me").exists());
    drop(log);
    let (log, rep) = Log::open(dir.path(), small_opts()).unwrap();
    assert_eq!(rep.generation, 4);
    assert!(rep.removed.contains(&stray), "{:?}", rep.removed);
    assert_eq!(log.append(b"z", Durability::Durable).unwrap(), 2001);
}
