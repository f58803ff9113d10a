//! Online compaction of the [`Store`] (the policy and the rewrite live in
//! [`crate::compact`]; this is the Store side).
//!
//! Invariant kept: after `compact` returns, the in-memory state equals the
//! fold of the compacted log, and a snapshot of the new log generation exists,
//! so reopening neither resurrects retired agents nor refolds everything.

use super::{Store, StoreResult};
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
        let (state, upto) = {
            let g = self.write();
            if !opts.dry_run {
                self.core.log.seal_active()?;
            }
            (g.state.clone(), g.applied)
        };
        let c = crate::compact::compact(&self.core.log, &state, upto, now, opts)?;
        if c.report.generation != c.report.generation_before {
            let mut g = self.write();
            let mut s = c.retained;
            crate::compact::catch_up(&mut s, &self.core.log.view(), self.core.log.dir(), upto)?;
            g.state = s;
            drop(g);
            // Snapshots of the old generation are no longer trusted (they would
            // bring retired agents back), so the next open would refold the
            // whole log: checkpoint the new generation right away.
            self.snapshot()?;
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
        auto.observe(&self.core.log.view(), self.core.log.dir())?;
        if !self.with_state(|s, _| auto.due(s, now)) {
            return Ok(None);
        }
        let report = self.compact(now, &auto.options())?;
        auto.compacted(&self.core.log.view(), self.core.log.dir(), now)?;
        Ok(Some(report))
    }
}
