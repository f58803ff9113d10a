//! `serve` and upstream fno's per-agent `state.json` (docs/upstream.md,
//! "state.json"): the daemon publishes one for every agent with a short id
//! at `<dir of registry.json>/<short_id>/state.json`, rewrites it only when
//! its content changes, ingests what another writer changed in it (events
//! with the actor "external writer (state.json)"), lets that status win
//! over a `registry.json` write and an agentlog command of the same window,
//! and leaves a malformed file as it is with one warning naming it.
//!
//! The foreign writer here is this test process writing as upstream's Rust
//! writer does (the only upstream writer of these files): exclusive `flock`
//! on `<state.json>.lock`, `.state.json.tmp.<pid>`, fsync, rename.

use crate::support::daemon::{eventually, Conn, Daemon, Store};
use serde_json::{json, Value};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

fn state_path(store: &Store, short_id: &str) -> PathBuf {
    store.dir.join(short_id).join("state.json")
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Upstream's `write_state_atomic`.
fn foreign_write(path: &Path, bytes: &[u8]) {
    let lock = File::options()
        .create(true)
        .append(true)
        .open(format!("{}.lock", path.display()))
        .unwrap();
    lock.lock().unwrap();
    let tmp = path
        .parent()
        .unwrap()
        .join(format!(".state.json.tmp.{}", std::process::id()));
    let mut f = File::create(&tmp).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
    std::fs::rename(&tmp, path).unwrap();
    drop(lock);
}

/// Waits until a whole periodic publish check has begun and ended after
/// this call: every write answered before it is then published.
fn one_whole_publish(store: &Store) {
    let rounds = || {
        let mut c = Conn::connect(&store.dir);
        c.call(json!({"id": 0, "method": "hello"}))["result"]["publish_rounds"]
            .as_u64()
            .expect("hello reports publish_rounds")
    };
    let from = rounds();
    // The check running now may have begun before the write: two more.
    eventually("two more publish checks", || {
        (rounds() >= from + 2).then_some(())
    });
}

fn show(store: &Store, name: &str) -> Value {
    serde_json::from_slice(&store.run(&["show", name, "--json"]).stdout).unwrap()
}

/// The `log --json` events of `kind` about `agent`.
fn logged(store: &Store, kind: &str, agent: &str) -> Vec<Value> {
    store
        .ok(&["log", "--json"])
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == kind && e["event"][kind]["agent"] == agent)
        .collect()
}

#[test]
fn serve_publishes_state_json_for_every_agent_with_a_short_id_and_rewrites_only_changes() {
    let store = Store::new();
    store.ok(&[
        "register",
        "a",
        "--provider",
        "claude",
        "--cwd",
        "/w",
        "--short-id",
        "aaaa0001",
    ]);
    store.ok(&["register", "b", "--provider", "claude", "--cwd", "/w"]);
    let d = Daemon::start(&store.dir, &["--publish-every-ms", "100"]);
    let path = state_path(&store, "aaaa0001");
    let doc = eventually("a's state.json", || read_json(&path));
    assert_eq!(
        doc,
        json!({"schema_version": 1, "short_id": "aaaa0001", "status": "live", "ready": false,
               "last_message_at": null, "last_reply": null, "restart_count": 0,
               "last_restart_at": null, "pty": null})
    );
    // Upstream's key order and layout (its Rust writer's pretty JSON).
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with(
            "{\n  \"schema_version\": 1,\n  \"short_id\": \"aaaa0001\",\n  \"status\""
        ),
        "{text}"
    );
    // No short id, no file; nothing else in the folder but upstream's names
    // and agentlog's dot-named copy of what it published.
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ".state.json.agentlog-published",
            "state.json",
            "state.json.lock"
        ]
    );
    assert!(!store.dir.join("b").exists());

    // A change elsewhere does not rewrite the file (same inode); a change
    // to `a` does.
    let inode = std::fs::metadata(&path).unwrap().ino();
    store.ok(&["status", "b", "busy"]);
    eventually("b busy in registry.json", || {
        let reg = read_json(&store.dir.join("registry.json"))?;
        let rows = reg["agents"].as_array()?;
        rows.iter()
            .any(|r| r["name"] == "b" && r["status"] == "busy")
            .then_some(())
    });
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
    store.ok(&["status", "a", "idle"]);
    eventually("a idle in state.json", || {
        (read_json(&path)?["status"] == "idle").then_some(())
    });
    assert_ne!(std::fs::metadata(&path).unwrap().ino(), inode);
    let (status, stderr) = d.stop();
    assert!(status.success(), "{status}: {stderr}");
}

#[test]
fn a_foreign_state_json_write_becomes_events_shown_with_the_actor_and_is_written_back() {
    let store = Store::new();
    store.ok(&[
        "register",
        "rev",
        "--provider",
        "claude",
        "--cwd",
        "/w",
        "--short-id",
        "reviewer",
    ]);
    let d = Daemon::start(&store.dir, &["--publish-every-ms", "100"]);
    let path = state_path(&store, "reviewer");
    eventually("rev's state.json", || read_json(&path));

    // Upstream's drive attach, plus facts no upstream writer sets yet and
    // a key agentlog does not know.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/state/pty-drive-open.json");
    let mut theirs: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    theirs["restart_count"] = json!(2);
    theirs["last_restart_at"] = json!("2030-01-01T00:00:05Z");
    theirs["last_reply"] = json!("done");
    theirs["worker_note"] = json!({"lane": [1, 2]});
    theirs["status"] = json!("orphaned");
    foreign_write(
        &path,
        serde_json::to_string_pretty(&theirs).unwrap().as_bytes(),
    );

    let changed = eventually("the worker facts in the log", || {
        logged(&store, "WorkerStateChanged", "rev").pop()
    });
    assert_eq!(
        changed["actor"], "external writer (state.json)",
        "{changed}"
    );
    let keys: Vec<&str> = changed["event"]["WorkerStateChanged"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c[0].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "last_reply",
            "last_restart_at",
            "pty.active",
            "pty.drive_active",
            "pty.drive_mode",
            "pty.drive_session_id",
            "pty.last_heartbeat_at_monotonic_ns",
            "ready",
            "restart_count",
            "worker_note"
        ]
    );
    let status = logged(&store, "ExternalChange", "rev");
    assert_eq!(status.len(), 1, "{status:?}");
    assert_eq!(status[0]["actor"], "external writer (state.json)");
    assert_eq!(show(&store, "rev")["status"], "orphaned");
    let audit = store.ok(&["audit", "rev"]);
    assert!(
        audit.contains("status → orphaned") && audit.contains("by external writer (state.json)"),
        "{audit}"
    );
    // The table cuts long lines; `--json` has each change in full.
    let audit: Value = serde_json::from_str(&store.ok(&["audit", "rev", "--json"])).unwrap();
    let facts = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "WorkerStateChanged")
        .unwrap_or_else(|| panic!("{audit}"));
    assert_eq!(facts["why"], "by external writer (state.json)");
    for shown in [
        "restart_count=2",
        "ready=true",
        "pty.drive_mode=\"interactive\"",
    ] {
        assert!(
            facts["what"].as_str().unwrap().contains(shown),
            "{shown}: {facts}"
        );
    }

    // Another publish (a command) writes back every fact, the unknown key
    // verbatim, and the new status; registry.json carries the status only.
    store.ok(&["heartbeat", "rev"]);
    let text = store.ok(&["show", "rev", "--json"]);
    assert!(!text.contains("restart_count"), "{text}");
    let back = read_json(&path).unwrap();
    assert_eq!(back, theirs);
    let reg = eventually("the status in registry.json", || {
        let reg = read_json(&store.dir.join("registry.json"))?;
        (reg["agents"][0]["status"] == "orphaned").then_some(reg)
    });
    assert!(reg["agents"][0].get("worker_note").is_none(), "{reg}");
    let (status, stderr) = d.stop();
    assert!(status.success(), "{status}: {stderr}");

    // The facts survive a restart (the fold keeps them): the file is
    // published unchanged.
    let d = Daemon::start(&store.dir, &["--publish-every-ms", "100"]);
    store.ok(&["heartbeat", "rev"]);
    one_whole_publish(&store);
    assert_eq!(read_json(&path).unwrap(), theirs);
    let (status, stderr) = d.stop();
    assert!(status.success(), "{status}: {stderr}");
}

#[test]
fn in_one_window_state_json_status_wins_over_registry_json_and_a_command() {
    let store = Store::new();
    store.ok(&[
        "register",
        "w",
        "--provider",
        "claude",
        "--cwd",
        "/w",
        "--short-id",
        "wwww0001",
    ]);
    let d = Daemon::start(&store.dir, &["--publish-every-ms", "100"]);
    let path = state_path(&store, "wwww0001");
    let registry = store.dir.join("registry.json");
    eventually("w's state.json", || read_json(&path));

    // One window: holding upstream Python's registry lock keeps the daemon
    // from publishing while a command, a registry.json write and a
    // state.json write land.
    let python_lock = File::options()
        .create(true)
        .append(true)
        .open(store.dir.join("locks/_registry.lock"))
        .unwrap();
    python_lock.lock().unwrap();
    store.ok(&["status", "w", "busy"]);
    let mut reg = read_json(&registry).unwrap();
    reg["agents"][0]["status"] = json!("idle");
    std::fs::write(
        store.dir.join("registry.json.tmp"),
        serde_json::to_string_pretty(&reg).unwrap(),
    )
    .unwrap();
    std::fs::rename(store.dir.join("registry.json.tmp"), &registry).unwrap();
    let mut state = read_json(&path).unwrap();
    state["status"] = json!("orphaned");
    foreign_write(
        &path,
        serde_json::to_string_pretty(&state).unwrap().as_bytes(),
    );
    drop(python_lock);

    eventually("the window's publish", || {
        let s = read_json(&path)?;
        let r = read_json(&registry)?;
        (s["status"] == "orphaned" && r["agents"][0]["status"] == "orphaned").then_some(())
    });
    assert_eq!(show(&store, "w")["status"], "orphaned");
    // All three are in the log, in the order the rule gives: the command,
    // then registry.json's, then state.json's.
    let audit = store.ok(&["audit", "w"]);
    let line_of = |needles: &[&str]| {
        audit
            .lines()
            .position(|l| needles.iter().all(|n| l.contains(n)))
            .unwrap_or_else(|| panic!("{needles:?} missing: {audit}"))
    };
    let busy = line_of(&["busy"]);
    let idle = line_of(&["→ idle", "external writer (registry.json)"]);
    let orphaned = line_of(&["→ orphaned", "external writer (state.json)"]);
    assert!(busy < idle && idle < orphaned, "{audit}");

    // A registry.json status change alone (state.json untouched) reaches
    // state.json: state.json only wins where it changed.
    let mut reg = read_json(&registry).unwrap();
    reg["agents"][0]["status"] = json!("live");
    std::fs::write(&registry, serde_json::to_string_pretty(&reg).unwrap()).unwrap();
    eventually("registry.json's status in state.json", || {
        (read_json(&path)?["status"] == "live").then_some(())
    });
    let (status, stderr) = d.stop();
    assert!(status.success(), "{status}: {stderr}");
}

#[test]
fn a_malformed_state_json_is_left_as_it_is_with_one_warning_naming_it() {
    let store = Store::new();
    for (name, sid) in [("m", "mmmm0001"), ("n", "nnnn0001")] {
        store.ok(&[
            "register",
            name,
            "--provider",
            "claude",
            "--cwd",
            "/w",
            "--short-id",
            sid,
        ]);
    }
    let d = Daemon::start(&store.dir, &["--publish-every-ms", "100"]);
    let bad = state_path(&store, "mmmm0001");
    let good = state_path(&store, "nnnn0001");
    eventually("both state.json files", || {
        read_json(&bad)?;
        read_json(&good)
    });
    let garbage = b"{\"schema_version\": 1, \"short_id\": \"mmmm0001\", \"status\": \"li";
    foreign_write(&bad, garbage);
    // Publishes go on (n's file follows its status) and never touch m's.
    store.ok(&["status", "m", "busy"]);
    store.ok(&["status", "n", "busy"]);
    eventually("n busy", || {
        (read_json(&good)?["status"] == "busy").then_some(())
    });
    one_whole_publish(&store);
    assert_eq!(std::fs::read(&bad).unwrap(), garbage);
    let reg = read_json(&store.dir.join("registry.json")).unwrap();
    assert_eq!(reg["agents"][0]["status"], "busy");

    // Repaired by its writer: ingested (its status is a change) and
    // published again.
    let mut fixed = read_json(&good).unwrap();
    fixed["short_id"] = json!("mmmm0001");
    fixed["status"] = json!("exited");
    foreign_write(
        &bad,
        serde_json::to_string_pretty(&fixed).unwrap().as_bytes(),
    );
    eventually("m's repaired file ingested", || {
        (show(&store, "m")["status"] == "exited").then_some(())
    });
    let (status, stderr) = d.stop();
    assert!(status.success(), "{status}: {stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("state.json not published"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning per bad content: {stderr}");
    assert!(
        warnings[0].contains(&bad.display().to_string()) && warnings[0].contains("not JSON"),
        "{}",
        warnings[0]
    );
}

/// The daemon's count of files its publish side read (`hello`).
fn publish_file_reads(store: &Store) -> u64 {
    let mut c = Conn::connect(&store.dir);
    c.call(json!({"id": 0, "method": "hello"}))["result"]["publish_file_reads"]
        .as_u64()
        .expect("hello reports publish_file_reads")
}

#[test]
fn an_idle_daemon_reads_no_published_file_yet_ingests_foreign_writes_in_place_or_replaced() {
    let store = Store::new();
    let agents = 12;
    for i in 0..agents {
        store.ok(&[
            "register",
            &format!("a{i}"),
            "--provider",
            "claude",
            "--cwd",
            "/w",
            "--short-id",
            &format!("sid{i:05}"),
        ]);
    }
    let d = Daemon::start(&store.dir, &["--publish-every-ms", "50"]);
    for i in 0..agents {
        eventually("every state.json", || {
            read_json(&state_path(&store, &format!("sid{i:05}")))
        });
    }
    one_whole_publish(&store);
    // Nothing changes: periodic checks and a publish (a command on another
    // agent's row that state.json does not show) only stat the files.
    let idle = publish_file_reads(&store);
    store.ok(&["heartbeat", "a0"]);
    one_whole_publish(&store);
    one_whole_publish(&store);
    assert_eq!(publish_file_reads(&store), idle, "an idle check read files");

    // A foreign write in place that keeps the inode and the size ("live"
    // → "idle"): its stamps (mtime, ctime) changed, so it is read and taken.
    let path = state_path(&store, "sid00003");
    let before = std::fs::metadata(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replace("\"status\": \"live\"", "\"status\": \"idle\"");
    assert_eq!(edited.len(), text.len());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .write_all(edited.as_bytes())
        .unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), before.ino());
    eventually("a3 idle from its state.json", || {
        (show(&store, "a3")["status"] == "idle").then_some(())
    });
    let status = logged(&store, "ExternalChange", "a3");
    assert_eq!(status.len(), 1, "{status:?}");
    // Upstream's write (a new inode) to another agent's file is taken too.
    let other = state_path(&store, "sid00007");
    let mut theirs = read_json(&other).unwrap();
    theirs["status"] = json!("orphaned");
    foreign_write(
        &other,
        serde_json::to_string_pretty(&theirs).unwrap().as_bytes(),
    );
    eventually("a7 orphaned from its state.json", || {
        (show(&store, "a7")["status"] == "orphaned").then_some(())
    });
    one_whole_publish(&store);
    // Per foreign write, the check reads the pair and the publish reads it
    // again under the lock: nothing else was read.
    let after = publish_file_reads(&store);
    assert!(
        after - idle <= 2 * 4,
        "{} files read for two foreign writes",
        after - idle
    );
    one_whole_publish(&store);
    assert_eq!(publish_file_reads(&store), after);
    let (status, stderr) = d.stop();
    assert!(status.success(), "{status}: {stderr}");
}
