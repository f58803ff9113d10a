//! Read views: a consistent, zero-copy snapshot of committed records.
//!
//! A `LogView` holds `Arc`s of the segments it covers (so their maps stay
//! alive even if compaction deletes the files) and, per segment, the
//! published end loaded once with `Acquire`. Everything below those ends is
//! immutable, so records are handed out as `&[u8]` into the maps. A record
//! below a published end was checksummed once already (by recovery, by a
//! reader's refresh, or written by this process), so iteration checks
//! structure only, except below a segment's `unverified_end`: records a
//! quick open trusted by a seal footer or the tail hint are checksummed (and
//! their LSN sequence checked) as they are read, and a segment read through
//! from its header is then marked checked; those below the LSN a view starts
//! at are stepped over by framing and LSN sequence only. `verify` re-reads
//! the disk with checksums. A segment's sparse index lets `iter_from` start
//! near its LSN.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::record::{parse_at, parse_validated_at, record_size, Parsed};
use super::recovery;
use super::segment::{Segment, SEG_HDR};
use super::Lsn;
use crate::log::{LogError, Result};

/// One record of a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub lsn: Lsn,
    pub payload: &'a [u8],
    /// False if more records of the same batch follow.
    pub last_in_batch: bool,
}

/// A consistent snapshot of committed records (cheap to clone).
#[derive(Debug, Clone)]
pub struct LogView {
    segs: Vec<(Arc<Segment>, usize)>,
}

impl LogView {
    pub(crate) fn new(segs: Vec<(Arc<Segment>, usize)>) -> LogView {
        LogView { segs }
    }

    /// Records with LSN >= `lsn`, in LSN order.
    pub fn iter_from(&self, lsn: Lsn) -> LogIter<'_> {
        // Last segment whose first LSN is <= lsn (segments are sorted by first LSN).
        let idx = self
            .segs
            .partition_point(|(s, _)| s.hdr.first_lsn <= lsn)
            .saturating_sub(1);
        let mut it = LogIter {
            view: self,
            idx,
            off: SEG_HDR,
            from: lsn,
            expect: None,
            from_header: true,
            released: 0,
        };
        it.enter_segment();
        if let Some((seg, end)) = self.segs.get(idx) {
            // Skip most of the segment by its sparse index: the newest mark
            // at or before `lsn` whose record checks out where it points.
            let bytes = seg.map.bytes(*end);
            let marks = seg.marks.lock().unwrap_or_else(|e| e.into_inner());
            let at = marks.partition_point(|m| m.0 <= lsn);
            let usable = marks[..at].iter().rev().find(|&&(l, o)| {
                o < *end
                    && matches!(parse_at(bytes, o, seg.hdr.segment_id),
                        Parsed::Record { lsn: got, .. } if got == l)
            });
            if let Some(&(l, o)) = usable {
                it.off = o;
                // Nothing below the mark is read: no release behind it.
                it.released = o / RELEASE_EVERY * RELEASE_EVERY;
                it.expect = (!seg.hdr.compacted()).then_some(l);
                it.from_header = false;
            }
        }
        it
    }

    /// Where record `lsn` lies: its segment file and byte offset, to name
    /// the place of damage found in a record's content (an event that does
    /// not decode). `None` when the view does not hold it readably.
    pub fn locate(&self, lsn: Lsn) -> Option<(&Path, u64)> {
        let mut it = self.iter_from(lsn);
        let rec = it.next()?.ok().filter(|r| r.lsn == lsn)?;
        // `next` leaves the cursor just past the record, in its segment.
        let at = it.off - record_size(rec.payload.len());
        Some((self.segs[it.idx].0.path.as_path(), at as u64))
    }

    /// All records.
    pub fn iter(&self) -> LogIter<'_> {
        self.iter_from(0)
    }

    /// Number of segments covered.
    pub fn segment_count(&self) -> usize {
        self.segs.len()
    }

    /// Used bytes (headers included) of the covered segments.
    pub fn bytes(&self) -> u64 {
        self.segs.iter().map(|(_, e)| *e as u64).sum()
    }

    /// Paths of the covered segment files.
    pub fn segment_paths(&self) -> Vec<&Path> {
        self.segs.iter().map(|(s, _)| s.path.as_path()).collect()
    }
}

/// Iterator over a view's records.
pub struct LogIter<'a> {
    view: &'a LogView,
    idx: usize,
    off: usize,
    from: Lsn,
    /// The LSN the next record of a main segment must carry.
    expect: Option<Lsn>,
    /// This segment is being read from its header (so reading it through
    /// checks every record it holds).
    from_header: bool,
    /// Offset below which this segment's pages were released (see `next`).
    released: usize,
}

/// A scan drops its map's pages behind it every this many bytes, so reading
/// a long log keeps RSS flat: at most two steps stay mapped behind the
/// cursor (measured: a 10 M-event audit held 2–4 MiB of the log at 2 MiB
/// steps, about 1 MiB at these; the `madvise` calls cost nothing visible).
const RELEASE_EVERY: usize = 512 << 10;

/// Bytes of a sealed segment read record by record (CRC each) before the
/// rest is checked by one pass over its seal footer.
const BULK_CHECK_AFTER: usize = 1 << 20;

impl LogIter<'_> {
    fn enter_segment(&mut self) {
        self.off = SEG_HDR;
        self.released = 0;
        self.from_header = true;
        self.expect = self
            .view
            .segs
            .get(self.idx)
            .filter(|(s, _)| !s.hdr.compacted())
            .map(|(s, _)| s.hdr.first_lsn);
    }
}

impl<'a> Iterator for LogIter<'a> {
    type Item = Result<RecordRef<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (seg, end) = self.view.segs.get(self.idx)?;
            if self.off >= *end {
                // Leaving a segment that is not the newest: its pages were
                // faulted in by this scan; let them go so a full scan (the
                // fold on open, a history audit) keeps RSS bounded by one
                // segment instead of growing with the log.
                if self.idx + 1 < self.view.segs.len() {
                    seg.map.release_resident();
                }
                if self.from_header {
                    // Every record up to `end` was checked on the way.
                    let _ =
                        seg.unverified_end
                            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                                (u <= *end).then_some(0)
                            });
                }
                self.idx += 1;
                self.enter_segment();
                continue;
            }
            let bytes = seg.map.bytes(*end);
            let mut unverified = self.off < seg.unverified_end.load(Ordering::Acquire);
            if unverified
                && self.from_header
                && self.off >= SEG_HDR + BULK_CHECK_AFTER
                && self.idx + 1 < self.view.segs.len()
            {
                // Reading a sealed segment through from its header: one CRC
                // pass over it by its footer is cheaper than a CRC per record
                // (after a first stretch, so reading a record or two, as
                // `Log::stats` does, stays cheap).
                if bulk_check(seg, *end) {
                    seg.unverified_end.store(0, Ordering::Release);
                    unverified = false;
                }
            }
            // A record below `from` is only stepped over: its effect is in
            // the caller's base (a snapshot), so its framing and LSN
            // sequence are checked but not its checksum (a `heartbeat` at
            // a snapshot that lies mid-way between two marks would CRC up to
            // 5,000 records for nothing). The segment is then no longer
            // read through with checks.
            let step_over = unverified && self.expect.is_some_and(|e| e < self.from);
            if step_over {
                self.from_header = false;
            }
            let parsed = if unverified && !step_over {
                parse_at(bytes, self.off, seg.hdr.segment_id)
            } else {
                parse_validated_at(bytes, self.off, seg.hdr.segment_id)
            };
            match parsed {
                Parsed::Record { lsn, .. }
                    if unverified && self.expect.is_some_and(|e| e != lsn) =>
                {
                    return Some(Err(self.damaged(seg, "lsn out of sequence", None)));
                }
                Parsed::Record {
                    lsn,
                    cont,
                    payload,
                    next,
                } => {
                    self.off = next;
                    self.expect = self.expect.map(|_| lsn + 1);
                    if next >= self.released + 2 * RELEASE_EVERY {
                        let upto = next / RELEASE_EVERY * RELEASE_EVERY - RELEASE_EVERY;
                        seg.map
                            .release_resident_range(self.released, upto - self.released);
                        self.released = upto;
                    }
                    if lsn < self.from {
                        continue;
                    }
                    return Some(Ok(RecordRef {
                        lsn,
                        payload,
                        last_in_batch: !cont,
                    }));
                }
                Parsed::End | Parsed::Bad { .. } => {
                    let (reason, lsn) = match parse_at(bytes, self.off, seg.hdr.segment_id) {
                        Parsed::Bad { reason, lsn } => (reason, lsn),
                        _ => ("end of data inside the committed range", None),
                    };
                    let damaged = if unverified {
                        self.damaged(seg, reason, lsn)
                    } else {
                        self.idx = self.view.segs.len();
                        LogError::Corrupt {
                            segment: seg.path.clone(),
                            offset: self.off as u64,
                            lsn,
                            reason: format!("{reason} (damaged after the log was opened)"),
                        }
                    };
                    return Some(Err(damaged));
                }
            }
        }
    }
}

/// Whether sealed segment `seg`'s records, ending at `end`, match its seal
/// footer's data CRC: one pass, in `RELEASE_EVERY` chunks whose pages are
/// dropped once hashed (RSS stays flat; reading them again hits the cache).
fn bulk_check(seg: &Segment, end: usize) -> bool {
    let Some(f) = seg.footer().filter(|f| f.used as usize == end) else {
        return false;
    };
    let whole = seg.map.bytes(seg.map.len());
    if recovery::sealed_scan(f, &seg.hdr, 0).is_none() {
        return false;
    }
    let mut h = crc32fast::Hasher::new();
    h.update(&seg.hdr.segment_id.to_le_bytes());
    let mut off = SEG_HDR;
    while off < end {
        let to = ((off / RELEASE_EVERY + 1) * RELEASE_EVERY).min(end);
        h.update(&whole[off..to]);
        let page = off & !4095;
        seg.map.release_resident_range(page, (to & !4095) - page);
        off = to;
    }
    h.finalize() == f.data_crc
}

impl LogIter<'_> {
    /// A record vouched for at open (by a seal footer or the tail hint)
    /// failed its check when read: damage, named by the LSN expected there.
    /// Ends the iteration.
    fn damaged(&mut self, seg: &Segment, reason: &str, claimed: Option<Lsn>) -> LogError {
        let off = self.off;
        let lsn = self.expect.or(claimed);
        self.idx = self.view.segs.len();
        LogError::Corrupt {
            segment: seg.path.clone(),
            offset: off as u64,
            lsn,
            reason: format!(
                "{reason} (in records opened without a full check; `agentlog verify` checks them all)"
            ),
        }
    }
}
