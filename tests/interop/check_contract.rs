//! `agentlog check` / `agentlog::check`: the readers' contract of each
//! file's declared schema (docs/registry-v4.md for 1–4, docs/upstream.md
//! for 5–16). Its verdict on every file in `fixtures/` is pinned
//! in a table here; where the external checker (`check_registry_v4.py`, kept
//! outside this repository) exists, it is run as a second opinion and must
//! agree. This is the only test that looks for it.

use crate::support::cli;

use agentlog::check::{check_bytes, check_file, Schema};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every fixture and whether every existing reader accepts it.
const VERDICTS: &[(&str, bool)] = &[
    ("registry/bad-provider.json", false),
    ("registry/bad-status.json", false),
    ("registry/empty.json", false),
    ("registry/malformed.json", false),
    ("registry/not-object.json", false),
    ("registry/unknown-key.json", false),
    ("registry/v1-python.json", false),
    ("registry/v17-additive.json", false),
    ("registry/v17-incompatible.json", false),
    ("registry/v2-python.json", true),
    ("registry/v3-python.json", true),
    ("registry/v4-entries-key.json", false),
    ("registry/v4-mixed.json", true),
    ("registry/v4-python.json", true),
    ("registry/v4-rust.json", true),
    // Not registries: upstream's per-agent state.json.
    ("state/pty-drive-open.json", false),
    ("state/pty-exited.json", false),
    ("state/pty-live.json", false),
    ("state/stream-live.json", false),
    ("state/stream-orphaned.json", false),
    // Upstream's own writers' files: every one passes the contract of its
    // declared schema (16's for 5 to 16), except the schema-4 file with
    // `spawned_by_*`, which the first schema-4 reader (`ae71d43`) rejects.
    ("upstream/v10-python.json", true),
    ("upstream/v11-python.json", true),
    ("upstream/v12-python.json", true),
    ("upstream/v13-python.json", true),
    ("upstream/v14-python.json", true),
    ("upstream/v15-python.json", true),
    ("upstream/v16-mixed-rust-last.json", true),
    ("upstream/v16-mixed.json", true),
    ("upstream/v16-mux.json", true),
    ("upstream/v16-operators.json", true),
    ("upstream/v16-python.json", true),
    ("upstream/v16-spawned.json", true),
    ("upstream/v4-ae71d43.json", true),
    ("upstream/v4-e9fd29f.json", false),
    ("upstream/v4-mixed-rewritten-by-head-rust.json", true),
    ("upstream/v4-mixed-rewritten-by-head.json", true),
    ("upstream/v4-rewritten-by-head-rust.json", true),
    ("upstream/v4-rewritten-by-head.json", true),
    ("upstream/v5-python.json", true),
    ("upstream/v6-python.json", true),
    ("upstream/v7-python.json", true),
    ("upstream/v8-python.json", true),
    ("upstream/v9-python.json", true),
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Every `.json` under `fixtures/`, relative to it.
fn fixture_files() -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![fixtures()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                let rel = p.strip_prefix(fixtures()).unwrap();
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn verdicts_on_every_fixture_match_the_table() {
    let files = fixture_files();
    let listed: Vec<&str> = VERDICTS.iter().map(|(f, _)| *f).collect();
    assert_eq!(files, listed, "every fixture needs a verdict in VERDICTS");
    for (file, accepted) in VERDICTS {
        let problems = check_file(&fixtures().join(file), None).unwrap();
        assert_eq!(problems.is_empty(), *accepted, "{file}: {problems:?}");
    }
}

#[test]
fn cli_exit_codes_and_reasons_name_row_and_key() {
    let ok = cli::bin()
        .arg("check")
        .arg(fixtures().join("registry/v4-rust.json"))
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0));
    let bad = cli::bin()
        .arg("check")
        .arg(fixtures().join("registry/unknown-key.json"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let text = String::from_utf8(bad.stdout).unwrap();
    assert!(text.contains("row 0 (\"x\"): key `colour`"), "{text}");
    // A version-2 file is accepted, but not where version 4 is required.
    let v2 = fixtures().join("registry/v2-python.json");
    assert!(check_file(&v2, None).unwrap().is_empty());
    let p = check_file(&v2, Some(4)).unwrap();
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].key.as_deref(), Some("schema_version"));
}

/// Documents probing each rule, beyond the fixtures.
fn probes() -> Vec<(&'static str, String)> {
    let row = |extra: &str| {
        format!(
            r#"{{"schema_version": 4, "agents": [{{"name": "a", "provider": "claude", "cwd": "/w",
            "log_path": null, "created_at": "2026-01-01T00:00:00Z", "status": "live"{extra}}}]}}"#
        )
    };
    vec![
        ("minimal", row("")),
        ("session_id tolerated", row(r#", "session_id": "s""#)),
        ("pid too big", row(r#", "pid": 4294967296"#)),
        ("pid max", row(r#", "pid": 4294967295"#)),
        ("pid float", row(r#", "pid": 1.0"#)),
        ("pid null", row(r#", "pid": null"#)),
        ("pid_start_time negative", row(r#", "pid_start_time": -1"#)),
        ("short_id null", row(r#", "short_id": null"#)),
        ("host_mode bad", row(r#", "host_mode": "tty""#)),
        ("host_mode null", row(r#", "host_mode": null"#)),
        ("mcp number", row(r#", "mcp_channel_id": 7"#)),
        ("offset time", row("").replace("00:00:00Z", "00:00:00+02:00")),
        ("space time", row("").replace("T00:00:00Z", " 00:00:00Z")),
        ("bool version", r#"{"schema_version": true, "agents": []}"#.into()),
        ("no version", r#"{"agents": []}"#.into()),
        ("agents object", r#"{"schema_version": 4, "agents": {}}"#.into()),
        ("row not object", r#"{"schema_version": 4, "agents": [1]}"#.into()),
        ("bom", format!("\u{feff}{}", row(""))),
        (
            "duplicate names",
            row("").replace("}]}", "}, {\"name\": \"a\", \"provider\": \"codex\", \"cwd\": \"/\", \"log_path\": null, \"created_at\": \"2026-01-01T00:00:00Z\", \"status\": \"idle\"}]}"),
        ),
    ]
}

#[test]
fn probes_have_the_expected_verdicts() {
    let rejected = [
        "pid too big",
        "pid float",
        "pid_start_time negative",
        "short_id null",
        "host_mode bad",
        "mcp number",
        "space time",
        "bool version",
        "no version",
        "agents object",
        "row not object",
        "bom",
        "duplicate names",
    ];
    for (what, doc) in probes() {
        let problems = check_bytes(doc.as_bytes(), None);
        assert_eq!(
            problems.is_empty(),
            !rejected.contains(&what),
            "{what}: {problems:?}"
        );
    }
}

/// The external checker, where a checkout of the shared material sits beside
/// this repository (never required).
fn external_checker() -> Option<PathBuf> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = [here.join("../shared"), here.join("../../shared")]
        .into_iter()
        .map(|d| d.join("conformance/check_registry_v4.py"))
        .find(|p| p.exists())?;
    let python = Command::new("python3").arg("--version").output();
    python.is_ok_and(|o| o.status.success()).then_some(found)
}

#[test]
fn external_checker_agrees_where_it_exists() {
    let Some(script) = external_checker() else {
        // The table test above still pins every verdict.
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut cases: Vec<(String, PathBuf)> = fixture_files()
        .into_iter()
        .map(|f| (f.clone(), fixtures().join(f)))
        .collect();
    for (i, (what, doc)) in probes().into_iter().enumerate() {
        let p = dir.path().join(format!("probe-{i}.json"));
        std::fs::write(&p, doc).unwrap();
        cases.push((what.to_string(), p));
    }
    for (what, path) in cases {
        let theirs = Command::new("python3")
            .arg(&script)
            .arg(&path)
            .output()
            .unwrap();
        // The external checker speaks for schema 4's readers only.
        let ours = agentlog::check::check_file_as(&path, Some(Schema::V4), None).unwrap();
        assert_eq!(
            ours.is_empty(),
            theirs.status.success(),
            "{what}: ours {ours:?}, theirs {}",
            String::from_utf8_lossy(&theirs.stdout)
        );
    }
}
