//! `verify` (read-only integrity scan) and `salvage` (explicit repair: copy
//! every valid record into a new log, never touching the source).
//!
//! Both walk every live segment with `recovery::walk`, which resynchronises
//! after a bad stretch at the next record that validates with the segment's
//! salt and a plausible LSN, so one damaged record does not hide the rest.
//! The newest segment's tail is first judged by the writer's own classifier
//! (`recovery::scan`): a torn tail (nothing valid after it) is reported as
//! such, apart from damage, because the next writer open cuts it. While a
//! writer holds the lock, what lies past the newest segment's last whole
//! batch is being written and is not judged at all; a writer that came
//! during the scan sends it round again (see [`verify`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use super::compaction::GenWriter;
use super::lock::writer_present;
use super::manifest::{gen_dir, Manifest};
use super::reader::is_not_found;
use super::recovery::{self, walk, whole_batches_end, WalkStep};
use super::segment::{self, Segment, SEG_HDR};
use super::{list_live, Lsn, TornTail};
use crate::log::{LogError, Result};

/// One bad stretch found by `verify` or `salvage`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRecord {
    pub segment: PathBuf,
    pub offset: u64,
    pub lsn: Option<Lsn>,
    pub reason: String,
}

/// What `verify` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub segments: usize,
    /// Valid records in whole batches.
    pub records: u64,
    /// Used bytes (up to the end of the last valid record of each segment).
    pub bytes: u64,
    pub first_lsn: Option<Lsn>,
    pub last_lsn: Option<Lsn>,
    pub generation: u64,
    /// Damage: bad stretches in sealed segments, or followed by valid records.
    pub bad: Vec<BadRecord>,
    /// The newest segment's torn tail (not damage: the next writer open cuts it).
    pub torn_tail: Option<TornTail>,
}

impl VerifyReport {
    /// No damage (a torn tail alone is not damage).
    pub fn is_clean(&self) -> bool {
        self.bad.is_empty()
    }
}

/// What `salvage` copied and skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SalvageReport {
    pub segments_read: usize,
    pub records_copied: u64,
    /// Valid records not copied: parts of batches cut by damage, or out of LSN order.
    pub records_skipped: u64,
    pub first_lsn: Option<Lsn>,
    pub last_lsn: Option<Lsn>,
    pub bad: Vec<BadRecord>,
}

/// A valid whole batch handed to the caller of `scan_dir`.
type Batch<'a> = Vec<(Lsn, &'a [u8])>;

/// A sealed segment whose footer vouched for all its records (the fast path).
struct SealedRange {
    first_lsn: Option<Lsn>,
    last_lsn: Option<Lsn>,
    records: u64,
}

/// What `scan_dir` found besides the batches it handed out.
struct Scanned {
    segments: usize,
    bytes: u64,
    bad: Vec<BadRecord>,
    /// Records of batches cut by damage.
    partial: u64,
    generation: u64,
    torn_tail: Option<TornTail>,
}

/// Walk every live segment of `dir`, handing whole batches to `on_batch`.
/// With `on_sealed`, a sealed segment whose seal footer checks out (one CRC
/// pass over its bytes) is reported whole instead of record by record.
fn scan_dir(
    dir: &Path,
    mut on_batch: impl FnMut(&Batch<'_>),
    mut on_sealed: Option<&mut dyn FnMut(SealedRange)>,
) -> Result<Scanned> {
    let writer_live = writer_present(dir);
    let mut torn_tail = None;
    let m = Manifest::load(dir)?;
    let live = list_live(dir, &m, None)?;
    let mut bad = Vec::new();
    let mut bytes = 0u64;
    let mut partial = 0u64;
    let mut prev: Lsn = 0;
    let mut expected_main = m.compacted_end.max(1);
    let n = live.gen.len() + live.main.len();
    for (i, p) in live.gen.iter().chain(live.main.iter()).enumerate() {
        let is_main = i >= live.gen.len();
        let seg = match Segment::open(p, false) {
            Ok(s) => s,
            Err(LogError::Corrupt {
                segment,
                offset,
                lsn,
                reason,
            }) => {
                bad.push(BadRecord {
                    segment,
                    offset,
                    lsn,
                    reason,
                });
                continue;
            }
            Err(e) => return Err(e),
        };
        if is_main && (seg.hdr.compacted() || seg.hdr.first_lsn != expected_main) {
            bad.push(BadRecord {
                segment: p.clone(),
                offset: 0,
                lsn: Some(seg.hdr.first_lsn),
                reason: format!(
                    "segment starts at lsn {} but lsn {expected_main} was expected{}",
                    seg.hdr.first_lsn,
                    if seg.hdr.compacted() {
                        " (and it is marked compacted)"
                    } else {
                        ""
                    }
                ),
            });
        }
        if !is_main && !seg.hdr.compacted() {
            bad.push(BadRecord {
                segment: p.clone(),
                offset: 0,
                lsn: None,
                reason: "segment in a generation directory is not marked compacted".into(),
            });
        }
        let mut all = seg.map.bytes(seg.map.len());
        if is_main && i + 1 == n {
            if writer_live {
                let (end, _) = whole_batches_end(all, &seg.hdr, SEG_HDR, seg.hdr.first_lsn);
                all = &all[..end];
            } else if let Some(pr) = recovery::scan(all, &seg.hdr, prev).problem {
                if pr.torn {
                    torn_tail = Some(TornTail {
                        segment: p.clone(),
                        offset: pr.offset as u64,
                        lsn: pr.lsn,
                        bytes: (pr.tail_end - pr.offset) as u64,
                        reason: pr.reason,
                    });
                    all = &all[..pr.offset];
                }
            }
        }
        if let Some(on_sealed) = on_sealed.as_deref_mut() {
            if let Some(sc) = super::recovery::scan_sealed(all, &seg.hdr, prev) {
                on_sealed(SealedRange {
                    first_lsn: sc.first_lsn,
                    last_lsn: sc.last_lsn,
                    records: sc.records,
                });
                bytes += sc.end as u64;
                if let Some(l) = sc.last_lsn {
                    prev = prev.max(l);
                }
                if is_main {
                    expected_main = prev.max(seg.hdr.first_lsn.saturating_sub(1)) + 1;
                }
                continue;
            }
        }
        let mut batch: Batch<'_> = Vec::new();
        let mut batch_off = 0usize;
        let mut used = SEG_HDR;
        let mut seg_bad: Vec<BadRecord> = Vec::new();
        let mut dropped = 0u64;
        // After damage inside an open batch, the batch's surviving tail
        // (up to its last record) is skipped too: batches are all or nothing.
        let mut skip_rest = false;
        let mut seg_last: Option<Lsn> = None;
        walk(all, &seg.hdr, prev, |ev| match ev {
            WalkStep::Record(r) if skip_rest => {
                seg_last = Some(r.lsn);
                dropped += 1;
                skip_rest = r.cont;
            }
            WalkStep::Record(r) => {
                seg_last = Some(r.lsn);
                if batch.is_empty() {
                    batch_off = r.offset;
                }
                batch.push((r.lsn, r.payload));
                used = r.offset + super::record::record_size(r.payload.len());
                if !r.cont {
                    on_batch(&batch);
                    batch.clear();
                }
            }
            WalkStep::Bad(off, lsn, reason) => {
                if !batch.is_empty() {
                    skip_rest = true;
                    dropped += batch.len() as u64;
                    seg_bad.push(BadRecord {
                        segment: p.clone(),
                        offset: batch_off as u64,
                        lsn: Some(batch[0].0),
                        reason: format!("batch of {} record(s) interrupted by damage", batch.len()),
                    });
                    batch.clear();
                }
                seg_bad.push(BadRecord {
                    segment: p.clone(),
                    offset: off as u64,
                    lsn,
                    reason,
                });
            }
        });
        if !batch.is_empty() {
            dropped += batch.len() as u64;
            let newest = i + 1 == n;
            seg_bad.push(BadRecord {
                segment: p.clone(),
                offset: batch_off as u64,
                lsn: Some(batch[0].0),
                reason: format!(
                    "unterminated batch of {} record(s) at the end of {}",
                    batch.len(),
                    if newest {
                        "the newest segment (a torn tail)"
                    } else {
                        "a sealed segment"
                    }
                ),
            });
        }
        bad.append(&mut seg_bad);
        partial += dropped;
        bytes += used as u64;
        if let Some(l) = seg_last {
            prev = prev.max(l);
        }
        if is_main {
            expected_main = prev.max(seg.hdr.first_lsn.saturating_sub(1)) + 1;
        }
    }
    Ok(Scanned {
        segments: n,
        bytes,
        bad,
        partial,
        generation: m.generation,
        torn_tail,
    })
}

/// Scan every live segment of the log in `dir` (read-only, no lock) and check
/// every checksum, LSN and batch boundary.
/// A compaction that commits meanwhile deletes the files of the old
/// generation: the scan then starts over on the new one. So does a scan
/// that found something wrong while a writer came (one rewrites `LOCK` as
/// it opens) or is there now: the presence probe at the start said none, so
/// a record that writer was appending could pass for damage. Damage is what
/// a scan finds with no writer coming or going around it.
pub fn verify(dir: &Path) -> Result<VerifyReport> {
    let (mut attempts, mut rescans) = (0, 0);
    loop {
        let generation = Manifest::load(dir)?.generation;
        let writers = writer_stamp(dir);
        match verify_once(dir) {
            Err(e) if attempts < 20 && is_not_found(&e) => {}
            Ok(_) if attempts < 20 && Manifest::load(dir)?.generation != generation => {}
            // A live writer beside real damage would send every scan round
            // again: a few rescans settle a transient.
            Ok(rep)
                if rescans < 5
                    && (!rep.bad.is_empty() || rep.torn_tail.is_some())
                    && (writer_stamp(dir) != writers || writer_present(dir)) =>
            {
                rescans += 1;
            }
            other => return other,
        }
        attempts += 1;
    }
}

/// What changes whenever a writer opens the log in `dir`: `LOCK`'s inode,
/// size and change time (each writer writes its pid there).
fn writer_stamp(dir: &Path) -> Option<(u64, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(dir.join("LOCK")).ok()?;
    Some((m.ino(), m.size(), m.ctime(), m.ctime_nsec()))
}

fn verify_once(dir: &Path) -> Result<VerifyReport> {
    let rep = std::cell::RefCell::new(VerifyReport::default());
    let mut sealed = |s: SealedRange| {
        let mut rep = rep.borrow_mut();
        rep.records += s.records;
        if let Some(f) = s.first_lsn {
            rep.first_lsn.get_or_insert(f);
        }
        rep.last_lsn = s.last_lsn.or(rep.last_lsn);
    };
    let scanned = scan_dir(
        dir,
        |b| {
            let mut rep = rep.borrow_mut();
            rep.records += b.len() as u64;
            rep.first_lsn.get_or_insert(b[0].0);
            rep.last_lsn = Some(b[b.len() - 1].0);
        },
        Some(&mut sealed),
    )?;
    let mut rep = rep.into_inner();
    rep.segments = scanned.segments;
    rep.bytes = scanned.bytes;
    rep.bad = scanned.bad;
    rep.generation = scanned.generation;
    rep.torn_tail = scanned.torn_tail;
    Ok(rep)
}

/// Copy every valid whole batch of the log in `src` (original LSNs) into a
/// new log in `dst` (which must not exist or be empty). `src` is never
/// modified. `dst` opens with `Log::open` and continues after the last copied LSN.
pub fn salvage(src: &Path, dst: &Path) -> Result<SalvageReport> {
    if dst.exists()
        && fs::read_dir(dst)
            .map_err(|e| LogError::io(dst, e))?
            .next()
            .is_some()
    {
        return Err(LogError::InvalidArgument(format!(
            "salvage destination {} is not empty",
            dst.display()
        )));
    }
    super::create_dir_durable(dst)?;
    let ids = AtomicU64::new(1);
    let gdir = gen_dir(dst, 1);
    let mut w = GenWriter::new(&gdir, 64 << 20, &ids)?;
    let mut rep = SalvageReport::default();
    let mut err: Option<LogError> = None;
    let mut last: Lsn = 0;
    let scanned = scan_dir(
        src,
        |b| {
            if err.is_some() {
                return;
            }
            if b[0].0 <= last {
                rep.records_skipped += b.len() as u64;
                return;
            }
            for (lsn, payload) in b {
                if let Err(e) = w.push(*lsn, payload) {
                    err = Some(e);
                    return;
                }
            }
            rep.records_copied += b.len() as u64;
            rep.first_lsn.get_or_insert(b[0].0);
            last = b[b.len() - 1].0;
            rep.last_lsn = Some(last);
        },
        None,
    )?;
    if let Some(e) = err {
        return Err(e);
    }
    rep.segments_read = scanned.segments;
    rep.bad = scanned.bad;
    rep.records_skipped += scanned.partial;
    let (files, _) = w.finish()?;
    segment::sync_dir(dst)?;
    let manifest = Manifest {
        generation: 1,
        compacted_end: last + 1,
        next_segment_id: ids.into_inner(),
        segments: files,
    };
    manifest.store(dst, || Ok(()))?;
    Ok(rep)
}
