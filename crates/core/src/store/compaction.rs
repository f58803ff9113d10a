//! Online compaction of the [`Store`] (the policy and the rewrite live in
//! [`crate::compact`]; this is the Store side).
//!
//! Invariant kept: after `compact` returns, the in-memory state equals the
//! fold of the compacted log, and a snapshot of the new log generation exists,
//! so reopening neither resurrects retired agents nor refolds everything.

use super::{current_origin, Store, StoreResult};
use crate::registry::history::{self, Until};
use crate::time::Timestamp;

impl Store {
    /// Compacts the log online at `now` (see `crate::compact`): under the
    /// lock, seal the active segment and clone the state at the last LSN L;
    /// plan and rewrite the sealed records <= L while commands go on; then,
    /// under the lock again, replace the state by the retained state with
    /// the records appended meanwhile folded on, so state == fold(log).
    pub fn compact(
        &self,
        now: Timestamp,
        opts: &crate::compact::CompactOptions,
    ) -> StoreResult<crate::compact::CompactionReport> {
        // A replica compacts the fleet's stream (docs/scaling.md §6); its
        // log follows when the mirror folds the marker. A dry run there
        // plans over the mirror caught up to the stream (over the local
        // mirror as it is when no daemon serves it).
        match self.sink() {
            Ok(Some(sink)) => return sink.compact(current_origin(), now, opts),
            Err(e) if !opts.dry_run => return Err(e),
            _ => {}
        }
        self.compact_log(now, opts)
    }

    /// A replica's mirror, on folding a stream compaction marker at `lsn`
    /// (its last applied record): compacts the local log up to it. The
    /// marker's fold already removed what the stream's compaction removed,
    /// so this retires nothing more (a retention that keeps everything); it
    /// drops the records of what the state no longer holds, the `Purged`
    /// fillers, and collapses heartbeat runs, so the fold of the compacted
    /// log is the state the marker left.
    #[doc(hidden)] // the server crate's cluster mirror only
    pub fn compact_mirrored(
        &self,
        lsn: crate::registry::Lsn,
        now: Timestamp,
    ) -> StoreResult<crate::compact::CompactionReport> {
        let applied = self.applied_lsn();
        if applied != lsn {
            return Err(super::StoreError::Replication(format!(
                "{}: compaction marker at lsn {lsn} but the mirror is at {applied}",
                self.dir().display()
            )));
        }
        let keep_all = crate::compact::CompactOptions {
            policy: crate::registry::RetentionPolicy {
                presence_ttl_ms: i64::MAX / 4,
                keep_finished: usize::MAX,
            },
            ..Default::default()
        };
        self.compact_log(now, &keep_all)
    }

    /// The local compaction itself: [`Store::compact`] of a store that is
    /// not a replica.
    fn compact_log(
        &self,
        now: Timestamp,
        opts: &crate::compact::CompactOptions,
    ) -> StoreResult<crate::compact::CompactionReport> {
        let started = crate::telemetry::start();
        let (state, upto) = {
            let g = self.write();
            if !opts.dry_run {
                self.core.log.seal_active()?;
            }
            (g.state.clone(), g.applied)
        };
        let c = crate::compact::compact(&self.core.log, &state, upto, now, opts)?;
        if c.report.generation != c.report.generation_before {
            #[cfg(test)]
            tests::AFTER_LOG_SWITCH.with(|h| h.get().map(|f| f(self)));
            let mut g = self.write();
            let mut s = c.retained;
            let view = self.core.log.view();
            history::fold_view(&view, &mut s, upto, Until::End)
                .map_err(|e| super::scan_err(&view, e))?;
            // State and generation change together (see `Inner::generation`).
            g.state = s;
            g.generation = c.report.generation;
            drop(g);
            // Snapshots of the old generation are no longer trusted (they would
            // bring retired agents back), so the next open would refold the
            // whole log: checkpoint the new generation right away.
            self.snapshot()?;
            crate::telemetry::compacted(started, c.report.bytes_before, c.report.bytes_after);
        }
        Ok(c.report)
    }

    /// The auto-compaction hook: call it periodically (e.g. after each
    /// sealed segment or every few seconds). It counts the records appended
    /// since the last call (off the append path), and compacts when `auto`'s
    /// policy says the droppable share is high enough or the schedule is due.
    pub fn maybe_compact(
        &self,
        auto: &mut crate::compact::AutoCompactor,
        now: Timestamp,
    ) -> StoreResult<Option<crate::compact::CompactionReport>> {
        auto.observe(&self.core.log.view())?;
        if !self.with_state(|s, _| auto.due(s, now)) {
            return Ok(None);
        }
        let report = self.compact(now, &auto.options())?;
        auto.compacted(&self.core.log.view(), now)?;
        Ok(Some(report))
    }
}

#[cfg(test)]
mod tests {
    use crate::compact::CompactOptions;
    use crate::log::LogOptions;
    use crate::model::Status;
    use crate::registry::Registration;
    use crate::store::checkpoint::SnapshotPayload;
    use crate::store::{Store, StoreOptions};
    use crate::time::Timestamp;
    use std::cell::Cell;

    thread_local! {
        /// Runs between the log's generation switch and the state swap.
        pub(super) static AFTER_LOG_SWITCH: Cell<Option<fn(&Store)>> = const { Cell::new(None) };
    }

    /// A snapshot taken while a compaction is between its log commit and its
    /// state swap must not pair the new generation with the old state: reopen
    /// would trust it and bring retired agents back.
    #[test]
    fn a_snapshot_during_compaction_never_pairs_the_new_generation_with_the_old_state() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = StoreOptions {
            log: LogOptions {
                segment_size: 32 * 1024,
                max_record_size: 4096,
                flush_interval: None,
                ..Default::default()
            },
            snapshot_every_events: 0,
            snapshot_every_secs: 0,
            ..Default::default()
        };
        let store = Store::open(tmp.path(), opts).unwrap();
        let t0 = Timestamp::from_secs(1_800_000_000);
        for i in 0..4 {
            let r = Registration::new(&format!("a{i}"), "claude", "/w");
            store.register(r, Some(t0)).unwrap();
        }
        store
            .set_status("a0", Status::Exited, None, Some(t0.add_millis(1000)))
            .unwrap();
        // The hook snapshots between the log switch and the state swap and
        // checks that file at once (the post-compaction snapshot, at the same
        // LSN, replaces it).
        AFTER_LOG_SWITCH.with(|h| {
            h.set(Some(|s: &Store| {
                let info = s.snapshot().unwrap();
                let snap: SnapshotPayload = crate::snapshot::read_one(&info).unwrap();
                let switched_to = s.log().stats().generation;
                assert!(
                    snap.generation != switched_to || !snap.state.agents().contains("a0"),
                    "{} is labelled generation {switched_to} but holds the pre-compaction state",
                    info.path.display()
                );
            }))
        });
        let now = t0.add_millis(1000 * 3600 * 1000);
        let report = store.compact(now, &CompactOptions::default());
        AFTER_LOG_SWITCH.with(|h| h.set(None));
        let report = report.unwrap();
        assert_ne!(report.generation, report.generation_before, "{report:?}");
        assert!(!store.state().agents().contains("a0"));
    }
}
