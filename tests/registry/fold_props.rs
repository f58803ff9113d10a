//! Property tests of the pure fold over random command sequences:
//! the codec round-trips, the payload fold equals the event fold, state
//! serialization round-trips, and the compaction rule holds (folding only the
//! events retention keeps gives the retained state).
//!
//! The command generator is the one the compaction tests use
//! (`compaction_common`), so every event kind the registry knows is covered
//! by both.

use crate::support::ops::{op, run};
use agentlog::registry::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn fold_is_deterministic_and_codec_faithful(ops in proptest::collection::vec(op(), 1..120)) {
        let (state, events, _) = run(&ops, 5);
        // Commands never produce anomalies.
        prop_assert_eq!(state.anomalies(), 0);
        let mut via_bytes = State::new(5);
        let mut via_events = State::new(5);
        for (i, e) in events.iter().enumerate() {
            let bytes = encode(e);
            prop_assert_eq!(&decode(&bytes).unwrap(), e);
            via_bytes.apply_payload(i as Lsn + 1, &bytes).unwrap();
            via_events.apply(i as Lsn + 1, e);
        }
        prop_assert_eq!(&via_bytes, &state);
        prop_assert_eq!(&via_events, &state);
        let snap = bincode::serde::encode_to_vec(&state, bincode::config::standard()).unwrap();
        let (back, _): (State, usize) = bincode::serde::decode_from_slice(&snap, bincode::config::standard()).unwrap();
        prop_assert_eq!(back, state);
    }

    #[test]
    fn folding_kept_events_gives_the_retained_state(
        ops in proptest::collection::vec(op(), 1..120),
        later in 0i64..200_000,
        ttl in 1i64..400_000,
        keep in 0usize..4,
    ) {
        let (state, events, end) = run(&ops, 5);
        let policy = RetentionPolicy { presence_ttl_ms: ttl, keep_finished: keep };
        let now = end.add_millis(later);
        let mut retained = state.clone();
        retained.retain(now, &policy);
        let kept = retained.kept();
        let mut compacted = State::new(5);
        for (i, e) in events.iter().enumerate() {
            if kept.keeps(i as Lsn + 1, e) {
                compacted.apply(i as Lsn + 1, e);
            }
        }
        prop_assert_eq!(compacted, retained);
    }
}
