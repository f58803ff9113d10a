//! Upstream fno's files (`fixtures/upstream/`, written by upstream's own
//! writers at schemas 4 to 16): every one imports, and re-exports without
//! losing a key — to schema 16 every key it has, to schema 4 every key 4
//! has — and each export passes its schema's readers' contract. Also the
//! per-version reading of `provider` and `harness`.

use agentlog::check::{check_bytes_as, Schema};
use agentlog::export::{render, ExportOptions};
use agentlog::import::parse_registry;
use agentlog::model::Agent;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn upstream_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/upstream")
}

/// Every upstream registry fixture: (file name, parsed JSON).
fn fixtures() -> Vec<(String, Value)> {
    let mut files: Vec<_> = std::fs::read_dir(upstream_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 23, "the 23 upstream fixtures");
    files
        .into_iter()
        .map(|p| {
            let doc = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), doc)
        })
        .collect()
}

/// A row's value with the readers' equivalences: absent, null and "" are
/// all empty.
fn value(row: &Value, key: &str) -> Option<Value> {
    match row.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(v) => Some(v.clone()),
    }
}

fn rows(doc: &Value) -> &Vec<Value> {
    doc["agents"].as_array().unwrap()
}

fn row_named<'a>(doc: &'a Value, name: &str) -> Option<&'a Value> {
    rows(doc).iter().find(|r| r["name"] == name)
}

fn export(agents: &[Agent], schema: Schema) -> (Value, agentlog::export::ExportReport) {
    let (bytes, report) = render(
        agents,
        &ExportOptions {
            strict: false,
            schema,
        },
    )
    .unwrap();
    let problems = check_bytes_as(&bytes, Some(schema), Some(u64::from(schema.version())));
    assert!(
        problems.is_empty(),
        "schema-{} readers reject the export: {problems:?}\n{}",
        schema.version(),
        String::from_utf8_lossy(&bytes)
    );
    (serde_json::from_slice(&bytes).unwrap(), report)
}

/// Keys schema 16 no longer has: checked in the schema-4 export instead.
const ONLY_IN_4: [&str; 4] = [
    "claude_short_id",
    "claude_session_uuid",
    "codex_session_id",
    "gemini_session_id",
];

#[test]
fn every_upstream_fixture_round_trips_to_16_and_to_4_without_losing_a_key() {
    for (name, doc) in fixtures() {
        let version = doc["schema_version"].as_u64().unwrap();
        let parsed = parse_registry(
            &std::fs::read(upstream_dir().join(&name)).unwrap(),
            Path::new(&name),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(parsed.rows.len(), rows(&doc).len(), "{name}");
        let agents: Vec<Agent> = parsed.rows.iter().map(|r| r.agent.clone()).collect();
        let (out16, rep16) = export(&agents, Schema::V16);
        assert!(rep16.skipped.is_empty(), "{name}: {:?}", rep16.skipped);
        assert!(rep16.lossy.is_empty(), "{name}: {:?}", rep16.lossy);
        let (out4, rep4) = export(&agents, Schema::V4);

        for src in rows(&doc) {
            let row = src["name"].as_str().unwrap();
            let at16 = row_named(&out16, row).unwrap();
            let at4 = row_named(&out4, row);
            let harness = value(src, "harness").or_else(|| value(src, "provider"));
            assert_eq!(value(at16, "harness"), harness, "{name} `{row}` harness");
            match at4 {
                Some(r4) => assert_eq!(value(r4, "provider"), harness, "{name} `{row}`"),
                None => {
                    // Left out of schema 4 only for a harness 4 cannot name.
                    let h = harness.as_ref().and_then(Value::as_str).unwrap();
                    assert!(
                        !["claude", "codex", "gemini"].contains(&h),
                        "{name} `{row}`"
                    );
                    assert!(rep4.skipped.iter().any(|s| s.name == row), "{name} `{row}`");
                }
            }
            for (key, v) in src.as_object().unwrap() {
                let Some(v) = value(src, key).filter(|_| !v.is_null()) else {
                    continue;
                };
                let shown = format!("{name} `{row}` key `{key}`");
                if key == "provider" && version < 15 || key == "harness" || key == "session_id" {
                    continue; // the identity, checked above; session_id: no schema has it
                }
                if ONLY_IN_4.contains(&key.as_str()) {
                    if let Some(r4) = at4 {
                        assert_eq!(value(r4, key), Some(v), "{shown} (schema 4)");
                    }
                    continue;
                }
                assert_eq!(value(at16, key), Some(v.clone()), "{shown} (schema 16)");
                let in_4 = agentlog::check::ROW_KEYS.contains(&key.as_str())
                    && key != "provider"
                    && v != "attached";
                if let (Some(r4), true) = (at4, in_4) {
                    assert_eq!(value(r4, key), Some(v), "{shown} (schema 4)");
                }
            }
        }
        // Re-importing the schema-16 export gives the same agents.
        let bytes = serde_json::to_vec(&out16).unwrap();
        let again = parse_registry(&bytes, Path::new("out16.json")).unwrap();
        let again: Vec<Agent> = again.rows.into_iter().map(|r| r.agent).collect();
        let (out16_again, _) = export(&again, Schema::V16);
        assert_eq!(
            out16_again, out16,
            "{name}: a second round trip changes nothing"
        );
    }
}

#[test]
fn provider_and_harness_are_read_by_the_files_version() {
    let load = |name: &str| {
        let path = upstream_dir().join(name);
        parse_registry(&std::fs::read(&path).unwrap(), &path).unwrap()
    };
    let extra = |a: &Agent, k: &str| agentlog::schemas::extra_str(a, k);
    // Schema 15 on: `provider` is the vendor, `harness` the identity.
    let v15 = load("v15-python.json");
    let routed = v15
        .rows
        .iter()
        .map(|r| &r.agent)
        .find(|a| extra(a, "provider").as_deref() == Some("zai"))
        .expect("a zai-routed row");
    assert_eq!(routed.provider, "claude", "the harness is the identity");
    // Below 15: `provider` is the harness; no vendor is invented.
    for a in load("v8-python.json").rows.iter().map(|r| &r.agent) {
        assert!(extra(a, "provider").is_none(), "{}", a.name);
    }
    // Any harness token is accepted: opencode rows import.
    let v10 = load("v10-python.json");
    assert!(v10.rows.iter().any(|r| r.agent.provider == "opencode"));
}

#[test]
fn a_newer_additive_schema_keeps_its_new_keys_and_an_incompatible_one_is_refused_whole() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/registry");
    let additive = parse_registry(
        &std::fs::read(dir.join("v17-additive.json")).unwrap(),
        Path::new("v17-additive.json"),
    )
    .unwrap();
    let a = &additive.rows[0].agent;
    assert_eq!(a.provider, "opencode");
    assert_eq!(
        agentlog::schemas::extra(a, "sandbox"),
        Some(r#"{"kind":"bwrap","net":false}"#)
    );
    // Schema 16 has no `sandbox`: the export names the agent and the key.
    let (_, report) = export(std::slice::from_ref(a), Schema::V16);
    assert_eq!(report.lossy.len(), 1);
    assert_eq!(report.lossy[0].keys, ["sandbox"]);
    let err = parse_registry(
        &std::fs::read(dir.join("v17-incompatible.json")).unwrap(),
        Path::new("v17-incompatible.json"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("schema_version 17 is newer than 16") && err.contains("nothing was imported"),
        "{err}"
    );
}

#[test]
fn the_schema_16_contract_judges_rows_the_way_the_readers_do() {
    let row = |extra: &str| {
        format!(
            r#"{{"schema_version": 16, "agents": [{{"name": "a", "harness": "opencode",
            "cwd": "/w", "log_path": null, "created_at": "2026-01-01T00:00:00Z",
            "status": "live"{extra}}}]}}"#
        )
    };
    let judge = |doc: &str| check_bytes_as(doc.as_bytes(), Some(Schema::V16), None);
    assert!(judge(&row("")).is_empty(), "{:?}", judge(&row("")));
    assert!(judge(&row(r#", "host_mode": "attached", "crown_level": 2"#)).is_empty());
    for (extra, key) in [
        (r#", "crown_level": "1""#, "crown_level"),
        (r#", "inside_leg": {"state": "napping"}"#, "inside_leg"),
        (r#", "colour": "blue""#, "colour"),
        (r#", "provider": "Z AI""#, "provider"),
        (r#", "mux": 3"#, "mux"),
    ] {
        let p = judge(&row(extra));
        assert_eq!(p.len(), 1, "{extra}: {p:?}");
        assert_eq!(p[0].key.as_deref(), Some(key), "{extra}");
    }
    // Without `harness` from 15 on, `provider` (now the vendor) is not enough.
    let p = judge(&row("").replace(r#""harness": "opencode""#, r#""provider": "zai""#));
    assert_eq!(p[0].key.as_deref(), Some("harness"), "{p:?}");
    // The same file judged by schema 4's readers fails on version and keys.
    assert!(!check_bytes_as(row("").as_bytes(), Some(Schema::V4), None).is_empty());
}
