//! Import of the shared fixtures (every file, as fixtures/README.md's table
//! says), refusals that name the row and value, and the import ↔ export round
//! trips (fixtures and a proptest over random agents).

use crate::support::conformance::checker_accepts;
use crate::support::fixtures::{registry_dir, ACCEPTED, BEYOND_V4, ROW_KEYS};
use agentlog::export::{render_v4, ExportOptions};
use agentlog::import::{parse_registry, read_registry_file, ImportError, ParsedRegistry};
use agentlog::model::{Agent, HostMode, Status, EXPORTABLE_PROVIDERS};
use agentlog::time::Timestamp;
use proptest::prelude::*;
use std::path::Path;
use std::time::Duration;

fn load(name: &str) -> Result<ParsedRegistry, ImportError> {
    let path = registry_dir().join(name);
    let bytes = std::fs::read(&path).unwrap();
    parse_registry(&bytes, &path)
}

fn agents(p: &ParsedRegistry) -> Vec<Agent> {
    p.rows.iter().map(|r| r.agent.clone()).collect()
}

/// (file, substrings the error must contain).
const REFUSED: [(&str, &[&str]); 5] = [
    (
        "v17-incompatible.json",
        &["schema_version 17 is newer than 16", "row 0", "`status`"],
    ),
    ("bad-provider.json", &["row 0", "`x`", "Open Code"]),
    ("bad-status.json", &["row 0", "`x`", "Active"]),
    ("malformed.json", &["malformed JSON", "line 1, column"]),
    ("not-object.json", &["top level is a list, not an object"]),
];

#[test]
fn every_fixture_is_in_the_table() {
    let mut files: Vec<String> = std::fs::read_dir(registry_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    let mut table: Vec<String> = ACCEPTED
        .iter()
        .map(|(f, _)| f.to_string())
        .chain(REFUSED.iter().map(|(f, _)| f.to_string()))
        .chain(BEYOND_V4.iter().map(|(f, _)| f.to_string()))
        .collect();
    table.sort();
    assert_eq!(files, table);
}

#[test]
fn accepted_fixtures_load_as_the_table_says() {
    for (name, count) in ACCEPTED.iter().chain(&BEYOND_V4) {
        let parsed = load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(parsed.rows.len(), *count, "{name}");
    }
    let t = |s| Timestamp::parse_rfc3339(s).unwrap();

    let v1 = &load("v1-python.json").unwrap().rows[0].agent;
    assert_eq!(v1.status, Status::Live, "schema 1 rows are live");
    assert_eq!(v1.last_message_at, None);
    assert_eq!(v1.claude_short_id.as_deref(), Some("abc"));
    assert_eq!(v1.created_at, t("2026-01-01T00:00:00Z"));

    let v2 = &load("v2-python.json").unwrap().rows[0].agent;
    assert_eq!(v2.status, Status::Orphaned);
    assert_eq!(v2.last_message_at, Some(t("2026-03-01T12:30:00Z")));
    assert_eq!(v2.mcp_channel_id, None);

    let v3 = load("v3-python.json").unwrap();
    assert_eq!(v3.schema_version, Some(3));
    assert_eq!(v3.rows[0].agent.host_mode, None);
    assert_eq!(v3.rows[0].agent.host_mode_or_default(), HostMode::Exec);

    let entries = &load("v4-entries-key.json").unwrap().rows[0].agent;
    assert_eq!(entries.name, "legacy-daemon");
    assert_eq!(entries.short_id, "q1");
    assert_eq!(entries.project_root, "/p");
    assert_eq!(entries.pid, Some(777));

    let mixed = load("v4-mixed.json").unwrap();
    let host = &mixed.rows[2].agent;
    assert_eq!(host.name, "host-a");
    assert_eq!(host.status, Status::Busy);
    assert_eq!(host.host_mode, Some(HostMode::Interactive));
    assert_eq!(host.pid, Some(41_233));
    assert_eq!(host.pid_start_time, Some(987_654_321));
    assert_eq!(
        host.messaging_socket_path.as_deref(),
        Some("/home/dev/.fno/agents/k3x9p2/worker.sock")
    );
    assert_eq!(host.last_reconciled_at, Some(t("2026-11-20T10:00:05Z")));
    let coder = &mixed.rows[1].agent;
    assert_eq!(
        coder.host_mode,
        Some(HostMode::Exec),
        "explicit exec is kept"
    );
    assert_eq!(
        coder.mcp_channel_id.as_deref(),
        Some("3e1f5a0c-7d2b-4f6e-8a9c-0b1c2d3e4f50")
    );
    assert_eq!(coder.short_id, "", "Python's empty short_id");
    assert_eq!(load("empty.json").unwrap().schema_version, None);
}

#[test]
fn refused_fixtures_name_the_row_and_value_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for (name, needles) in REFUSED {
        // Through the locked file reader: the refused file stays byte-identical.
        let path = dir.path().join(name);
        let original = std::fs::read(registry_dir().join(name)).unwrap();
        std::fs::write(&path, &original).unwrap();
        let err = read_registry_file(&path, Duration::from_secs(5))
            .expect_err(name)
            .to_string();
        assert!(err.contains(name), "error names the file: {err}");
        for needle in needles {
            assert!(err.contains(needle), "{name}: `{needle}` not in: {err}");
        }
        assert_eq!(std::fs::read(&path).unwrap(), original, "{name}");
    }
}

#[test]
fn row_level_refusals_name_row_and_value() {
    let row = |extra: &str| {
        format!(
            r#"{{"schema_version": 4, "agents": [
            {{"name": "ok", "provider": "codex", "cwd": "/p", "log_path": null,
              "created_at": "2026-11-01T00:00:00Z", "status": "live"}},
            {{"name": "y", "provider": "codex", "cwd": "/p", "log_path": null,
              "created_at": "2026-11-01T00:00:00Z", "status": "live"{extra}}}]}}"#
        )
    };
    let cases: Vec<(String, &[&str])> = vec![
        (row(r#", "pid": -1"#), &["row 1", "`pid` is -1"]),
        (row(r#", "pid": 4294967296"#), &["row 1", "4294967296"]),
        (row(r#", "pid_start_time": 1.5"#), &["row 1", "1.5"]),
        (
            row(r#", "host_mode": "tty""#),
            &["row 1", "host_mode", "tty"],
        ),
        (
            row(r#", "last_message_at": "yesterday""#),
            &["row 1", "last_message_at", "yesterday"],
        ),
        (
            row(r#", "short_id": null"#),
            &["row 1", "short_id", "never null"],
        ),
        (
            row(r#", "codex_session_id": 7"#),
            &["row 1", "codex_session_id", "7"],
        ),
        (
            r#"{"schema_version": 4, "agents": [{"name": "a", "provider": "codex", "cwd": 3,
               "created_at": "2026-11-01T00:00:00Z", "status": "live"}]}"#
                .to_string(),
            &["row 0", "`cwd` is 3"],
        ),
        (
            r#"{"schema_version": 2, "agents": [{"name": "a", "provider": "codex", "cwd": "/p",
               "created_at": "2026-11-01T00:00:00Z"}]}"#
                .to_string(),
            &["row 0", "missing required key `status`"],
        ),
        (
            r#"{"schema_version": 4, "agents": [{"name": "a", "provider": "codex", "cwd": "/p",
               "created_at": "2026-11-01T00:00:00Z", "status": "live"}, 5]}"#
                .to_string(),
            &["row 1", "not an object but a number"],
        ),
        (
            row("").replace("\"name\": \"y\"", "\"name\": \"ok\""),
            &["row 1", "duplicate name (first seen in row 0)"],
        ),
        (
            r#"{"schema_version": "4", "agents": []}"#.to_string(),
            &["unsupported schema_version \"4\""],
        ),
        (
            r#"{"schema_version": 0, "agents": []}"#.to_string(),
            &["unsupported schema_version 0"],
        ),
        (
            r#"{"schema_version": 4, "agents": {}}"#.to_string(),
            &["`agents` is an object, expected a list"],
        ),
        (
            r#"{"schema_version": 4, "agents": [], "entries": []}"#.to_string(),
            &["both `agents` and `entries`"],
        ),
        (r#"{"agents": []}"#.to_string(), &["missing schema_version"]),
    ];
    for (json, needles) in cases {
        let err = parse_registry(json.as_bytes(), Path::new("reg.json"))
            .expect_err(&json)
            .to_string();
        for needle in needles {
            assert!(err.contains(needle), "`{needle}` not in: {err}\nfor {json}");
        }
    }
}

#[test]
fn newer_writer_keys_are_kept_but_never_exported() {
    let json = r#"{"schema_version": 4, "agents": [{"name": "kid", "provider": "claude",
        "cwd": "/p", "log_path": null, "created_at": "2026-11-01T00:00:00Z",
        "status": "live", "session_id": "derived", "spawned_by_session": "s-1",
        "spawned_by_harness": {"kind": "mcp"}, "spawned_by_cwd": "/parent"}]}"#;
    let parsed = parse_registry(json.as_bytes(), Path::new("r.json")).unwrap();
    let agent = &parsed.rows[0].agent;
    let mut extra = agent.extra.clone();
    extra.sort();
    assert_eq!(
        extra,
        vec![
            ("session_id".to_string(), "\"derived\"".to_string()),
            ("spawned_by_cwd".to_string(), "\"/parent\"".to_string()),
            (
                "spawned_by_harness".to_string(),
                r#"{"kind":"mcp"}"#.to_string()
            ),
            ("spawned_by_session".to_string(), "\"s-1\"".to_string()),
        ]
    );
    let (bytes, _) = render_v4([agent], &ExportOptions::default()).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    for key in ["spawned_by", "\"session_id\""] {
        assert!(!text.contains(key), "{key} exported:\n{text}");
    }
}

/// A fixture row's value for `key`, with the readers' equivalences applied:
/// absent, null and "" are all "empty"; a schema-1 row's missing status is live.
fn normalised(row: &serde_json::Value, key: &str) -> Option<serde_json::Value> {
    match row.get(key) {
        None if key == "status" => Some("live".into()),
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) if s.is_empty() => None,
        Some(v) => Some(v.clone()),
    }
}

#[test]
fn import_export_round_trips_keep_every_field() {
    let dir = tempfile::tempdir().unwrap();
    for (name, _) in ACCEPTED {
        let first = load(name).unwrap();
        let (bytes, report) = render_v4(
            &agents(&first),
            &ExportOptions {
                strict: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(report.rows, first.rows.len(), "{name}");
        let out = dir.path().join(name);
        std::fs::write(&out, &bytes).unwrap();
        checker_accepts(&out);

        // Same agents, same field values — as parsed, and row by row against
        // the source file's JSON.
        let second = parse_registry(&bytes, &out).unwrap();
        assert_eq!(agents(&second), agents(&first), "{name}");
        let src: serde_json::Value =
            serde_json::from_slice(&std::fs::read(registry_dir().join(name)).unwrap())
                .unwrap_or(serde_json::json!({}));
        let src_rows = src
            .get("agents")
            .or_else(|| src.get("entries"))
            .and_then(|r| r.as_array())
            .cloned()
            .unwrap_or_default();
        let exported: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let exported_rows = exported["agents"].as_array().unwrap();
        assert_eq!(src_rows.len(), exported_rows.len());
        for (s, e) in src_rows.iter().zip(exported_rows) {
            for key in ROW_KEYS {
                assert_eq!(normalised(s, key), normalised(e, key), "{name}: {key}");
            }
        }

        // export → import → export is byte-identical.
        let (again, _) = render_v4(
            &agents(&second),
            &ExportOptions {
                strict: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(again, bytes, "{name}");
    }
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    prop::option::of(any::<String>().prop_filter("non-empty", |s| !s.is_empty()))
}

fn opt_time() -> impl Strategy<Value = Option<Timestamp>> {
    // Whole seconds across years 1..=9999: the export's resolution and range.
    prop::option::of((-62_135_596_800i64..253_402_300_799).prop_map(Timestamp::from_secs))
}

prop_compose! {
    fn arb_agent()(
        name in any::<String>(),
        provider in prop::sample::select(EXPORTABLE_PROVIDERS.to_vec()),
        cwd in any::<String>(),
        created in (-62_135_596_800i64..253_402_300_799).prop_map(Timestamp::from_secs),
        status in prop::sample::select(Status::ALL.to_vec()),
        host_mode in prop::option::of(prop::sample::select(HostMode::ALL.to_vec())),
        texts in prop::collection::vec(opt_text(), 8),
        times in (opt_time(), opt_time()),
        ids in (any::<String>(), any::<String>()),
        pid in prop::option::of(any::<u32>()),
        start in prop::option::of(any::<u64>()),
    ) -> Agent {
        let mut a = Agent::new(&name, provider, &cwd, created);
        a.status = status;
        a.host_mode = host_mode;
        let mut t = texts.into_iter();
        a.log_path = t.next().flatten();
        a.claude_short_id = t.next().flatten();
        a.codex_session_id = t.next().flatten();
        a.gemini_session_id = t.next().flatten();
        a.claude_session_uuid = t.next().flatten();
        a.mcp_channel_id = t.next().flatten();
        a.messaging_socket_path = t.next().flatten();
        a.cc_session_id = t.next().flatten();
        a.last_message_at = times.0;
        a.last_reconciled_at = times.1;
        a.short_id = ids.0;
        a.project_root = ids.1;
        a.pid = pid;
        a.pid_start_time = start;
        a
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn export_import_export_is_byte_identical(mut fleet in prop::collection::vec(arb_agent(), 0..8)) {
        // Names must be unique and non-empty for every row to be exportable.
        for (i, a) in fleet.iter_mut().enumerate() {
            a.name = format!("{i}-{}", a.name);
        }
        let (bytes, report) = render_v4(&fleet, &ExportOptions { strict: true, ..Default::default() }).unwrap();
        prop_assert_eq!(report.rows, fleet.len());
        let parsed = parse_registry(&bytes, Path::new("prop.json")).unwrap();
        prop_assert_eq!(parsed.rows.len(), fleet.len());
        for (got, want) in parsed.rows.iter().map(|r| &r.agent).zip(&fleet) {
            // Every schema-v4 field survives; registry-only fields are not in the file.
            let mut expect = want.clone();
            expect.status_cause = got.status_cause;
            expect.registered_at = got.registered_at;
            expect.last_active = got.last_active;
            prop_assert_eq!(got, &expect);
        }
        let (again, _) = render_v4(&agents(&parsed), &ExportOptions { strict: true, ..Default::default() }).unwrap();
        prop_assert_eq!(again, bytes);
    }
}
