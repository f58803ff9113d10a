//! The compaction invariant over random histories and random "now":
//! fold(compacted log) == retention(fold(log), now) — agents with every
//! field, statuses, messages with read receipts, request ids, sessions — and
//! every retained agent keeps its history but for collapsed heartbeats. Runs
//! on a real log with small segments, optionally compacted once midway.

use crate::support::ops::*;
use agentlog::compact::{compact, compact_log, fold_view, CompactOptions};
use agentlog::log::verify;
use agentlog::registry::*;
use proptest::prelude::*;

const MAX_MESSAGES: usize = 5;

fn same_registry(a: &State, b: &State) -> Result<(), TestCaseError> {
    prop_assert_eq!(a.agents(), b.agents());
    prop_assert_eq!(a.messages(), b.messages());
    prop_assert_eq!(a.requests(), b.requests());
    prop_assert_eq!(a.sessions(), b.sessions());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn fold_of_compacted_log_is_retention_of_fold(
        ops in proptest::collection::vec(op(), 20..300),
        midway in proptest::option::of(0.0f64..1.0),
        later in 0i64..200_000,
        ttl in 1i64..400_000,
        keep in 0usize..4,
        keep_all_heartbeats in any::<bool>(),
    ) {
        let (_, events, end) = run(&ops, MAX_MESSAGES);
        let tmp = tempfile::tempdir().unwrap();
        let log = open(tmp.path());
        let opts = CompactOptions {
            policy: RetentionPolicy { presence_ttl_ms: ttl, keep_finished: keep },
            keep_all_heartbeats,
            dry_run: false,
        };
        // Optionally compact once in the middle of the history (at the time
        // of the last event appended so far), then append the rest.
        let split = midway.map_or(0, |f| (events.len() as f64 * f) as usize);
        append_all(&log, &events[..split]);
        if split > 0 {
            let mid_now = events[split - 1].at;
            compact_log(&log, MAX_MESSAGES, mid_now, &opts).unwrap();
        }
        append_all(&log, &events[split..]);

        let before = read_events(&log);
        let original = fold(&before, MAX_MESSAGES);
        let now = end.add_millis(later);
        let mut expected = original.clone();
        expected.retain(now, &opts.policy);

        // The Store's way: seal, take the state at the last LSN, compact.
        log.seal_active().unwrap();
        let l = log.last_lsn().unwrap_or(0);
        let c = compact(&log, &original, l, now, &opts).unwrap();
        same_registry(&c.retained, &expected)?;

        let after = read_events(&log);
        same_registry(&fold(&after, MAX_MESSAGES), &expected)?;
        prop_assert_eq!(c.report.events_kept as usize, after.len());
        prop_assert_eq!(c.report.events_dropped as usize, before.len() - after.len());
        if keep_all_heartbeats {
            prop_assert_eq!(c.report.heartbeats_collapsed, 0);
        }
        let kept = expected.kept();
        history_preserved(&before, &after, &|a| kept.agents.contains(a))
            .map_err(TestCaseError::fail)?;
        if keep_all_heartbeats {
            // Nothing of a retained agent is missing.
            for (l, e) in &before {
                if matches!(e.kind, EventKind::Heartbeat { .. })
                    && kept.agents.contains(e.kind.subject_agent().unwrap())
                {
                    prop_assert!(after.iter().any(|(al, _)| al == l), "heartbeat {} dropped", l);
                }
            }
        }

        // Reopen: same records, verify clean, same fold.
        drop(log);
        let rep = verify(tmp.path()).unwrap();
        prop_assert!(rep.bad.is_empty(), "verify found {:?}", rep.bad);
        let log = open(tmp.path());
        prop_assert_eq!(read_events(&log), after);
        let refolded = fold_view(&log.view(), u64::MAX, MAX_MESSAGES).unwrap();
        same_registry(&refolded, &expected)?;
    }
}
