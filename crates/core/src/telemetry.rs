//! What the writer reports to monitoring (`serve --http`'s `/metrics`):
//! events appended by kind, append and durable-ack latency, fsync latency
//! and group-commit batch size, recorded through the `metrics` facade.
//!
//! Invariant: this costs the append path nothing measurable. Until
//! [`enable`] runs (only `serve --http` calls it) every hook is one atomic
//! load of an empty `OnceLock`; afterwards a hook is an atomic counter
//! increment or a lock-free histogram push on handles resolved once here,
//! never a registry lookup, a lock or an allocation per event. Everything
//! else `/metrics` shows (agents by status, log bytes, ...) is read at
//! scrape time by the daemon, off the append path.

use crate::registry::tag;
use metrics::{Counter, Histogram};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Events appended, by kind (`agentlog_events_appended_total{kind}`).
pub const EVENTS_APPENDED: &str = "agentlog_events_appended_total";
/// Seconds under the writer lock to encode, append and apply one command's
/// events.
pub const APPEND_SECONDS: &str = "agentlog_append_duration_seconds";
/// Seconds a durable write waited for the fsync that covers it.
pub const DURABLE_ACK_SECONDS: &str = "agentlog_durable_ack_duration_seconds";
/// Seconds one group-commit msync/fsync took.
pub const FSYNC_SECONDS: &str = "agentlog_fsync_duration_seconds";
/// Records made durable by one group-commit sync.
pub const GROUP_COMMIT_RECORDS: &str = "agentlog_group_commit_records";
/// The last compaction's wall time, seconds.
pub const COMPACTION_SECONDS: &str = "agentlog_last_compaction_duration_seconds";
/// Bytes the last compaction reclaimed.
pub const COMPACTION_RECLAIMED: &str = "agentlog_last_compaction_reclaimed_bytes";

struct Handles {
    /// Indexed by event tag; index 0 counts tags this build does not know.
    appended: Vec<Counter>,
    append: Histogram,
    durable_ack: Histogram,
    fsync: Histogram,
    batch: Histogram,
}

static HANDLES: OnceLock<Handles> = OnceLock::new();
/// Heartbeats appended while recording (the page's heartbeats/s chart).
static HEARTBEATS: AtomicU64 = AtomicU64::new(0);

/// Heartbeats appended since [`enable`].
pub fn heartbeats() -> u64 {
    HEARTBEATS.load(Ordering::Relaxed)
}

/// Resolves the handles against the installed global recorder; the hooks
/// record from then on. Call once, after `metrics::set_global_recorder`.
pub fn enable() {
    HANDLES.get_or_init(|| Handles {
        appended: (0..=tag::MAX_KNOWN)
            .map(|t| {
                let kind = if t == 0 { "unknown" } else { tag::name(t) };
                metrics::counter!(EVENTS_APPENDED, "kind" => kind)
            })
            .collect(),
        append: metrics::histogram!(APPEND_SECONDS),
        durable_ack: metrics::histogram!(DURABLE_ACK_SECONDS),
        fsync: metrics::histogram!(FSYNC_SECONDS),
        batch: metrics::histogram!(GROUP_COMMIT_RECORDS),
    });
}

/// A start time when recording, else `None` (no clock read).
#[inline]
pub fn start() -> Option<Instant> {
    HANDLES.get().map(|_| Instant::now())
}

/// Counts appended events of the kinds `tags` and the append's latency.
#[inline]
pub fn appended(started: Option<Instant>, tags: impl IntoIterator<Item = u8>) {
    let (Some(h), Some(t0)) = (HANDLES.get(), started) else {
        return;
    };
    for t in tags {
        let i = if t <= tag::MAX_KNOWN { t as usize } else { 0 };
        h.appended[i].increment(1);
        if t == tag::HEARTBEAT {
            HEARTBEATS.fetch_add(1, Ordering::Relaxed);
        }
    }
    h.append.record(t0.elapsed().as_secs_f64());
}

/// A durable write's wait for its fsync ended.
#[inline]
pub fn durable_acked(started: Option<Instant>) {
    if let (Some(h), Some(t0)) = (HANDLES.get(), started) {
        h.durable_ack.record(t0.elapsed().as_secs_f64());
    }
}

/// One group-commit sync made `records` records durable.
#[inline]
pub fn synced(started: Option<Instant>, records: u64) {
    if let (Some(h), Some(t0)) = (HANDLES.get(), started) {
        h.fsync.record(t0.elapsed().as_secs_f64());
        h.batch.record(records as f64);
    }
}

/// A compaction that changed the log finished.
pub fn compacted(started: Option<Instant>, bytes_before: u64, bytes_after: u64) {
    if let Some(t0) = started {
        metrics::gauge!(COMPACTION_SECONDS).set(t0.elapsed().as_secs_f64());
        metrics::gauge!(COMPACTION_RECLAIMED).set(bytes_before.saturating_sub(bytes_after) as f64);
    }
}
