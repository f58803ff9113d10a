//! What a caller asks of the log (its options and the durability of an
//! append) and what the log reports back (recovery, torn tails, its shape).
//! Plain data: the engine in `log/mod.rs` reads the options once at open.

use std::path::PathBuf;
use std::time::Duration;

use super::record::{record_size, MAX_PAYLOAD};
use super::segment::SEG_HDR;
#[cfg(any(test, feature = "fault-injection"))]
use super::CompactionStep;
use super::{seal, LogError, Lsn, Result};

/// How durable an append must be before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Returns once the bytes are in the map (written back by the flusher or the OS).
    Lazy,
    /// Returns after an msync that covers the record.
    Durable,
}

/// What `Log::open` does with bad records (the recovery policy, as in
/// raft-engine: chosen by the caller, never guessed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RecoveryMode {
    /// Cut a torn tail of the newest segment (saved to `.broken`); refuse corruption.
    #[default]
    TolerateTail,
    /// Any bad record (even a torn tail) is an error.
    Absolute,
    /// As `TolerateTail`, and also cut the newest segment at a power-loss
    /// hole: after a power loss, lazy appends written back out of order can
    /// leave a zero page followed by valid records. Everything from the
    /// first bad offset on (those valid records included) is saved to
    /// `.broken` and zeroed; the `TailCut` says which LSNs were dropped.
    /// Other damage is still refused.
    CutAtHole,
}

/// Test hooks that inject failures (all off by default). Only in builds
/// with the `fault-injection` feature (the tests'), never in a release of
/// the library or the binary.
#[cfg(any(test, feature = "fault-injection"))]
#[derive(Debug, Clone, Default)]
pub struct FaultInjection {
    /// Bytes the segment allocator may still preallocate; past that it fails with ENOSPC.
    pub disk_budget: Option<u64>,
    /// Make every msync/fsync of appended data fail.
    pub fail_syncs: bool,
    /// Fail a compaction at this step.
    pub fail_compaction_at: Option<CompactionStep>,
    /// Sleep this long in each segment switch, under the writer lock: a
    /// slow seal msync or directory fsync.
    pub switch_delay: Option<Duration>,
}

/// Options of a writer.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// Preallocated size of a segment (multiple of 4096). Default 64 MiB.
    pub segment_size: u64,
    /// Largest payload accepted. Default 1 MiB.
    pub max_record_size: u32,
    /// Background writeback of `Lazy` appends. Default every 200 ms; None = leave it to the OS.
    pub flush_interval: Option<Duration>,
    /// Recovery mode of `open`.
    pub recovery: RecoveryMode,
    /// Wait this long for another writer's lock; None = fail at once.
    pub lock_timeout: Option<Duration>,
    /// Prepare the next segment in the background at 75% fill. Default true.
    pub prepare_ahead: bool,
    /// Zero-fill new segments after fallocate (see FORMAT.md, "Assumptions
    /// about the disk"): cheaper fdatasync on ext4/xfs at the cost of writing
    /// each segment twice. Default false.
    pub zero_fill: bool,
    /// Open quickly, for a short-lived process (the one-shot CLI): trust
    /// sealed segments by their footers' own checksums (no CRC pass over
    /// their records) and resume the newest segment after the records the
    /// tail hint (`TAIL`, FORMAT.md) vouches for instead of rescanning it.
    /// Records vouched for that way are checksummed when a view reads them
    /// (those a view starting at a later LSN steps over have their framing
    /// and LSN sequence checked only); `verify` checks everything. A torn tail past the hint is still found
    /// and cut. Default false (every record is checked at open).
    pub quick_open: bool,
    /// Test hooks.
    #[cfg(any(test, feature = "fault-injection"))]
    pub faults: FaultInjection,
}

impl LogOptions {
    /// Refuses options the log cannot honour, naming the option.
    pub(super) fn check(&self) -> Result<()> {
        let o = self;
        let bad = |m: String| Err(LogError::InvalidArgument(m));
        if !o.segment_size.is_multiple_of(4096) || o.segment_size < 8192 {
            return bad(format!(
                "segment_size {} must be a multiple of 4096 and at least 8192",
                o.segment_size
            ));
        }
        if o.max_record_size == 0 || o.max_record_size > MAX_PAYLOAD {
            return bad(format!(
                "max_record_size {} out of range",
                o.max_record_size
            ));
        }
        if (SEG_HDR + record_size(o.max_record_size as usize) + seal::SEAL_RESERVE) as u64
            > o.segment_size
        {
            return bad(format!(
                "max_record_size {} does not fit into segment_size {}",
                o.max_record_size, o.segment_size
            ));
        }
        Ok(())
    }

    /// Options for a process that opens, appends a little and closes: no
    /// background threads (no flusher, no next segment prepared ahead; the
    /// close syncs) and a [`quick_open`](LogOptions::quick_open).
    pub fn short_lived() -> LogOptions {
        LogOptions {
            flush_interval: None,
            prepare_ahead: false,
            quick_open: true,
            ..LogOptions::default()
        }
    }
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            segment_size: 64 << 20,
            max_record_size: 1 << 20,
            flush_interval: Some(Duration::from_millis(200)),
            recovery: RecoveryMode::TolerateTail,
            lock_timeout: None,
            prepare_ahead: true,
            zero_fill: false,
            quick_open: false,
            #[cfg(any(test, feature = "fault-injection"))]
            faults: FaultInjection::default(),
        }
    }
}

/// A torn tail cut by recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailCut {
    pub segment: PathBuf,
    pub offset: u64,
    pub lsn: Option<Lsn>,
    /// Bytes removed (copied to `broken_copy`).
    pub bytes: u64,
    pub reason: String,
    pub broken_copy: PathBuf,
}

/// A torn tail of the newest segment, seen by a reader or `verify` (which
/// change nothing): the records before `offset` are whole, nothing valid
/// follows it, and the next writer open cuts it (saving it to `.broken`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    pub segment: PathBuf,
    pub offset: u64,
    /// The LSN expected at `offset` (never a damaged header's claim).
    pub lsn: Option<Lsn>,
    /// Bytes from `offset` to the end of the nonzero tail.
    pub bytes: u64,
    pub reason: String,
}

/// What `Log::open` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub segments: usize,
    pub records: u64,
    pub first_lsn: Option<Lsn>,
    pub last_lsn: Option<Lsn>,
    pub generation: u64,
    /// Torn tails cut (at most one: the newest segment's).
    pub cut: Vec<TailCut>,
    /// Leftovers of crashed compactions/rotations that were deleted.
    pub removed: Vec<PathBuf>,
}

/// A snapshot of the log's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogStats {
    pub segments: usize,
    /// Used bytes over all live segments (headers included).
    pub bytes: u64,
    pub first_lsn: Option<Lsn>,
    pub last_lsn: Option<Lsn>,
    pub next_lsn: Lsn,
    pub synced_lsn: Lsn,
    pub sealed_end_lsn: Lsn,
    pub generation: u64,
    pub compacted_end: Lsn,
}
