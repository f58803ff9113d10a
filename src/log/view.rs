//! Read views: a consistent, zero-copy snapshot of committed records.
//!
//! A `LogView` holds `Arc`s of the segments it covers (so their maps stay
//! alive even if compaction deletes the files) and, per segment, the
//! published end loaded once with `Acquire`. Everything below those ends is
//! immutable, so records are handed out as `&[u8]` into the maps. Every
//! record below a published end was checksummed once already (by recovery,
//! by a reader's refresh, or written by this process), so iteration checks
//! structure only; `verify` re-reads the disk with checksums.

use std::path::Path;
use std::sync::Arc;

use super::record::{parse_at, parse_validated_at, Parsed};
use super::segment::{Segment, SEG_HDR};
use super::Lsn;
use crate::error::{Error, Result};

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
        LogIter {
            view: self,
            idx,
            off: SEG_HDR,
            from: lsn,
        }
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
                self.idx += 1;
                self.off = SEG_HDR;
                continue;
            }
            let bytes = seg.map.bytes(*end);
            match parse_validated_at(bytes, self.off, seg.hdr.segment_id) {
                Parsed::Record {
                    lsn,
                    cont,
                    payload,
                    next,
                } => {
                    self.off = next;
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
                    let off = self.off;
                    self.idx = self.view.segs.len();
                    return Some(Err(Error::Corrupt {
                        segment: seg.path.clone(),
                        offset: off as u64,
                        lsn,
                        reason: format!("{reason} (damaged after the log was opened)"),
                    }));
                }
            }
        }
    }
}
