//! `LogReader`: read-only access from another process, without the lock.
//!
//! Opening judges the log by the writer's own rules (`recovery::scan`, the
//! structural torn-vs-corrupt classifier): sealed segments must be whole
//! (footer or record walk), segments must be contiguous, and damage is
//! refused with the segment, the offset and the LSN that was *expected*
//! there. A bad stretch at the end of the newest segment with nothing valid
//! after it is a torn tail: the reader shows the prefix and reports it (the
//! next writer open cuts it). While a writer holds the log's lock, the
//! newest segment's tail is being written, so the reader shows only its
//! whole batches and ignores what lies past them.
//!
//! Opened quickly ([`LogReader::open_with`], the CLI's read-only commands),
//! it trusts sealed segments by their footers and resumes the newest one
//! after the tail hint, as a quick writer open does (FORMAT.md, "Tail
//! hint"); the records vouched for that way are checksummed when read.
//!
//! `refresh` follows the tail (new records, new segments) and reloads
//! everything when the MANIFEST names a new generation; files vanishing under
//! it (compaction deleting them) trigger a reload. Files are never shrunk
//! under a reader's map (see `seal.rs`), so reading never faults.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::lock::writer_present;
use super::manifest::Manifest;
use super::open::corrupt;
use super::recovery::{self, whole_batches_end};
use super::segment::{self, Segment, SEG_HDR};
use super::tail::{Resume, TailHint};
use super::view::LogView;
use super::{list_live, Lsn, TornTail};
use crate::log::{LogError, Result};

/// A read-only follower of a log directory.
#[derive(Debug)]
pub struct LogReader {
    dir: PathBuf,
    generation: u64,
    segs: Vec<Arc<Segment>>,
    /// Per segment: the LSN after its last shown record.
    next: Vec<Lsn>,
    /// The newest segment's torn tail, when no writer held the log at open.
    torn: Option<TornTail>,
    /// Opened quickly (`LogOptions::quick_open`'s rules for readers).
    quick: bool,
}

/// A file vanished under a reader (compaction deleted it): start over.
pub(super) fn is_not_found(e: &LogError) -> bool {
    matches!(e, LogError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

/// How many times opening starts over when compaction swaps files under it.
const OPEN_ATTEMPTS: usize = 20;

impl LogReader {
    /// Open `dir` read-only (no lock), refusing a damaged log.
    pub fn open(dir: &Path) -> Result<LogReader> {
        Self::open_with(dir, false)
    }

    /// [`LogReader::open`]; with `quick`, by the rules of
    /// `LogOptions::quick_open`: sealed segments are trusted by their
    /// footers' own checksums, the newest one is read on from the tail hint,
    /// and the records vouched for that way are checksummed as they are
    /// read. A short-lived reader then reads a snapshot and the log after
    /// it, once.
    pub fn open_with(dir: &Path, quick: bool) -> Result<LogReader> {
        let mut last_err = None;
        for _ in 0..OPEN_ATTEMPTS {
            let generation = Manifest::load(dir)?.generation;
            match Self::load(dir, quick) {
                Ok(r) => return Ok(r),
                Err(e) if is_not_found(&e) => last_err = Some(e),
                // A compaction committed while we listed: what looked like a
                // gap is the old generation's files going away.
                Err(e) if Manifest::load(dir)?.generation != generation => last_err = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_err.expect("an error"))
    }

    fn load(dir: &Path, quick: bool) -> Result<LogReader> {
        let writer_live = writer_present(dir);
        let m = Manifest::load(dir)?;
        let live = list_live(dir, &m, None)?;
        let mut r = LogReader {
            dir: dir.to_path_buf(),
            generation: m.generation,
            segs: Vec::new(),
            next: Vec::new(),
            torn: None,
            quick,
        };
        let mut prev = 0;
        let n_gen = live.gen.len();
        let total = n_gen + live.main.len();
        let mut expect_main = m.compacted_end.max(1);
        for (k, p) in live.gen.iter().chain(live.main.iter()).enumerate() {
            let s = Arc::new(Segment::open(p, false)?);
            let is_main = k >= n_gen;
            if is_main == s.hdr.compacted() {
                return Err(corrupt(
                    p,
                    0,
                    None,
                    if is_main {
                        "compacted segment in the main directory"
                    } else {
                        "segment in a generation directory is not marked compacted"
                    },
                ));
            }
            if is_main && s.hdr.first_lsn != expect_main {
                return Err(corrupt(
                    p,
                    0,
                    Some(expect_main),
                    format!(
                        "segment starts at lsn {} but lsn {expect_main} was expected (records missing before it)",
                        s.hdr.first_lsn
                    ),
                ));
            }
            let start = if s.hdr.compacted() {
                prev + 1
            } else {
                s.hdr.first_lsn
            };
            let newest = k + 1 == total;
            r.segs.push(s);
            r.next.push(start);
            let i = r.segs.len() - 1;
            if newest && quick {
                r.resume_from_hint(i);
            }
            if newest && writer_live {
                r.advance(i);
            } else {
                r.check(i, prev, newest)?;
            }
            prev = r.next[i] - 1;
            if is_main {
                expect_main = r.next[i];
            }
        }
        Ok(r)
    }

    /// Judge segment `i` whole by the writer's recovery rules: a sealed
    /// segment by its footer or a record walk, the newest one's tail as torn
    /// (shown up to it, reported) or damaged (refused).
    fn check(&mut self, i: usize, prev: Lsn, newest: bool) -> Result<()> {
        let s = self.segs[i].clone();
        let bytes = s.map.bytes(s.map.len());
        let resume = (s.end() > SEG_HDR).then(|| Resume {
            off: s.end(),
            next_lsn: self.next[i],
            records: self.next[i] - s.hdr.first_lsn,
            last_off: 0,
        });
        let sc = match s.scan_sealed(prev, !self.quick) {
            Some(sc) => {
                if self.quick {
                    s.unverified_end.store(sc.end, Ordering::Release);
                }
                sc
            }
            None => recovery::scan_from(bytes, &s.hdr, prev, resume, &|b, o| s.zero_from(b, o)),
        };
        if let Some(pr) = sc.problem {
            if !(newest && pr.torn) {
                // A writer that opened after our probe may be writing this tail.
                if newest && writer_present(&self.dir) {
                    self.advance(i);
                    return Ok(());
                }
                let mut reason = pr.reason;
                if !newest {
                    reason.push_str(" (in a sealed segment)");
                }
                return Err(corrupt(&s.path, pr.offset, pr.lsn, reason));
            }
            self.torn = Some(TornTail {
                segment: s.path.clone(),
                offset: pr.offset as u64,
                lsn: pr.lsn,
                bytes: (pr.tail_end - pr.offset) as u64,
                reason: pr.reason,
            });
        }
        s.end.store(sc.end, Ordering::Release);
        if let Some(l) = sc.last_lsn {
            self.next[i] = l + 1;
        }
        // The scan faulted the whole file in; a sealed segment is read again
        // only by the fold.
        s.map.release_resident();
        Ok(())
    }

    /// Start segment `i` (the newest) after the records the tail hint
    /// vouches for, when it checks out there (see `tail.rs`); they are
    /// checksummed when read.
    fn resume_from_hint(&mut self, i: usize) {
        let s = &self.segs[i];
        let Some(hint) = TailHint::load(&self.dir) else {
            return;
        };
        if let Some(r) = hint.resume(s.map.bytes(s.map.len()), &s.hdr) {
            s.end.store(r.off, Ordering::Release);
            s.unverified_end.store(r.off, Ordering::Release);
            *s.marks.lock().unwrap_or_else(|e| e.into_inner()) =
                hint.marks.into_iter().filter(|m| m.1 < r.off).collect();
            self.next[i] = r.next_lsn;
        }
    }

    /// Extend segment `i`'s shown prefix over newly committed whole batches.
    fn advance(&mut self, i: usize) {
        let s = &self.segs[i];
        let bytes = s.map.bytes(s.map.len());
        if s.end() == SEG_HDR {
            // A sealed segment vouches for all its records by its footer:
            // one CRC pass instead of a walk (see `seal.rs`).
            let sealed = s.scan_sealed(self.next[i] - 1, !self.quick);
            if let Some(sc) = sealed {
                if self.quick {
                    s.unverified_end.store(sc.end, Ordering::Release);
                }
                s.end.store(sc.end, Ordering::Release);
                if let Some(last) = sc.last_lsn {
                    self.next[i] = last + 1;
                }
                return;
            }
        }
        let (end, next) = whole_batches_end(bytes, &s.hdr, s.end(), self.next[i]);
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
                    s.unverified_end.store(
                        last.unverified_end.load(Ordering::Acquire),
                        Ordering::Release,
                    );
                    *s.marks.lock().unwrap_or_else(|e| e.into_inner()) =
                        last.marks.lock().unwrap_or_else(|e| e.into_inner()).clone();
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
            let expected = *self.next.last().expect("segment");
            if first != expected {
                return Err(corrupt(
                    &p,
                    0,
                    Some(expected),
                    format!("segment starts at lsn {first} but lsn {expected} was expected (records missing before it)"),
                ));
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

    /// The newest segment's torn tail found at open (no writer held the log):
    /// the records shown end before it, and the next writer open cuts it.
    pub fn torn_tail(&self) -> Option<&TornTail> {
        self.torn.as_ref()
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
