//! The tail hint (`TAIL`, FORMAT.md "Tail hint"): where the newest segment's
//! committed records ended when the last writer closed, and a sparse index
//! of record offsets in it, so the next open resumes there instead of
//! rescanning the segment and a fold starting mid-segment need not walk it
//! from its header.
//!
//! Invariants: the hint is only advice. It is written after the close's
//! sync (every byte it points below is durable before it exists) and never
//! synced itself; it is used only after its own CRC holds, it names the
//! newest segment by id and first LSN, and the record it names as the last
//! parses with its checksum at that offset, with that LSN, ending a batch
//! exactly at the hinted end. Recovery then scans on from the hinted end by
//! the usual rules, so records a later writer appended past it (and a torn
//! tail after them) are still found. A stale, missing or damaged hint costs
//! a full scan, never a record.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::record::{parse_at, Parsed};
use super::segment::{SegHeader, SEG_HDR};
use super::Lsn;

/// File name of the hint in a log directory.
pub const TAIL_FILE: &str = "TAIL";
/// Hint magic.
pub const TAIL_MAGIC: &[u8; 8] = b"AGLTAIL\0";
/// Hint format version.
pub const TAIL_VERSION: u32 = 1;
/// Bytes between two marks of the sparse offset index.
pub const MARK_EVERY: usize = 256 << 10;
/// Most marks a hint may carry (a 1 GiB segment at `MARK_EVERY`).
const MAX_MARKS: usize = 4096;
const FIXED: usize = 64;

/// A record's LSN and offset in its segment.
pub type Mark = (Lsn, usize);

/// The decoded hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailHint {
    pub segment_id: u64,
    pub first_lsn: Lsn,
    /// Offset after the last whole batch.
    pub end: usize,
    /// Offset and LSN of the last record (`None`: the segment is empty).
    pub last: Option<Mark>,
    /// Records in the segment up to `end`.
    pub records: u64,
    /// Sparse index: (LSN, offset) of record starts, increasing.
    pub marks: Vec<Mark>,
}

/// Where a scan of the newest segment resumes: after the hinted records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    pub off: usize,
    /// The LSN expected at `off`.
    pub next_lsn: Lsn,
    pub records: u64,
    /// Offset of the last hinted record (0: none).
    pub last_off: usize,
}

pub fn path(dir: &Path) -> PathBuf {
    dir.join(TAIL_FILE)
}

impl TailHint {
    pub fn encode(&self) -> Vec<u8> {
        let marks = &self.marks[..self.marks.len().min(MAX_MARKS)];
        let mut b = Vec::with_capacity(FIXED + marks.len() * 16 + 4);
        b.extend_from_slice(TAIL_MAGIC);
        b.extend_from_slice(&TAIL_VERSION.to_le_bytes());
        b.extend_from_slice(&(marks.len() as u32).to_le_bytes());
        let (last_off, last_lsn) = self.last.map_or((0, 0), |(l, o)| (o as u64, l));
        for v in [
            self.segment_id,
            self.first_lsn,
            self.end as u64,
            last_off,
            last_lsn,
            self.records,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for &(lsn, off) in marks {
            b.extend_from_slice(&lsn.to_le_bytes());
            b.extend_from_slice(&(off as u64).to_le_bytes());
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode; `None` unless magic, version, length and CRC hold.
    pub fn decode(b: &[u8]) -> Option<TailHint> {
        let u64_at = |o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
        let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
        if b.get(..8)? != TAIL_MAGIC || u32_at(8)? != TAIL_VERSION {
            return None;
        }
        let n = u32_at(12)? as usize;
        let body = FIXED + n * 16;
        if n > MAX_MARKS || b.len() != body + 4 || crc32fast::hash(&b[..body]) != u32_at(body)? {
            return None;
        }
        let off = |v: u64| usize::try_from(v).ok();
        let last_lsn = u64_at(48)?;
        let marks = (0..n)
            .map(|i| Some((u64_at(FIXED + i * 16)?, off(u64_at(FIXED + i * 16 + 8)?)?)))
            .collect::<Option<Vec<Mark>>>()?;
        Some(TailHint {
            segment_id: u64_at(16)?,
            first_lsn: u64_at(24)?,
            end: off(u64_at(32)?)?,
            last: (last_lsn > 0).then_some((last_lsn, off(u64_at(40)?)?)),
            records: u64_at(56)?,
            marks,
        })
    }

    /// The hint in `dir`, if there is a readable, intact one.
    pub fn load(dir: &Path) -> Option<TailHint> {
        let b = fs::read(path(dir)).ok()?;
        let h = TailHint::decode(&b);
        if h.is_none() {
            tracing::debug!(dir = %dir.display(), "tail hint damaged; scanning the newest segment");
        }
        h
    }

    /// Writes the hint in place, unsynced (see the module invariants): over
    /// the existing file when it is one (not a link: `O_NOFOLLOW`), which
    /// costs a write instead of an unlink and a create on every close; a
    /// reader that meets a half-written hint finds its CRC wrong and scans.
    /// A failure only costs the next open a full scan, so it is logged.
    pub fn store(&self, dir: &Path) {
        use std::os::unix::fs::{FileExt, OpenOptionsExt};
        let p = path(dir);
        let bytes = self.encode();
        let in_place = fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&p)
            .and_then(|f| {
                f.write_all_at(&bytes, 0)?;
                if f.metadata()?.len() != bytes.len() as u64 {
                    f.set_len(bytes.len() as u64)?;
                }
                Ok(())
            });
        let res = in_place.or_else(|_| {
            crate::files::create_fresh(&p)
                .or_else(|_| fs::OpenOptions::new().write(true).truncate(true).open(&p))
                .and_then(|mut f| f.write_all(&bytes))
        });
        if let Err(e) = res {
            tracing::warn!(path = %p.display(), error = %e, "cannot write the tail hint");
        }
    }

    /// Where a scan of segment `hdr` (`bytes` = the whole map) may resume,
    /// if this hint is about it and its last record checks out there.
    pub fn resume(&self, bytes: &[u8], hdr: &SegHeader) -> Option<Resume> {
        if self.segment_id != hdr.segment_id
            || self.first_lsn != hdr.first_lsn
            || hdr.compacted()
            || self.end < SEG_HDR
            || !self.end.is_multiple_of(8)
            || self.end > bytes.len()
        {
            return None;
        }
        let last_off = self.last.map_or(0, |l| l.1);
        let next_lsn = match self.last {
            None => (self.end == SEG_HDR && self.records == 0).then_some(hdr.first_lsn)?,
            Some((lsn, off)) => {
                let ok = matches!(parse_at(bytes, off, hdr.segment_id),
                    Parsed::Record { lsn: l, cont: false, next, .. } if l == lsn && next == self.end);
                (ok && self.records > 0 && lsn == hdr.first_lsn + self.records - 1)
                    .then_some(lsn + 1)?
            }
        };
        Some(Resume {
            off: self.end,
            next_lsn,
            records: self.records,
            last_off,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(marks: usize) -> TailHint {
        TailHint {
            segment_id: 3,
            first_lsn: 100,
            end: 4096,
            last: Some((140, 4000)),
            records: 41,
            marks: (0..marks as u64)
                .map(|i| (100 + i, 64 + 8 * i as usize))
                .collect(),
        }
    }

    #[test]
    fn stored_in_place_over_longer_and_shorter_hints() {
        let dir = tempfile::tempdir().unwrap();
        for marks in [5, 1, 9, 0] {
            hint(marks).store(dir.path());
            assert_eq!(
                TailHint::load(dir.path()),
                Some(hint(marks)),
                "{marks} marks"
            );
        }
    }

    #[test]
    fn a_planted_link_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"secret").unwrap();
        std::os::unix::fs::symlink(&victim, path(dir.path())).unwrap();
        hint(2).store(dir.path());
        assert_eq!(fs::read(&victim).unwrap(), b"secret");
        assert!(!fs::symlink_metadata(path(dir.path())).unwrap().is_symlink());
        assert_eq!(TailHint::load(dir.path()), Some(hint(2)));
    }
}
