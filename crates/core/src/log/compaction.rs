//! The compaction primitive: rewrite sealed segments keeping only the
//! records a predicate keeps (with their original LSNs) into a new generation
//! directory, then switch to it atomically through the MANIFEST.
//!
//! Switch protocol (crash-safe at every step): write `gen-{N+1}/` segment
//! files (flag compacted) and fsync them and the directories; write
//! `MANIFEST.tmp`, fsync, rename over `MANIFEST`, fsync the directory (the
//! commit point); swap the in-memory segment list; delete the old generation
//! and the compacted main-directory segments. `Log::open` deletes whatever a
//! crash left of the side not named by the MANIFEST, so a reopen sees the old
//! or the new generation, never a mix.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::manifest::{commit_tmp, gen_dir, max_gen_on_disk, Manifest};
use super::record::{encode_record, parse_at, record_size, Parsed};
use super::seal::{footer_offset, sealed_len, SealFooter, SEAL_RESERVE};
use super::segment::{self, file_name, SegHeader, Segment, SEG_HDR};
use super::{lock, Log, Lsn};
use crate::log::{LogError, Result};
use std::os::unix::fs::FileExt;

/// The steps of a compaction's commit; a fault-injection build can fail
/// one (`FaultInjection::fail_compaction_at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionStep {
    /// After the new generation's segment files are written, before the MANIFEST.
    SegmentsWritten,
    /// After `MANIFEST.tmp` is written and synced, before the rename.
    ManifestTmpWritten,
    /// After the rename and the directory fsync, before memory switches
    /// (as if that fsync had failed).
    ManifestRenamed,
    /// After the switch is committed, before the old files are deleted.
    Committed,
}

/// What a compaction did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionOutcome {
    /// The generation now current (unchanged if there was nothing to do).
    pub generation: u64,
    /// LSNs below this now live in the generation's segments.
    pub compacted_end: Lsn,
    pub segments_in: usize,
    pub segments_out: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_kept: u64,
    pub records_dropped: u64,
}

/// Writes compacted segments (standalone records, no batches) into one
/// directory, each sealed with its footer like a sealed main segment.
pub(crate) struct GenWriter<'a> {
    dir: PathBuf,
    seg_size: usize,
    cur: Option<OutFile>,
    pub files: Vec<(Lsn, u64)>,
    pub bytes: u64,
    ids: &'a AtomicU64,
}

/// The compacted segment being written.
struct OutFile {
    w: BufWriter<File>,
    path: PathBuf,
    used: usize,
    id: u64,
    first_lsn: Lsn,
    last_lsn: Lsn,
    records: u64,
    /// Salted CRC of the record bytes so far (the footer's `data_crc`).
    crc: crc32fast::Hasher,
}

impl<'a> GenWriter<'a> {
    pub fn new(dir: &Path, seg_size: u64, ids: &'a AtomicU64) -> Result<GenWriter<'a>> {
        // A link at the generation's name would put the compacted segments
        // in someone else's folder: refused, never followed.
        if fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(LogError::InvalidArgument(format!(
                "{} is a symbolic link; agentlog does not follow links inside a store \
                 (one may have been planted): remove it",
                dir.display()
            )));
        }
        super::create_dir_durable(dir)?;
        Ok(GenWriter {
            dir: dir.to_path_buf(),
            seg_size: seg_size as usize,
            cur: None,
            files: Vec::new(),
            bytes: 0,
            ids,
        })
    }

    pub fn push(&mut self, lsn: Lsn, payload: &[u8]) -> Result<()> {
        let size = record_size(payload.len());
        let full = match &self.cur {
            Some(c) => c.used + size + SEAL_RESERVE > self.seg_size,
            None => true,
        };
        if full {
            self.finish_current()?;
            let id = self.ids.fetch_add(1, Ordering::AcqRel);
            let path = self.dir.join(file_name(lsn));
            let f = crate::files::create_fresh(&path).map_err(|e| LogError::io(&path, e))?;
            let mut w = BufWriter::with_capacity(1 << 16, f);
            w.write_all(&SegHeader::new(id, lsn, true).encode())
                .map_err(|e| LogError::io(&path, e))?;
            self.files.push((lsn, id));
            let mut crc = crc32fast::Hasher::new();
            crc.update(&id.to_le_bytes());
            self.cur = Some(OutFile {
                w,
                path,
                used: SEG_HDR,
                id,
                first_lsn: lsn,
                last_lsn: lsn,
                records: 0,
                crc,
            });
        }
        let c = self.cur.as_mut().expect("current file");
        let rec = encode_record(c.id, lsn, false, payload);
        c.w.write_all(&rec)
            .map_err(|e| LogError::io(c.path.as_path(), e))?;
        c.crc.update(&rec);
        c.used += size;
        c.last_lsn = lsn;
        c.records += 1;
        Ok(())
    }

    fn finish_current(&mut self) -> Result<()> {
        if let Some(c) = self.cur.take() {
            let f =
                c.w.into_inner()
                    .map_err(|e| LogError::io(&c.path, e.into_error()))?;
            let len = sealed_len(c.used);
            let footer = SealFooter {
                used: c.used as u64,
                first_lsn: c.first_lsn,
                last_lsn: c.last_lsn,
                records: c.records,
                data_crc: c.crc.finalize(),
            };
            f.set_len(len as u64)
                .and_then(|_| f.write_all_at(&footer.encode(), footer_offset(c.used) as u64))
                .and_then(|_| f.sync_all())
                .map_err(|e| LogError::io(&c.path, e))?;
            self.bytes += len as u64;
        }
        Ok(())
    }

    /// Close the last file and fsync the directory.
    pub fn finish(mut self) -> Result<(Vec<(Lsn, u64)>, u64)> {
        self.finish_current()?;
        segment::sync_dir(&self.dir)?;
        Ok((self.files, self.bytes))
    }
}

impl Log {
    /// Rewrite every sealed segment entirely below `upto` (and the current
    /// generation's segments) keeping the records for which `keep(lsn,
    /// payload)` is true, with their original LSNs, as a new generation.
    /// Appends and views continue meanwhile; views taken before keep seeing
    /// the old segments.
    pub fn compact_sealed(
        &self,
        upto: Lsn,
        keep: &mut dyn FnMut(Lsn, &[u8]) -> bool,
    ) -> Result<CompactionOutcome> {
        let inner = &*self.inner;
        inner.check_poison()?;
        let mut g = lock(&inner.gen);
        let limit = upto.min(inner.sealed_end.load(Ordering::Acquire));
        let segs = lock(&inner.segs).clone();
        // Inputs: the generation's segments plus main segments whose successor starts <= limit.
        let mut inputs: Vec<Arc<Segment>> = Vec::new();
        let mut new_end = g.compacted_end;
        for (i, s) in segs.iter().enumerate() {
            if s.hdr.compacted() {
                inputs.push(s.clone());
                continue;
            }
            match segs.get(i + 1) {
                Some(next) if next.hdr.first_lsn <= limit => {
                    new_end = next.hdr.first_lsn;
                    inputs.push(s.clone());
                }
                _ => break,
            }
        }
        let mut out = CompactionOutcome {
            generation: g.generation,
            compacted_end: g.compacted_end,
            segments_in: inputs.len(),
            ..Default::default()
        };
        if inputs.is_empty() {
            return Ok(out);
        }
        // Above every generation on disk: a directory left by a failed
        // attempt (or committed by one whose swap failed) is never reused.
        let generation = g.generation.max(max_gen_on_disk(&inner.dir)?) + 1;
        let gdir = gen_dir(&inner.dir, generation);
        let mut w = GenWriter::new(&gdir, inner.opts.segment_size, &inner.next_segment_id)?;
        for s in &inputs {
            let bytes = s.published();
            out.bytes_before += bytes.len() as u64;
            let mut off = SEG_HDR;
            loop {
                match parse_at(bytes, off, s.hdr.segment_id) {
                    Parsed::Record {
                        lsn, payload, next, ..
                    } => {
                        if keep(lsn, payload) {
                            w.push(lsn, payload)?;
                            out.records_kept += 1;
                        } else {
                            out.records_dropped += 1;
                        }
                        off = next;
                    }
                    Parsed::End => break,
                    Parsed::Bad { reason, lsn } => {
                        return Err(LogError::Corrupt {
                            segment: s.path.clone(),
                            offset: off as u64,
                            lsn,
                            reason: format!("{reason} (found while compacting)"),
                        })
                    }
                }
            }
        }
        let (files, bytes_after) = w.finish()?;
        segment::sync_dir(&inner.dir)?;
        inner.inject(CompactionStep::SegmentsWritten)?;
        // Open and check the new segments while nothing refers to them yet:
        // a failure here leaves the old generation current.
        let new_segs = open_generation(&gdir, &files)?;
        let manifest = Manifest {
            generation,
            compacted_end: new_end,
            next_segment_id: inner.next_segment_id.load(Ordering::Acquire),
            segments: files.clone(),
        };
        manifest.write_tmp(&inner.dir)?;
        inner.inject(CompactionStep::ManifestTmpWritten)?;
        // From the rename on, the disk may name the new generation while
        // memory still has the old: any failure poisons the log, so this
        // process neither writes under nor deletes the committed generation.
        let poison = |e: LogError| inner.poison_with(&e);
        commit_tmp(&inner.dir)
            .and_then(|_| inner.inject(CompactionStep::ManifestRenamed))
            .map_err(poison)?;
        let old_gen = g.generation;
        {
            let mut cur = lock(&inner.segs);
            let rest = cur
                .iter()
                .filter(|s| !s.hdr.compacted() && s.hdr.first_lsn >= new_end)
                .cloned();
            let v: Vec<Arc<Segment>> = new_segs.into_iter().chain(rest).collect();
            *cur = Arc::new(v);
        }
        g.generation = generation;
        g.compacted_end = new_end;
        out.generation = generation;
        out.compacted_end = new_end;
        out.segments_out = files.len();
        out.bytes_after = bytes_after;
        inner.inject(CompactionStep::Committed).map_err(poison)?;
        // Delete what the new generation replaces (open would do it after a crash).
        if old_gen > 0 {
            let old = gen_dir(&inner.dir, old_gen);
            fs::remove_dir_all(&old).map_err(|e| poison(LogError::io(&old, e)))?;
        }
        for s in inputs.iter().filter(|s| !s.hdr.compacted()) {
            fs::remove_file(&s.path).map_err(|e| poison(LogError::io(&s.path, e)))?;
        }
        segment::sync_dir(&inner.dir).map_err(poison)?;
        Ok(out)
    }
}

/// Map the segments of a freshly written generation and check each one
/// (CRCs, LSN order) before a MANIFEST may name them.
fn open_generation(gdir: &Path, files: &[(Lsn, u64)]) -> Result<Vec<Arc<Segment>>> {
    let mut segs = Vec::with_capacity(files.len());
    let mut prev_last = 0;
    for (lsn, _) in files {
        let s = Segment::open(&gdir.join(file_name(*lsn)), false)?;
        let bytes = s.map.bytes(s.map.len());
        let sc = super::recovery::scan_sealed(bytes, &s.hdr, prev_last)
            .unwrap_or_else(|| super::recovery::scan(bytes, &s.hdr, prev_last));
        if let Some(pr) = sc.problem {
            return Err(LogError::Corrupt {
                segment: s.path.clone(),
                offset: pr.offset as u64,
                lsn: pr.lsn,
                reason: format!("{} (in a segment compaction just wrote)", pr.reason),
            });
        }
        prev_last = sc.last_lsn.unwrap_or(prev_last);
        s.end.store(sc.end, Ordering::Release);
        segs.push(Arc::new(s));
    }
    Ok(segs)
}

impl super::Inner {
    /// Fails at `step` when a test asked for it (fault-injection builds).
    #[cfg_attr(not(any(test, feature = "fault-injection")), allow(unused_variables))]
    fn inject(&self, step: CompactionStep) -> Result<()> {
        #[cfg(any(test, feature = "fault-injection"))]
        if self.opts.faults.fail_compaction_at == Some(step) {
            return Err(LogError::Injected(format!(
                "compaction failure at {step:?}"
            )));
        }
        Ok(())
    }
}
