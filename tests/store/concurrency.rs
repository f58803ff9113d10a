//! 8 threads × 10,000 mixed commands on one Store: nothing lost, the state
//! equals the refold of the log, the log verifies, and a reopen agrees.

use crate::support::store::*;
use agentlog::log::{verify, Durability};
use agentlog::registry::*;
use agentlog::store::{Store, StoreOptions};
use std::sync::atomic::{AtomicU64, Ordering};

#[test]
fn eight_threads_of_mixed_commands() {
    let dir = tempfile::tempdir().unwrap();
    // Lazy appends (fsync cost is the log's concern, see the durable test
    // below); each thread syncs at its end.
    let opts = lazy_opts();
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    let ok_heartbeats = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..8u32 {
            let store = &store;
            let ok_heartbeats = &ok_heartbeats;
            s.spawn(move || {
                let me = format!("agent-{t}");
                let peer = format!("agent-{}", (t + 1) % 8);
                let pid = 1000 + t;
                let mut r = Registration::new(&me, "claude", "/w");
                r.pid = Some(pid);
                store.register(r, Some(T0)).unwrap();
                let mut x: u32 = t.wrapping_mul(2_654_435_761);
                for i in 0..10_000u32 {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    let at = T0.add_millis(i64::from(i));
                    // Mostly heartbeats (as in a real fleet); 1 in 50 is another command.
                    if !x.is_multiple_of(50) {
                        if store.heartbeat(&me, Some(pid), Some(at)).is_ok() {
                            ok_heartbeats.fetch_add(1, Ordering::Relaxed);
                        }
                    } else {
                        let pick = (x / 50) % 10;
                        if mixed_command(store, pick, &me, &peer, pid, at)
                            && (1..=4).contains(&pick)
                        {
                            ok_heartbeats.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                store.sync().unwrap();
            });
        }
    });
    let state = store.state();
    assert_eq!(state.anomalies(), 0);
    assert_eq!(refold(&store), state);
    let records = store.log().last_lsn().unwrap();
    assert_eq!(store.applied_lsn(), records);
    let hb_records = store
        .view()
        .iter()
        .filter(|r| r.as_ref().unwrap().payload[0] == tag::HEARTBEAT)
        .count() as u64;
    assert_eq!(
        hb_records,
        ok_heartbeats.load(Ordering::Relaxed),
        "every acknowledged heartbeat is in the log"
    );
    assert!(
        hb_records > 8 * 5_000,
        "most heartbeats succeed ({hb_records})"
    );
    store.close().unwrap();
    let report = verify(&dir.path().join("log")).unwrap();
    assert!(report.is_clean(), "{report:?}");
    let reopened = Store::open(dir.path(), opts).unwrap();
    assert_eq!(reopened.state(), state);
    assert_eq!(reopened.applied_lsn(), records);
}

#[test]
fn durable_commands_from_threads_share_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        command_durability: Durability::Durable,
        ..lazy_opts()
    };
    let store = Store::open(dir.path(), opts.clone()).unwrap();
    store
        .register(Registration::new("hub", "claude", "/w"), Some(T0))
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let store = &store;
            s.spawn(move || {
                for i in 0..25 {
                    let id = store
                        .post_message(
                            PostMessage::new("hub", None, "c", &format!("{t}/{i}")),
                            Some(T0),
                        )
                        .unwrap();
                    // Acknowledged durable => synced.
                    assert!(store.log().synced_lsn() >= id);
                }
            });
        }
    });
    let state = store.state();
    drop(store);
    let reopened = Store::open(dir.path(), opts).unwrap();
    assert_eq!(reopened.state(), state);
    // One registration, 100 posts, and a `MessagesDropped` record before
    // each of the 92 posts that overflowed the cap of 8.
    assert_eq!(reopened.state().drops_total(), 92);
    assert_eq!(reopened.log().last_lsn(), Some(1 + 100 + 92));
}
