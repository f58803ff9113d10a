//! Seal footers (FORMAT.md "Seal footer"): sealed segments are checked by
//! one CRC pass on open and verify, every damage to a sealed segment or its
//! footer is still refused, and a crash between sealing a segment and
//! installing its successor reopens cleanly.

use crate::support::copy_dir;
use crate::support::log::{fast_tempdir, main_segments, payload, read_all, small_opts};
use agentlog::internals::{footer_offset, SealFooter, SEAL_FOOTER};
use agentlog::log::{verify, Durability, Log};
use agentlog::LogError;
use std::path::Path;

/// A closed log of `n` records spread over several small segments.
fn build(dir: &Path, n: u64) -> Vec<(u64, Vec<u8>)> {
    let (log, _) = Log::open(dir, small_opts()).unwrap();
    for lsn in 1..=n {
        assert_eq!(log.append(&payload(lsn), Durability::Lazy).unwrap(), lsn);
    }
    let all = read_all(&log);
    log.close().unwrap();
    assert!(main_segments(dir).len() >= 3, "want sealed segments");
    all
}

fn footer_of(seg: &Path) -> (SealFooter, usize) {
    let bytes = std::fs::read(seg).unwrap();
    let pos = bytes.len() - SEAL_FOOTER;
    (
        SealFooter::decode(&bytes[pos..]).expect("sealed segment ends with a footer"),
        pos,
    )
}

#[test]
fn sealed_segments_carry_a_footer_that_matches_their_records() {
    let d = fast_tempdir();
    let all = build(d.path(), 2_000);
    let segs = main_segments(d.path());
    let mut next = 1;
    for seg in &segs[..segs.len() - 1] {
        let (f, pos) = footer_of(seg);
        assert_eq!(pos, footer_offset(f.used as usize));
        assert_eq!(f.first_lsn, next, "{}", seg.display());
        assert_eq!(f.records, f.last_lsn - f.first_lsn + 1);
        next = f.last_lsn + 1;
    }
    let rep = verify(d.path()).unwrap();
    assert!(rep.is_clean(), "{:?}", rep.bad);
    assert_eq!(rep.records, 2_000);
    assert_eq!((rep.first_lsn, rep.last_lsn), (Some(1), Some(2_000)));
    let (log, r) = Log::open(d.path(), small_opts()).unwrap();
    assert_eq!(r.records, 2_000);
    assert_eq!(read_all(&log), all);
}

#[test]
fn every_bit_flip_in_a_sealed_footer_or_its_records_is_refused() {
    let base = fast_tempdir();
    build(base.path(), 1_500);
    let seg = main_segments(base.path())[0].clone();
    let name = seg.file_name().unwrap().to_owned();
    let (f, pos) = footer_of(&seg);
    // Every bit of the footer, and a sample of bits in the records it covers.
    let mut offsets: Vec<usize> = (pos * 8..(pos + SEAL_FOOTER) * 8).collect();
    offsets.extend((64 * 8..f.used as usize * 8).step_by(997));
    for bit in offsets {
        let d = fast_tempdir();
        copy_dir(base.path(), d.path());
        let p = d.path().join(&name);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[bit / 8] ^= 1 << (bit % 8);
        std::fs::write(&p, &bytes).unwrap();
        match Log::open(d.path(), small_opts()) {
            Err(LogError::Corrupt { segment, .. }) => assert_eq!(segment, p, "bit {bit}"),
            Err(e) => panic!("bit {bit}: unexpected error {e}"),
            Ok(_) => panic!("bit {bit} of a sealed segment flipped and the log opened"),
        }
        let rep = verify(d.path()).unwrap();
        assert!(!rep.is_clean(), "verify missed bit {bit}");
    }
}

#[test]
fn crash_after_sealing_before_the_next_segment_reopens_and_continues() {
    let d = fast_tempdir();
    build(d.path(), 1_200);
    // The state a crash between `seal` and installing the successor leaves:
    // the newest file on disk is a sealed (trimmed, footed) segment.
    let segs = main_segments(d.path());
    std::fs::remove_file(segs.last().unwrap()).unwrap();
    let (f, _) = footer_of(&segs[segs.len() - 2]);
    let (log, rep) = Log::open(d.path(), small_opts()).unwrap();
    assert!(rep.cut.is_empty(), "nothing torn: {:?}", rep.cut);
    assert_eq!(log.last_lsn(), Some(f.last_lsn));
    let next = log.append(b"after the crash", Durability::Durable).unwrap();
    assert_eq!(next, f.last_lsn + 1);
    log.close().unwrap();
    let (log, _) = Log::open(d.path(), small_opts()).unwrap();
    let all = read_all(&log);
    assert_eq!(all.len() as u64, f.last_lsn + 1);
    assert_eq!(all.last().unwrap().1, b"after the crash");
    assert!(verify(d.path()).unwrap().is_clean());
}
