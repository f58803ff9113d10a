//! Export from the Store: rows in registration order, unrepresentable agents
//! left out (or refused in strict mode, leaving the old file), the automatic
//! export with each snapshot, conformance of every file, and
//! export → import into a fresh store → export byte-identical.

use crate::support::conformance::checker_accepts;
use crate::support::fixtures::{registry_dir, ACCEPTED};
use crate::support::store::*;
use agentlog::model::Status;
use agentlog::registry::*;
use agentlog::store::{Store, StoreError, StoreOptions};

fn manual_opts() -> StoreOptions {
    StoreOptions {
        snapshot_every_events: 0,
        snapshot_every_secs: 0,
        ..lazy_opts()
    }
}

/// A small fleet: mixed providers (one unrepresentable), statuses and
/// optional fields, registered in a known order.
fn fleet(store: &Store) {
    let providers = ["claude", "codex", "gemini"];
    for i in 0..9u32 {
        let mut r = Registration::new(&format!("agent-{i}"), providers[i as usize % 3], "/w/p");
        r.pid = Some(100 + i);
        if i % 2 == 0 {
            r.log_path = Some(format!("/w/logs/{i}.log"));
            r.short_id = format!("s{i}");
            r.project_root = "/w".into();
        }
        store
            .register(r, Some(T0.add_millis(i64::from(i) * 1000)))
            .unwrap();
    }
    store
        .register(
            Registration::new("odd-one", "opencode", "/w"),
            Some(T0.add_millis(20_000)),
        )
        .unwrap();
    store
        .set_status("agent-3", Status::Busy, None, Some(T0.add_millis(30_000)))
        .unwrap();
    store
        .set_status("agent-4", Status::Exited, None, Some(T0.add_millis(31_000)))
        .unwrap();
    store
        .heartbeat("agent-5", Some(105), Some(T0.add_millis(32_000)))
        .unwrap();
}

fn row_names(bytes: &[u8]) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    v["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn export_writes_registration_order_leaves_out_the_unrepresentable_and_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store"), manual_opts()).unwrap();
    fleet(&store);
    let out = dir.path().join("pub/registry.json");
    let report = store.export(Some(&out), false).unwrap();
    assert_eq!(report.rows, 9);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].name, "odd-one");
    let bytes = std::fs::read(&out).unwrap();
    let expect: Vec<String> = (0..9).map(|i| format!("agent-{i}")).collect();
    assert_eq!(row_names(&bytes), expect);
    checker_accepts(&out);

    // Strict: refused naming the agent; the published file is untouched.
    let err = store.export(Some(&out), true).unwrap_err();
    assert!(matches!(err, StoreError::Export(_)), "{err}");
    assert!(err.to_string().contains("odd-one"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), bytes);

    // No path given and none configured.
    assert!(matches!(
        store.export(None, false),
        Err(StoreError::NoExportPath)
    ));
}

#[test]
fn every_snapshot_exports_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("registry.json");
    let opts = StoreOptions {
        export_path: Some(out.clone()),
        ..manual_opts()
    };
    let store = Store::open(&dir.path().join("store"), opts.clone()).unwrap();
    fleet(&store);
    store.snapshot().unwrap();
    let first = std::fs::read(&out).unwrap();
    assert_eq!(row_names(&first).len(), 9);
    checker_accepts(&out);

    // The clean close snapshots the new registration and exports it too.
    let mut r = Registration::new("late", "claude", "/w");
    r.pid = Some(999);
    store.register(r, Some(T0.add_millis(60_000))).unwrap();
    store.close().unwrap();
    let names = row_names(&std::fs::read(&out).unwrap());
    assert_eq!(names.last().map(String::as_str), Some("late"));
    checker_accepts(&out);

    // export(None) uses the configured path.
    let store = Store::open(&dir.path().join("store"), opts).unwrap();
    std::fs::remove_file(&out).unwrap();
    assert_eq!(store.export(None, false).unwrap().rows, 10);
    checker_accepts(&out);
}

#[test]
fn export_import_into_a_fresh_store_export_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("a"), manual_opts()).unwrap();
    fleet(&store);
    let first = dir.path().join("first.json");
    store.export(Some(&first), false).unwrap();
    checker_accepts(&first);

    let fresh = Store::open(&dir.path().join("b"), manual_opts()).unwrap();
    let report = fresh.import_registry(&first).unwrap();
    assert_eq!(report.imported, 9);
    assert_eq!(report.schema_version, Some(4));
    let second = dir.path().join("second.json");
    fresh.export(Some(&second), false).unwrap();
    assert_eq!(
        std::fs::read(&first).unwrap(),
        std::fs::read(&second).unwrap()
    );

    // And the imported state survives a snapshot + reopen unchanged.
    let state = fresh.state();
    fresh.close().unwrap();
    let fresh = Store::open(&dir.path().join("b"), manual_opts()).unwrap();
    assert_eq!(fresh.state(), state);
    let third = dir.path().join("third.json");
    fresh.export(Some(&third), false).unwrap();
    assert_eq!(
        std::fs::read(&first).unwrap(),
        std::fs::read(&third).unwrap()
    );
}

/// Import → export through the Store keeps every exported field of every
/// accepted fixture: the store's export equals rendering the parsed rows.
#[test]
fn accepted_fixtures_round_trip_through_the_store() {
    let fixtures = registry_dir();
    for (name, _) in ACCEPTED {
        // A copy: an import creates `<file>.lock` beside the file it reads.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(name);
        std::fs::copy(fixtures.join(name), &file).unwrap();
        let store = Store::open(&dir.path().join("s"), manual_opts()).unwrap();
        store.import_registry(&file).unwrap();
        let out = dir.path().join("registry.json");
        let report = store.export(Some(&out), true).unwrap();
        let parsed =
            agentlog::import::parse_registry(&std::fs::read(&file).unwrap(), &file).unwrap();
        assert_eq!(report.rows, parsed.rows.len(), "{name}");
        let (expect, _) = agentlog::export::render_v4(
            parsed.rows.iter().map(|r| &r.agent),
            &agentlog::export::ExportOptions {
                strict: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(std::fs::read(&out).unwrap()).unwrap(),
            String::from_utf8(expect).unwrap(),
            "{name}"
        );
        checker_accepts(&out);
    }
}
