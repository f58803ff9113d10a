//! The log engine: an append-only sequence of checksummed records in
//! memory-mapped, preallocated segment files (see FORMAT.md for the bytes).
//!
//! Invariants:
//! * one writer process (`LOCK` flock); inside it, one writer at a time
//!   (the `writer` mutex); records get consecutive LSNs starting at 1;
//! * bytes are published by storing a segment's end with `Release` after they
//!   were written; views load it with `Acquire` and never see partial batches;
//! * `Durable` returns only after an msync covering the record (group commit:
//!   one leader syncs for everyone waiting); a failed sync poisons the log;
//! * sealed segments are fully synced and trimmed before the next segment is
//!   installed, so only the newest segment can hold a torn tail;
//! * recovery cuts a torn tail (saving it to `.broken`) but refuses corruption.
//!
//! Lock order: `gen` (compaction) → `segs`; `writer` → `segs`; `writer` →
//! `sync` (briefly, at rotation). The group-commit leader takes `writer`
//! only while holding no other lock, so waiting on `sync` never blocks appends.

// A benchmark's yardstick, not part of the engine: only with `internals`.
#[cfg(feature = "internals")]
pub(crate) mod bound;
mod compaction;
mod error;
mod lock;
mod manifest;
#[allow(unsafe_code)] // the one module that may (see its safety arguments)
pub(crate) mod mmap; // `crate::internals` re-exports its `wait_child` and `die_with_spawning_thread`
mod open;
mod options;
mod poison;
mod reader;
pub(crate) mod record;
pub(crate) mod recovery;
pub(crate) mod seal;
pub(crate) mod segment;
mod tail;
mod verify;
mod view;

use std::fs;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::JoinHandle;

pub use compaction::{CompactionOutcome, CompactionStep};
pub use error::{LogError, Result};
#[cfg(any(test, feature = "fault-injection"))]
pub use options::FaultInjection;
pub use options::{
    Durability, LogOptions, LogStats, RecoveryMode, RecoveryReport, TailCut, TornTail,
};
pub use reader::LogReader;
pub use verify::{salvage, verify, BadRecord, SalvageReport, VerifyReport};

pub use view::{LogIter, LogView, RecordRef};

pub(crate) use open::list_live;

use record::{encode_header, hasher_for, record_size, CONT, REC_HDR};
use segment::{Prepared, Segment, SEG_HDR};

/// A log sequence number. The first record of a new log is 1; 0 means "nothing".
pub type Lsn = u64;

struct Writer {
    active: Arc<Segment>,
    write_off: usize,
    next_lsn: Lsn,
    /// Offset from which the next record start is added to the active
    /// segment's sparse index (`tail::MARK_EVERY` apart).
    next_mark: usize,
    /// Offset of the last record written (valid while the active segment
    /// holds records).
    last_record_off: usize,
    prepared: Option<JoinHandle<Result<Prepared>>>,
}

struct SyncState {
    synced: Lsn,
    in_flight: bool,
}

struct GenState {
    generation: u64,
    compacted_end: Lsn,
}

struct Inner {
    dir: PathBuf,
    /// `dir` held open: a segment switch fsyncs it without needing a new
    /// descriptor, so running out of them fails the append that finds no
    /// room for a new segment file, never the switch half-way (poison).
    dir_fd: fs::File,
    opts: LogOptions,
    _lock: lock::LockFile,
    writer: Mutex<Writer>,
    segs: Mutex<Arc<Vec<Arc<Segment>>>>,
    last_lsn: AtomicU64,
    sealed_end: AtomicU64,
    /// Bytes a record may still take in the active segment, and whether a
    /// segment switch is under way: read without the writer lock by
    /// [`Log::append_may_wait`].
    room: AtomicUsize,
    switching: AtomicBool,
    next_segment_id: AtomicU64,
    sync: Mutex<SyncState>,
    sync_cv: Condvar,
    poison: OnceLock<String>,
    gen: Mutex<GenState>,
    budget: Option<Arc<AtomicI64>>,
}

/// The bytes a record may take in a segment of `len` bytes written up to
/// `end` (the seal's reserve kept).
fn room_after(len: usize, end: usize) -> usize {
    len.saturating_sub(end + seal::SEAL_RESERVE)
}

/// A writer over one log directory. `Send + Sync`; all methods take `&self`.
pub struct Log {
    inner: Arc<Inner>,
    flusher: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log").field("dir", &self.inner.dir).finish()
    }
}

/// `create_dir_all` that also fsyncs the parent of every directory it
/// creates, so a new directory survives a power loss with what is put in it.
pub(crate) fn create_dir_durable(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir_durable(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => {}
        // Created concurrently by someone else: their fsync, or ours below.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {}
        Err(e) => return Err(LogError::io(dir, e)),
    }
    match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => segment::sync_dir(parent),
        None => Ok(()),
    }
}

/// Lock a mutex, ignoring poisoning: every critical section leaves the state
/// consistent before anything that can panic (a panicking `fill` closure
/// publishes nothing).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Log {
    /// Open (or create) the log in `dir`, taking the writer lock and recovering.
    pub fn open(dir: &Path, opts: LogOptions) -> Result<(Log, RecoveryReport)> {
        opts.check()?;
        create_dir_durable(dir)?;
        let lockf = lock::acquire(dir, opts.lock_timeout)?;
        poison::check_marker(dir)?;
        let opened = open::recovery_open(dir, &opts)?;
        // Stands in for free space; only fault-injection builds set it.
        #[cfg(any(test, feature = "fault-injection"))]
        let budget = opts
            .faults
            .disk_budget
            .map(|b| Arc::new(AtomicI64::new(b as i64)));
        #[cfg(not(any(test, feature = "fault-injection")))]
        let budget = None;
        let last = opened.next_lsn - 1;
        let sealed_end = opened.active.hdr.first_lsn;
        let dir_fd = fs::File::open(dir).map_err(|e| LogError::io(dir, e))?;
        let room = room_after(opened.active.map.len(), opened.active.end());
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            dir_fd,
            writer: Mutex::new(Writer {
                next_mark: (opened.active.end() / tail::MARK_EVERY + 1) * tail::MARK_EVERY,
                last_record_off: opened.last_record_off,
                write_off: opened.active.end(),
                active: opened.active,
                next_lsn: opened.next_lsn,
                prepared: None,
            }),
            segs: Mutex::new(Arc::new(opened.segs)),
            last_lsn: AtomicU64::new(last),
            sealed_end: AtomicU64::new(sealed_end),
            room: AtomicUsize::new(room),
            switching: AtomicBool::new(false),
            next_segment_id: AtomicU64::new(opened.next_segment_id),
            sync: Mutex::new(SyncState {
                synced: opened.durable_lsn,
                in_flight: false,
            }),
            sync_cv: Condvar::new(),
            poison: OnceLock::new(),
            gen: Mutex::new(GenState {
                generation: opened.manifest.generation,
                compacted_end: opened.manifest.compacted_end,
            }),
            budget,
            opts,
            _lock: lockf,
        });
        let flusher = inner.opts.flush_interval.map(|every| {
            let (tx, rx) = mpsc::channel::<()>();
            let weak: Weak<Inner> = Arc::downgrade(&inner);
            let h = std::thread::Builder::new()
                .name("agentlog-flush".into())
                .spawn(move || {
                    while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                        let Some(inner) = weak.upgrade() else { break };
                        let last = inner.last_lsn.load(Ordering::Acquire);
                        if inner.poison.get().is_none() && lock(&inner.sync).synced < last {
                            // An error poisons the log; appenders report it.
                            let _ = inner.wait_durable(last);
                        }
                    }
                })
                .expect("spawn flusher thread");
            (tx, h)
        });
        Ok((Log { inner, flusher }, opened.report))
    }

    /// Append one record.
    pub fn append(&self, payload: &[u8], d: Durability) -> Result<Lsn> {
        self.append_with(payload.len(), d, |buf| buf.copy_from_slice(payload))
    }

    /// Append one record of `len` bytes, letting `fill` write the payload
    /// directly into the map (no intermediate buffer).
    pub fn append_with(
        &self,
        len: usize,
        d: Durability,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<Lsn> {
        let inner = &*self.inner;
        inner.check_len(len)?;
        let lsn = {
            let mut w = inner.writer_for(record_size(len))?;
            let lsn = w.next_lsn;
            let off = w.write_off;
            inner.write_record(&w, off, lsn, len, false, fill);
            inner.mark(&mut w, off, lsn, off);
            inner.publish(&mut w, off + record_size(len), lsn);
            lsn
        };
        if d == Durability::Durable {
            inner.wait_durable(lsn)?;
        }
        Ok(lsn)
    }

    /// Append several records as one batch: recovery keeps all or none of them.
    pub fn append_batch(&self, payloads: &[&[u8]], d: Durability) -> Result<RangeInclusive<Lsn>> {
        let inner = &*self.inner;
        if payloads.is_empty() {
            return Err(LogError::InvalidArgument("empty batch".into()));
        }
        let mut total = 0;
        for p in payloads {
            inner.check_len(p.len())?;
            total += record_size(p.len());
        }
        let (first, last) = {
            let mut w = inner.writer_for(total)?;
            let first = w.next_lsn;
            let start = w.write_off;
            let mut off = start;
            for (i, p) in payloads.iter().enumerate() {
                let cont = i + 1 < payloads.len();
                inner.write_record(&w, off, first + i as u64, p.len(), cont, |b| {
                    b.copy_from_slice(p)
                });
                off += record_size(p.len());
            }
            let last = first + payloads.len() as u64 - 1;
            let last_off = off - record_size(payloads[payloads.len() - 1].len());
            inner.mark(&mut w, start, first, last_off);
            inner.publish(&mut w, off, last);
            (first, last)
        };
        if d == Durability::Durable {
            inner.wait_durable(last)?;
        }
        Ok(first..=last)
    }

    /// Whether appending a record of `len` bytes now may wait on the file
    /// system: it does not fit the active segment (the append switches
    /// segments: seal, msync, fsyncs, hole punch), or a switch is under way
    /// (the append waits for its writer lock). Read without a lock, so a
    /// hint: an async caller runs such an append off its worker.
    pub fn append_may_wait(&self, len: usize) -> bool {
        self.inner.switching.load(Ordering::Acquire)
            || record_size(len) > self.inner.room.load(Ordering::Acquire)
    }

    /// Make everything appended so far durable.
    pub fn sync(&self) -> Result<()> {
        let last = self.inner.last_lsn.load(Ordering::Acquire);
        self.inner.wait_durable(last)
    }

    /// Group-commit wait: returns once `lsn` is on disk (sharing fsyncs with
    /// other waiting threads).
    pub fn wait_durable(&self, lsn: Lsn) -> Result<()> {
        if lsn > self.inner.last_lsn.load(Ordering::Acquire) {
            return Err(LogError::InvalidArgument(format!(
                "lsn {lsn} has not been appended"
            )));
        }
        let started = crate::telemetry::start();
        let out = self.inner.wait_durable(lsn);
        crate::telemetry::durable_acked(started);
        out
    }

    /// Why the log refuses appends, once a failed sync poisoned it.
    pub fn poisoned(&self) -> Option<&str> {
        self.inner.poison.get().map(String::as_str)
    }

    /// The LSN the next append will get.
    pub fn next_lsn(&self) -> Lsn {
        self.inner.last_lsn.load(Ordering::Acquire) + 1
    }

    /// The last appended LSN, if any record was ever appended.
    pub fn last_lsn(&self) -> Option<Lsn> {
        match self.inner.last_lsn.load(Ordering::Acquire) {
            0 => None,
            l => Some(l),
        }
    }

    /// The highest LSN known durable (0 = none).
    pub fn synced_lsn(&self) -> Lsn {
        lock(&self.inner.sync).synced
    }

    /// A consistent snapshot of the committed records.
    pub fn view(&self) -> LogView {
        let segs = lock(&self.inner.segs).clone();
        LogView::new(segs.iter().map(|s| (s.clone(), s.end())).collect())
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The compaction generation (0: never compacted) and the first LSN
    /// after the compacted range, cheaply (no segment is read): what a
    /// reader compares to learn that a compaction rewrote the log under it.
    pub fn compaction_point(&self) -> (u64, Lsn) {
        let g = lock(&self.inner.gen);
        (g.generation, g.compacted_end)
    }

    /// Counts and LSN bounds.
    pub fn stats(&self) -> LogStats {
        let view = self.view();
        let (generation, compacted_end) = {
            let g = lock(&self.inner.gen);
            (g.generation, g.compacted_end)
        };
        let last = self.inner.last_lsn.load(Ordering::Acquire);
        LogStats {
            segments: view.segment_count(),
            bytes: view.bytes(),
            first_lsn: view.iter_from(0).next().and_then(|r| r.ok()).map(|r| r.lsn),
            last_lsn: (last > 0).then_some(last),
            next_lsn: last + 1,
            synced_lsn: self.synced_lsn(),
            sealed_end_lsn: self.sealed_end_lsn(),
            generation,
            compacted_end,
        }
    }

    /// LSNs below this are in sealed (immutable) segments.
    pub fn sealed_end_lsn(&self) -> Lsn {
        self.inner.sealed_end.load(Ordering::Acquire)
    }

    /// Seal the active segment now and start a new one (no-op if it is empty).
    /// Compaction seals this way before it rewrites, so the successor takes
    /// no room compaction's output needs: one already prepared (its space
    /// was taken before) or else one of the least size (a record's worth),
    /// never one sized to the free space. The next rotation sizes normally.
    pub fn seal_active(&self) -> Result<()> {
        let inner = &*self.inner;
        inner.check_poison()?;
        let mut w = lock(&inner.writer);
        if w.write_off == SEG_HDR {
            return Ok(());
        }
        inner.rotate_sized(&mut w, 0, Successor::Least)
    }

    /// Sync, leave the tail hint for the next open (see `tail.rs`) and
    /// release the lock.
    pub fn close(mut self) -> Result<()> {
        self.stop_flusher();
        self.sync()?;
        self.inner.store_tail_hint();
        Ok(())
    }

    /// Whether this writer runs a background thread (the flusher). Threads
    /// preparing a next segment exist only while one is being prepared.
    pub fn has_background_thread(&self) -> bool {
        self.flusher.is_some() || lock(&self.inner.writer).prepared.is_some()
    }

    fn stop_flusher(&mut self) {
        if let Some((tx, h)) = self.flusher.take() {
            drop(tx);
            let _ = h.join();
        }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        self.stop_flusher();
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let w = self.writer.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = w.prepared.take() {
            if let Ok(Ok(p)) = h.join() {
                p.discard();
            }
        }
    }
}

/// Zeroes an unpublished range when dropped (only during a panic: the
/// normal path forgets it).
struct ZeroOnUnwind<'a> {
    map: &'a mmap::Map,
    off: usize,
    len: usize,
}

impl Drop for ZeroOnUnwind<'_> {
    fn drop(&mut self) {
        self.map.zero(self.off, self.len);
    }
}

impl Inner {
    fn check_poison(&self) -> Result<()> {
        match self.poison.get() {
            Some(d) => Err(LogError::FsyncFailed { detail: d.clone() }),
            None => Ok(()),
        }
    }

    /// Poison after a failed sync: the page cache may now hold pages that
    /// look written but never reach the disk, so the marker makes the next
    /// process refuse to open (see `poison`) instead of trusting them.
    fn poison_sync(&self, e: &LogError) -> LogError {
        poison::write_marker(&self.dir, &e.to_string());
        self.poison_with(e)
    }

    fn poison_with(&self, e: &LogError) -> LogError {
        let _ = self.poison.set(e.to_string());
        tracing::error!(dir = %self.dir.display(), error = %e, "log poisoned");
        LogError::FsyncFailed {
            detail: self.poison.get().cloned().unwrap_or_default(),
        }
    }

    fn check_len(&self, len: usize) -> Result<()> {
        if len == 0 {
            return Err(LogError::InvalidArgument(
                "empty payloads are not allowed".into(),
            ));
        }
        if len > self.opts.max_record_size as usize {
            return Err(LogError::RecordTooLarge {
                len,
                max: self.opts.max_record_size,
            });
        }
        Ok(())
    }

    /// Lock the writer with room for `need` bytes in the active segment.
    fn writer_for(&self, need: usize) -> Result<MutexGuard<'_, Writer>> {
        self.check_poison()?;
        // A batch larger than a configured segment gets a segment of its own
        // sized for it (`rotate`): a batch never spans segments, so it stays
        // whole-or-nothing at recovery, and any size the disk holds fits.
        let mut w = lock(&self.writer);
        if w.write_off + need + seal::SEAL_RESERVE > w.active.map.len() {
            self.rotate(&mut w, need)?;
        }
        Ok(w)
    }

    fn write_record(
        &self,
        w: &Writer,
        off: usize,
        lsn: Lsn,
        len: usize,
        cont: bool,
        fill: impl FnOnce(&mut [u8]),
    ) {
        let map = &w.active.map;
        let len_flags = len as u32 | if cont { CONT } else { 0 };
        let mut h = hasher_for(w.active.hdr.segment_id, len_flags, lsn);
        // If `fill` panics, zero what it wrote: nothing is published, and the
        // bytes past the end must stay zero for seal and recovery.
        let undo = ZeroOnUnwind {
            map,
            off: off + REC_HDR,
            len: record_size(len) - REC_HDR,
        };
        map.fill(off + REC_HDR, record_size(len) - REC_HDR, |buf| {
            let (payload, pad) = buf.split_at_mut(len);
            fill(payload);
            pad.fill(0);
            h.update(payload);
        });
        std::mem::forget(undo);
        map.write(off, &encode_header(len_flags, h.finalize(), lsn));
    }

    /// The tail hint of the active segment, written once everything is
    /// synced (every byte it vouches for is durable before it exists).
    fn store_tail_hint(&self) {
        let w = lock(&self.writer);
        if self.poison.get().is_some() || lock(&self.sync).synced + 1 < w.next_lsn {
            return;
        }
        let seg = &w.active;
        let first = seg.hdr.first_lsn;
        let records = w.next_lsn - first;
        let last = (records > 0).then(|| (w.next_lsn - 1, w.last_record_off));
        tail::TailHint {
            segment_id: seg.hdr.segment_id,
            first_lsn: first,
            end: w.write_off,
            last,
            records,
            marks: lock(&seg.marks).clone(),
        }
        .store(&self.dir);
    }

    /// Notes a write starting at `off` with LSN `lsn` whose last record
    /// starts at `last_off`: the last record for the tail hint, and a mark
    /// of the sparse index every `MARK_EVERY` bytes (one compare per append).
    #[inline]
    fn mark(&self, w: &mut Writer, off: usize, lsn: Lsn, last_off: usize) {
        w.last_record_off = last_off;
        if off >= w.next_mark {
            lock(&w.active.marks).push((lsn, off));
            w.next_mark = (off / tail::MARK_EVERY + 1) * tail::MARK_EVERY;
        }
    }

    fn publish(&self, w: &mut Writer, end: usize, last: Lsn) {
        self.room
            .store(room_after(w.active.map.len(), end), Ordering::Release);
        w.write_off = end;
        w.next_lsn = last + 1;
        w.active.end.store(end, Ordering::Release);
        self.last_lsn.store(last, Ordering::Release);
        if self.opts.prepare_ahead && w.prepared.is_none() && end > w.active.map.len() / 4 * 3 {
            let id = self.next_segment_id.fetch_add(1, Ordering::AcqRel);
            let dir = self.dir.clone();
            let size = self.opts.segment_size;
            let budget = self.budget.clone();
            let zero = self.opts.zero_fill;
            w.prepared = Some(std::thread::spawn(move || {
                segment::prepare(&dir, id, size, budget.as_deref(), zero)
            }));
        }
    }

    /// Seal the active segment and install the next one, with room for a
    /// record or batch of `need` bytes (writer lock held).
    fn rotate(&self, w: &mut Writer, need: usize) -> Result<()> {
        self.rotate_sized(w, need, Successor::Fitting)
    }

    /// [`Inner::rotate`] with the successor's size chosen by `successor`.
    fn rotate_sized(&self, w: &mut Writer, need: usize, successor: Successor) -> Result<()> {
        self.switching.store(true, Ordering::Release);
        let out = self.rotate_switching(w, need, successor);
        self.room.store(
            room_after(w.active.map.len(), w.write_off),
            Ordering::Release,
        );
        self.switching.store(false, Ordering::Release);
        out
    }

    fn rotate_switching(&self, w: &mut Writer, need: usize, successor: Successor) -> Result<()> {
        #[cfg(any(test, feature = "fault-injection"))]
        if let Some(d) = self.opts.faults.switch_delay {
            std::thread::sleep(d);
        }
        let ahead = w.prepared.take().map(|h| {
            h.join().unwrap_or_else(|_| {
                Err(LogError::InvalidArgument(
                    "segment preparation panicked".into(),
                ))
            })
        });
        let fits = |p: &segment::Prepared| SEG_HDR + need + seal::SEAL_RESERVE <= p.map.len();
        let prepared = match ahead {
            Some(Ok(p)) if fits(&p) => p,
            Some(Err(e)) if !matches!(e, LogError::DiskFull { .. }) => return Err(e),
            // None prepared, the full-size one did not fit the disk, or the
            // batch does not fit it: a segment sized to the free space and
            // at least to the batch (see `segment::fitting_size`).
            ahead => {
                if let Some(Ok(p)) = ahead {
                    p.discard();
                }
                let id = self.next_segment_id.fetch_add(1, Ordering::AcqRel);
                let least = (SEG_HDR
                    + need.max(self.opts.max_record_size as usize)
                    + REC_HDR
                    + seal::SEAL_RESERVE) as u64;
                let mut size = match successor {
                    Successor::Fitting => {
                        segment::fitting_size(&self.dir, self.opts.segment_size, least)
                    }
                    Successor::Least => least.div_ceil(4096) * 4096,
                };
                if let Some(b) = &self.budget {
                    // The fault-injection budget stands in for free space.
                    let left = b.load(Ordering::Acquire).max(0) as u64 / 4096 * 4096;
                    size = size.min(left).max(least.div_ceil(4096) * 4096);
                }
                segment::prepare(
                    &self.dir,
                    id,
                    size,
                    self.budget.as_deref(),
                    self.opts.zero_fill,
                )?
            }
        };
        #[cfg(any(test, feature = "fault-injection"))]
        if self.opts.faults.fail_syncs {
            prepared.discard();
            return Err(self.poison_sync(&LogError::Injected("sync failure".into())));
        }
        // A main-directory segment holds consecutive LSNs from its first.
        let first = w.active.hdr.first_lsn;
        let records = w.next_lsn - first;
        let range = (records > 0).then_some((first, w.next_lsn - 1));
        if let Err(e) = w
            .active
            .seal(w.write_off, range.map(|r| r.0), range.map(|r| r.1), records)
        {
            prepared.discard();
            return Err(self.poison_sync(&e));
        }
        {
            let mut st = lock(&self.sync);
            st.synced = st.synced.max(w.next_lsn - 1);
        }
        let seg = match prepared.install(&self.dir, Some(&self.dir_fd), w.next_lsn) {
            Ok(s) => Arc::new(s),
            Err(e) => return Err(self.poison_with(&e)),
        };
        {
            let mut segs = lock(&self.segs);
            let mut v: Vec<Arc<Segment>> = segs.as_ref().clone();
            v.push(seg.clone());
            *segs = Arc::new(v);
        }
        w.active = seg;
        w.write_off = SEG_HDR;
        w.next_mark = tail::MARK_EVERY;
        self.sealed_end.store(w.next_lsn, Ordering::Release);
        Ok(())
    }

    /// Leader/follower group commit.
    fn wait_durable(&self, lsn: Lsn) -> Result<()> {
        let mut st = lock(&self.sync);
        loop {
            self.check_poison()?;
            if st.synced >= lsn {
                return Ok(());
            }
            if st.in_flight {
                st = self.sync_cv.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            st.in_flight = true;
            let before = st.synced;
            drop(st);
            let started = crate::telemetry::start();
            let res = self.sync_active();
            st = lock(&self.sync);
            st.in_flight = false;
            match res {
                Ok(covered) => {
                    crate::telemetry::synced(started, covered.saturating_sub(before));
                    st.synced = st.synced.max(covered)
                }
                Err(e) => {
                    let err = self.poison_sync(&e);
                    self.sync_cv.notify_all();
                    return Err(err);
                }
            }
            self.sync_cv.notify_all();
        }
    }

    /// msync the unsynced part of the active segment; returns the LSN covered.
    fn sync_active(&self) -> Result<Lsn> {
        let (seg, end, last) = {
            let w = lock(&self.writer);
            (w.active.clone(), w.write_off, w.next_lsn - 1)
        };
        #[cfg(any(test, feature = "fault-injection"))]
        if self.opts.faults.fail_syncs {
            return Err(LogError::Injected(format!(
                "msync of {}",
                seg.path.display()
            )));
        }
        let from = seg.synced.load(Ordering::Acquire) & !4095;
        if end > from {
            seg.map
                .flush(from, end - from)
                .map_err(|e| LogError::io(&seg.path, e))?;
            seg.synced.fetch_max(end, Ordering::AcqRel);
        }
        Ok(last)
    }
}

/// How large a rotation's new segment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Successor {
    /// The configured segment size, or the free space when less
    /// ([`segment::fitting_size`]).
    Fitting,
    /// The least that holds one record: for a seal that makes room
    /// (compaction), which must not take the space it is about to need.
    Least,
}
