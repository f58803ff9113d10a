//! CLI tests of the write commands and the store-level ones (snapshot,
//! export, import, stats): success, refusals with their exit code and one
//! clear error line, and `--json` parsed back.

use crate::support::cli;

use crate::support::cli::{register_args, Env};

const T0: &str = "2026-11-30T12:00:00Z";

fn at(hms: &str) -> String {
    format!("2026-11-30T{hms}Z")
}

/// A store with `alice` (pid 4242, claude) and `bob` (codex, no pid).
fn fleet() -> Env {
    let env = Env::new();
    env.ok(&["init"]);
    env.ok(&register_args(
        "alice",
        "claude",
        "/repo",
        T0,
        &["--pid", "4242", "--role", "lead"],
    ));
    env.ok(&register_args(
        "bob",
        "codex",
        "/repo",
        &at("12:00:05"),
        &["--parent", "alice"],
    ));
    env
}

#[test]
fn commands_need_an_initialized_store() {
    let env = Env::new();
    env.run(&["register", "a", "--provider", "claude", "--cwd", "/"])
        .fails(1, "run `agentlog --dir");
    env.run(&["stats"]).fails(1, "no agentlog store");
}

#[test]
fn register_heartbeat_status_update_remove() {
    let env = fleet();
    let doc = env.json(&register_args(
        "alice",
        "claude",
        "/repo",
        &at("12:00:10"),
        &["--pid", "4242"],
    ));
    assert_eq!(doc["registration"], "renewal");
    assert_eq!(doc["lsn"], 3);

    let doc = env.json(&[
        "heartbeat",
        "alice",
        "--pid",
        "4242",
        "--at",
        &at("12:00:20"),
    ]);
    assert_eq!(doc["lsn"], 4);
    env.run(&["heartbeat", "alice", "--pid", "7", "--at", &at("12:00:21")])
        .fails(1, "registered by pid 4242; the request came from pid 7");
    env.run(&["heartbeat", "carol"])
        .fails(1, "agent `carol` not found");
    // A name held by a live agent of another pid.
    env.run(&[
        "register",
        "alice",
        "--provider",
        "claude",
        "--cwd",
        "/repo",
        "--pid",
        "5000",
    ])
    .fails(1, "pid 4242");

    let out = env.ok(&[
        "status",
        "bob",
        "busy",
        "--message",
        "compiling",
        "--at",
        &at("12:01:00"),
    ]);
    assert!(out.contains("`bob`: status busy"), "{out}");
    env.run(&["status", "bob", "sleeping"]).fails(2, "sleeping");
    env.run(&["status", "carol", "busy"])
        .fails(1, "agent `carol` not found");

    env.ok(&[
        "update",
        "bob",
        "--codex-session-id",
        "sess-9",
        "--host-mode",
        "interactive",
    ]);
    env.run(&["update", "bob"]).fails(1, "names no field");
    env.run(&["update", "bob", "--host-mode", "tty"])
        .fails(2, "tty");

    env.ok(&[
        "status",
        "bob",
        "exited",
        "--message",
        "done",
        "--at",
        &at("12:02:00"),
    ]);
    env.run(&["heartbeat", "bob", "--at", &at("12:02:10")])
        .fails(1, "finished; register again");
    env.run(&["status", "bob", "busy"])
        .fails(1, "needs a new registration");

    let doc = env.json(&["list", "--all"]);
    let bob = &doc["agents"][1];
    assert_eq!(bob["name"], "bob");
    assert_eq!(bob["status"], "exited");
    assert_eq!(bob["status_message"], "done");
    assert_eq!(bob["codex_session_id"], "sess-9");
    assert_eq!(bob["host_mode"], "interactive");
    assert_eq!(bob["parent"], "alice");
    // Without --all, finished agents are hidden.
    let doc = env.json(&["list"]);
    assert_eq!(doc["agents"].as_array().unwrap().len(), 1);

    env.ok(&["remove", "bob"]);
    env.run(&["remove", "bob"])
        .fails(1, "agent `bob` not found");
    let doc = env.json(&["list", "--all"]);
    assert_eq!(doc["agents"].as_array().unwrap().len(), 1);
}

#[test]
fn post_and_read_messages() {
    let env = fleet();
    let id = env.ok(&[
        "post",
        "--from",
        "alice",
        "--to",
        "bob",
        "review #12",
        "--at",
        &at("12:01:00"),
    ]);
    let id: u64 = id.trim().parse().expect("post prints the message id");
    // Idempotent retry: the same id, nothing appended.
    let args = [
        "post",
        "--from",
        "alice",
        "--request-id",
        "r1",
        "--category",
        "plan",
        "ship it",
        "--at",
    ];
    let first = env.json(&[&args[..], &[&at("12:01:10")]].concat());
    let again = env.json(&[&args[..], &[&at("12:01:20")]].concat());
    assert_eq!(first["id"], again["id"]);
    env.run(&[
        "post",
        "--from",
        "alice",
        "--request-id",
        "r1",
        "--category",
        "plan",
        "other text",
        "--at",
        &at("12:01:30"),
    ])
    .fails(1, "reused with different content");
    env.run(&["post", "--from", "carol", "hi"])
        .fails(1, "carol");
    env.run(&["post", "--from", "alice", "--ttl-hours", "0", "x"])
        .fails(2, "--ttl-hours");

    let doc = env.json(&["read", "bob", "--at", &at("12:02:00")]);
    let msgs = doc["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "{doc}");
    assert_eq!(msgs[0]["id"], id);
    assert_eq!(msgs[0]["body"], "review #12");
    assert_eq!(msgs[1]["to"], serde_json::Value::Null);
    // Read receipts: nothing unread now.
    assert!(env
        .ok(&["read", "bob", "--at", &at("12:03:00")])
        .contains("no unread messages"));
    env.run(&["read", "carol"])
        .fails(1, "agent `carol` not found");
}

#[test]
fn sessions_open_heartbeat_close() {
    let env = fleet();
    let key = [
        "--source",
        "ide",
        "--workspace",
        "/repo",
        "--session-id",
        "s1",
    ];
    let doc = env.json(&[&["sessions", "open"][..], &key].concat());
    assert!(doc["lsn"].as_u64().is_some());
    env.ok(&[&["sessions", "heartbeat"][..], &key].concat());
    let out = env.ok(&[&["sessions", "close"][..], &key].concat());
    assert!(out.contains("closed"), "{out}");
    let out = env.ok(&[&["sessions", "close"][..], &key].concat());
    assert!(out.contains("nothing appended"), "{out}");
    env.run(&[
        "sessions",
        "open",
        "--source",
        "",
        "--workspace",
        "w",
        "--session-id",
        "x",
    ])
    .fails(1, "must not be empty");
}

#[test]
fn sweep_expires_leases_and_audit_tells_the_story() {
    let env = Env::new();
    env.ok(&["init"]);
    env.ok(&register_args("w1", "codex", "/r", T0, &[]));
    for s in ["12:00:30", "12:01:00", "12:01:30"] {
        env.ok(&["heartbeat", "w1", "--at", &at(s)]);
    }
    let doc = env.json(&["sweep", "--now", &at("12:02:00")]);
    assert_eq!(
        doc["changes"].as_array().unwrap().len(),
        0,
        "within the lease"
    );
    let doc = env.json(&["sweep", "--now", &at("12:05:00")]);
    let ch = doc["changes"].as_array().unwrap();
    assert_eq!(ch.len(), 1);
    assert_eq!(ch[0]["agent"], "w1");
    assert!(ch[0]["why"]
        .as_str()
        .unwrap()
        .contains("worker lease expired"));
    env.ok(&register_args("w1", "codex", "/r", &at("12:06:00"), &[]));

    let doc = env.json(&["audit", "w1"]);
    let ev = doc["events"].as_array().unwrap();
    let kinds: Vec<&str> = ev.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "AgentRegistered",
            "Heartbeat",
            "StatusChanged",
            "AgentRegistered"
        ]
    );
    assert_eq!(ev[1]["count"], 3);
    assert!(ev[3]["what"].as_str().unwrap().contains("new life"));
    let text = env.ok(&["audit", "w1"]);
    assert!(
        text.contains("heartbeats ×3 from 2026-11-30T12:00:30Z to 2026-11-30T12:01:30Z"),
        "{text}"
    );
}

/// The LSNs of the snapshots `stats --json` lists.
fn snapshot_lsns(stats: &serde_json::Value) -> Vec<u64> {
    stats["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["lsn"].as_u64().unwrap())
        .collect()
}

#[test]
fn snapshot_export_import_and_stats() {
    let env = fleet();
    // Counts the snapshots direct writes' closes take (a daemon snapshots
    // on its triggers instead).
    cli::direct_only(&env.dir);
    // What the registrations left: the first write's close took one (there
    // was none yet), or a daemon's shutdown did.
    let before: Vec<u64> = snapshot_lsns(&env.json(&["stats"]));
    assert_eq!(before.len(), 1, "{before:?}");
    env.ok(&["heartbeat", "alice", "--at", &at("12:00:30")]);
    let snap = env.json(&["snapshot"]);
    assert_eq!(snap["lsn"], 3);
    assert!(std::path::Path::new(snap["path"].as_str().unwrap()).exists());
    // Events after the snapshot are folded on top of it.
    env.ok(&["status", "bob", "busy", "--at", &at("12:01:00")]);
    let doc = env.json(&["list"]);
    assert_eq!(doc["agents"][1]["status"], "busy");

    // A provider no existing reader accepts is left out of the export, named.
    env.ok(&register_args("odd", "ollama", "/", &at("12:01:30"), &[]));
    let doc = env.json(&["export"]);
    assert_eq!(doc["rows"], 2);
    assert_eq!(doc["skipped"][0]["name"], "odd");
    let file = std::path::PathBuf::from(doc["path"].as_str().unwrap());
    assert_eq!(file, env.dir.join("registry.json"));
    cli::assert_accepted(&file);
    let strict = env.path("strict.json");
    env.run(&["export", "--strict", "--out", strict.to_str().unwrap()])
        .fails(1, "agent `odd` cannot be written");
    assert!(!strict.exists());

    // Import into a fresh store: the same agents come back.
    let other = Env::new();
    other.ok(&["init"]);
    let doc = other.json(&["import", file.to_str().unwrap()]);
    assert_eq!(doc["schema_version"], 4);
    assert_eq!(doc["imported"], 2);
    assert_eq!(doc["lsns"]["first"], 1);
    let listed = other.json(&["list", "--all"]);
    assert_eq!(listed["agents"][0]["name"], "alice");
    assert_eq!(listed["agents"][1]["status"], "busy");

    let st = env.json(&["stats"]);
    assert_eq!(st["events"], 5);
    assert_eq!(st["last_lsn"], 5);
    assert_eq!(st["agents"], 3);
    assert_eq!(st["by_status"]["busy"], 1);
    assert_eq!(st["by_status"]["live"], 2);
    // The registrations' snapshot and the one taken on demand at lsn 3. The
    // later closes took none: a one-shot write snapshots on close only when
    // the count (50,000 events) or time (60 s) trigger is due.
    assert_eq!(snapshot_lsns(&st), [before[0], 3]);
    let text = env.ok(&["stats"]);
    assert!(text.contains("events      5 (lsn 1..=5)"), "{text}");
}

#[test]
fn import_refuses_bad_files_and_changes_nothing() {
    let env = Env::new();
    env.ok(&["init"]);
    // Copies: reading takes a shared lock on a `<file>.lock` sidecar beside
    // the file, which must not land in the repository's fixtures.
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/registry/");
    let fixtures = format!("{}/", env.path("fixtures").display());
    std::fs::create_dir_all(&fixtures).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(
            e.path(),
            format!("{fixtures}{}", e.file_name().to_str().unwrap()),
        )
        .unwrap();
    }
    let cases = [
        (
            "v17-incompatible.json",
            "schema_version 17 is newer than 16",
        ),
        ("malformed.json", "malformed JSON"),
        ("bad-provider.json", "row 0"),
        ("not-object.json", "not an object"),
    ];
    for (file, needle) in cases {
        env.run(&["import", &format!("{fixtures}{file}")])
            .fails(1, needle);
    }
    env.run(&["import", "/no/such/registry.json"])
        .fails(1, "/no/such/registry.json");
    assert_eq!(env.json(&["stats"])["events"], 0);
    let doc = env.json(&["import", &format!("{fixtures}v1-python.json")]);
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(env.json(&["list"])["agents"][0]["status"], "live");
}

#[test]
fn a_second_writer_is_refused_naming_the_holder() {
    let env = fleet();
    cli::direct_only(&env.dir); // this process is the writer here
                                // Hold the writer lock from this process.
    let store = agentlog::Store::open(&env.dir, agentlog::StoreOptions::short_lived()).unwrap();
    env.run(&["heartbeat", "alice"])
        .fails(1, &format!("pid {}", std::process::id()));
    // Read-only commands still work beside the writer.
    assert_eq!(env.json(&["list"])["agents"].as_array().unwrap().len(), 2);
    env.ok(&["audit", "alice"]);
    drop(store);
    env.ok(&["heartbeat", "alice"]);
}

#[test]
fn compact_dry_run_then_compact_retires_beyond_the_newest_finished() {
    let env = Env::new();
    env.ok(&["init"]);
    let file = finished_fleet_file(&env);
    let doc = env.json(&["import", file.to_str().unwrap()]);
    assert_eq!(doc["imported"], 41);
    env.ok(&["heartbeat", "alive", "--at", &at("11:30:00")]);
    env.ok(&["snapshot"]);

    let dry = env.json(&["compact", "--dry-run", "--now", &at("12:00:00")]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["agents_retired"].as_array().unwrap().len(), 8, "{dry}");
    assert_eq!(
        env.json(&["list", "--all"])["agents"]
            .as_array()
            .unwrap()
            .len(),
        41
    );

    let text = env.ok(&["compact", "--now", &at("12:00:00")]);
    assert!(text.contains("agents retired: 8"), "{text}");
    assert!(text.contains("generation 0 → 1"), "{text}");
    let listed = env.json(&["list", "--all"]);
    assert_eq!(listed["agents"].as_array().unwrap().len(), 33);
    let st = env.json(&["stats"]);
    assert_eq!(st["generation"], 1);
    // The store snapshots the new generation (older snapshots stay on disk
    // but are no longer trusted: `list` above shows the compacted registry).
    let snaps = st["snapshots"].as_array().unwrap();
    assert_eq!(snaps.last().unwrap()["lsn"], st["last_lsn"]);
    assert_eq!(env.json(&["verify"])["clean"], true);
    // Writes continue after a compaction.
    env.ok(&["heartbeat", "alive", "--at", &at("12:01:00")]);
    // A retired agent's history is gone with it.
    let retired = dry["agents_retired"][0].as_str().unwrap();
    env.run(&["audit", retired]).fails(1, "not found");
}

/// A registry.json with 40 finished agents and one live one.
fn finished_fleet_file(env: &Env) -> std::path::PathBuf {
    let mut rows: Vec<serde_json::Value> = (0..40)
        .map(|i| {
            serde_json::json!({
                "name": format!("done-{i:02}"), "provider": "claude", "cwd": "/r",
                "log_path": null, "created_at": format!("2026-11-30T10:{i:02}:00Z"),
                "status": "exited",
            })
        })
        .collect();
    rows.push(serde_json::json!({
        "name": "alive", "provider": "codex", "cwd": "/r", "log_path": null,
        "created_at": "2026-11-30T10:00:00Z", "status": "live",
    }));
    let file = env.path("fleet.json");
    std::fs::write(
        &file,
        serde_json::to_vec(&serde_json::json!({"schema_version": 4, "agents": rows})).unwrap(),
    )
    .unwrap();
    file
}

#[test]
fn a_snapshot_older_than_a_compaction_is_not_folded_with_the_compacted_log() {
    let env = Env::new();
    env.ok(&["init"]);
    cli::direct_only(&env.dir); // the test compacts in-process
    let file = finished_fleet_file(&env);
    env.ok(&["import", file.to_str().unwrap()]);
    env.ok(&["snapshot"]);
    // A compaction by another program (no CLI), leaving the old snapshot.
    {
        let (log, _) = agentlog::log::Log::open(&env.dir.join("log"), Default::default()).unwrap();
        let now = agentlog::time::Timestamp::parse_rfc3339(&at("12:00:00")).unwrap();
        let (c, full) =
            agentlog::compact::compact_log(&log, 200, now, &Default::default()).unwrap();
        assert_eq!(c.report.agents_retired.len(), 8);
        assert_eq!(full.agents().len(), 33);
        log.close().unwrap();
    }
    let r = env.run(&["--json", "list", "--all"]);
    assert_eq!(r.json()["agents"].as_array().unwrap().len(), 33);
    assert!(
        r.stderr.contains("compaction rewrote history"),
        "{}",
        r.stderr
    );
}

/// Every field flag the field table declares is a flag of its command, its
/// value reaches the row (`show --json`), and the export of that row
/// imports into another store and exports again to the same bytes.
#[test]
fn every_field_flag_reaches_the_row_and_survives_export_and_import() {
    use agentlog::model::fields::{FieldKind, AGENT_FIELDS};
    use agentlog::registry::FieldUpdates;
    fn text(i: usize, kind: FieldKind) -> String {
        match kind {
            FieldKind::Text | FieldKind::Str => format!("value-{i}"),
            FieldKind::U32 | FieldKind::U64 => (4_000 + i).to_string(),
            FieldKind::HostMode => "interactive".to_string(),
            FieldKind::Time => format!("2026-11-30T11:00:{i:02}Z"),
        }
    }
    let env = Env::with_agent("boss", "/", T0);
    let mut expected = Vec::new();
    let mut register: Vec<String> = ["register", "a1", "--provider", "codex", "--cwd", "/w"]
        .map(String::from)
        .to_vec();
    for (i, f) in AGENT_FIELDS.iter().enumerate() {
        let Some(_) = f.register else { continue };
        let v = if f.name == "parent" {
            "boss".to_string()
        } else {
            text(i, f.kind)
        };
        register.extend([format!("--{}", f.name.replace('_', "-")), v.clone()]);
        expected.push((f.name, v));
    }
    register.extend(["--at".to_string(), at("12:00:01")]);
    env.ok(&register.iter().map(String::as_str).collect::<Vec<_>>());
    let mut update: Vec<String> = vec!["update".into(), "a1".into()];
    for (i, u) in FieldUpdates::FIELDS.iter().enumerate() {
        let Some(_) = u.flag else { continue };
        let v = text(40 + i, u.kind);
        update.extend([format!("--{}", u.name.replace('_', "-")), v.clone()]);
        expected.retain(|(name, _)| *name != u.name);
        expected.push((u.name, v));
    }
    update.extend(["--at".to_string(), at("12:00:02")]);
    env.ok(&update.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(expected.len() >= 15, "{expected:?}");

    let row = env.json(&["show", "a1"]);
    for (name, v) in &expected {
        let shown = match &row[*name] {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        assert_eq!(&shown, v, "`{name}` in {row}");
    }

    let first = env.path("first.json");
    env.ok(&["export", "--out", first.to_str().unwrap()]);
    let other = Env::new();
    other.ok(&["init"]);
    other.ok(&["import", first.to_str().unwrap()]);
    let second = env.path("second.json");
    other.ok(&["export", "--out", second.to_str().unwrap()]);
    let first = std::fs::read_to_string(&first).unwrap();
    assert!(first.contains("\"mcp_channel_id\": \"value-"), "{first}");
    assert_eq!(first, std::fs::read_to_string(&second).unwrap());
}
