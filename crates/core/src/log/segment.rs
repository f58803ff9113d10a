//! Segment files: a 64-byte header followed by records, preallocated with
//! `fallocate` and memory-mapped.
//!
//! Invariants: a segment file only ever appears under its final name
//! (`{first_lsn:020}.seg`) with a complete, synced header (it is prepared as
//! `next-{id}.seg.tmp` and renamed); the directory is fsynced after every
//! create, rename and delete; `end` (published byte end) only grows and is
//! stored with `Release` after the bytes below it were written.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::mmap::{fallocate, punch_hole, written_ranges, Map};
use super::seal::{data_crc, footer_offset, SealFooter, FIXED_FOOTER_VERSION, SEAL_FOOTER};

use super::record::{all_zero, u64_at};
use super::recovery::{self, Scan};
use super::tail::Mark;
use crate::log::{LogError, Result};

/// Segment header size; records start here.
pub const SEG_HDR: usize = 64;
/// Segment magic.
pub const MAGIC: &[u8; 8] = b"AGLOGSEG";
/// Current segment format version (3: a sealed segment keeps its
/// preallocated length, its seal footer in the last 48 bytes; see `seal.rs`
/// and FORMAT.md, "Version changes"). Versions 1 and 2 are still read.
pub const VERSION: u32 = 3;
/// Oldest segment format version this build reads.
pub const MIN_VERSION: u32 = 1;
/// Header flag bit 0: compacted segment (LSNs increasing with gaps).
pub const FLAG_COMPACTED: u32 = 1;

/// A decoded segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegHeader {
    pub version: u32,
    pub flags: u32,
    pub segment_id: u64,
    pub first_lsn: u64,
}

impl SegHeader {
    pub fn new(segment_id: u64, first_lsn: u64, compacted: bool) -> SegHeader {
        SegHeader {
            version: VERSION,
            flags: if compacted { FLAG_COMPACTED } else { 0 },
            segment_id,
            first_lsn,
        }
    }

    pub fn compacted(&self) -> bool {
        self.flags & FLAG_COMPACTED != 0
    }

    pub fn encode(&self) -> [u8; SEG_HDR] {
        let mut b = [0u8; SEG_HDR];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b[16..24].copy_from_slice(&self.segment_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.first_lsn.to_le_bytes());
        let crc = crc32fast::hash(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode and check a header; the error is the reason.
    pub fn decode(b: &[u8]) -> std::result::Result<SegHeader, &'static str> {
        if b.len() < SEG_HDR {
            return Err("file shorter than a segment header");
        }
        if &b[0..8] != MAGIC {
            return Err("bad segment magic");
        }
        let crc = u32::from_le_bytes(b[60..64].try_into().expect("4"));
        if crc32fast::hash(&b[..60]) != crc {
            return Err("segment header checksum mismatch");
        }
        let version = u32::from_le_bytes(b[8..12].try_into().expect("4"));
        if !(MIN_VERSION..=VERSION).contains(&version) {
            return Err("unsupported segment format version");
        }
        let flags = u32::from_le_bytes(b[12..16].try_into().expect("4"));
        if flags & !FLAG_COMPACTED != 0 {
            return Err("unknown segment flags");
        }
        if b[32..60].iter().any(|&x| x != 0) {
            return Err("nonzero reserved header bytes");
        }
        Ok(SegHeader {
            version,
            flags,
            segment_id: u64_at(b, 16),
            first_lsn: u64_at(b, 24),
        })
    }
}

/// Allocate `[0, size)` of `file` with `fallocate` (real blocks: a write
/// through the map can never hit ENOSPC/SIGBUS later), optionally overwrite
/// `[from, size)` with zeros, and sync. Zero-filling turns the "unwritten"
/// extents fallocate creates into written ones, so a later fdatasync/msync of
/// appended records need not commit the filesystem journal for the extent
/// conversion; it costs a second write of the whole segment
/// (`LogOptions::zero_fill`, off by default).
pub(crate) fn preallocate(
    file: &File,
    from: u64,
    size: u64,
    zero_fill: bool,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    fallocate(file, size)?;
    if !zero_fill {
        return file.sync_all();
    }
    let zeros = vec![0u8; 1 << 20];
    let mut off = from;
    while off < size {
        let n = ((size - off) as usize).min(zeros.len());
        file.write_all_at(&zeros[..n], off)?;
        off += n as u64;
    }
    file.sync_all()
}

/// `{first_lsn:020}.seg`
pub fn file_name(first_lsn: u64) -> String {
    format!("{first_lsn:020}.seg")
}

/// The first LSN encoded in a segment file name.
pub fn parse_file_name(name: &str) -> Option<u64> {
    let n = name.strip_suffix(".seg")?;
    if n.len() == 20 && n.bytes().all(|b| b.is_ascii_digit()) {
        n.parse().ok()
    } else {
        None
    }
}

/// fsync a directory.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| LogError::io(dir, e))
}

/// One mapped segment (the writer's, a reader's or verify's).
#[derive(Debug)]
pub(crate) struct Segment {
    pub path: PathBuf,
    pub hdr: SegHeader,
    pub file: File,
    pub map: Map,
    /// Published end: bytes `[0, end)` hold whole, valid batches.
    pub end: AtomicUsize,
    /// Bytes of this segment known to be on disk.
    pub synced: AtomicUsize,
    /// Records below this offset were vouched for by a seal footer or the
    /// tail hint, not checksummed one by one: a view checks each one it
    /// reads there (0: every published record was checked).
    pub unverified_end: AtomicUsize,
    /// Sparse (LSN, offset) index of record starts (see `tail.rs`), so a
    /// view starting mid-segment skips most of it. Advice: each mark is
    /// checked where it is used.
    pub marks: Mutex<Vec<Mark>>,
}

impl Segment {
    pub fn end(&self) -> usize {
        self.end.load(Ordering::Acquire)
    }

    /// The published bytes.
    pub fn published(&self) -> &[u8] {
        self.map.bytes(self.end())
    }

    /// Open and map an existing segment; checks the header and the name.
    pub fn open(path: &Path, writable: bool) -> Result<Segment> {
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| LogError::io(path, e))?;
        let len = file.metadata().map_err(|e| LogError::io(path, e))?.len() as usize;
        let corrupt = |reason: &str| LogError::Corrupt {
            segment: path.to_path_buf(),
            offset: 0,
            lsn: None,
            reason: reason.to_string(),
        };
        if len < SEG_HDR {
            return Err(corrupt("file shorter than a segment header"));
        }
        let map = if writable {
            Map::map_rw(&file, len)
        } else {
            Map::map_ro(&file, len)
        }
        .map_err(|e| LogError::io(path, e))?;
        // Read with pread, not through the map: touching a map faults in a
        // whole (possibly large) folio, and an opener touches every segment.
        let mut head = [0u8; SEG_HDR];
        {
            use std::os::unix::fs::FileExt;
            file.read_exact_at(&mut head, 0)
                .map_err(|e| LogError::io(path, e))?;
        }
        let hdr = SegHeader::decode(&head).map_err(corrupt)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if parse_file_name(name) != Some(hdr.first_lsn) {
            return Err(corrupt("file name does not match the header's first LSN"));
        }
        Ok(Segment {
            path: path.to_path_buf(),
            hdr,
            file,
            map,
            end: AtomicUsize::new(SEG_HDR),
            synced: AtomicUsize::new(0),
            unverified_end: AtomicUsize::new(0),
            marks: Mutex::new(Vec::new()),
        })
    }

    /// The scan result this segment's seal footer stands for, if it is
    /// sealed (see `seal.rs`). With `check_data` the data CRC is checked
    /// over the map; without, only the footer and the zeros around it are
    /// read, with `pread` (RSS stays flat in the number of segments).
    pub fn scan_sealed(&self, prev_lsn: u64, check_data: bool) -> Option<Scan> {
        if check_data {
            return recovery::scan_sealed(self.map.bytes(self.map.len()), &self.hdr, prev_lsn);
        }
        recovery::sealed_scan(self.footer()?, &self.hdr, prev_lsn)
    }

    /// This segment's seal footer, if it is sealed: the footer and the zeros
    /// around it read with `pread`, never through the map (a touch of the
    /// map faults in a whole, possibly 2 MiB, folio: RSS).
    pub fn footer(&self) -> Option<SealFooter> {
        use std::os::unix::fs::FileExt;
        SealFooter::footer_only(self.map.len(), self.hdr.version, &mut |a, b| {
            let mut buf = vec![0u8; b.checked_sub(a)?];
            self.file.read_exact_at(&mut buf, a as u64).ok()?;
            Some(buf)
        })
    }

    /// Whether every byte of the map from `off` on is zero, reading only
    /// the file's written extents (see `mmap::written_ranges`): holes and
    /// unwritten preallocated extents read as zeros, so the unused rest of a
    /// preallocated segment is not faulted in page by page. (`SEEK_DATA`
    /// cannot tell: ext4 reports unwritten extents as data once the file was
    /// written through a map.) Where the filesystem has no FIEMAP, every
    /// byte is read.
    pub fn zero_from(&self, bytes: &[u8], off: usize) -> bool {
        let len = bytes.len();
        let page_end = ((off + 4095) & !4095).min(len);
        if off < page_end && !all_zero(&bytes[..page_end], off) {
            return false;
        }
        if page_end >= len {
            return true;
        }
        match written_ranges(&self.file, page_end as u64, len as u64) {
            Ok(ranges) => ranges
                .iter()
                .all(|&(a, b)| all_zero(&bytes[..(b as usize).min(len)], a as usize)),
            Err(_) => all_zero(bytes, page_end),
        }
    }

    /// Remap after the file grew (writer reopening a trimmed newest segment).
    pub fn extend_to(self, size: u64, zero_fill: bool) -> Result<Segment> {
        let from = self.map.len() as u64;
        preallocate(&self.file, from, size, zero_fill).map_err(|e| LogError::io(&self.path, e))?;
        let map =
            Map::map_rw(&self.file, size as usize).map_err(|e| LogError::io(&self.path, e))?;
        Ok(Segment { map, ..self })
    }

    /// Seal: sync the used bytes, zero everything between the end marker
    /// and the footer's place (a panicking payload closure may have left
    /// bytes past `used`), write the seal footer (see `seal.rs`), fsync.
    ///
    /// The file keeps its length: a reader in another process may map it
    /// whole, and shrinking it would turn that reader's next access past the
    /// new end into SIGBUS. The unused space is given back by punching a
    /// hole. A version-3 segment's footer goes to the end of the file; an
    /// older segment (reopened from a previous build) gets it at its
    /// version's place `footer_offset(used)`, with zeros after it.
    pub fn seal(
        &self,
        used: usize,
        first_lsn: Option<u64>,
        last_lsn: Option<u64>,
        records: u64,
    ) -> Result<()> {
        let io = |e| LogError::io(&self.path, e);
        let synced = self.synced.load(Ordering::Acquire) & !4095;
        if used > synced {
            self.map.flush(synced, used - synced).map_err(io)?;
        }
        let len = self.map.len();
        let pos = if self.hdr.version >= FIXED_FOOTER_VERSION {
            len - SEAL_FOOTER
        } else {
            footer_offset(used)
        };
        if pos + SEAL_FOOTER > len || used + super::record::REC_HDR > pos {
            return Err(LogError::InvalidArgument(format!(
                "{}: no room for the seal footer (used {used}, segment {len})",
                self.path.display()
            )));
        }
        self.zero_range(used, pos)?;
        self.zero_range(pos + SEAL_FOOTER, len)?;
        let footer = SealFooter {
            used: used as u64,
            first_lsn: first_lsn.unwrap_or(0),
            last_lsn: last_lsn.unwrap_or(0),
            records,
            data_crc: data_crc(self.hdr.segment_id, &self.map.bytes(used)[SEG_HDR..used]),
        };
        self.map.write(pos, &footer.encode());
        // msync the partial pages written through the map, then fsync the
        // file (the punched hole is metadata).
        let head = used & !4095;
        self.map
            .flush(head, ((used + 4095) & !4095).min(len) - head)
            .map_err(io)?;
        let tail = pos & !4095;
        self.map.flush(tail, len - tail).map_err(io)?;
        self.file.sync_all().map_err(io)?;
        self.synced.store(used, Ordering::Release);
        // A sealed segment is only read again by scans: stop holding its
        // pages in this process's RSS (it would otherwise grow with the log).
        self.map.release_resident();
        Ok(())
    }

    /// Make `[from, to)` (unpublished) read as zeros: whole pages by punching
    /// a hole (which also frees their blocks), the partial pages at either
    /// end by writing zeros. Where the filesystem cannot punch holes, every
    /// byte is written.
    fn zero_range(&self, from: usize, to: usize) -> Result<()> {
        if from >= to {
            return Ok(());
        }
        let first_page = ((from + 4095) & !4095).min(to);
        let last_page = (to & !4095).max(first_page);
        self.map.zero(from, first_page - from);
        self.map.zero(last_page, to - last_page);
        if last_page > first_page {
            match punch_hole(
                &self.file,
                first_page as u64,
                (last_page - first_page) as u64,
            ) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                    self.map.zero(first_page, last_page - first_page);
                    self.map
                        .flush(first_page, last_page - first_page)
                        .map_err(|e| LogError::io(&self.path, e))?;
                }
                Err(e) => return Err(LogError::io(&self.path, e)),
            }
        }
        Ok(())
    }
}

/// A preallocated, mapped, not yet named segment file.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub tmp: PathBuf,
    pub file: File,
    pub map: Map,
    pub segment_id: u64,
}

/// The size of a new segment in `dir`: `wanted` (the configured segment
/// size) when the file system has room for it, else the free space rounded
/// down to pages, but never below `at_least` (then preparing it fails with
/// `DiskFull`). A nearly full disk thus gets smaller segments instead of a
/// wedged store: appends go on, and `compact`, which must seal the active
/// segment (installing a successor) before it can shrink the log, can run
/// exactly when space is short. Readers never assume a segment's size.
pub(crate) fn fitting_size(dir: &Path, wanted: u64, at_least: u64) -> u64 {
    const PAGE: u64 = 4096;
    let at_least = at_least.div_ceil(PAGE) * PAGE;
    match rustix::fs::statvfs(dir) {
        Ok(st) => {
            let free = st.f_bavail.saturating_mul(st.f_frsize) / PAGE * PAGE;
            wanted.min(free).max(at_least)
        }
        // Cannot tell: ask for the full size (a failure names the disk).
        Err(_) => wanted,
    }
}

/// Create `next-{id}.seg.tmp`, preallocate `size` bytes, sync, map.
/// `budget` is the disk-full fault-injection hook (bytes left to allocate).
pub(crate) fn prepare(
    dir: &Path,
    segment_id: u64,
    size: u64,
    budget: Option<&AtomicI64>,
    zero_fill: bool,
) -> Result<Prepared> {
    let tmp = dir.join(format!("next-{segment_id}.seg.tmp"));
    let res = (|| {
        let file = crate::files::create_fresh(&tmp).map_err(|e| LogError::io(&tmp, e))?;
        if let Some(b) = budget {
            if b.fetch_sub(size as i64, Ordering::AcqRel) < size as i64 {
                b.fetch_add(size as i64, Ordering::AcqRel);
                return Err(LogError::io(
                    &tmp,
                    std::io::Error::from_raw_os_error(libc::ENOSPC),
                ));
            }
        }
        preallocate(&file, 0, size, zero_fill).map_err(|e| LogError::io(&tmp, e))?;
        let map = Map::map_rw(&file, size as usize).map_err(|e| LogError::io(&tmp, e))?;
        Ok(Prepared {
            tmp: tmp.clone(),
            file,
            map,
            segment_id,
        })
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res
}

impl Prepared {
    /// Write the header, sync it, rename to the final name, sync the directory.
    /// Names the prepared file as the segment starting at `first_lsn` and
    /// fsyncs `dir` through `dir_fd` when given (the writer's directory
    /// handle, held open so that a switch needs no new descriptor: running
    /// out of them cannot fail it), else by opening `dir`.
    pub fn install(self, dir: &Path, dir_fd: Option<&File>, first_lsn: u64) -> Result<Segment> {
        let hdr = SegHeader::new(self.segment_id, first_lsn, false);
        self.map.write(0, &hdr.encode());
        self.map
            .flush(0, SEG_HDR)
            .map_err(|e| LogError::io(&self.tmp, e))?;
        let path = dir.join(file_name(first_lsn));
        fs::rename(&self.tmp, &path).map_err(|e| LogError::io(&path, e))?;
        match dir_fd {
            Some(d) => d.sync_all().map_err(|e| LogError::io(dir, e))?,
            None => sync_dir(dir)?,
        }
        Ok(Segment {
            path,
            hdr,
            file: self.file,
            map: self.map,
            end: AtomicUsize::new(SEG_HDR),
            synced: AtomicUsize::new(SEG_HDR),
            unverified_end: AtomicUsize::new(0),
            marks: Mutex::new(Vec::new()),
        })
    }

    pub fn discard(self) {
        let _ = fs::remove_file(&self.tmp);
    }
}
