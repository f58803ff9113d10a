//! Recovery on real files: torn tails at every byte, garbage after the
//! last record, every bit flipped, recovery modes, batch atomicity.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::copy_dir;
use crate::support::log::*;
use agentlog::log::{Durability, Log, LogOptions, RecoveryMode};
use agentlog::LogError;

/// A one-segment log: records 1..=n-2 single, then a batch of the last two.
/// Returns (dir contents as (name, bytes), payloads, batch-end offsets per LSN).
struct Base {
    seg_name: String,
    seg: Vec<u8>,
    payloads: Vec<Vec<u8>>,
    /// For each LSN (index lsn-1): the end offset of the batch containing it.
    batch_end: Vec<usize>,
    /// Start offset of each record.
    start: Vec<usize>,
}

fn opts(seg: u64) -> LogOptions {
    LogOptions {
        segment_size: seg,
        max_record_size: 1024,
        flush_interval: None,
        prepare_ahead: false,
        ..Default::default()
    }
}

fn build_base(dir: &Path, n: u64, seg_size: u64) -> Base {
    let (log, _) = Log::open(dir, opts(seg_size)).unwrap();
    let mut payloads = Vec::new();
    let mut start = Vec::new();
    let mut off = 64;
    for lsn in 1..=n - 2 {
        let p = payload(lsn)[..(lsn as usize % 40) + 1].to_vec();
        log.append(&p, Durability::Lazy).unwrap();
        start.push(off);
        off += rec_size(p.len());
        payloads.push(p);
    }
    let a = payload(n - 1)[..17].to_vec();
    let b = payload(n)[..9].to_vec();
    log.append_batch(&[&a, &b], Durability::Lazy).unwrap();
    start.push(off);
    off += rec_size(a.len());
    start.push(off);
    payloads.push(a);
    payloads.push(b);
    log.close().unwrap();
    // A batch is intact once its last record's payload is (padding is zeros anyway).
    let mut batch_end: Vec<usize> = (0..n as usize)
        .map(|i| start[i] + 16 + payloads[i].len())
        .collect();
    batch_end[n as usize - 2] = batch_end[n as usize - 1];
    let segs = main_segments(dir);
    assert_eq!(segs.len(), 1);
    Base {
        seg_name: segs[0].file_name().unwrap().to_str().unwrap().to_string(),
        seg: fs::read(&segs[0]).unwrap(),
        payloads,
        batch_end,
        start,
    }
}

fn reset(dir: &Path, base: &Base, seg: &[u8]) -> PathBuf {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            fs::remove_dir_all(&p).unwrap();
        } else {
            fs::remove_file(&p).unwrap();
        }
    }
    let p = dir.join(&base.seg_name);
    fs::write(&p, seg).unwrap();
    p
}

fn records(log: &Log) -> Vec<Vec<u8>> {
    read_all(log).into_iter().map(|(_, p)| p).collect()
}

#[test]
fn torn_tail_at_every_byte_of_the_last_three_records() {
    let tmp = fast_tempdir();
    let build = tmp.path().join("base");
    let base = build_base(&build, 12, 8192);
    let dir = tmp.path().join("t");
    fs::create_dir_all(&dir).unwrap();
    let n = base.payloads.len();
    let from = base.start[n - 3];
    let to = base.start[n - 1] + rec_size(base.payloads[n - 1].len());
    for zero_instead in [false, true] {
        for cut in from..to {
            let mut seg = base.seg.clone();
            if zero_instead {
                seg[cut..].fill(0);
            } else {
                seg.truncate(cut);
            }
            let p = reset(&dir, &base, &seg);
            let (log, rep) =
                Log::open(&dir, opts(8192)).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            let keep = base.batch_end.iter().filter(|&&e| e <= cut).count();
            let got = records(&log);
            assert_eq!(got, base.payloads[..keep].to_vec(), "cut at {cut}");
            // Something nonzero was cut away iff the cut is past the kept data.
            let kept_end = if keep == 0 {
                64
            } else {
                base.start[keep - 1] + rec_size(base.payloads[keep - 1].len())
            };
            assert_eq!(
                rep.cut.len(),
                usize::from(cut > kept_end),
                "cut at {cut}: {rep:?}"
            );
            if let Some(c) = rep.cut.first() {
                assert_eq!(c.offset as usize, kept_end);
                assert_eq!(c.lsn, Some(keep as u64 + 1));
                assert!(c.broken_copy.exists());
                assert_eq!(c.segment, p);
            }
            // Appending continues right after the kept records.
            assert_eq!(
                log.append(b"next", Durability::Durable).unwrap(),
                keep as u64 + 1
            );
            drop(log);
            let (log, rep) = Log::open(&dir, opts(8192)).unwrap();
            assert!(rep.cut.is_empty());
            let got = records(&log);
            assert_eq!(got.len(), keep + 1);
            assert_eq!(got[keep], b"next");
        }
    }
}

#[test]
fn garbage_after_the_last_record_never_validates() {
    let tmp = fast_tempdir();
    // Two segments so there is an older segment's bytes to copy.
    let src = tmp.path().join("src");
    let (log, _) = Log::open(&src, opts(8192)).unwrap();
    let mut lsn = 0;
    while main_segments(&src).len() < 2 {
        lsn = log.append(&payload(lsn + 1), Durability::Lazy).unwrap();
    }
    log.close().unwrap();
    let segs = main_segments(&src);
    let old = fs::read(&segs[0]).unwrap();
    let newest = fs::read(&segs[1]).unwrap();
    let (log, _) = Log::open(&src, opts(8192)).unwrap();
    let expect = read_all(&log);
    let end = {
        let s = log.stats();
        assert_eq!(s.last_lsn, Some(lsn));
        // End of data in the newest segment = 64 + its records.
        let newest_first = expect.iter().position(|(l, _)| {
            *l == segs[1].file_name().unwrap().to_str().unwrap()[..20]
                .parse::<u64>()
                .unwrap()
        });
        64 + expect[newest_first.unwrap()..]
            .iter()
            .map(|(_, p)| rec_size(p.len()))
            .sum::<usize>()
    };
    drop(log);
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let random: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("zeros", vec![0u8; 4096]),
        ("random", random),
        ("older segment", old[64..64 + 4096].to_vec()),
        ("older segment, shifted", old[72..72 + 4096].to_vec()),
    ];
    for (name, garbage) in cases {
        for mode in [RecoveryMode::TolerateTail, RecoveryMode::Absolute] {
            let dir = tmp.path().join(format!("{name}-{mode:?}"));
            copy_dir(&src, &dir);
            let mut seg = newest.clone();
            let room = seg.len() - end;
            let g = &garbage[..room.min(garbage.len())];
            seg[end..end + g.len()].copy_from_slice(g);
            fs::write(dir.join(segs[1].file_name().unwrap()), &seg).unwrap();
            let o = LogOptions {
                recovery: mode,
                ..opts(8192)
            };
            match Log::open(&dir, o) {
                Ok((log, rep)) => {
                    assert_eq!(read_all(&log), expect, "{name} {mode:?}");
                    let nonzero = g.iter().any(|&b| b != 0);
                    assert_eq!(rep.cut.len(), usize::from(nonzero), "{name} {mode:?}");
                    assert!(
                        mode == RecoveryMode::TolerateTail || !nonzero,
                        "{name}: Absolute must refuse"
                    );
                    assert_eq!(log.append(b"x", Durability::Durable).unwrap(), lsn + 1);
                }
                Err(e) => {
                    assert_eq!(mode, RecoveryMode::Absolute, "{name}: {e}");
                    assert!(matches!(e, LogError::Corrupt { .. }), "{e}");
                }
            }
        }
    }
}

#[test]
fn every_bit_flip_is_detected() {
    let tmp = fast_tempdir();
    let build = tmp.path().join("base");
    let base = build_base(&build, 8, 8192);
    let dir = tmp.path().join("f");
    fs::create_dir_all(&dir).unwrap();
    let n = base.payloads.len();
    let data_end = base.start[n - 1] + rec_size(base.payloads[n - 1].len());
    let tail_start = base.start[n - 1]; // the last record (its batch is cut whole)
    let (mut refused, mut cut_tail, mut cut_garbage) = (0, 0, 0);
    // Every bit of the used area, plus the end marker and a stretch of zeros after it.
    for byte in 0..data_end + 64 {
        for bit in 0..8 {
            let mut seg = base.seg.clone();
            seg[byte] ^= 1 << bit;
            reset(&dir, &base, &seg);
            let res = Log::open(&dir, opts(8192));
            if byte < 64 || byte < tail_start {
                // Header or a non-tail record: must be refused.
                match res {
                    Err(LogError::Corrupt { ref segment, .. }) => {
                        assert!(segment.ends_with(&base.seg_name));
                        refused += 1;
                    }
                    Err(e) => panic!("byte {byte} bit {bit}: unexpected error {e}"),
                    Ok((log, _)) => panic!(
                        "byte {byte} bit {bit}: accepted {} records",
                        records(&log).len()
                    ),
                }
                continue;
            }
            let (log, rep) = res.unwrap_or_else(|e| panic!("byte {byte} bit {bit}: {e}"));
            let got = records(&log);
            assert!(
                got.len() <= n && got[..] == base.payloads[..got.len()],
                "byte {byte} bit {bit}"
            );
            if byte < data_end {
                assert_eq!(
                    got.len(),
                    n - 2,
                    "tail batch damaged at byte {byte} must be cut whole"
                );
                cut_tail += 1;
            } else {
                assert_eq!(got.len(), n, "byte {byte}");
                cut_garbage += 1;
            }
            assert_eq!(
                rep.cut.len(),
                1,
                "byte {byte} bit {bit}: flip must be detected"
            );
        }
    }
    eprintln!("bit flips: {refused} refused, {cut_tail} tail cuts, {cut_garbage} garbage cuts");
    assert_eq!(refused + cut_tail + cut_garbage, (data_end + 64) * 8);
}

#[test]
fn batches_recover_whole_or_not_at_all() {
    let tmp = fast_tempdir();
    let dir = tmp.path().join("b");
    let (log, _) = Log::open(&dir, opts(65536)).unwrap();
    log.append(b"single", Durability::Lazy).unwrap();
    let big: Vec<Vec<u8>> = (0..5).map(|i| vec![i as u8 + 1; 100]).collect();
    let refs: Vec<&[u8]> = big.iter().map(|v| v.as_slice()).collect();
    assert_eq!(log.append_batch(&refs, Durability::Durable).unwrap(), 2..=6);
    log.close().unwrap();
    let seg = main_segments(&dir)[0].clone();
    let bytes = fs::read(&seg).unwrap();
    // Cut inside the 4th record of the batch: the whole batch goes.
    let cut = 64 + rec_size(6) + 3 * rec_size(100) + 40;
    let mut b = bytes.clone();
    b[cut..].fill(0);
    fs::write(&seg, &b).unwrap();
    let (log, rep) = Log::open(&dir, opts(65536)).unwrap();
    assert_eq!(records(&log), vec![b"single".to_vec()]);
    assert_eq!(rep.cut[0].lsn, Some(2));
    assert!(rep.cut[0].reason.contains("batch"), "{}", rep.cut[0].reason);
    // A batch whose last record is missing entirely is cut as well (Absolute refuses).
    drop(log);
    let mut b = bytes.clone();
    let last = 64 + rec_size(6) + 4 * rec_size(100);
    b[last..].fill(0);
    fs::write(&seg, &b).unwrap();
    let e = Log::open(
        &dir,
        LogOptions {
            recovery: RecoveryMode::Absolute,
            ..opts(65536)
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("unterminated batch"), "{e}");
    let (log, _) = Log::open(&dir, opts(65536)).unwrap();
    assert_eq!(records(&log).len(), 1);
}

#[test]
fn damage_in_a_sealed_segment_is_corruption() {
    let tmp = fast_tempdir();
    let dir = tmp.path().join("s");
    let (log, _) = Log::open(&dir, opts(8192)).unwrap();
    while main_segments(&dir).len() < 3 {
        log.append(&payload(log.next_lsn()), Durability::Lazy)
            .unwrap();
    }
    let all = read_all(&log);
    log.close().unwrap();
    let segs = main_segments(&dir);
    let orig = fs::read(&segs[0]).unwrap();
    let second: u64 = segs[1].file_name().unwrap().to_str().unwrap()[..20]
        .parse()
        .unwrap();
    let offsets: Vec<usize> = all[..second as usize - 1]
        .iter()
        .scan(64, |off, (_, p)| {
            let o = *off;
            *off += rec_size(p.len());
            Some(o)
        })
        .collect();
    // A damaged record in the middle of a sealed segment.
    let mut b = orig.clone();
    b[offsets[3] + 20] ^= 0x40;
    fs::write(&segs[0], &b).unwrap();
    let e = Log::open(&dir, opts(8192)).unwrap_err();
    match &e {
        LogError::Corrupt {
            segment,
            offset,
            lsn,
            ..
        } => {
            assert_eq!(segment, &segs[0]);
            assert_eq!(*offset as usize, offsets[3]);
            assert_eq!(*lsn, Some(4));
        }
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains("sealed"), "{e}");
    // The last record of a sealed segment zeroed: looks like a clean end there,
    // but the next segment does not connect, so open refuses.
    let mut b = orig.clone();
    let last = *offsets.last().unwrap();
    b[last..].fill(0);
    fs::write(&segs[0], &b).unwrap();
    let e = Log::open(&dir, opts(8192)).unwrap_err();
    assert!(e.to_string().contains("records missing"), "{e}");
    fs::write(&segs[0], &orig).unwrap();
    assert_eq!(read_all_from(&dir, opts(8192)), all);
}

fn read_all_from(dir: &Path, o: LogOptions) -> Vec<(u64, Vec<u8>)> {
    let (log, _) = Log::open(dir, o).unwrap();
    read_all(&log)
}

/// After a power loss with lazy appends, a page that never reached the disk
/// leaves a zero hole with valid records behind it. The default mode
/// refuses that (valid records after damage); `CutAtHole` cuts at the hole,
/// keeps the rest in `.broken` and says which LSNs it dropped.
#[test]
fn power_loss_hole_is_cut_in_cut_at_hole_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), small_opts()).unwrap();
    for lsn in 1..=150u64 {
        log.append(&payload(lsn), Durability::Lazy).unwrap();
    }
    log.close().unwrap();
    let seg = main_segments(dir.path()).pop().unwrap();
    let mut bytes = fs::read(&seg).unwrap();
    // The first record that starts inside or reaches into page 1.
    let mut off = 64;
    let mut lsn = 1u64;
    while off + rec_size(payload(lsn).len()) <= 4096 {
        off += rec_size(payload(lsn).len());
        lsn += 1;
    }
    let first_lost = lsn;
    bytes[4096..8192].fill(0);
    fs::write(&seg, &bytes).unwrap();

    match Log::open(dir.path(), small_opts()) {
        Err(LogError::Corrupt { lsn, .. }) => assert_eq!(lsn, Some(first_lost)),
        other => panic!("the default mode must refuse a hole: {other:?}"),
    }
    let hole_opts = LogOptions {
        recovery: RecoveryMode::CutAtHole,
        ..small_opts()
    };
    let (log, rep) = Log::open(dir.path(), hole_opts).unwrap();
    assert_eq!(rep.cut.len(), 1, "{rep:?}");
    let cut = &rep.cut[0];
    assert_eq!(cut.lsn, Some(first_lost));
    assert!(
        cut.reason
            .contains("power-loss hole (zero page at offset 4096)"),
        "{}",
        cut.reason
    );
    assert!(
        cut.reason.contains("..=150)"),
        "names the dropped LSNs: {}",
        cut.reason
    );
    assert!(cut.broken_copy.exists());
    let kept: Vec<u64> = read_all(&log).into_iter().map(|(l, _)| l).collect();
    assert_eq!(kept, (1..first_lost).collect::<Vec<_>>());
    assert_eq!(
        log.append(b"next", Durability::Durable).unwrap(),
        first_lost
    );
    log.close().unwrap();
    // Nothing is left to cut: the default mode opens it again.
    let (log, rep) = Log::open(dir.path(), small_opts()).unwrap();
    assert!(rep.cut.is_empty());
    assert_eq!(log.last_lsn(), Some(first_lost));
    log.close().unwrap();
}

/// Options of a short-lived writer (the one-shot CLI): quick open, no
/// background threads.
fn quick(seg: u64) -> LogOptions {
    LogOptions {
        segment_size: seg,
        max_record_size: 1024,
        ..LogOptions::short_lived()
    }
}

/// Appends records `from..=to` (payload by LSN) lazily, then syncs.
fn append_range(log: &Log, from: u64, to: u64) {
    for lsn in from..=to {
        assert_eq!(log.append(&payload(lsn), Durability::Lazy).unwrap(), lsn);
    }
    log.sync().unwrap();
}

/// A clean close leaves the tail hint; a later writer that appends past it
/// and crashes (no close, so the hint is stale) must not hide its records:
/// a quick open resumes at the hint and scans on, finds them, and cuts the
/// torn record it left after them, exactly as a full open does.
#[test]
fn records_past_the_tail_hint_and_a_torn_tail_after_them_are_found() {
    let tmp = tempfile::tempdir().unwrap(); // ext4 or the like: FIEMAP is used
    let dir = tmp.path().join("log");
    let (log, _) = Log::open(&dir, quick(1 << 20)).unwrap();
    assert!(
        !log.has_background_thread(),
        "a short-lived writer starts no thread"
    );
    append_range(&log, 1, 300);
    log.close().unwrap();
    assert!(
        dir.join("TAIL").exists(),
        "a clean close leaves the tail hint"
    );
    let hint = fs::read(dir.join("TAIL")).unwrap();

    let (log, rep) = Log::open(&dir, quick(1 << 20)).unwrap();
    assert_eq!((rep.records, log.last_lsn()), (300, Some(300)));
    append_range(&log, 301, 450);
    drop(log); // a crash: no close, the hint still says 300
    assert_eq!(fs::read(dir.join("TAIL")).unwrap(), hint);
    // A torn write after them: a payload whose header never made it.
    let seg = main_segments(&dir).pop().unwrap();
    let bytes = fs::read(&seg).unwrap();
    let end = {
        let (log, _) = Log::open(
            &dir,
            LogOptions {
                quick_open: false,
                ..quick(1 << 20)
            },
        )
        .unwrap();
        let e = log.stats().bytes as usize;
        drop(log);
        e
    };
    let mut torn = bytes.clone();
    torn[end + 16..end + 40].fill(0xab);
    let full = tmp.path().join("full");
    copy_dir(&dir, &full);
    fs::write(&seg, &torn).unwrap();
    fs::write(full.join(seg.file_name().unwrap()), &torn).unwrap();

    let (log, rep) = Log::open(&dir, quick(1 << 20)).unwrap();
    assert_eq!(log.last_lsn(), Some(450), "records past the hint are found");
    assert_eq!(rep.records, 450);
    assert_eq!(
        rep.cut.len(),
        1,
        "the torn tail past them is cut: {:?}",
        rep.cut
    );
    assert_eq!(rep.cut[0].offset as usize, end);
    let all = read_all(&log);
    assert_eq!(all.len(), 450);
    assert!(all.iter().all(|(l, p)| *p == payload(*l)));
    assert_eq!(log.append(b"next", Durability::Durable).unwrap(), 451);
    log.close().unwrap();

    // A full open of the same damage agrees.
    let (log, rep) = Log::open(&full, opts(1 << 20)).unwrap();
    assert_eq!((log.last_lsn(), rep.cut.len()), (Some(450), 1));
}

/// The hint is advice: damaged, stale (another segment), or pointing at a
/// place where its last record is not, it is ignored and the segment is
/// scanned whole.
#[test]
fn a_damaged_stale_or_misplaced_tail_hint_is_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let (log, _) = Log::open(&dir, quick(1 << 20)).unwrap();
    append_range(&log, 1, 100);
    log.close().unwrap();
    let good = fs::read(dir.join("TAIL")).unwrap();
    let mut variants: Vec<Vec<u8>> = Vec::new();
    for i in [0, 9, 17, 33, 41, 49, 57, good.len() - 1] {
        let mut b = good.clone();
        b[i] ^= 0x04; // any flipped bit: the hint's CRC fails
        variants.push(b);
    }
    variants.push(good[..good.len() - 3].to_vec());
    variants.push(Vec::new());
    for v in variants {
        fs::write(dir.join("TAIL"), &v).unwrap();
        let (log, rep) = Log::open(&dir, quick(1 << 20)).unwrap();
        assert_eq!((rep.records, log.last_lsn()), (100, Some(100)));
        assert_eq!(read_all(&log).len(), 100);
        drop(log);
    }
    // A hint from an older close (stale, the log went on): the scan resumes
    // there and finds the rest.
    fs::write(dir.join("TAIL"), &good).unwrap();
    let (log, _) = Log::open(&dir, opts(1 << 20)).unwrap();
    append_range(&log, 101, 130);
    drop(log);
    let (log, rep) = Log::open(&dir, quick(1 << 20)).unwrap();
    assert_eq!((rep.records, log.last_lsn()), (130, Some(130)));
    // After a rotation the hint names a sealed segment: not the newest.
    log.seal_active().unwrap();
    log.append(b"in the next segment", Durability::Durable)
        .unwrap();
    drop(log);
    fs::write(dir.join("TAIL"), &good).unwrap();
    let (log, rep) = Log::open(&dir, quick(1 << 20)).unwrap();
    assert_eq!((rep.records, log.last_lsn()), (131, Some(131)));
}

/// A one-segment log of records `1..=n` closed by a short-lived writer
/// (so it has a tail hint): its temp dir, log folder and segment file.
fn closed_quick_log(n: u64) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let (log, _) = Log::open(&dir, quick(1 << 20)).unwrap();
    append_range(&log, 1, n);
    log.close().unwrap();
    let seg = main_segments(&dir).pop().unwrap();
    (tmp, dir, seg)
}

/// A quick open trusts the records the hint vouches for without reading
/// them: damage there is found when they are read (naming the LSN expected
/// there), by `verify`, and by a full open, never folded silently.
#[test]
fn damage_below_the_tail_hint_is_found_when_read() {
    let (_tmp, dir, seg) = closed_quick_log(200);
    let mut bytes = fs::read(&seg).unwrap();
    let off = offset_of(50);
    bytes[off + 8] ^= 0x01; // lsn 50's LSN field
    fs::write(&seg, &bytes).unwrap();

    let (log, rep) = Log::open(&dir, quick(1 << 20)).unwrap();
    assert_eq!(rep.last_lsn, Some(200), "the hint vouches for the prefix");
    let err = log
        .view()
        .iter()
        .find_map(|r| r.err())
        .expect("damage found");
    match &err {
        LogError::Corrupt { offset, lsn, .. } => {
            assert_eq!((*offset as usize, *lsn), (off, Some(50)), "{err}");
        }
        other => panic!("{other}"),
    }
    drop(log);
    assert!(!agentlog::log::verify(&dir).unwrap().is_clean());
    let e = Log::open(&dir, opts(1 << 20)).unwrap_err();
    assert!(matches!(e, LogError::Corrupt { .. }), "{e}");
}

/// A view starting mid-segment uses the sparse index the hint carries and
/// still yields exactly the records from the asked LSN on.
#[test]
fn a_quick_open_reads_from_any_lsn_by_the_hinted_index() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let (log, _) = Log::open(&dir, quick(8 << 20)).unwrap();
    append_range(&log, 1, 20_000);
    log.close().unwrap();
    let (log, _) = Log::open(&dir, quick(8 << 20)).unwrap();
    for from in [1, 2, 4_999, 10_000, 19_999, 20_000] {
        let got: Vec<u64> = log
            .view()
            .iter_from(from)
            .take(3)
            .map(|r| r.unwrap().lsn)
            .collect();
        let want: Vec<u64> = (from..=20_000).take(3).collect();
        assert_eq!(got, want, "from {from}");
    }
    let view = log.view();
    let r = view.iter_from(12_345).next().unwrap().unwrap();
    assert_eq!(r.payload, payload(12_345).as_slice());
}

/// A read from an LSN steps over the records before it (the caller's base,
/// a snapshot, holds their effect): their framing and LSN sequence are
/// checked, their checksums are not, so damage to such a payload does not
/// stop a one-shot open's fold after its snapshot, while the record itself
/// is still refused when read. A misframed record (a damaged length) breaks
/// the sequence and is refused either way.
#[test]
fn a_read_from_an_lsn_steps_over_the_records_before_it_without_their_checksums() {
    let (_tmp, dir, seg) = closed_quick_log(300);
    let clean = fs::read(&seg).unwrap();
    let at = offset_of(50);
    assert_eq!(
        u64::from_le_bytes(clean[at + 8..at + 16].try_into().unwrap()),
        50
    );

    let mut bad_payload = clean.clone();
    bad_payload[at + 16] ^= 0x01;
    fs::write(&seg, &bad_payload).unwrap();
    let (log, _) = Log::open(&dir, quick(1 << 20)).unwrap();
    let first_error = |log: &Log, from| log.view().iter_from(from).find_map(Result::err);
    let lsns: Vec<u64> = log.view().iter_from(60).map(|r| r.unwrap().lsn).collect();
    assert_eq!(lsns, (60..=300).collect::<Vec<_>>());
    let err = first_error(&log, 50).expect("record 50, read, is checked");
    assert!(err.to_string().contains("checksum mismatch"), "{err}");
    drop(log);

    let mut bad_length = clean;
    bad_length[at] ^= 0x08; // its payload 8 bytes longer: the next header is misread
    fs::write(&seg, &bad_length).unwrap();
    let (log, _) = Log::open(&dir, quick(1 << 20)).unwrap();
    let err = first_error(&log, 60).expect("a misframed record before the start is refused");
    assert!(matches!(err, LogError::Corrupt { .. }), "{err}");
}
