//! Import through the Store: every shared fixture imports or is refused as
//! fixtures/README.md's table says; a refusal (parser or merge rule) changes
//! neither the state nor the log; an import lands as one batch; finished
//! agents are replaced, unfinished ones refuse the file.

use crate::support::fixtures::{registry_dir, ACCEPTED};
use crate::support::store::*;
use agentlog::model::Status;
use agentlog::registry::*;
use agentlog::store::{Store, StoreError, StoreOptions};
use std::path::{Path, PathBuf};

fn manual_opts() -> StoreOptions {
    StoreOptions {
        snapshot_every_events: 0,
        snapshot_every_secs: 0,
        ..lazy_opts()
    }
}

/// A copy of fixture `name` in `dir/in/` (an import takes a shared lock on
/// `<file>.lock`, which must not be created among the project's fixtures).
fn fixture(dir: &Path, name: &str) -> PathBuf {
    let src = registry_dir().join(name);
    let dst = dir.join("in").join(name);
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    std::fs::copy(&src, &dst).unwrap();
    dst
}

const REFUSED: [(&str, &[&str]); 5] = [
    ("v17-incompatible.json", &["schema_version 17", "row 0"]),
    ("bad-provider.json", &["row 0", "Open Code"]),
    ("bad-status.json", &["row 0", "Active"]),
    ("malformed.json", &["malformed JSON", "line 1, column"]),
    ("not-object.json", &["not an object"]),
];

/// The store's observable content: state and log length.
fn snapshot_of(store: &Store) -> (State, Option<u64>) {
    (store.state(), store.log().last_lsn())
}

/// A store holding one live agent, so "changes nothing" is not vacuous.
fn seeded(dir: &Path) -> Store {
    let store = Store::open(dir, manual_opts()).unwrap();
    let mut r = Registration::new("resident", "claude", "/w");
    r.pid = Some(42);
    store.register(r, Some(T0)).unwrap();
    store
}

#[test]
fn accepted_fixtures_import_as_one_batch_with_every_row() {
    for (name, rows) in ACCEPTED {
        let dir = tempfile::tempdir().unwrap();
        let store = seeded(dir.path());
        let before = store.log().last_lsn().unwrap();
        let report = store
            .import_registry(&fixture(dir.path(), name))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(report.imported, rows, "{name}");
        assert_eq!(
            store.log().last_lsn().unwrap() - before,
            rows as u64,
            "{name}"
        );
        assert_eq!(store.state().agents().len(), 1 + rows, "{name}");
        if rows > 0 {
            let lsns = report.lsns.clone().unwrap();
            assert_eq!(*lsns.start(), before + 1, "{name}");
            assert_eq!(*lsns.end(), before + rows as u64, "{name}");
        } else {
            assert_eq!(report.lsns, None, "{name}");
        }
        // The import is in the log, not only in memory.
        assert_eq!(store.state(), refold(&store), "{name}");
        assert!(report.replaced.is_empty(), "{name}");
    }
}

#[test]
fn refused_fixtures_change_nothing_and_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let store = seeded(dir.path());
    let before = snapshot_of(&store);
    for (name, needles) in REFUSED {
        let err = store
            .import_registry(&fixture(dir.path(), name))
            .unwrap_err();
        assert!(matches!(err, StoreError::Import(_)), "{name}: {err}");
        let msg = err.to_string();
        assert!(msg.contains(name), "{name}: {msg}");
        for n in needles {
            assert!(msg.contains(n), "{name}: `{n}` not in {msg}");
        }
        assert_eq!(snapshot_of(&store), before, "{name}");
    }
    // A missing file is an error too, not an empty import.
    let err = store
        .import_registry(&dir.path().join("absent.json"))
        .unwrap_err();
    assert!(err.to_string().contains("absent.json"), "{err}");
    assert_eq!(snapshot_of(&store), before);
}

#[test]
fn a_row_naming_an_unfinished_agent_refuses_the_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), manual_opts()).unwrap();
    // `coder-1` is row 1 of v4-python.json; row 0 (`planner`) is free.
    let mut r = Registration::new("coder-1", "codex", "/elsewhere");
    r.pid = Some(7);
    store.register(r, Some(T0)).unwrap();
    let before = snapshot_of(&store);
    let err = store
        .import_registry(&fixture(dir.path(), "v4-python.json"))
        .unwrap_err();
    match &err {
        StoreError::ImportConflict {
            row, agent, status, ..
        } => {
            assert_eq!(
                (*row, agent.as_str(), *status),
                (1, "coder-1", Status::Live)
            );
        }
        other => panic!("expected a conflict, got {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("v4-python.json") && msg.contains("row 1"),
        "{msg}"
    );
    assert_eq!(snapshot_of(&store), before, "nothing of the file landed");

    // Once that agent has finished, the import replaces it (a new life).
    store
        .set_status("coder-1", Status::Exited, None, Some(T0.add_millis(1000)))
        .unwrap();
    let report = store
        .import_registry(&fixture(dir.path(), "v4-python.json"))
        .unwrap();
    assert_eq!(report.imported, 3);
    assert_eq!(report.replaced, vec!["coder-1".to_string()]);
    let state = store.state();
    let coder = state.agent("coder-1").unwrap();
    assert_eq!(coder.status, Status::Idle);
    assert_ne!(coder.cwd, "/elsewhere");

    // Importing the same file again: `planner` is live now, so refused.
    let before = snapshot_of(&store);
    let err = store
        .import_registry(&fixture(dir.path(), "v4-python.json"))
        .unwrap_err();
    assert!(err.to_string().contains("`planner`"), "{err}");
    assert_eq!(snapshot_of(&store), before);
}

#[test]
fn an_import_survives_a_crash_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), manual_opts()).unwrap();
    store
        .import_registry(&fixture(dir.path(), "v4-mixed.json"))
        .unwrap();
    let state = store.state();
    // No sync, no close: the import itself was durable.
    drop(store);
    let store = Store::open(dir.path(), manual_opts()).unwrap();
    assert_eq!(store.state(), state);
    assert_eq!(store.state().agents().len(), 3);
}

#[test]
fn an_import_larger_than_a_segment_is_one_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = manual_opts();
    // The smallest segment the default record limit (128 KiB) allows.
    opts.log.segment_size = 256 * 1024;
    // 4000 rows with a 300-byte cwd: several times the segment size.
    let rows: Vec<String> = (0..4000)
        .map(|i| {
            format!(
                r#"{{"name": "agent-{i:04}", "provider": "claude", "cwd": "/{}", "log_path": null,
                "created_at": "2026-01-01T00:00:00Z", "status": "live"}}"#,
                "w".repeat(300)
            )
        })
        .collect();
    let file = dir.path().join("registry.json");
    let doc = format!(r#"{{"schema_version": 4, "agents": [{}]}}"#, rows.join(","));
    assert!(doc.len() > 4 * 256 * 1024);
    std::fs::write(&file, doc).unwrap();
    let store_dir = dir.path().join("s");
    let store = Store::open(&store_dir, opts.clone()).unwrap();
    let report = store.import_registry(&file).unwrap();
    assert_eq!(report.imported, 4000);
    store.close().unwrap();
    let store = Store::open(&store_dir, opts).unwrap();
    assert_eq!(store.state().agents().len(), 4000);
    assert_eq!(store.applied_lsn(), 4000, "one event per row, one batch");
    store.close().unwrap();
}
