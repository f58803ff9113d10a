//! The fuzz target bodies, shared by the cargo-fuzz targets
//! (`tests/fuzz/fuzz_targets/*.rs`, nightly) and the stable replay test
//! (`tests/fuzz_regressions.rs`), which runs every kept corpus and crash
//! file through them. Each body must never panic on any input; the
//! assertions in them are properties the code under test promises.

#![allow(dead_code)] // each fuzz target uses one body

use std::path::Path;

use agentlog::fuzzing::{decode_snapshot, scan_segment, snapshot_file};
use agentlog::internals::encode_record;
use agentlog::internals::{data_crc, SealFooter, SEAL_FOOTER};
use agentlog::internals::{SegHeader, SEG_HDR};
use agentlog::registry::{codec, State};
use agentlog::time::Timestamp;

/// A byte cursor that yields zeros once the input runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let (head, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        head
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Builds a segment image from a small program in `data` (valid records
/// with chosen LSNs and batch flags, raw bytes, bit flips, zero runs, an
/// optional seal footer), so most inputs get past the checksums, then runs
/// every scanner over it and checks what they agree on.
pub fn segment(data: &[u8]) {
    let mut input = Input(data);
    let flags = input.byte();
    let segment_id = u64::from(input.byte());
    let first_lsn = u64::from(input.byte()) + 1;
    let prev_lsn = first_lsn - 1 - u64::from(flags >> 6 & 1);
    let mut header = SegHeader::new(segment_id, first_lsn, flags & 1 != 0);
    header.version = 1 + u32::from(flags >> 1 & 3) % 3;
    let mut buf = header.encode().to_vec();
    let mut next = first_lsn;
    while !input.is_empty() {
        let op = input.byte();
        match op & 3 {
            0 => {
                let len = usize::from(input.byte()).max(1);
                let lsn = match op >> 2 & 3 {
                    0 => next,
                    1 => next + 1,
                    2 => next.saturating_sub(1),
                    _ => u64::from(input.byte()),
                };
                let payload = input.bytes(len).to_vec();
                if payload.is_empty() {
                    break;
                }
                buf.extend_from_slice(&encode_record(segment_id, lsn, op & 16 != 0, &payload));
                next = lsn + 1;
            }
            1 => {
                let n = usize::from(input.byte());
                buf.extend_from_slice(input.bytes(n));
            }
            2 => {
                let at = usize::from(u16::from_le_bytes([input.byte(), input.byte()]));
                let len = buf.len();
                buf[at % len] ^= 1 << (op >> 5);
            }
            _ => {
                let zeros = if op & 4 != 0 {
                    4096 - buf.len() % 4096
                } else {
                    8 * usize::from(op >> 3)
                };
                buf.resize(buf.len() + zeros, 0);
            }
        }
    }
    // An end marker's worth of zeros, then (flag bit 3) a seal footer over
    // the bytes so far, at the end of a page-rounded file.
    let used = buf.len();
    buf.resize((used + 16 + 7) & !7, 0);
    if flags & 8 != 0 {
        let footer = SealFooter {
            used: used as u64,
            first_lsn,
            last_lsn: next.saturating_sub(1),
            records: next.saturating_sub(first_lsn),
            data_crc: data_crc(segment_id, &buf[SEG_HDR.min(used)..used]),
        };
        let len = (buf.len() + SEAL_FOOTER + 4095) & !4095;
        buf.resize(len - SEAL_FOOTER, 0);
        buf.extend_from_slice(&footer.encode());
    }
    check_segment(&buf, prev_lsn);
}

/// The scanners' promises about one segment image.
pub fn check_segment(bytes: &[u8], prev_lsn: u64) {
    let Ok(r) = scan_segment(bytes, prev_lsn) else {
        return;
    };
    let scan = &r.scan;
    assert!(
        SEG_HDR <= scan.end && scan.end <= bytes.len() && scan.end % 8 == 0,
        "{scan:?}"
    );
    if let Some(p) = &scan.problem {
        assert!(
            scan.end <= p.offset && p.offset <= p.tail_end && p.tail_end <= bytes.len(),
            "{p:?}"
        );
        if !r.header.compacted() {
            // The LSN named is the one expected, never the damaged header's claim.
            let expected = scan.last_lsn.map_or(r.header.first_lsn, |l| l + 1);
            assert_eq!(p.lsn, Some(expected), "{p:?}");
        }
    }
    if let Some(h) = &r.hole {
        assert!(h.page % 4096 == 0 && h.page < bytes.len(), "{h:?}");
    }
    assert!(r.whole_batches.0 <= bytes.len());
    assert!(
        r.walked
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1),
        "walk went backwards"
    );
    if !r.header.compacted() {
        // walk (verify) and scan (recovery) agree on the valid prefix.
        let before_end = r.walked.iter().filter(|w| w.0 < scan.end).count() as u64;
        assert_eq!(before_end, scan.records, "walk and scan disagree");
        // A reader beside a writer stops where recovery would.
        assert_eq!(
            r.whole_batches.0, scan.end,
            "whole batches and scan disagree"
        );
    }
}

/// Decodes one event payload; whatever decodes re-encodes to an equal
/// event, and the fold applies any payload without panicking.
pub fn event(data: &[u8]) {
    if let Ok(ev) = codec::decode(data) {
        let again = codec::decode(&codec::encode(&ev)).expect("a re-encoded event decodes");
        assert_eq!(again, ev);
    }
    if let Ok(Some(hb)) = codec::decode_heartbeat(data) {
        assert!(
            codec::decode(data).is_ok(),
            "heartbeat {hb:?} decodes by hand only"
        );
    }
    let mut state = State::new(8);
    let _ = state.apply_payload(1, data);
}

/// Decodes a snapshot file as-is, and `data` as the payload of a file with
/// a valid header and checksum (what a fuzzer could not forge by itself).
pub fn snapshot(data: &[u8]) {
    let _ = decode_snapshot(data, 7);
    let _ = decode_snapshot(&snapshot_file(7, data), 7);
}

/// Parses a `registry.json`; what parses converts to events the fold applies.
pub fn import(data: &[u8]) {
    let Ok(parsed) = agentlog::import::parse_registry(data, Path::new("registry.json")) else {
        return;
    };
    let mut state = State::new(8);
    for (i, ev) in agentlog::import::to_events(parsed, Timestamp(1_800_000_000_000))
        .iter()
        .enumerate()
    {
        state.apply(i as u64 + 1, ev);
    }
}

/// The contract checker never panics, and a file it passes, the importer
/// (one of the readers it speaks for) accepts. One known difference (found
/// by this target, TESTING.md): the importer parses the optional times
/// `last_message_at` / `last_reconciled_at`, which the checker, like the
/// external readers, takes as free text.
pub fn check(data: &[u8]) {
    use agentlog::import::{ImportError, RowProblem};
    let problems = agentlog::check::check_bytes(data, None);
    let _ = agentlog::check::check_bytes(data, Some(4));
    if !problems.is_empty() {
        return;
    }
    match agentlog::import::parse_registry(data, Path::new("registry.json")) {
        Ok(_) => {}
        Err(ImportError::Row { problem, .. })
            if matches!(
                *problem,
                RowProblem::BadTime {
                    key: "last_message_at" | "last_reconciled_at",
                    ..
                }
            ) => {}
        Err(e) => panic!("check passed a file the importer refuses: {e}"),
    }
}

/// The daemon's request reader and parsers (PROTOCOL.md): the first byte
/// picks the line limit and the read buffer's width, the rest is what a
/// client sent. Frames respect the limit and never hold a `\n`; the
/// heartbeat hot path takes only what the general parser reads as the same
/// heartbeat, and its reply is byte for byte the general path's.
pub fn protocol(data: &[u8]) {
    use agentlog::fuzzing::{parse_request, request_frames, RequestFrame};
    use serde_json::{json, Value};
    let Some((&knobs, input)) = data.split_first() else {
        return;
    };
    let max = 16 + usize::from(knobs & 0x3f) * 16;
    let buffer = 1 + usize::from(knobs >> 6) * 37;
    let frames = request_frames(input, max, buffer);
    let mut consumed = 0;
    for frame in &frames {
        let RequestFrame::Line(line) = frame else {
            assert_eq!(
                frame,
                frames.last().unwrap(),
                "a connection ends at an over-long line"
            );
            continue;
        };
        assert!(line.len() <= max, "a line over the limit was taken");
        // (Only one `\r` before the terminator is dropped, so a line may
        // still end in one.)
        assert!(!line.contains(&b'\n'), "{line:?}");
        consumed += 1;
        let lsn = u64::from(knobs) * 1_000_003;
        let (general, hot) = parse_request(line, lsn);
        let Some(hot) = hot else {
            continue;
        };
        let (id, method, params) = general.expect("the hot path took a line the parser refuses");
        assert_eq!(method, "heartbeat");
        assert_eq!(id, hot.id);
        assert_eq!(params.get("name"), Some(&Value::String(hot.name.clone())));
        // A pid is a number or, as the CLI sends it, a decimal string.
        let pid = params.get("pid").and_then(|p| {
            p.as_u64().or_else(|| {
                p.as_str()
                    .and_then(|s| s.parse::<i64>().ok()?.try_into().ok())
            })
        });
        assert_eq!(pid, hot.pid.map(u64::from));
        assert_eq!(
            params.get("durable") == Some(&Value::Bool(true)),
            hot.durable
        );
        assert_eq!(params.contains_key("at"), hot.at.is_some());
        let mut general_reply =
            serde_json::to_vec(&json!({"id": id, "result": {"agent": hot.name, "lsn": lsn}}))
                .unwrap();
        general_reply.push(b'\n');
        assert_eq!(hot.reply, general_reply, "hot and general replies differ");
    }
    // Every `\n` ends a frame, so no terminated line was lost or merged.
    if !matches!(frames.last(), Some(RequestFrame::TooLong)) {
        let terminated = input.iter().filter(|&&b| b == b'\n').count();
        let unterminated = usize::from(input.last().is_some_and(|&b| b != b'\n'));
        assert_eq!(consumed, terminated + unterminated, "frames lost or merged");
    }
}
