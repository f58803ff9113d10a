//! In-memory entry points for the fuzz targets (`tests/fuzz/`) and their
//! stable replay test (`tests/fuzz_regressions.rs`): the parts of segment
//! recovery and snapshot loading that the store otherwise reaches only
//! through files, and the daemon's request framing and parsers, which it
//! otherwise reaches only through a socket.
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

/// One frame of the daemon's line reader: a request line (terminator and
/// a trailing `\r` removed), or the over-long line that closes a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestFrame {
    Line(Vec<u8>),
    TooLong,
}

/// Splits `input` into request lines as a connection reads it, with lines
/// limited to `max` bytes and the reader's buffer `buffer` bytes wide (so
/// lines straddle buffer refills). Stops after an over-long line, as the
/// connection does.
pub fn request_frames(input: &[u8], max: usize, buffer: usize) -> Vec<RequestFrame> {
    use crate::daemon::frame::{read_line, Frame};
    use std::future::Future;
    let mut reader = tokio::io::BufReader::with_capacity(buffer.max(1), input);
    let mut frames = Vec::new();
    let mut line = Vec::new();
    // Reading a byte slice never waits, so one poll of each future suffices.
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        let frame = {
            let mut next = std::pin::pin!(read_line(&mut reader, &mut line, max));
            match next.as_mut().poll(&mut cx) {
                std::task::Poll::Ready(frame) => frame.expect("a slice reader does not fail"),
                std::task::Poll::Pending => unreachable!("a slice reader is always ready"),
            }
        };
        match frame {
            Frame::Line => frames.push(RequestFrame::Line(line.clone())),
            Frame::TooLong => {
                frames.push(RequestFrame::TooLong);
                return frames;
            }
            Frame::Eof => return frames,
        }
    }
}

/// What the general request parser made of a line: `(id, method, params)`,
/// or `(id, error code)`.
pub type ParsedRequest = Result<
    (
        serde_json::Value,
        String,
        serde_json::Map<String, serde_json::Value>,
    ),
    (serde_json::Value, String),
>;

/// What the heartbeat decoder took from a line, and the plain reply the
/// daemon writes for it at `reply_lsn`.
#[derive(Debug)]
pub struct HotRequest {
    pub id: serde_json::Value,
    pub name: String,
    pub pid: Option<u32>,
    pub at: Option<crate::time::Timestamp>,
    pub durable: bool,
    pub reply: Vec<u8>,
}

/// Runs one request line through the daemon's general parser and its
/// heartbeat decoder (`src/daemon/heartbeat.rs`).
pub fn parse_request(line: &[u8], reply_lsn: u64) -> (ParsedRequest, Option<HotRequest>) {
    use crate::daemon::conn;
    let general = conn::parse(line)
        .map(|r| (r.id, r.method, r.params))
        .map_err(|(id, e)| (id, e.code));
    let hot = crate::daemon::heartbeat::HeartbeatLine::decode(line).map(|hb| {
        let mut reply = Vec::new();
        crate::daemon::heartbeat::write_result(&hb.id, &hb.params.name, reply_lsn, &mut reply);
        HotRequest {
            id: hb.id.clone(),
            name: hb.params.name.to_string(),
            pid: hb.params.pid,
            at: hb.params.at,
            durable: hb.params.durable,
            reply,
        }
    });
    (general, hot)
}
