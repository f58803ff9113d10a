//! `serve` beside upstream fno's own writers (docs/upstream.md,
//! "Coexistence"): two foreign writer processes (`tests/support/fno_writer.py`,
//! one locking like upstream's Python writer, one like its Rust writer)
//! register rows in `registry.json` while the daemon publishes; every row
//! they wrote ends in the log (as an event whose actor is the external
//! writer) and in the published file, and every intermediate file is one
//! its schema's readers accept: upstream HEAD's (schema 16, which reads
//! 1–16) every one, and the design card's schema-4 reader every one
//! agentlog published (the foreign writers' own schema-16 files are refused
//! by that reader's version guard, as upstream intends). Meanwhile a third
//! foreign writer (this test, as upstream's Rust `state.json` writer) bumps
//! `own-1`'s `restart_count` in its `state.json`. The race runs the issue's
//! 60 s (`AGENTLOG_RACE_SECS=N` shortens it for a quick local run). Also:
//! a lock held past the publish wait at shutdown is a warning and exit 0.

use crate::support::daemon::{bin, eventually_within, Daemon, Store};
use agentlog::check::check_bytes_as;
use agentlog::schemas::Schema;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn writer(store: &Store, mode: &str, prefix: &str, count: usize, secs: u64) -> std::process::Child {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/fno_writer.py");
    Command::new("python3")
        .arg(script)
        .args(["--mode", mode, "--prefix", prefix])
        .args([
            "--count",
            &count.to_string(),
            "--seconds",
            &secs.to_string(),
        ])
        .arg("--registry")
        .arg(store.dir.join("registry.json"))
        .arg("--serialize")
        .arg(store.tmp.path().join("writers.lock"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the foreign writer")
}

fn names(doc: &Value) -> BTreeSet<String> {
    doc["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn two_foreign_writers_beside_serve_lose_nothing() {
    let secs: u64 = std::env::var("AGENTLOG_RACE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let store = Store::new();
    store.ok(&[
        "register",
        "own-1",
        "--provider",
        "codex",
        "--cwd",
        "/w",
        "--short-id",
        "own00001",
    ]);
    let d = Daemon::start(&store.dir, &["--publish-every-ms", "100"]);
    let registry = store.dir.join("registry.json");
    eventually_within("the first publish", Duration::from_secs(10), || {
        registry.exists().then_some(())
    });

    // A reader beside the race: every file it sees parses, passes the
    // schema-16 readers' contract, and, when agentlog wrote it (schema 4),
    // the schema-4 readers' too.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, registry) = (stop.clone(), registry.clone());
        std::thread::spawn(move || {
            let mut seen = [0usize; 2];
            while !stop.load(Ordering::Relaxed) {
                let bytes = std::fs::read(&registry).unwrap();
                let doc: Value = serde_json::from_slice(&bytes).unwrap();
                let ours = doc["schema_version"] == 4;
                let mut contracts = vec![Schema::V16];
                if ours {
                    contracts.push(Schema::V4);
                }
                for contract in contracts {
                    let problems = check_bytes_as(&bytes, Some(contract), None);
                    assert!(
                        problems.is_empty(),
                        "{contract:?} reader: {problems:?}\n{}",
                        String::from_utf8_lossy(&bytes)
                    );
                }
                agentlog::import::parse_registry(&bytes, &registry).unwrap();
                seen[usize::from(!ours)] += 1;
                std::thread::sleep(Duration::from_millis(3));
            }
            seen
        })
    };
    // The state.json writer: `own-1`'s restart count, once per 250 ms.
    let state = store.dir.join("own00001/state.json");
    eventually_within("own-1's state.json", Duration::from_secs(10), || {
        state.exists().then_some(())
    });
    let restarts = {
        let (stop, state) = (stop.clone(), state.clone());
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                write_state_like_upstream(&state, |doc| doc["restart_count"] = n.into());
                std::thread::sleep(Duration::from_millis(250));
            }
            n
        })
    };
    let per_writer = (3 * secs) as usize;
    let py = writer(&store, "python", "py", per_writer, secs);
    let rs = writer(&store, "rust", "rs", per_writer, secs);
    let mut written = BTreeSet::new();
    for w in [py, rs] {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        written.extend(
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(String::from),
        );
    }
    assert_eq!(written.len(), 2 * per_writer);

    // Within a few publish periods every foreign row is in the fold.
    eventually_within(
        "the foreign rows in the log",
        Duration::from_secs(20),
        || {
            let out = store.run(&["list", "--json"]);
            let doc: Value = serde_json::from_slice(&out.stdout).ok()?;
            let listed = names(&doc);
            written.is_subset(&listed).then_some(())
        },
    );
    stop.store(true, Ordering::Relaxed);
    let restarts = restarts.join().unwrap();
    eventually_within(
        "the last restart count in the fold",
        Duration::from_secs(20),
        || {
            let audit = store.run(&["audit", "own-1", "--json"]).stdout;
            let doc: Value = serde_json::from_slice(&audit).ok()?;
            let last = doc["events"]
                .as_array()?
                .iter()
                .rev()
                .find(|e| e["kind"] == "WorkerStateChanged")?;
            last["what"]
                .as_str()?
                .contains(&format!("restart_count={restarts}"))
                .then_some(())
        },
    );
    let (status, stderr) = d.stop();
    let seen = reader.join().unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert!(seen[0] > 0, "the reader saw agentlog's schema-4 publishes");
    assert!(seen[1] > 0, "the reader saw the writers' schema-16 files");

    // The published file holds every row, and agentlog's own.
    let published: Value = serde_json::from_slice(&std::fs::read(&registry).unwrap()).unwrap();
    assert_eq!(published["schema_version"], 4);
    let rows = names(&published);
    assert!(
        written.is_subset(&rows),
        "missing: {:?}",
        written.difference(&rows)
    );
    assert!(rows.contains("own-1"));
    // Every row's state.json carries its published status; own-1's the
    // last restart count the state.json writer wrote.
    for row in published["agents"].as_array().unwrap() {
        let sid = row["short_id"].as_str().unwrap();
        let doc: Value =
            serde_json::from_slice(&std::fs::read(store.dir.join(sid).join("state.json")).unwrap())
                .unwrap();
        assert_eq!(doc["status"], row["status"], "{row}\n{doc}");
    }
    let own: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(own["restart_count"], restarts);

    // Each row came in as an external writer's registration; the status
    // marks as status events, all shown with the actor.
    let log = store.ok(&["log", "--json"]);
    let mut registered = BTreeSet::new();
    let mut statuses = 0;
    for line in log.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        if e["kind"] != "ExternalChange" {
            continue;
        }
        assert_eq!(e["actor"], "external writer (registry.json)", "{e}");
        let change = &e["event"]["ExternalChange"];
        let agent = change["agent"].as_str().unwrap().to_string();
        match &change["change"] {
            c if c.get("Registered").is_some() => {
                registered.insert(agent);
            }
            c if c.get("Status").is_some() => statuses += 1,
            _ => {}
        }
    }
    assert_eq!(registered, written, "one registration per foreign row");
    assert!(statuses > 0, "the writers' status marks are events");
    let busy =
        serde_json::from_slice::<Value>(&store.run(&["show", "py-3", "--json"]).stdout).unwrap();
    assert_eq!(busy["status"], "busy", "{busy}");
    let audit = store.ok(&["audit", "py-3"]);
    assert!(audit.contains("external writer (registry.json)"), "{audit}");
}

/// Upstream's `update_state_atomic`: under the exclusive lock on
/// `<state.json>.lock`, read, change, write `.state.json.tmp.<pid>`, fsync,
/// rename.
fn write_state_like_upstream(path: &Path, change: impl FnOnce(&mut Value)) {
    let lock = std::fs::File::options()
        .create(true)
        .append(true)
        .open(format!("{}.lock", path.display()))
        .unwrap();
    lock.lock().unwrap();
    let mut doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    change(&mut doc);
    let tmp = path
        .parent()
        .unwrap()
        .join(format!(".state.json.tmp.{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp).unwrap();
    std::io::Write::write_all(
        &mut f,
        serde_json::to_string_pretty(&doc).unwrap().as_bytes(),
    )
    .unwrap();
    f.sync_all().unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A child killed when the test ends, however it ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_registry_lock_held_past_the_wait_at_shutdown_is_a_warning_and_exit_0() {
    let store = Store::new();
    store.ok(&["register", "a", "--provider", "claude", "--cwd", "/w"]);
    let d = Daemon::start(&store.dir, &["--publish-lock-wait", "2"]);
    let registry = store.dir.join("registry.json");
    eventually_within("the first publish", Duration::from_secs(10), || {
        registry.exists().then_some(())
    });
    // A writer holding upstream Python's lock for longer than the wait.
    let lock = store.dir.join("locks/_registry.lock");
    let holder = Command::new("python3")
        .arg("-c")
        .arg(
            "import fcntl,sys,time; f=open(sys.argv[1],'a'); fcntl.flock(f,fcntl.LOCK_EX); \
             print('held',flush=True); time.sleep(60)",
        )
        .arg(&lock)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut holder = Killed(holder);
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.0.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "held");
    store.ok(&["register", "b", "--provider", "claude", "--cwd", "/w"]);
    let (status, stderr) = d.stop();
    assert!(
        status.success(),
        "exit 0 with a durable log: {status}\n{stderr}"
    );
    assert!(stderr.contains("not republished"), "{stderr}");
    assert!(
        stderr.contains("_registry.lock"),
        "the warning names the lock: {stderr}"
    );
    drop(holder);
    // The log is durable: `b` is there for the next start to publish.
    let list = bin()
        .arg("--dir")
        .arg(&store.dir)
        .args(["list", "--json"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert!(names(&doc).contains("b"));
}
