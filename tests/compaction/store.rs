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
