//! CLI tests of the read-only commands (replay, audit, log, verify, repair)
//! and of usage errors and exit codes, over logs written through the library.

use crate::support::cli;

use crate::support::cli::{append_events, heartbeat, t, Env};
use agentlog::model::{Status, StatusCause};
use agentlog::registry::{Event, EventKind, Registration, RegistrationKind};

fn register(at: &str, name: &str, pid: u32, kind: RegistrationKind) -> Event {
    let mut reg = Registration::new(name, "claude", "/work/repo");
    reg.pid = Some(pid);
    Event {
        at: t(at),
        kind: EventKind::AgentRegistered {
            reg: Box::new(reg),
            kind,
            host: None,
        },
    }
}

fn status(at: &str, name: &str, s: Status, msg: &str, cause: StatusCause) -> Event {
    Event {
        at: t(at),
        kind: EventKind::StatusChanged {
            agent: name.into(),
            status: s,
            message: Some(msg.into()),
            cause,
        },
    }
}

/// alice: registered, 3 heartbeats, lease expiry, registered again;
/// bob: registered at 12:05.
fn history() -> Vec<Event> {
    vec![
        register("12:00:00", "alice", 100, RegistrationKind::New),
        heartbeat("12:00:30", "alice"),
        heartbeat("12:01:00", "alice"),
        heartbeat("12:01:30", "alice"),
        status(
            "12:04:00",
            "alice",
            Status::Exited,
            "worker lease expired; register again before continuing",
            StatusCause::LeaseExpired,
        ),
        register("12:05:00", "bob", 200, RegistrationKind::New),
        register("12:06:00", "alice", 101, RegistrationKind::NewLife),
    ]
}

fn store_with_history() -> Env {
    let env = Env::new();
    append_events(&env.dir, &history());
    env
}

#[test]
fn usage_errors_exit_2_naming_the_value() {
    let env = Env::new();
    let r = env.run(&["replay", "--at", "yesterday"]);
    r.fails(2, "yesterday");
    let r = env.run(&["audit", "a", "--since", "2026-13-01T00:00:00Z"]);
    r.fails(2, "2026-13-01T00:00:00Z");
    env.run(&["replay"]).fails(2, "--at");
    env.run(&["no-such-command"]).fails(2, "no-such-command");
    assert_eq!(env.run_bare(&[]).code, 2);
}

#[test]
fn every_command_has_help() {
    let env = Env::new();
    let top = env.run_bare(&["--help"]);
    let text = top.ok().to_string();
    let commands: Vec<String> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 7, "{text}");
    for c in commands {
        let r = env.run_bare(&[&c, "--help"]);
        assert!(r.ok().contains("Usage: agentlog"), "{c}: {}", r.stdout);
    }
}

#[test]
fn a_missing_or_unusable_store_dir_is_a_clear_error() {
    let env = Env::new();
    env.run(&["list"]).fails(1, "no agentlog store at");
    let file = env.path("plain-file");
    std::fs::write(&file, b"not a store").unwrap();
    env.run_in(&file, &["init"]).fails(1, "is not a directory");
    env.run_in(&file, &["list"]).fails(1, "is not a directory");
    // A directory that cannot be created (it would lie under a regular file);
    // the tests run as root, so permission bits cannot provoke the refusal.
    let under = file.join("store");
    env.run_in(&under, &["init"]).fails(1, "plain-file/store");
    env.run_in(&under, &["verify"]).fails(1, "plain-file/store");
}

#[test]
fn init_creates_an_empty_store_and_is_idempotent() {
    let env = Env::new();
    assert!(env.ok(&["init"]).contains("initialized an empty store"));
    let doc = env.json(&["init"]);
    assert_eq!(doc["created"], false);
    assert_eq!(doc["events"], 0);
    assert_eq!(env.json(&["list"])["agents"].as_array().unwrap().len(), 0);
}

#[test]
fn replay_at_a_time_between_two_events_gives_the_earlier_state() {
    let env = store_with_history();
    // 12:04:30 lies between alice's lease expiry (12:04:00) and bob (12:05:00).
    let doc = env.json(&["replay", "--at", "2026-11-30T12:04:30Z"]);
    let agents = doc["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1, "{doc}");
    assert_eq!(agents[0]["name"], "alice");
    assert_eq!(agents[0]["status"], "exited");
    assert_eq!(agents[0]["last_active"], "2026-11-30T12:01:30Z");
    assert_eq!(doc["last"]["lsn"], 5);
    assert_eq!(doc["next"]["lsn"], 6);
    assert_eq!(doc["next"]["at"], "2026-11-30T12:05:00Z");

    // Exactly at an event's time includes it.
    let doc = env.json(&["replay", "--at", "2026-11-30T12:05:00Z"]);
    assert_eq!(doc["agents"].as_array().unwrap().len(), 2);

    // By LSN: after the third event alice is live with two heartbeats.
    let doc = env.json(&["replay", "--lsn", "3"]);
    assert_eq!(doc["agents"][0]["status"], "live");
    assert_eq!(doc["agents"][0]["last_active"], "2026-11-30T12:01:00Z");

    // Before the first event: empty.
    let doc = env.json(&["replay", "--at", "2026-11-30T11:00:00Z"]);
    assert_eq!(doc["agents"].as_array().unwrap().len(), 0);
    assert_eq!(doc["next"]["lsn"], 1);

    // The text form names the point.
    let text = env.ok(&["replay", "--at", "2026-11-30T12:04:30Z"]);
    assert!(
        text.contains("registry as of lsn 5 (2026-11-30T12:04:00Z)"),
        "{text}"
    );
    assert!(text.contains("worker lease expired"), "{text}");
}

#[test]
fn replay_export_writes_a_registry_every_reader_accepts() {
    let env = store_with_history();
    let file = env.path("then/registry.json");
    let doc = env.json(&["replay", "--lsn", "6", "--export", file.to_str().unwrap()]);
    assert_eq!(doc["export"]["rows"], 2);
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(written["schema_version"], 4);
    assert_eq!(written["agents"][0]["name"], "alice");
    assert_eq!(written["agents"][0]["status"], "exited");
    assert_eq!(written["agents"][1]["name"], "bob");
    cli::assert_accepted(&file);
}

#[test]
fn list_shows_the_current_registry() {
    let env = store_with_history();
    let text = env.ok(&["list"]);
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("NAME"));
    assert_eq!(lines.clone().count(), 2, "{text}");
    assert!(text.contains("alice") && text.contains("bob"));
    let doc = env.json(&["list", "--all"]);
    assert_eq!(doc["agents"][0]["life"], 2);
    assert_eq!(doc["agents"][0]["pid"], 101);
}

#[test]
fn audit_follows_an_agent_through_registration_heartbeats_expiry_and_return() {
    let env = store_with_history();
    let doc = env.json(&["audit", "alice"]);
    let ev = doc["events"].as_array().unwrap();
    assert_eq!(ev.len(), 4, "{doc}");
    assert_eq!(ev[0]["kind"], "AgentRegistered");
    assert_eq!(ev[0]["lsn"], 1);
    assert_eq!(ev[1]["kind"], "Heartbeat");
    assert_eq!(ev[1]["count"], 3);
    assert_eq!(ev[1]["at"], "2026-11-30T12:00:30Z");
    assert_eq!(ev[1]["last_at"], "2026-11-30T12:01:30Z");
    assert_eq!(
        ev[1]["what"],
        "heartbeats ×3 from 2026-11-30T12:00:30Z to 2026-11-30T12:01:30Z"
    );
    assert_eq!(ev[2]["kind"], "StatusChanged");
    assert!(ev[2]["why"]
        .as_str()
        .unwrap()
        .contains("lease expired: worker lease expired"));
    assert_eq!(ev[3]["lsn"], 7);
    assert!(ev[3]["what"].as_str().unwrap().contains("new life"));

    // Text: one line per event; bob's registration is not in alice's audit.
    let text = env.ok(&["audit", "alice"]);
    assert_eq!(text.lines().count(), 5, "{text}");
    assert!(!text.contains("bob"));

    // A time window.
    let doc = env.json(&[
        "audit",
        "alice",
        "--since",
        "2026-11-30T12:01:00Z",
        "--until",
        "2026-11-30T12:04:00Z",
    ]);
    let ev = doc["events"].as_array().unwrap();
    assert_eq!(ev.len(), 2, "{doc}");
    assert_eq!(ev[0]["count"], 2);

    env.run(&["audit", "carol"])
        .fails(1, "agent `carol` not found");
}

#[test]
fn log_dumps_raw_events_as_text_and_json_lines() {
    let env = store_with_history();
    let text = env.ok(&["log"]);
    assert_eq!(text.lines().count(), 7);
    assert!(text.lines().next().unwrap().contains("registered `alice`"));
    let out = env.run(&["--json", "log", "--from", "5"]);
    let lines: Vec<serde_json::Value> = out
        .ok()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["lsn"], 5);
    assert_eq!(lines[0]["kind"], "StatusChanged");
    assert_eq!(lines[0]["at"], "2026-11-30T12:04:00Z");
    assert_eq!(lines[2]["kind"], "AgentRegistered");
}

#[test]
fn log_follow_prints_events_appended_later() {
    use std::io::{BufRead, BufReader};
    let env = store_with_history();
    let mut child = cli::bin()
        .arg("--dir")
        .arg(&env.dir)
        .args(["--json", "log", "--follow", "--from", "7"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["lsn"], 7);
    append_events(&env.dir, &[heartbeat("12:07:00", "bob")]);
    let next: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(next["lsn"], 8);
    assert_eq!(next["kind"], "Heartbeat");
}

/// Flips one byte inside the payload of the first record of the store's
/// first segment (valid records follow it: damage, not a torn tail).
fn damage_first_record(dir: &std::path::Path) -> std::path::PathBuf {
    let seg = std::fs::read_dir(dir.join("log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .min()
        .expect("a segment");
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[64 + 16 + 12] ^= 0x40;
    std::fs::write(&seg, bytes).unwrap();
    seg
}

#[test]
fn verify_is_clean_then_names_damage_and_repair_salvages_the_rest() {
    let env = store_with_history();
    let out = env.ok(&["verify"]);
    assert!(out.contains("7 records") && out.contains("clean"), "{out}");
    let doc = env.json(&["verify"]);
    assert_eq!(doc["clean"], true);
    assert_eq!(doc["last_lsn"], 7);

    // Damage under a live writer is not judged in the newest segment's
    // unsealed part (it may be mid-write; README, "verify"), so this part
    // needs no daemon holding the store.
    cli::direct_only(&env.dir);
    let seg = damage_first_record(&env.dir);
    let r = env.run(&["verify"]);
    r.fails(1, "log damaged");
    let seg_name = seg.file_name().unwrap().to_str().unwrap();
    assert!(r.stdout.contains(seg_name), "{}", r.stdout);
    assert!(r.stdout.contains("offset 64"), "{}", r.stdout);
    assert!(r.stdout.contains("lsn 1"), "{}", r.stdout);
    let doc = cli::bin()
        .arg("--dir")
        .arg(&env.dir)
        .args(["--json", "verify"])
        .output()
        .unwrap();
    assert_eq!(doc.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&doc.stdout).unwrap();
    assert_eq!(doc["clean"], false);
    assert_eq!(doc["bad"][0]["offset"], 64);

    // A fold that must read the damaged record refuses, naming where. (A
    // snapshot past it would let the fold step over it unchecked: a daemon
    // leaves one at its close, so the snapshots go first.)
    // (A store written only by one-shot commands has no snapshot folder.)
    for snap in std::fs::read_dir(env.dir.join("snapshots"))
        .into_iter()
        .flatten()
    {
        std::fs::remove_file(snap.unwrap().path()).unwrap();
    }
    env.run(&["list"]).fails(1, "offset 64");

    let out = env.path("salvaged");
    let doc = env.json(&["repair", "--salvage", "--out", out.to_str().unwrap()]);
    assert_eq!(doc["records_copied"], 6);
    assert_eq!(doc["bad"].as_array().unwrap().len(), 1);
    let r = env.run_in(&out, &["--json", "verify"]);
    assert_eq!(r.json()["records"], 6);
    // The original is unchanged: still damaged.
    assert_eq!(env.run(&["verify"]).code, 1);
    // Salvage refuses a non-empty destination.
    env.run(&["repair", "--salvage", "--out", out.to_str().unwrap()])
        .fails(1, "not empty");
}

#[test]
fn the_store_dir_comes_from_the_flag_then_agentlog_dir_then_home() {
    let env = store_with_history();
    // $AGENTLOG_DIR when no --dir is given.
    let out = cli::bin()
        .env("AGENTLOG_DIR", &env.dir)
        .args(["--json", "list"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["agents"].as_array().unwrap().len(), 2);
    // Else ~/.agentlog.
    let home = env.path("home");
    let out = cli::bin().env("HOME", &home).arg("init").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(home.join(".agentlog/log").is_dir());
    // No HOME and no directory given: a usage error.
    let out = cli::bin().env_remove("HOME").arg("list").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --dir DIR"));
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::io::{BufRead, BufReader};
    let env = Env::new();
    let many: Vec<Event> = (0..2000)
        .map(|i| {
            let mut e = heartbeat("12:00:30", "alice");
            e.at = e.at.add_millis(i);
            e
        })
        .collect();
    append_events(
        &env.dir,
        &[register("12:00:00", "alice", 1, RegistrationKind::New)],
    );
    append_events(&env.dir, &many);
    let mut child = cli::bin()
        .arg("--dir")
        .arg(&env.dir)
        .arg("log")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is gone (stdout dropped above): the writer must not panic.
    let out = child.wait_with_output().unwrap();
    assert!(first.contains("registered `alice`"));
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
