//! Where this host's durable commands spend their time: validating against
//! the fold, publishing until the stream's ack (an R3 quorum stored it),
//! and from the ack until the local mirror folded it. Sums since the node
//! started, kept with relaxed atomics (a few adds per command, no lock);
//! `bench cluster` reports the means of a phase from two snapshots.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A snapshot of the sums (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DurableStages {
    /// Commands that published and were folded here.
    pub commands: u64,
    /// Rounds lost to another host ("wrong last sequence"): caught up,
    /// validated again.
    pub conflicts: u64,
    /// Validating against the fold, every round.
    pub validate_ns: u64,
    /// From the round's first publish until its last ack.
    pub publish_ns: u64,
    /// From the last ack until the local mirror folded that sequence.
    pub fold_ns: u64,
}

impl DurableStages {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &DurableStages) -> DurableStages {
        DurableStages {
            commands: self.commands - earlier.commands,
            conflicts: self.conflicts - earlier.conflicts,
            validate_ns: self.validate_ns - earlier.validate_ns,
            publish_ns: self.publish_ns - earlier.publish_ns,
            fold_ns: self.fold_ns - earlier.fold_ns,
        }
    }

    /// Sums of several hosts.
    pub fn add(&mut self, other: &DurableStages) {
        self.commands += other.commands;
        self.conflicts += other.conflicts;
        self.validate_ns += other.validate_ns;
        self.publish_ns += other.publish_ns;
        self.fold_ns += other.fold_ns;
    }
}

/// The live sums a node updates.
#[derive(Debug, Default)]
pub(crate) struct StageClock {
    commands: AtomicU64,
    conflicts: AtomicU64,
    validate_ns: AtomicU64,
    publish_ns: AtomicU64,
    fold_ns: AtomicU64,
}

fn add(a: &AtomicU64, d: Duration) {
    a.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
}

impl StageClock {
    pub fn validated(&self, d: Duration) {
        add(&self.validate_ns, d);
    }
    pub fn conflict(&self) {
        self.conflicts.fetch_add(1, Ordering::Relaxed);
    }
    /// A command done: `publish` until its last ack, `fold` after it.
    pub fn done(&self, publish: Duration, fold: Duration) {
        add(&self.publish_ns, publish);
        add(&self.fold_ns, fold);
        self.commands.fetch_add(1, Ordering::Relaxed);
    }
    pub fn snapshot(&self) -> DurableStages {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DurableStages {
            commands: get(&self.commands),
            conflicts: get(&self.conflicts),
            validate_ns: get(&self.validate_ns),
            publish_ns: get(&self.publish_ns),
            fold_ns: get(&self.fold_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_is_the_difference_of_two_snapshots() {
        let clock = StageClock::default();
        clock.validated(Duration::from_micros(3));
        clock.done(Duration::from_micros(500), Duration::from_micros(40));
        let before = clock.snapshot();
        clock.validated(Duration::from_micros(2));
        clock.conflict();
        clock.validated(Duration::from_micros(2));
        clock.done(Duration::from_micros(700), Duration::from_micros(60));
        let phase = clock.snapshot().since(&before);
        assert_eq!(
            phase,
            DurableStages {
                commands: 1,
                conflicts: 1,
                validate_ns: 4_000,
                publish_ns: 700_000,
                fold_ns: 60_000,
            }
        );
        let mut sum = phase;
        sum.add(&phase);
        assert_eq!((sum.commands, sum.fold_ns), (2, 120_000));
    }
}
