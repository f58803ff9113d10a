//! `LogReader`: read-only access from another process, without the lock.
//!
//! The reader maps segments read-only and validates every record by CRC,
//! showing only whole batches: a concurrent (torn) write is "not there yet".
//! `refresh` follows the tail (new records, new segments) and reloads
//! everything when the MANIFEST names a new generation; files vanishing under
//! it (compaction deleting them) trigger a reload.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::manifest::Manifest;
use super::record::{parse_at, Parsed};
use super::segment::{self, Segment, SEG_HDR};
use super::view::LogView;
use super::{list_live, Lsn};
use crate::error::{Error, Result};

/// A read-only follower of a log directory.
#[derive(Debug)]
pub struct LogReader {
    dir: PathBuf,
    generation: u64,
    segs: Vec<Arc<Segment>>,
    /// Per segment: the LSN after its last shown record.
    next: Vec<Lsn>,
}

fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

impl LogReader {
    /// Open `dir` read-only (no lock).
    pub fn open(dir: &Path) -> Result<LogReader> {
        let mut last_err = None;
        for _ in 0..20 {
            match Self::load(dir) {
                Ok(r) => return Ok(r),
                Err(e) if is_not_found(&e) => last_err = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_err.expect("an error"))
    }

    fn load(dir: &Path) -> Result<LogReader> {
        let m = Manifest::load(dir)?;
        let live = list_live(dir, &m, None)?;
        let mut r = LogReader {
            dir: dir.to_path_buf(),
            generation: m.generation,
            segs: Vec::new(),
            next: Vec::new(),
        };
        let mut prev = 0;
        let n_gen = live.gen.len();
        for (k, p) in live.gen.iter().chain(live.main.iter()).enumerate() {
            let s = Arc::new(Segment::open(p, false)?);
            let start = if s.hdr.compacted() {
                prev + 1
            } else {
                s.hdr.first_lsn
            };
            // The first main segment starts at the compacted end, the others where the previous ended.
            let expect = if k == n_gen {
                m.compacted_end.max(1)
            } else {
                prev + 1
            };
            if !s.hdr.compacted() && s.hdr.first_lsn != expect {
                break; // not contiguous: show the consistent prefix only
            }
            r.segs.push(s);
            r.next.push(start);
            let i = r.segs.len() - 1;
            r.advance(i);
            prev = r.next[i] - 1;
        }
        Ok(r)
    }

    /// Extend segment `i`'s shown prefix over newly committed whole batches.
    fn advance(&mut self, i: usize) {
        let s = &self.segs[i];
        let bytes = s.map.bytes(s.map.len());
        if s.end() == SEG_HDR {
            // A sealed segment vouches for all its records by its footer:
            // one CRC pass instead of a walk (see `seal.rs`).
            if let Some(sc) = super::recovery::scan_sealed(bytes, &s.hdr, self.next[i] - 1) {
                s.end.store(sc.end, Ordering::Release);
                if let Some(last) = sc.last_lsn {
                    self.next[i] = last + 1;
                }
                return;
            }
        }
        let mut off = s.end();
        let mut expect = self.next[i];
        let (mut end, mut next) = (off, expect);
        while let Parsed::Record {
            lsn, cont, next: n, ..
        } = parse_at(bytes, off, s.hdr.segment_id)
        {
            let ok = if s.hdr.compacted() {
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
        s.end.store(end, Ordering::Release);
        self.next[i] = next;
    }

    /// See records appended (and segments or generations created) since the last call.
    pub fn refresh(&mut self) -> Result<()> {
        let m = Manifest::load(&self.dir)?;
        if m.generation != self.generation {
            *self = Self::open(&self.dir)?;
            return Ok(());
        }
        // List first: a newer segment exists only once the previous one was sealed,
        // so re-reading the previous one afterwards sees all of it.
        let live = match list_live(&self.dir, &m, None) {
            Ok(l) => l,
            Err(e) if is_not_found(&e) => {
                *self = Self::open(&self.dir)?;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let Some(last) = self.segs.last().cloned() else {
            *self = Self::open(&self.dir)?;
            return Ok(());
        };
        // The newest segment may have been re-extended by a reopening writer.
        let i = self.segs.len() - 1;
        let len = std::fs::metadata(&last.path)
            .map(|md| md.len() as usize)
            .unwrap_or(0);
        if len > last.map.len() {
            match Segment::open(&last.path, false) {
                Ok(s) => {
                    s.end.store(last.end(), Ordering::Release);
                    self.segs[i] = Arc::new(s);
                }
                Err(e) if is_not_found(&e) => {
                    *self = Self::open(&self.dir)?;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        self.advance(i);
        for p in live.main {
            let first = p
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(segment::parse_file_name)
                .unwrap_or(0);
            if first <= last.hdr.first_lsn {
                continue;
            }
            if first != *self.next.last().expect("segment") {
                break;
            }
            let s = match Segment::open(&p, false) {
                Ok(s) => Arc::new(s),
                Err(e) if is_not_found(&e) => {
                    *self = Self::open(&self.dir)?;
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            self.segs.push(s);
            self.next.push(first);
            let j = self.segs.len() - 1;
            self.advance(j);
        }
        Ok(())
    }

    /// A consistent view of what the reader has seen.
    pub fn view(&self) -> LogView {
        LogView::new(self.segs.iter().map(|s| (s.clone(), s.end())).collect())
    }

    /// The last LSN shown, if any.
    pub fn last_lsn(&self) -> Option<Lsn> {
        self.next.last().map(|n| n - 1).filter(|&l| l > 0)
    }

    /// A cheap test for new data, for followers that poll: whether the
    /// newest segment holds a nonzero byte past what the reader has shown
    /// (a record, or a seal footer before a rotation), or is full. It reads
    /// only the mapped bytes — no system call — so it can run every few
    /// milliseconds; call [`LogReader::refresh`] when it says yes. (inotify
    /// cannot do this: writes through a shared mapping raise no events.)
    pub fn tail_moved(&self) -> bool {
        let Some(s) = self.segs.last() else {
            return true;
        };
        let len = s.map.len();
        let end = s.end();
        end >= len || s.map.bytes(len)[end] != 0
    }

    /// The compacted generation the reader is on.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}
