//! Opening a log directory as the writer: delete leftovers of interrupted
//! compactions/rotations, scan every live segment, cut a torn tail of the
//! newest segment (TolerateTail) or refuse (corruption, Absolute), and hand
//! `Log::open` the segments with their committed ends.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::manifest::{self, Manifest};
use super::record::REC_HDR;
use super::seal::SEAL_RESERVE;
use super::segment::{self, Segment, SEG_HDR};
use super::tail::{Mark, TailHint};
use super::{recovery, LogOptions, Lsn, RecoveryMode, RecoveryReport, TailCut};
use crate::log::{LogError, Result};

/// What recovery hands to `Log::open`.
pub(crate) struct Opened {
    pub manifest: Manifest,
    pub segs: Vec<Arc<Segment>>,
    pub active: Arc<Segment>,
    pub next_lsn: Lsn,
    pub next_segment_id: u64,
    pub report: RecoveryReport,
    /// Offset of the active segment's last record (0: it holds none).
    pub last_record_off: usize,
    /// The last LSN known to be on disk.
    pub durable_lsn: Lsn,
}

pub(super) fn corrupt(
    seg: &Path,
    offset: usize,
    lsn: Option<Lsn>,
    reason: impl Into<String>,
) -> LogError {
    LogError::Corrupt {
        segment: seg.to_path_buf(),
        offset: offset as u64,
        lsn,
        reason: reason.into(),
    }
}

/// Delete leftovers, scan every live segment, cut a torn tail, prepare the active segment.
pub(crate) fn recovery_open(dir: &Path, opts: &LogOptions) -> Result<Opened> {
    let manifest = Manifest::load(dir)?;
    let mut report = RecoveryReport {
        generation: manifest.generation,
        ..Default::default()
    };
    let live = list_live(dir, &manifest, Some(&mut report.removed))?;
    if !report.removed.is_empty() {
        segment::sync_dir(dir)?;
        for p in &report.removed {
            tracing::info!(path = %p.display(), "removed leftover of an interrupted compaction or rotation");
        }
    }
    let mut segs: Vec<Segment> = Vec::with_capacity(live.gen.len() + live.main.len());
    let mut max_id = 0;
    let mut prev_last: Lsn = 0;
    for p in &live.gen {
        let s = Segment::open(p, false)?;
        if !s.hdr.compacted() {
            return Err(corrupt(
                p,
                0,
                None,
                "segment in a generation directory is not marked compacted",
            ));
        }
        let sc = s
            .scan_sealed(prev_last, !opts.quick_open)
            .unwrap_or_else(|| recovery::scan(s.map.bytes(s.map.len()), &s.hdr, prev_last));
        if sc.sealed && opts.quick_open {
            s.unverified_end.store(sc.end, Ordering::Release);
        }
        if let Some(pr) = sc.problem {
            return Err(corrupt(p, pr.offset, pr.lsn, pr.reason));
        }
        if let Some(l) = sc.last_lsn {
            if l >= manifest.compacted_end && manifest.generation > 0 {
                return Err(corrupt(
                    p,
                    0,
                    Some(l),
                    "compacted segment holds an LSN past the compacted end",
                ));
            }
            prev_last = l;
        }
        s.end.store(sc.end, Ordering::Release);
        report.records += sc.records;
        report.first_lsn = report.first_lsn.or(sc.first_lsn);
        max_id = max_id.max(s.hdr.segment_id);
        segs.push(s);
    }
    let mut expected = manifest.compacted_end.max(1);
    let n_main = live.main.len();
    // Whether the newest main segment was sealed (a crash between sealing it
    // and installing its successor): then appends go to a new segment.
    let mut newest_sealed = false;
    // The newest segment's bytes below this were synced before the tail hint
    // was written (see `tail.rs`): no need to flush them again.
    let mut newest_durable_below = 0;
    let mut newest_last_off = 0;
    let mut hinted_lsn = 0;
    for (i, p) in live.main.iter().enumerate() {
        let newest = i + 1 == n_main;
        let mut s = Segment::open(p, newest)?;
        // Sealed segments are checked by one CRC pass (their footer), not
        // record by record: this is what keeps reopening a long log fast.
        let fast = s.scan_sealed(expected - 1, !opts.quick_open);
        if fast.is_none() && newest && (s.map.len() as u64) < opts.segment_size {
            // Trimmed when sealed (crash before the next segment was installed)
            // or cut short: grow it back first; the new bytes are zeros. On a
            // nearly full disk it grows only as far as space allows (a short
            // active segment is fine: appends rotate when it is full).
            let len = s.map.len() as u64;
            let size = segment::fitting_size(dir, opts.segment_size, len);
            if size > len {
                s = s.extend_to(size, opts.zero_fill)?;
            }
        }
        if s.hdr.compacted() {
            return Err(corrupt(
                p,
                0,
                None,
                "compacted segment in the main directory",
            ));
        }
        if s.hdr.first_lsn != expected {
            return Err(corrupt(
                p,
                0,
                Some(s.hdr.first_lsn),
                match segs.last() {
                    Some(prev) => format!(
                        "segment starts at lsn {} but the previous segment {} ends before lsn {expected} (records missing at its end)",
                        s.hdr.first_lsn,
                        prev.path.display()
                    ),
                    None => format!(
                        "segment starts at lsn {} but lsn {expected} was expected (missing records)",
                        s.hdr.first_lsn
                    ),
                },
            ));
        }
        // A quick open resumes the newest segment after what the tail hint
        // vouches for (validated there; the scan goes on past it by the
        // usual rules). The repair modes judge every byte.
        let resume = (opts.quick_open
            && newest
            && fast.is_none()
            && opts.recovery == RecoveryMode::TolerateTail)
            .then(|| TailHint::load(dir))
            .flatten()
            .and_then(|h| {
                let r = h.resume(s.map.bytes(s.map.len()), &s.hdr)?;
                Some((r, h.marks))
            });
        let sc = match fast {
            Some(sc) => {
                if opts.quick_open {
                    s.unverified_end.store(sc.end, Ordering::Release);
                }
                sc
            }
            None => {
                let bytes = s.map.bytes(s.map.len());
                let zero_from = |b: &[u8], o: usize| s.zero_from(b, o);
                let sc = recovery::scan_from(
                    bytes,
                    &s.hdr,
                    expected - 1,
                    resume.as_ref().map(|r| r.0),
                    &zero_from,
                );
                let mut marks: Vec<Mark> = match &resume {
                    Some((r, hinted)) => {
                        s.unverified_end.store(r.off, Ordering::Release);
                        hinted.iter().copied().filter(|m| m.1 < r.off).collect()
                    }
                    None => Vec::new(),
                };
                marks.extend(sc.marks.iter().copied().filter(|m| m.1 < sc.end));
                *s.marks.get_mut().unwrap_or_else(|e| e.into_inner()) = marks;
                sc
            }
        };
        let durable_below = resume.as_ref().map_or(0, |r| r.0.off);
        if let Some((r, _)) = &resume {
            hinted_lsn = r.next_lsn - 1;
        }
        newest_sealed = newest && sc.sealed;
        if let Some(mut pr) = sc.problem {
            let tolerates_tail = opts.recovery != RecoveryMode::Absolute;
            let hole = (newest && !pr.torn && opts.recovery == RecoveryMode::CutAtHole)
                .then(|| recovery::power_loss_hole(s.map.bytes(s.map.len()), &s.hdr, &pr))
                .flatten();
            if let Some(h) = &hole {
                let dropped = match h.lsns {
                    Some((a, b)) => format!("lsn {a}..={b}"),
                    None => "no lsn".to_string(),
                };
                pr.reason = format!(
                    "{}; power-loss hole (zero page at offset {}): dropped {} valid record(s) behind it ({dropped})",
                    pr.reason, h.page, h.records
                );
            }
            let tolerable = newest && (pr.torn && tolerates_tail || hole.is_some());
            if !tolerable {
                let mut reason = pr.reason.clone();
                if newest && pr.torn {
                    reason.push_str(" (torn tail; refused in Absolute recovery mode)");
                } else if !newest {
                    reason.push_str(" (in a sealed segment)");
                }
                return Err(corrupt(p, pr.offset, pr.lsn, reason));
            }
            report.cut.push(cut_tail(&s, &pr)?);
        }
        s.end.store(sc.end, Ordering::Release);
        // Bytes below the hinted end were synced before the hint was
        // written; the rest is synced by the first sync (see below).
        let synced = if durable_below > 0 {
            durable_below.min(sc.end)
        } else {
            sc.end
        };
        s.synced.store(synced, Ordering::Release);
        newest_durable_below = durable_below.min(sc.end);
        newest_last_off = sc.last_off;
        report.records += sc.records;
        report.first_lsn = report.first_lsn.or(sc.first_lsn);
        if let Some(l) = sc.last_lsn {
            expected = l + 1;
        }
        max_id = max_id.max(s.hdr.segment_id);
        segs.push(s);
    }
    let mut next_segment_id = manifest.next_segment_id.max(max_id + 1).max(1);
    let fresh = n_main == 0 || newest_sealed;
    let mut durable_lsn = expected - 1;
    let active = if fresh {
        let id = next_segment_id;
        next_segment_id += 1;
        // Sized to the free space on a nearly full disk (`fitting_size`).
        let least = (SEG_HDR + REC_HDR + opts.max_record_size as usize + SEAL_RESERVE) as u64;
        let size = segment::fitting_size(dir, opts.segment_size, least);
        segment::prepare(dir, id, size, None, opts.zero_fill)?.install(dir, None, expected)?
    } else {
        let s = segs.pop().expect("newest segment");
        let end = s.end();
        if newest_durable_below > 0 {
            // Resumed from the tail hint: what a crashed writer left past
            // it in the page cache is synced by this writer's first sync
            // (its `synced` starts at the hinted end), not with a sync now.
            if end > newest_durable_below {
                durable_lsn = hinted_lsn;
            }
        } else {
            // Whatever the previous writer left in the page cache becomes durable now.
            s.map.flush(0, end).map_err(|e| LogError::io(&s.path, e))?;
            s.synced.store(end, Ordering::Release);
        }
        s
    };
    let active = Arc::new(active);
    let mut all: Vec<Arc<Segment>> = segs.into_iter().map(Arc::new).collect();
    all.push(active.clone());
    report.segments = all.len();
    report.last_lsn = (expected > 1).then_some(expected - 1);
    Ok(Opened {
        manifest,
        segs: all,
        active,
        next_lsn: expected,
        next_segment_id,
        report,
        last_record_off: if fresh { 0 } else { newest_last_off },
        durable_lsn,
    })
}

/// Copy a torn tail to `<segment>.broken[.N]`, zero it, sync.
fn cut_tail(s: &Segment, pr: &recovery::Problem) -> Result<TailCut> {
    let mut broken = PathBuf::from(format!("{}.broken", s.path.display()));
    let mut n = 1;
    while broken.exists() {
        broken = PathBuf::from(format!("{}.broken.{n}", s.path.display()));
        n += 1;
    }
    let bytes = &s.map.bytes(s.map.len())[pr.offset..pr.tail_end];
    fs::write(&broken, bytes)
        .and_then(|_| fs::File::open(&broken)?.sync_all())
        .map_err(|e| LogError::io(&broken, e))?;
    s.map.zero(pr.offset, pr.tail_end - pr.offset);
    s.map
        .flush(pr.offset, pr.tail_end - pr.offset)
        .map_err(|e| LogError::io(&s.path, e))?;
    if let Some(dir) = s.path.parent() {
        segment::sync_dir(dir)?;
    }
    tracing::warn!(
        segment = %s.path.display(),
        offset = pr.offset,
        lsn = ?pr.lsn,
        bytes = pr.tail_end - pr.offset,
        reason = %pr.reason,
        broken = %broken.display(),
        "cut a torn tail"
    );
    Ok(TailCut {
        segment: s.path.clone(),
        offset: pr.offset as u64,
        lsn: pr.lsn,
        bytes: (pr.tail_end - pr.offset) as u64,
        reason: pr.reason.clone(),
        broken_copy: broken,
    })
}

/// Live segment paths of a log directory.
pub(crate) struct Live {
    pub gen: Vec<PathBuf>,
    pub main: Vec<PathBuf>,
}

/// List live segments per the MANIFEST. With `removed = Some(..)` (the
/// writer), delete leftovers and record them; readers pass `None`.
pub(crate) fn list_live(
    dir: &Path,
    m: &Manifest,
    mut removed: Option<&mut Vec<PathBuf>>,
) -> Result<Live> {
    let gdir = manifest::gen_dir(dir, m.generation);
    let gen: Vec<PathBuf> = if m.generation > 0 {
        m.segments
            .iter()
            .map(|(lsn, _)| gdir.join(segment::file_name(*lsn)))
            .collect()
    } else {
        Vec::new()
    };
    let mut main: Vec<(Lsn, PathBuf)> = Vec::new();
    let rd = fs::read_dir(dir).map_err(|e| LogError::io(dir, e))?;
    for ent in rd {
        let ent = ent.map_err(|e| LogError::io(dir, e))?;
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = ent.path();
        let leftover = if name.ends_with(".tmp") {
            true
        } else if let Some(g) = manifest::parse_gen_dir(name) {
            g != m.generation
        } else if let Some(lsn) = segment::parse_file_name(name) {
            if lsn < m.compacted_end {
                true
            } else {
                main.push((lsn, path.clone()));
                false
            }
        } else {
            false
        };
        if leftover {
            if let Some(r) = removed.as_deref_mut() {
                let res = if path.is_dir() {
                    fs::remove_dir_all(&path)
                } else {
                    fs::remove_file(&path)
                };
                res.map_err(|e| LogError::io(&path, e))?;
                r.push(path);
            }
        }
    }
    if m.generation > 0 {
        if let Some(r) = removed {
            // Files in the current generation directory that the MANIFEST does not list.
            let rd = fs::read_dir(&gdir).map_err(|e| LogError::io(&gdir, e))?;
            let mut any = false;
            for ent in rd {
                let path = ent.map_err(|e| LogError::io(&gdir, e))?.path();
                if !gen.contains(&path) {
                    fs::remove_file(&path).map_err(|e| LogError::io(&path, e))?;
                    r.push(path);
                    any = true;
                }
            }
            if any {
                segment::sync_dir(&gdir)?;
            }
        }
    }
    main.sort();
    Ok(Live {
        gen,
        main: main.into_iter().map(|(_, p)| p).collect(),
    })
}
