//! Scanning segments: where the valid data ends and what lies after it.
//!
//! `scan` walks a segment from its header, checking every record (CRC, LSN
//! sequence, padding) and batch boundaries. It returns the offset after the
//! last whole batch and, if anything but zeros follows, a `Problem`
//! classified as a **torn tail** (nothing valid follows the first bad offset:
//! a crash mid-write) or **corruption** (a valid record of this segment follows
//! a bad one, or a valid record is out of sequence). `walk` is the
//! resynchronising variant used by verify and salvage: it reports every bad
//! stretch and keeps going from the next valid record.

use super::record::u64_at;
use super::record::{all_zero, last_nonzero, parse_at, Parsed, CONT, LEN_MASK, REC_HDR};
use super::seal::SealFooter;
use super::segment::{SegHeader, SEG_HDR};
use super::tail::{Mark, Resume, MARK_EVERY};

/// Something other than zeros after the last whole batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Offset of the first bad byte range (or the unterminated batch's start).
    pub offset: usize,
    pub lsn: Option<u64>,
    pub reason: String,
    /// True: nothing valid follows (a torn write). False: corruption.
    pub torn: bool,
    /// End of the nonzero tail (`offset..tail_end` is what a cut removes).
    pub tail_end: usize,
}

/// Result of scanning one segment.
#[derive(Debug, Clone)]
pub struct Scan {
    /// Offset after the last whole batch.
    pub end: usize,
    pub first_lsn: Option<u64>,
    pub last_lsn: Option<u64>,
    pub records: u64,
    pub problem: Option<Problem>,
    /// The segment ends with a trusted seal footer (it was sealed).
    pub sealed: bool,
    /// (LSN, offset) of the first record at or after every
    /// [`MARK_EVERY`] bytes walked (the tail hint's sparse index).
    pub marks: Vec<Mark>,
    /// Offset of the last record of the last whole batch (0: none seen, or
    /// a sealed segment's footer was trusted).
    pub last_off: usize,
}

/// The fast path for a sealed segment (`bytes` = the whole trimmed file):
/// the scan result read from its trusted seal footer, without walking the
/// records. `None` if there is no trusted footer at the end of the file or
/// its LSNs do not fit after `prev_lsn`; then [`scan`] walks the records and
/// names whatever is wrong.
pub fn scan_sealed(bytes: &[u8], hdr: &SegHeader, prev_lsn: u64) -> Option<Scan> {
    let f = SealFooter::at_file_end(bytes, hdr.segment_id, hdr.version)?;
    sealed_scan(f, hdr, prev_lsn)
}

/// The scan result a trusted seal footer `f` stands for, if its LSNs fit
/// the segment and follow `prev_lsn`.
pub fn sealed_scan(f: SealFooter, hdr: &SegHeader, prev_lsn: u64) -> Option<Scan> {
    let fits = if f.records == 0 {
        f.first_lsn == 0 && f.last_lsn == 0
    } else if hdr.compacted() {
        f.first_lsn > prev_lsn && f.first_lsn >= hdr.first_lsn && f.last_lsn >= f.first_lsn
    } else {
        f.first_lsn == hdr.first_lsn && f.last_lsn == f.first_lsn + f.records - 1
    };
    fits.then(|| Scan {
        end: f.used as usize,
        first_lsn: (f.records > 0).then_some(f.first_lsn),
        last_lsn: (f.records > 0).then_some(f.last_lsn),
        records: f.records,
        problem: None,
        sealed: true,
        marks: Vec::new(),
        last_off: 0,
    })
}

/// After the end-of-data marker at `off`: nothing but zeros, or zeros and a
/// trusted seal footer that agrees with `off`?
fn clean_end(
    bytes: &[u8],
    off: usize,
    hdr: &SegHeader,
    zero_from: &dyn Fn(&[u8], usize) -> bool,
) -> Option<bool> {
    if zero_from(bytes, off) {
        return Some(false);
    }
    SealFooter::verified_at(bytes, off, hdr.segment_id, hdr.version).map(|_| true)
}

/// Does a valid record of this segment start somewhere in `(from, len)`?
/// `min_lsn` is the smallest LSN a genuine later record could have.
pub fn find_valid_after(
    bytes: &[u8],
    from: usize,
    hdr: &SegHeader,
    min_lsn: u64,
) -> Option<(usize, u64)> {
    let mut p = (from + 8) & !7;
    while p + REC_HDR <= bytes.len() {
        let lf = u32::from_le_bytes(bytes[p..p + 4].try_into().expect("4"));
        if lf != 0 && lf & !(LEN_MASK | CONT) == 0 {
            let lsn = u64_at(bytes, p + 8);
            let room = (bytes.len() - p) as u64 / REC_HDR as u64;
            let plausible = if hdr.compacted() {
                lsn >= min_lsn
            } else {
                lsn >= min_lsn && lsn <= min_lsn.saturating_add(room)
            };
            if plausible && (lf & LEN_MASK) as usize + p + REC_HDR <= bytes.len() {
                if let Parsed::Record { lsn, .. } = parse_at(bytes, p, hdr.segment_id) {
                    return Some((p, lsn));
                }
            }
        }
        p += 8;
    }
    None
}

/// The offset after the last whole batch of valid, in-sequence records from
/// `off` on (where `expect` is the next LSN), and the LSN after that batch.
/// A reader beside a live writer stops here: whatever follows may be a batch
/// still being written, never judged.
pub fn whole_batches_end(bytes: &[u8], hdr: &SegHeader, off: usize, expect: u64) -> (usize, u64) {
    let (mut off, mut expect) = (off, expect);
    let (mut end, mut next) = (off, expect);
    while let Parsed::Record {
        lsn, cont, next: n, ..
    } = parse_at(bytes, off, hdr.segment_id)
    {
        let ok = if hdr.compacted() {
            lsn >= expect
        } else {
            lsn == expect
        };
        if !ok {
            break;
        }
        expect = lsn + 1;
        off = n;
        if !cont {
            end = off;
            next = expect;
        }
    }
    (end, next)
}

/// Scan a segment (`bytes` = the whole mapped file). `prev_lsn` is the last
/// LSN before this segment (used for compacted segments' ordering).
pub fn scan(bytes: &[u8], hdr: &SegHeader, prev_lsn: u64) -> Scan {
    scan_from(bytes, hdr, prev_lsn, None, &|b, off| all_zero(b, off))
}

/// [`scan`], resuming after the records a validated tail hint vouches for
/// (`resume`, main segments only), and asking `zero_from(bytes, off)`
/// whether everything from `off` on is zero (the writer skips unwritten
/// extents instead of reading them; see `Segment::zero_from`).
pub fn scan_from(
    bytes: &[u8],
    hdr: &SegHeader,
    prev_lsn: u64,
    resume: Option<Resume>,
    zero_from: &dyn Fn(&[u8], usize) -> bool,
) -> Scan {
    let id = hdr.segment_id;
    let compacted = hdr.compacted();
    let resume = resume.filter(|_| !compacted);
    let mut off = resume.map_or(SEG_HDR, |r| r.off);
    let mut expected = resume.map_or(hdr.first_lsn, |r| r.next_lsn);
    let mut prev = expected.saturating_sub(1).max(prev_lsn);
    let resumed = resume.filter(|r| r.records > 0);
    let mut out = Scan {
        end: off,
        first_lsn: resumed.map(|_| hdr.first_lsn),
        last_lsn: resumed.map(|r| r.next_lsn - 1),
        records: resume.map_or(0, |r| r.records),
        problem: None,
        sealed: false,
        marks: Vec::new(),
        last_off: resume.map_or(0, |r| r.last_off),
    };
    let mut next_mark = (off / MARK_EVERY + 1) * MARK_EVERY;
    let mut batch: Option<(usize, u64, u64)> = None; // (offset, first lsn, count)
    let stop: Option<(Option<u64>, &'static str)>;
    loop {
        match parse_at(bytes, off, id) {
            Parsed::End => {
                stop = None;
                break;
            }
            Parsed::Bad { reason, lsn } => {
                stop = Some((lsn, reason));
                break;
            }
            Parsed::Record {
                lsn, cont, next, ..
            } => {
                let in_seq = if compacted {
                    lsn > prev && lsn >= hdr.first_lsn
                } else {
                    lsn == expected
                };
                if !in_seq {
                    stop = Some((Some(lsn), "lsn out of sequence"));
                    break;
                }
                if off >= next_mark {
                    out.marks.push((lsn, off));
                    next_mark = (off / MARK_EVERY + 1) * MARK_EVERY;
                }
                let b = batch.get_or_insert((off, lsn, 0));
                b.2 += 1;
                if !cont {
                    let (_, first, n) = batch.take().expect("batch");
                    out.first_lsn.get_or_insert(first);
                    out.last_lsn = Some(lsn);
                    out.records += n;
                    out.end = next;
                    out.last_off = off;
                }
                prev = lsn;
                expected = lsn + 1;
                off = next;
            }
        }
    }
    let min_next = if compacted { prev + 1 } else { expected };
    let cut = batch.map(|b| b.0).unwrap_or(off);
    match stop {
        None => {
            if batch.is_none() {
                if let Some(sealed) = clean_end(bytes, off, hdr, zero_from) {
                    out.sealed = sealed;
                    return out;
                }
            }
            let (offset, lsn, reason) = match batch {
                Some((o, l, _)) => (o, Some(l), "unterminated batch at the end of data"),
                None => (
                    off,
                    (!compacted).then_some(expected),
                    "nonzero bytes after the end-of-data marker",
                ),
            };
            let torn = find_valid_after(bytes, off, hdr, min_next).is_none();
            out.problem = Some(Problem {
                offset,
                lsn,
                reason: reason.to_string(),
                torn,
                tail_end: last_nonzero(bytes, cut).unwrap_or(cut),
            });
        }
        Some((lsn, reason)) => {
            let (offset, lsn, reason) = match batch {
                Some((o, l, _)) => (
                    o,
                    Some(l),
                    format!("unterminated batch: record at offset {off}: {reason}"),
                ),
                // The LSN this record should have had (the header's claim may be damaged).
                None if !compacted => (off, Some(expected), reason.to_string()),
                None => (off, lsn, reason.to_string()),
            };
            let follower = if reason.contains("out of sequence") {
                Some((off, 0))
            } else {
                find_valid_after(bytes, off, hdr, min_next)
            };
            let reason = match follower {
                Some((p, l)) if p != off => {
                    format!("{reason}; followed by a valid record at offset {p} (lsn {l})")
                }
                _ => reason,
            };
            out.problem = Some(Problem {
                offset,
                lsn,
                reason,
                torn: follower.is_none(),
                tail_end: last_nonzero(bytes, cut).unwrap_or(cut),
            });
        }
    }
    out
}

/// What a power loss with lazy appends left in the newest segment: a page
/// that was never written back (zeros) with valid records behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hole {
    /// Offset of the first zero page.
    pub page: usize,
    /// Valid records behind the hole: count and LSN range.
    pub records: u64,
    pub lsns: Option<(u64, u64)>,
}

/// Is the damage at `problem` a power-loss hole: a whole zero page between
/// the first bad offset and the next valid record? Records written back
/// out of order leave exactly that; anything else stays corruption.
pub fn power_loss_hole(bytes: &[u8], hdr: &SegHeader, problem: &Problem) -> Option<Hole> {
    let min_lsn = problem.lsn?;
    let (follower, _) = find_valid_after(bytes, problem.offset, hdr, min_lsn)?;
    let mut page = problem.offset & !4095;
    let hole = loop {
        if page + 4096 > follower {
            return None;
        }
        if page + 4096 > problem.offset && bytes[page..page + 4096].iter().all(|&b| b == 0) {
            break page;
        }
        page += 4096;
    };
    let (mut off, mut records, mut lsns) = (follower, 0u64, None::<(u64, u64)>);
    loop {
        match parse_at(bytes, off, hdr.segment_id) {
            Parsed::Record { lsn, next, .. } => {
                records += 1;
                lsns = Some(lsns.map_or((lsn, lsn), |(a, _)| (a, lsn)));
                off = next;
            }
            _ => match find_valid_after(bytes, off, hdr, lsns.map_or(min_lsn, |l| l.1 + 1)) {
                Some((p, _)) => off = p,
                None => break,
            },
        }
    }
    Some(Hole {
        page: hole,
        records,
        lsns,
    })
}

/// A record seen by `walk`.
pub struct Walked<'a> {
    pub offset: usize,
    pub lsn: u64,
    pub cont: bool,
    pub payload: &'a [u8],
}

/// One step of `walk`: a record, or a bad stretch it resynchronised after.
pub enum WalkStep<'a> {
    Record(Walked<'a>),
    /// One bad stretch: offset, the LSN expected there (main segments), reason.
    Bad(usize, Option<u64>, String),
}

/// Walk every valid record of a segment, resynchronising after bad stretches.
pub fn walk<'a>(bytes: &'a [u8], hdr: &SegHeader, prev_lsn: u64, mut on: impl FnMut(WalkStep<'a>)) {
    let id = hdr.segment_id;
    let compacted = hdr.compacted();
    let mut off = SEG_HDR;
    let mut min_next = if compacted {
        prev_lsn + 1
    } else {
        hdr.first_lsn
    };
    loop {
        let bad = match parse_at(bytes, off, id) {
            Parsed::Record {
                lsn,
                cont,
                payload,
                next,
            } => {
                let ok = if compacted {
                    lsn >= min_next
                } else {
                    lsn == min_next
                };
                if ok {
                    on(WalkStep::Record(Walked {
                        offset: off,
                        lsn,
                        cont,
                        payload,
                    }));
                    min_next = lsn + 1;
                    off = next;
                    continue;
                }
                format!("lsn {lsn} out of sequence (expected {min_next})")
            }
            Parsed::End => {
                if clean_end(bytes, off, hdr, &|b, o| all_zero(b, o)).is_some() {
                    return;
                }
                "nonzero bytes after the end-of-data marker".to_string()
            }
            Parsed::Bad { reason, .. } => reason.to_string(),
        };
        // Name the LSN expected here, never the damaged header's claim.
        on(WalkStep::Bad(off, (!compacted).then_some(min_next), bad));
        match find_valid_after(bytes, off, hdr, min_next) {
            Some((p, lsn)) => {
                off = p;
                if !compacted {
                    min_next = lsn;
                }
            }
            None => return,
        }
    }
}
