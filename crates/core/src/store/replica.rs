//! The store's side of the replicated mode (docs/scaling.md §4): a store
//! whose log mirrors a fleet's stream of record.
//!
//! * [`Store::append_replicated`] appends a message of the stream at LSN =
//!   its stream sequence. Invariant: local LSN = stream sequence; a record
//!   is appended only at or after the log's next LSN, and only after its
//!   payload decoded; the sequences before it that the stream's compaction
//!   deleted are held by `Purged` fillers (folding to nothing). The event was validated by the host
//!   that published it; here it is a fact.
//! * A [`CommandSink`] installed by the cluster code takes every command the
//!   store is asked for (`register` … `sweep`, `import`): it validates them
//!   against the fold and publishes them, and returns once the mirror folded
//!   them. So the CLI's command code, run by the daemon, never changes.
//! * `<dir>/replica.json` marks a store as a replica of a fleet. Such a
//!   store, opened without a sink (the CLI with no daemon running, a
//!   daemon without `--nats`), refuses every write: a local append would
//!   put a record at an LSN the stream gives to another event.

use super::{Inner, Store, StoreError, StoreResult};
use crate::log::Durability;
use crate::registry::codec::Origin;
use crate::registry::{codec, Event, Lsn, State};
use crate::time::Timestamp;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

/// File marking a store directory as a replica (`{"fleet": NAME}`).
pub const REPLICA_FILE: &str = "replica.json";

/// Validates a command against a state; may be called more than once
/// (after a lost race, against the newer state).
pub type Check<'a> = dyn FnMut(&State) -> StoreResult<Vec<Event>> + Send + 'a;

/// Where a replicated store's commands go instead of its own log.
/// Implementations block the calling thread (never call them on an async
/// worker) and must not be called with the store's state lock held.
pub trait CommandSink: Send + Sync {
    /// Runs `check` against the folded state, publishes the events it
    /// returns, and returns them with their LSNs once folded locally. On a
    /// lost race it re-runs `check` against the newer state; a batch may
    /// then be published in part (docs/scaling.md §2, "Batches").
    fn command(
        &self,
        origin: Option<Origin>,
        check: &mut Check<'_>,
    ) -> StoreResult<Vec<(Lsn, Event)>>;
    /// A heartbeat: validated, published, folded locally; its LSN.
    fn heartbeat(
        &self,
        origin: Option<Origin>,
        agent: &str,
        pid: Option<u32>,
        at: Timestamp,
        durable: bool,
    ) -> StoreResult<Lsn>;
    /// An explicit sweep at `now`: the same path as the periodic one, under
    /// the fleet's sweeper lease (docs/scaling.md §7); refused when another
    /// host holds it.
    fn sweep(&self, origin: Option<Origin>, now: Timestamp) -> StoreResult<Vec<(Lsn, Event)>>;
    /// Compacts the fleet's stream at `now` with `opts`' retention (one
    /// host at a time), returns once the local mirror folded the marker
    /// and compacted its log up to it (docs/scaling.md §6).
    fn compact(
        &self,
        origin: Option<Origin>,
        now: Timestamp,
        opts: &crate::compact::CompactOptions,
    ) -> StoreResult<crate::compact::CompactionReport>;
}

/// A replicated record, decoded before anything is appended: a heartbeat
/// batch is resolved into the store's
/// [`FoldScratch`](crate::registry::FoldScratch). One lives on the
/// stack per append, so the size gap between variants costs nothing.
#[allow(clippy::large_enum_variant)]
enum Fact {
    Batch,
    Event(Event),
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Marker {
    fleet: String,
}

fn marker_path(dir: &Path) -> PathBuf {
    dir.join(REPLICA_FILE)
}

/// The fleet whose stream the store in `dir` mirrors, if it is a replica.
pub fn replica_of(dir: &Path) -> StoreResult<Option<String>> {
    let p = marker_path(dir);
    let text = match std::fs::read(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(crate::LogError::io(&p, e).into()),
    };
    let m: Marker = serde_json::from_slice(&text).map_err(|e| {
        crate::LogError::InvalidArgument(format!(
            "{}: {e} (expected {{\"fleet\": NAME}})",
            p.display()
        ))
    })?;
    Ok(Some(m.fleet))
}

impl Store {
    /// Marks this store as a replica of `fleet`'s stream (`replica.json`,
    /// written once): from now on it refuses local writes. A store holding
    /// local events, or the replica of another fleet, is refused.
    pub fn mark_replica(&self, fleet: &str) -> StoreResult<()> {
        let refuse = |why: String| Err(StoreError::Replication(why));
        match replica_of(self.dir())? {
            Some(f) if f == fleet => {}
            Some(f) => {
                return refuse(format!(
                    "{} is a replica of fleet `{f}`, not `{fleet}`",
                    self.dir().display()
                ))
            }
            None => {
                let last = self.applied_lsn();
                if last > 0 {
                    return refuse(format!(
                        "{} holds {last} local events: a replica starts from an empty store \
                         (its LSNs are the stream's sequences); use a new directory",
                        self.dir().display()
                    ));
                }
                let p = marker_path(self.dir());
                let body = serde_json::to_vec(&Marker {
                    fleet: fleet.to_string(),
                })
                .map_err(|e| crate::LogError::io(&p, std::io::Error::other(e)))?;
                crate::files::publish_atomic(&p, &body, 0o640, || Ok(()))
                    .map_err(|e| crate::LogError::io(&p, e.into_io()))?;
            }
        }
        let _ = self.core.replica_of.set(fleet.to_string());
        Ok(())
    }

    /// Routes every command of this replica to `sink` (once). The store
    /// keeps only a weak reference: whoever owns the sink owns the
    /// replication, and once it is gone commands fail rather than fall back
    /// to local appends.
    pub fn set_command_sink(&self, sink: Weak<dyn CommandSink>) -> StoreResult<()> {
        if self.core.replica_of.get().is_none() {
            return Err(StoreError::Replication(format!(
                "{}: mark the store as a replica before installing a command sink",
                self.dir().display()
            )));
        }
        self.core.sink.set(sink).map_err(|_| {
            StoreError::Replication(format!(
                "{}: a command sink is already installed",
                self.dir().display()
            ))
        })
    }

    /// Whether commands go to a [`CommandSink`] (or are refused for want of one).
    pub fn is_replica(&self) -> bool {
        self.core.replica_of.get().is_some()
    }

    /// The sink commands go to: `None` for a local store; an error for a
    /// replica whose sink is not (or no longer) there.
    pub(super) fn sink(&self) -> StoreResult<Option<Arc<dyn CommandSink>>> {
        match (self.core.sink.get(), self.core.replica_of.get()) {
            (Some(weak), _) => weak.upgrade().map(Some).ok_or_else(|| {
                StoreError::Replication(format!(
                    "{}: the replication stopped (the cluster node closed); nothing was written",
                    self.dir().display()
                ))
            }),
            (None, Some(fleet)) => Err(StoreError::Replication(format!(
                "{} is a replica of fleet `{fleet}`: writes go through its daemon \
                 (`agentlog serve --nats URLS --stream {fleet}`), none is serving it; nothing was written",
                self.dir().display()
            ))),
            (None, None) => Ok(None),
        }
    }

    /// Appends `payload` (one encoded event) at `lsn` and folds it. `lsn` is
    /// at least the log's next LSN (an older one is refused, naming both);
    /// the sequences it skips were deleted from the stream by a compaction
    /// and are held by `Purged` fillers, because the local log's LSNs are
    /// the stream's sequences.
    pub fn append_replicated(&self, lsn: Lsn, payload: &[u8]) -> StoreResult<()> {
        let decode_err = |source| StoreError::Decode {
            dir: self.core.dir.clone(),
            lsn,
            source,
        };
        let mut g = self.write();
        // A heartbeat batch is decoded once, from its bytes, into reused
        // space (no allocation per beat); it is applied after the append.
        let Inner { state, scratch, .. } = &mut *g;
        let fact = match state.resolve_batch(payload, scratch).map_err(decode_err)? {
            true => Fact::Batch,
            false => Fact::Event(codec::decode(payload).map_err(decode_err)?),
        };
        let next = self.core.log.next_lsn();
        if lsn < next {
            return Err(StoreError::Log(crate::log::LogError::InvalidArgument(
                format!(
                    "log {}: replicated record at lsn {lsn} but the log already holds up to lsn {}",
                    self.core.log.dir().display(),
                    next - 1
                ),
            )));
        }
        // Sequences the stream's compaction deleted before this replica read
        // them: a `Purged` filler each, so LSNs stay the stream's (the main
        // log has no gaps; the next local compaction drops the fillers).
        if lsn > next {
            let (_, at) = codec::decode_header(payload).map_err(decode_err)?;
            let filler = codec::encode(&Event {
                at,
                kind: crate::registry::EventKind::Purged,
            });
            for _ in next..lsn {
                self.core.log.append(&filler, Durability::Lazy)?;
            }
        }
        let appended = self.core.log.append(payload, Durability::Lazy)?;
        debug_assert_eq!(appended, lsn);
        match &fact {
            // The lock was held since the batch was resolved: the agents'
            // positions are unchanged.
            Fact::Batch => {
                let Inner { state, scratch, .. } = &mut *g;
                state.apply_resolved_batch(lsn, scratch)
            }
            Fact::Event(e) => g.state.apply(lsn, e),
        }
        g.applied = lsn;
        drop(g);
        self.after_append(lsn);
        Ok(())
    }

    /// Holds the stream record at `lsn`, which this build cannot apply (it
    /// does not decode), by a `Purged` filler: the mirror refuses it and
    /// goes on (docs/scaling.md §4, "Refused records"), LSNs staying the
    /// stream's. Sequences before it that the log lacks get fillers too.
    pub fn append_refused(&self, lsn: Lsn, at: Timestamp) -> StoreResult<()> {
        let mut g = self.write();
        let next = self.core.log.next_lsn();
        if lsn < next {
            return Err(StoreError::Log(crate::log::LogError::InvalidArgument(
                format!(
                    "log {}: refused record at lsn {lsn} but the log already holds up to lsn {}",
                    self.core.log.dir().display(),
                    next - 1
                ),
            )));
        }
        let filler = codec::encode(&Event {
            at,
            kind: crate::registry::EventKind::Purged,
        });
        for _ in next..=lsn {
            self.core.log.append(&filler, Durability::Lazy)?;
        }
        g.applied = lsn;
        drop(g);
        self.after_append(lsn);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registration;
    use crate::store::StoreOptions;

    /// A sink that takes nothing (the tests only check the routing).
    struct Unreachable;
    impl CommandSink for Unreachable {
        fn command(&self, _: Option<Origin>, _: &mut Check<'_>) -> StoreResult<Vec<(Lsn, Event)>> {
            Err(StoreError::Replication("unreachable sink".into()))
        }
        fn heartbeat(
            &self,
            _: Option<Origin>,
            _: &str,
            _: Option<u32>,
            _: Timestamp,
            _: bool,
        ) -> StoreResult<Lsn> {
            Err(StoreError::Replication("unreachable sink".into()))
        }
        fn sweep(&self, _: Option<Origin>, _: Timestamp) -> StoreResult<Vec<(Lsn, Event)>> {
            Err(StoreError::Replication("unreachable sink".into()))
        }
        fn compact(
            &self,
            _: Option<Origin>,
            _: Timestamp,
            _: &crate::compact::CompactOptions,
        ) -> StoreResult<crate::compact::CompactionReport> {
            Err(StoreError::Replication("unreachable sink".into()))
        }
    }

    fn reg(name: &str) -> Registration {
        Registration::new(name, "claude", "/w")
    }

    #[test]
    fn only_an_empty_store_becomes_a_replica_and_then_it_never_writes_locally() {
        let used_dir = tempfile::tempdir().unwrap();
        let used = Store::open(used_dir.path(), StoreOptions::short_lived()).unwrap();
        used.register(reg("a"), None).unwrap();
        let e = used.mark_replica("f").unwrap_err().to_string();
        assert!(e.contains("holds 1 local events"), "{e}");

        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreOptions::short_lived()).unwrap();
        let sink: Arc<dyn CommandSink> = Arc::new(Unreachable);
        assert!(store.set_command_sink(Arc::downgrade(&sink)).is_err());
        store.mark_replica("f").unwrap();
        let e = store.mark_replica("g").unwrap_err().to_string();
        assert!(e.contains("replica of fleet `f`, not `g`"), "{e}");
        // No sink yet: refused, naming the fleet; nothing appended.
        let e = store.register(reg("b"), None).unwrap_err().to_string();
        assert!(e.contains("replica of fleet `f`"), "{e}");
        // With one, commands go to it (and heartbeats, sweeps, compaction).
        store.set_command_sink(Arc::downgrade(&sink)).unwrap();
        let e = store.register(reg("b"), None).unwrap_err().to_string();
        assert!(e.contains("unreachable sink"), "{e}");
        let e = store.heartbeat("b", None, None).unwrap_err().to_string();
        assert!(e.contains("unreachable sink"), "{e}");
        let e = store.sweep(None, &crate::registry::NoProbe).unwrap_err();
        assert!(e.to_string().contains("unreachable sink"), "{e}");
        let now = Timestamp::from_secs(1_900_000_000);
        let e = store.compact(now, &Default::default()).unwrap_err();
        assert!(e.to_string().contains("unreachable sink"), "{e}");
        // Once the sink is gone, commands fail instead of appending here.
        drop(sink);
        let e = store.register(reg("b"), None).unwrap_err().to_string();
        assert!(e.contains("replication stopped"), "{e}");
        assert_eq!(store.applied_lsn(), 0);
        store.close().unwrap();
        // Reopened, it is still a replica: writes refused, reads served.
        let store = Store::open(dir.path(), StoreOptions::short_lived()).unwrap();
        assert!(store.register(reg("c"), None).is_err());
        assert!(store.state().agents().as_slice().is_empty());
    }

    #[test]
    fn a_replicated_batch_with_a_bad_entry_is_refused_whole_and_nothing_is_logged() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreOptions::short_lived()).unwrap();
        let t0 = Timestamp::from_secs(1_900_000_000);
        for (name, pid) in [("a", 1), ("b", 2)] {
            let mut r = reg(name);
            r.pid = Some(pid);
            store.register(r, Some(t0)).unwrap();
        }
        let t1 = t0.add_millis(1000);
        let mut b = crate::registry::codec::HeartbeatBatchBuilder::default();
        b.push(t1, "a", Some(1), None);
        b.push(t1, "b", Some(2), None);
        let good = b.take_payload();
        // The last entry cut short: "a" decodes, "b" does not.
        let bad = &good[..good.len() - 1];
        let e = store.append_replicated(3, bad).unwrap_err().to_string();
        assert!(e.contains("lsn 3"), "{e}");
        assert_eq!(store.applied_lsn(), 2);
        let active = |name: &str| store.state().agent(name).unwrap().last_active;
        assert_eq!((active("a"), active("b")), (t0, t0), "nothing applied");
        // The good batch takes the same LSN: nothing was logged at 3.
        store.append_replicated(3, &good).unwrap();
        assert_eq!((active("a"), active("b")), (t1, t1));
        assert_eq!(store.state().anomalies(), 0);
    }

    #[test]
    fn a_refused_record_is_held_by_a_filler_and_the_next_one_folds() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreOptions::short_lived()).unwrap();
        let t0 = Timestamp::from_secs(1_900_000_000);
        store.register(reg("a"), Some(t0)).unwrap();
        // A tag no build knows, at 3 (2 was deleted from the stream).
        let alien = [99u8, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3];
        assert!(store.append_replicated(3, &alien).is_err());
        store.append_refused(3, t0).unwrap();
        assert_eq!(store.applied_lsn(), 3);
        assert!(store.append_refused(3, t0).is_err(), "never twice");
        let hb = codec::encode(&Event {
            at: t0.add_millis(5),
            kind: crate::registry::EventKind::Heartbeat {
                agent: "a".into(),
                pid: None,
            },
        });
        store.append_replicated(4, &hb).unwrap();
        assert_eq!(store.state().agent("a").unwrap().last_event_lsn, 4);
        let view = store.view();
        let tags: Vec<u8> = view
            .iter_from(0)
            .map(|r| codec::tag_of(r.unwrap().payload).unwrap())
            .collect();
        use crate::registry::tag;
        assert_eq!(
            tags,
            [
                tag::AGENT_REGISTERED,
                tag::PURGED,
                tag::PURGED,
                tag::HEARTBEAT
            ]
        );
    }
}
