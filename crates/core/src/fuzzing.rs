//! In-memory entry points for the fuzz targets (`tests/fuzz/`) and their
//! stable replay test (`tests/fuzz_regressions.rs`): the parts of segment
//! recovery and snapshot loading that the store otherwise reaches only
//! through files. (The daemon's request framing and parsers are
//! `agentlog_server::fuzzing`.)
//!
//! **Not a stable API.** Hidden from the docs; it follows the internals it
//! exposes and may change or go away with them. Nothing here writes files.

use crate::log::recovery::{self, Hole, Scan, WalkStep};
use crate::log::segment::SegHeader;
use crate::snapshot::{SkipReason, HEADER_LEN};
use crate::store::SnapshotPayload;

/// Everything the scanners say about one segment image.
#[derive(Debug)]
pub struct SegmentReport {
    pub header: SegHeader,
    /// The sealed fast path's answer, when the footer is trusted.
    pub sealed: Option<Scan>,
    /// The record-by-record scan (what recovery on open uses).
    pub scan: Scan,
    /// The power-loss hole behind the scan's problem, if it is one.
    pub hole: Option<Hole>,
    /// `walk` (verify, salvage): valid records seen and bad stretches reported,
    /// each with its offset.
    pub walked: Vec<(usize, u64)>,
    pub bad: Vec<usize>,
    /// Where a reader beside a live writer stops, and the LSN after it.
    pub whole_batches: (usize, u64),
}

/// Runs every segment scanner over `bytes` (a whole segment file) with
/// `prev_lsn` the last LSN before it. `Err` is the header's refusal.
pub fn scan_segment(bytes: &[u8], prev_lsn: u64) -> Result<SegmentReport, &'static str> {
    let header = SegHeader::decode(bytes)?;
    let sealed = recovery::scan_sealed(bytes, &header, prev_lsn);
    let scan = recovery::scan(bytes, &header, prev_lsn);
    let hole = scan
        .problem
        .as_ref()
        .and_then(|p| recovery::power_loss_hole(bytes, &header, p));
    let (mut walked, mut bad) = (Vec::new(), Vec::new());
    recovery::walk(bytes, &header, prev_lsn, |e| match e {
        WalkStep::Record(w) => walked.push((w.offset, w.lsn)),
        WalkStep::Bad(offset, _, _) => bad.push(offset),
    });
    let start = crate::log::segment::SEG_HDR;
    let whole_batches = recovery::whole_batches_end(bytes, &header, start, header.first_lsn);
    Ok(SegmentReport {
        header,
        sealed,
        scan,
        hole,
        walked,
        bad,
        whole_batches,
    })
}

/// Checks and decodes the bytes of a snapshot file named for `name_lsn`, as
/// opening a store does.
pub fn decode_snapshot(bytes: &[u8], name_lsn: u64) -> Result<SnapshotPayload, SkipReason> {
    crate::snapshot::decode_file(bytes, name_lsn)
}

/// A snapshot file at `lsn` around an arbitrary `payload`, with a valid
/// header and checksum (so a fuzzer reaches the payload decoder).
pub fn snapshot_file(lsn: u64, payload: &[u8]) -> Vec<u8> {
    let mut file = vec![0u8; HEADER_LEN];
    file.extend_from_slice(payload);
    crate::snapshot::fill_header(&mut file, lsn);
    file
}
