//! `stats`: what a store holds — events, agents by status, messages,
//! sessions, segments, bytes (used and on disk), the LSN range, snapshots and
//! the compaction generation. Read-only (no writer lock).

use super::{current, Progress, Result};
use agentlog::log::{self, Lsn};
use agentlog::model::Status;
use agentlog::StoreLayout;
use std::path::Path;

/// A store's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Records in the log.
    pub events: u64,
    pub first_lsn: Option<Lsn>,
    pub last_lsn: Option<Lsn>,
    pub segments: usize,
    /// Bytes of records (segment headers included).
    pub used_bytes: u64,
    /// Bytes the log's files take (segments are preallocated).
    pub disk_bytes: u64,
    /// Compacted generation (0 = never compacted).
    pub generation: u64,
    pub agents: usize,
    /// Agents per status, in the vocabulary's order; statuses with none are left out.
    pub by_status: Vec<(Status, usize)>,
    pub messages: usize,
    /// Messages the cap dropped since the log's start or last compaction.
    pub messages_dropped: u64,
    pub sessions: usize,
    /// Events that could not take effect when folded (see `State::anomalies`).
    pub anomalies: u64,
    /// (LSN, file size) of each snapshot, oldest first.
    pub snapshots: Vec<(Lsn, u64)>,
}

/// Gathers the figures of the store at `dir`.
pub fn stats(dir: &Path, progress: &mut dyn Progress) -> Result<Stats> {
    let (state, _) = current(dir, progress)?;
    let layout = StoreLayout::new(dir);
    let report = log::verify(&layout.log())?;
    let by_status = Status::ALL
        .iter()
        .map(|s| (*s, state.agents().iter().filter(|a| a.status == *s).count()))
        .filter(|(_, n)| *n > 0)
        .collect();
    // Unlistable snapshots are not the figures' failure: the fold above
    // already warned and read the whole log instead.
    let snapshots = agentlog::internals::snapshot::list(&layout.snapshots())
        .unwrap_or_default()
        .into_iter()
        .map(|s| (s.lsn, s.len))
        .collect();
    Ok(Stats {
        events: report.records,
        first_lsn: report.first_lsn,
        last_lsn: report.last_lsn,
        segments: report.segments,
        used_bytes: report.bytes,
        disk_bytes: disk_usage(&layout.log()),
        generation: report.generation,
        agents: state.agents().len(),
        by_status,
        messages: state.messages().len(),
        messages_dropped: state.drops_total(),
        sessions: state.sessions().len(),
        anomalies: state.anomalies(),
        snapshots,
    })
}

/// Allocated bytes of the files under `dir` (one level of subdirectories,
/// which is how the log lays out compacted generations).
fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    for e in rd.flatten() {
        let Ok(md) = e.metadata() else { continue };
        if md.is_dir() {
            total += disk_usage(&e.path());
        } else {
            total += md.blocks() * 512;
        }
    }
    total
}
