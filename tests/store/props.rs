//! Property tests of the Store over random command sequences: the fold of
//! the log equals the store's state, reopening gives the same state, and the
//! fold of every prefix equals `state_at` that LSN (and that time).

use crate::support::store::*;
use agentlog::registry::history::Until;
use agentlog::registry::*;
use agentlog::store::Store;
use proptest::prelude::*;

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn log_fold_equals_state_and_prefixes_equal_state_at(
        cmds in proptest::collection::vec((0u32..10, 0usize..4, 0usize..4, 1u32..4, 0i64..90_000), 1..80)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), lazy_opts()).unwrap();
        let mut at = T0;
        for (pick, a, b, pid, dt) in &cmds {
            at = at.add_millis(*dt);
            mixed_command(&store, *pick, NAMES[*a], NAMES[*b], *pid, at);
            if *dt > 85_000 {
                let _ = store.sweep(Some(at), &NoProbe);
            }
        }
        let state = store.state();
        prop_assert_eq!(state.anomalies(), 0);
        prop_assert_eq!(&refold(&store), &state);
        prop_assert_eq!(store.applied_lsn(), store.log().last_lsn().unwrap_or(0));

        // Every prefix: incremental fold == state_at(lsn); times are
        // monotonic here, so state_at(time of record) is the same prefix
        // extended over records sharing that time.
        let mut inc = State::new(store.options().max_messages);
        prop_assert_eq!(&store.state_at(Until::Lsn(0)).unwrap(), &inc);
        for r in store.view().iter() {
            let r = r.unwrap();
            inc.apply_payload(r.lsn, r.payload).unwrap();
            prop_assert_eq!(&store.state_at(Until::Lsn(r.lsn)).unwrap(), &inc);
        }
        prop_assert_eq!(&store.state_at(Until::Time(at)).unwrap(), &state);

        // History of each agent: exactly the events that concern it.
        for n in NAMES {
            let h = store.history(n).unwrap();
            let mut expect = Vec::new();
            for r in store.view().iter() {
                let r = r.unwrap();
                let e = decode(r.payload).unwrap();
                if e.kind.concerns_agent(n) {
                    expect.push((r.lsn, e));
                }
            }
            prop_assert_eq!(h, expect);
        }

        store.close().unwrap();
        let reopened = Store::open(dir.path(), lazy_opts()).unwrap();
        prop_assert_eq!(reopened.state(), state);
    }
}

/// The snapshot hook: resuming the fold from (state_at(k), k) gives the same
/// store as folding everything.
#[test]
fn open_from_a_base_state_resumes_the_fold() {
    let dir = tempfile::tempdir().unwrap();
    let store = mixed_store(dir.path(), &NAMES, 300, 500);
    let full = store.state();
    let last = store.applied_lsn();
    assert!(last > 50, "{last}");
    let base = store.state_at(Until::Lsn(last / 2)).unwrap();
    store.close().unwrap();
    let resumed = Store::open_from(dir.path(), lazy_opts(), Some((base, last / 2))).unwrap();
    assert_eq!(resumed.state(), full);
    assert_eq!(resumed.applied_lsn(), last);
}
