//! Import into a store's terms: each accepted fixture becomes `AgentImported`
//! events whose fold holds exactly the file's agents, and whose export equals
//! the export of the parsed file.

use crate::support::fixtures::{registry_dir, ACCEPTED};
use agentlog::export::{render_v4, ExportOptions};
use agentlog::import::{parse_registry, to_events};
use agentlog::model::StatusCause;
use agentlog::registry::{EventKind, State};
use agentlog::time::Timestamp;

#[test]
fn fixtures_fold_into_the_same_agents_and_export() {
    let at = Timestamp::parse_rfc3339("2026-11-30T12:00:00Z").unwrap();
    let dir = registry_dir();
    for (name, _) in ACCEPTED {
        let path = dir.join(name);
        let parsed = parse_registry(&std::fs::read(&path).unwrap(), &path).unwrap();
        let rows: Vec<_> = parsed.rows.iter().map(|r| r.agent.clone()).collect();
        let events = to_events(parsed, at);
        assert_eq!(events.len(), rows.len(), "{name}");

        let mut state = State::default();
        for (i, e) in events.iter().enumerate() {
            assert_eq!(e.at, at);
            assert!(matches!(e.kind, EventKind::AgentImported(_)));
            state.apply(i as u64 + 1, e);
        }
        assert_eq!(state.anomalies(), 0, "{name}");
        let folded: Vec<_> = state.agents().iter().cloned().collect();
        assert_eq!(folded.len(), rows.len(), "{name}");
        for (i, (got, want)) in folded.iter().zip(&rows).enumerate() {
            assert_eq!(got.created_at, want.created_at, "file's created_at kept");
            assert_eq!(
                got.last_event_lsn,
                i as u64 + 1,
                "the import is its last event"
            );
            assert_eq!((got.registered_at, got.last_active), (at, at));
            assert_eq!(got.status_cause, StatusCause::Import);
            let mut same = got.clone();
            same.registered_at = want.registered_at;
            same.last_active = want.last_active;
            same.last_event_lsn = want.last_event_lsn;
            assert_eq!(&same, want, "{name}: every field kept");
        }
        let opts = ExportOptions {
            strict: true,
            ..Default::default()
        };
        assert_eq!(
            render_v4(&folded, &opts).unwrap(),
            render_v4(&rows, &opts).unwrap(),
            "{name}"
        );
    }
}
