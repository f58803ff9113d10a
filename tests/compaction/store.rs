//! `Store::compact` and the auto-compaction hook: while 2 threads keep
//! issuing commands, the store's in-memory state after compaction equals the
//! fold of the compacted log (the Store's invariant), retired agents are
//! gone from both, and `maybe_compact` fires on the threshold only.

use std::sync::Arc;

use agentlog::compact::{AutoCompactor, AutoPolicy, CompactOptions};
use agentlog::log::LogOptions;
use agentlog::model::Status;
use agentlog::registry::*;
use agentlog::store::{Store, StoreOptions};
use agentlog::time::Timestamp;

const H: i64 = 3600 * 1000;

fn opts() -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_size: 32 * 1024,
            max_record_size: 4096,
            flush_interval: None,
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn store_compaction_keeps_state_equal_to_the_fold_of_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(tmp.path(), opts()).unwrap());
    let t0 = Timestamp::from_secs(1_800_000_000);
    for i in 0..60 {
        let mut r = Registration::new(&format!("a{i:02}"), "claude", "/w");
        r.pid = Some(9);
        store.register(r, Some(t0)).unwrap();
        for k in 0..20 {
            store
                .heartbeat(
                    &format!("a{i:02}"),
                    Some(9),
                    Some(t0.add_millis(1000 + k * 1000)),
                )
                .unwrap();
        }
    }
    // 50 finish: all older than the TTL at `now` except the last 10.
    for i in 0..50 {
        let at = if i < 40 {
            t0.add_millis(H)
        } else {
            t0.add_millis(20 * H + i)
        };
        store
            .set_status(&format!("a{i:02}"), Status::Exited, None, Some(at))
            .unwrap();
    }
    let now = t0.add_millis(26 * H);

    let mut auto = AutoCompactor::new(
        AutoPolicy {
            threshold: 0.99,
            min_bytes: 0,
            every_ms: None,
        },
        CompactOptions::default(),
    );
    assert!(
        store.maybe_compact(&mut auto, now).unwrap().is_none(),
        "99% is not reached"
    );
    auto.policy.threshold = 0.5;
    let est = store.with_state(|s, _| auto.estimate(s, now));
    assert!(est.droppable_bytes * 2 >= est.total_bytes, "{est:?}");

    // Commands keep going in 2 threads while the hook compacts.
    let workers: Vec<_> = (50..52)
        .map(|i| {
            let store = store.clone();
            std::thread::spawn(move || {
                for k in 0..300 {
                    let name = format!("a{i:02}");
                    store
                        .heartbeat(&name, Some(9), Some(now.add_millis(k)))
                        .unwrap();
                    if k % 50 == 0 {
                        let f = FieldUpdates {
                            log_path: Some(Some(format!("/l/{k}"))),
                            ..Default::default()
                        };
                        store
                            .update_fields(&name, f, Some(now.add_millis(k)))
                            .unwrap();
                    }
                }
            })
        })
        .collect();
    let report = store
        .maybe_compact(&mut auto, now)
        .unwrap()
        .expect("threshold reached");
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(report.agents_retired.len(), 40);
    assert!(report.heartbeats_collapsed > 0);
    // (bytes_after also counts what the workers appended meanwhile.)
    assert!(report.bytes_dropped > report.bytes_before / 2, "{report:?}");

    let state = store.state();
    let folded = store.state_at(agentlog::store::Until::End).unwrap();
    assert_eq!(state.agents(), folded.agents());
    assert_eq!(state.messages(), folded.messages());
    assert_eq!(state.sessions(), folded.sessions());
    assert_eq!(state.agents().len(), 20);
    assert!(state.agent("a00").is_none() && state.agent("a45").is_some());
    assert_eq!(
        state.agent("a51").unwrap().log_path.as_deref(),
        Some("/l/250")
    );

    // The workers' heartbeat runs are collapsible again: compact once more
    // (no retirements left); reopening gives the same state.
    let again = store.compact(now, &CompactOptions::default()).unwrap();
    assert!(again.agents_retired.is_empty());
    assert!(again.heartbeats_collapsed > 0);
    let state = store.state();
    assert_eq!(
        state.agents(),
        store
            .state_at(agentlog::store::Until::End)
            .unwrap()
            .agents()
    );
    let store = Arc::try_unwrap(store).unwrap();
    store.close().unwrap();
    let reopened = Store::open(tmp.path(), opts()).unwrap();
    assert_eq!(reopened.state().agents(), state.agents());
}

/// A heartbeat batch (a replica's record of several agents' beats) joins
/// each agent's heartbeat run beat by beat: the record is dropped once every
/// beat in it is a middle one, kept while one is still some run's first or
/// latest; the compacted log folds to the state before compaction.
#[test]
fn heartbeat_batches_collapse_beat_by_beat() {
    use agentlog::registry::codec::HeartbeatBatchBuilder;
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path(), opts()).unwrap();
    let t0 = Timestamp::from_secs(1_800_000_000);
    let at = |s: i64| t0.add_millis(s * 1000);
    for (name, pid) in [("a", 1), ("b", 2)] {
        let mut r = Registration::new(name, "claude", "/w");
        r.pid = Some(pid);
        store.register(r, Some(t0)).unwrap();
    }
    let batch = |beats: &[(&str, u32, i64)]| {
        let mut b = HeartbeatBatchBuilder::default();
        for &(agent, pid, s) in beats {
            b.push(at(s), agent, Some(pid), None);
        }
        let lsn = store.with_state(|_, lsn| lsn) + 1;
        store.append_replicated(lsn, &b.take_payload()).unwrap();
        lsn
    };
    let l1 = batch(&[("a", 1, 1), ("b", 2, 1)]); // both runs begin: kept
    let l2 = batch(&[("a", 1, 2), ("b", 2, 2)]); // middles once l3, l4 come
    let l3 = batch(&[("a", 1, 3)]); // a middle once l4 comes
    let l4 = batch(&[("b", 2, 4), ("a", 1, 4)]); // a's run ends here: kept
    store
        .set_status("a", Status::Busy, None, Some(at(5)))
        .unwrap();
    let l6 = batch(&[("a", 1, 6), ("b", 2, 6)]); // a's new run begins: kept
    let before = store.state();

    let report = store.compact(at(10), &CompactOptions::default()).unwrap();
    assert_eq!(report.heartbeats_collapsed, 4, "{report:?}");
    assert_eq!(report.events_dropped, 2, "{report:?}");
    let kept: Vec<u64> = store.view().iter().map(|r| r.unwrap().lsn).collect();
    for lsn in [l1, l4, l6] {
        assert!(kept.contains(&lsn), "{lsn} kept: {kept:?}");
    }
    for lsn in [l2, l3] {
        assert!(!kept.contains(&lsn), "{lsn} dropped: {kept:?}");
    }
    let folded = store.state_at(agentlog::store::Until::End).unwrap();
    assert_eq!(folded.agents(), before.agents());
    assert_eq!(store.state().agents(), before.agents());
}
