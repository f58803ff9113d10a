//! Data loss and wrong results: a command reports exactly what
//! it committed (a failed close-time snapshot or a failed stdout is not the
//! command's failure), `read` marks read only what it delivered, the message
//! cap's drops are in the log and told to the recipient, `compact --now` and
//! write times refuse the far future, and one out-of-order stamp blinds
//! neither `replay --at` nor the lease.

use crate::support::cli;

use crate::support::cli::{bin, register_args, Env, Run};
use std::process::Stdio;

const NOW: &str = "2026-11-30T12:00:00Z";

fn at(hms: &str) -> String {
    format!("2026-11-30T{hms}Z")
}

/// Runs `agentlog --dir <store> ARGS…` with `$AGENTLOG_NOW` = `now` and
/// stdout sent to `/dev/full` when `full_stdout`.
fn run_now(env: &Env, now: &str, full_stdout: bool, args: &[&str]) -> Run {
    let mut c = bin();
    c.env("AGENTLOG_NOW", now)
        .arg("--dir")
        .arg(&env.dir)
        .args(args);
    if full_stdout {
        let devfull = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        c.stdout(Stdio::from(devfull));
    }
    let out = c.output().expect("run agentlog");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn two_agents() -> Env {
    let env = Env::new();
    env.ok(&["init"]);
    for name in ["alice", "bob"] {
        env.ok(&register_args(name, "codex", "/r", NOW, &[]));
    }
    env
}

fn post(env: &Env, from: &str, to: &str, text: &str, hms: &str) -> u64 {
    env.ok(&["post", "--from", from, "--to", to, text, "--at", &at(hms)])
        .trim()
        .parse()
        .expect("post prints the id")
}

fn unread_ids(env: &Env, reader: &str, hms: &str) -> Vec<u64> {
    let doc = env.json(&["read", reader, "--at", &at(hms)]);
    doc["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["id"].as_u64().expect("id"))
        .collect()
}

#[test]
fn read_into_a_full_stdout_marks_nothing_read() {
    let env = two_agents();
    let id = post(&env, "alice", "bob", "do not lose me", "12:01:00");
    let failed = run_now(&env, &at("12:02:00"), true, &["read", "bob"]);
    failed.fails(1, "nothing was marked read");
    // Delivered now, once.
    assert_eq!(unread_ids(&env, "bob", "12:03:00"), vec![id]);
    assert!(unread_ids(&env, "bob", "12:04:00").is_empty());
}

#[test]
fn a_failed_close_time_snapshot_is_a_warning_and_the_post_is_reported() {
    let env = two_agents();
    // `snapshots/` being a file makes every snapshot fail.
    let snaps = env.dir.join("snapshots");
    let _ = std::fs::remove_dir_all(&snaps);
    std::fs::write(&snaps, b"not a directory").unwrap();
    let r = env.run(&[
        "post",
        "--from",
        "alice",
        "--to",
        "bob",
        "hi",
        "--at",
        &at("12:01:00"),
    ]);
    let id: u64 = r.ok().trim().parse().expect("the id of the committed post");
    assert!(
        r.stderr.contains("snapshot"),
        "a warning names the snapshot: {}",
        r.stderr
    );
    assert_eq!(unread_ids(&env, "bob", "12:02:00"), vec![id]);
}

#[test]
fn a_post_whose_stdout_fails_says_on_stderr_what_was_committed() {
    let env = two_agents();
    let r = run_now(
        &env,
        &at("12:01:00"),
        true,
        &["post", "--from", "alice", "--to", "bob", "x"],
    );
    assert_eq!(r.code, 0, "committed, so not a failure: {}", r.stderr);
    assert!(r.stderr.contains("committed"), "{}", r.stderr);
    let ids = unread_ids(&env, "bob", "12:02:00");
    assert_eq!(ids.len(), 1, "exactly one post");
    assert!(
        r.stderr.contains(&ids[0].to_string()),
        "stderr names id {}: {}",
        ids[0],
        r.stderr
    );
}

#[test]
fn compact_refuses_a_now_beyond_the_clock_and_the_log_unless_forced() {
    let env = two_agents();
    post(&env, "alice", "bob", "unread", "12:01:00");
    let typo = "2062-11-30T12:00:00Z";
    run_now(&env, NOW, false, &["compact", "--now", typo]).fails(1, "--force-now");
    assert_eq!(
        unread_ids(&env, "bob", "12:02:00").len(),
        1,
        "nothing was dropped"
    );
    let forced = run_now(&env, NOW, false, &["compact", "--now", typo, "--force-now"]);
    forced.ok();
}

#[test]
fn write_times_far_after_the_clock_are_refused_unless_forced() {
    let env = two_agents();
    let late = at("13:00:00");
    run_now(&env, NOW, false, &["heartbeat", "alice", "--at", &late]).fails(2, "--force-time");
    run_now(
        &env,
        NOW,
        false,
        &["heartbeat", "alice", "--at", &late, "--force-time"],
    )
    .ok();
    // Within the tolerance: clock skew between hosts is fine.
    run_now(
        &env,
        NOW,
        false,
        &["heartbeat", "bob", "--at", &at("12:04:00")],
    )
    .ok();
}

#[test]
fn times_that_leave_years_0001_9999_are_refused() {
    let env = two_agents();
    env.run(&["heartbeat", "alice", "--at", "9999-12-31T23:59:59-23:59"])
        .fails(2, "0001-9999");
}

#[test]
fn a_heartbeat_stamped_in_the_future_does_not_outlive_the_lease() {
    let env = two_agents();
    run_now(
        &env,
        NOW,
        false,
        &[
            "heartbeat",
            "alice",
            "--at",
            "2030-01-01T00:00:00Z",
            "--force-time",
        ],
    )
    .ok();
    let swept = env.json(&["sweep", "--now", &at("12:10:00")]);
    let text = swept.to_string();
    assert!(text.contains("alice"), "alice's lease expired: {text}");
}

#[test]
fn replay_at_a_time_is_not_blinded_by_one_later_stamp() {
    let env = Env::new();
    env.ok(&["init"]);
    for (name, hms) in [
        ("early", "12:00:00"),
        ("stray", "14:00:00"),
        ("after", "12:30:00"),
    ] {
        env.ok(&register_args(name, "codex", "/", &at(hms), &[]));
    }
    let doc = env.json(&["replay", "--at", &at("13:00:00")]);
    let text = doc.to_string();
    assert!(text.contains("\"early\""), "{text}");
    assert!(
        text.contains("\"after\""),
        "an event after the stray stamp counts: {text}"
    );
    assert!(!text.contains("\"stray\""), "{text}");
}

#[test]
fn cap_drops_are_logged_counted_and_told_to_the_recipient() {
    let env = Env::new();
    env.ok(&["init", "--max-messages", "2"]);
    for name in ["alice", "bob", "carol"] {
        env.ok(&register_args(name, "codex", "/", NOW, &[]));
    }
    let first = post(&env, "bob", "alice", "one", "12:01:00");
    post(&env, "bob", "alice", "two", "12:02:00");
    post(&env, "carol", "alice", "three", "12:03:00");
    // The drop is an event in the log, in alice's and bob's timelines.
    let log = env.ok(&["log"]);
    assert!(log.contains("dropped"), "{log}");
    let audit = env.ok(&["audit", "alice"]);
    assert!(
        audit.contains(&format!("#{first}")) && audit.contains("dropped"),
        "{audit}"
    );
    let stats = env.json(&["stats"]);
    assert_eq!(stats["messages_dropped"], 1, "{stats}");
    let read = env.json(&["read", "alice", "--at", &at("12:04:00")]);
    assert_eq!(read["messages"].as_array().unwrap().len(), 2);
    assert_eq!(read["dropped"][0]["from"], "bob", "{read}");
    assert_eq!(read["dropped"][0]["count"], 1, "{read}");
    // The cap is the store's: persisted, and fixed once set.
    env.run(&["init", "--max-messages", "5"]).fails(1, "fixed");
}

#[test]
fn readers_fold_the_log_when_snapshots_cannot_be_read() {
    let env = Env::with_agent("alice", "/r", NOW);
    env.ok(&["snapshot"]);
    let snaps = env.dir.join("snapshots");
    let check = |args: &[&str], r: &Run| {
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("folding the whole log"),
            "{args:?}: {}",
            r.stderr
        );
    };
    // A folder the reader may not enter: as another uid, with the rest of
    // the store opened to it.
    std::process::Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&env.dir)
        .status()
        .unwrap();
    std::process::Command::new("chmod")
        .args(["a+x"])
        .arg(env.tmp.path())
        .status()
        .unwrap();
    std::process::Command::new("chmod")
        .arg("000")
        .arg(&snaps)
        .status()
        .unwrap();
    for args in [&["list"][..], &["stats"], &["show", "alice"]] {
        let mut a: Vec<&std::ffi::OsStr> = vec!["--dir".as_ref(), env.dir.as_os_str()];
        a.extend(args.iter().map(|s| std::ffi::OsStr::new(*s)));
        let r = Run::from_output(cli::as_neighbour(env!("CARGO_BIN_EXE_agentlog"), &a));
        check(args, &r);
        if args[0] != "stats" {
            assert!(r.stdout.contains("alice"), "{args:?}: {}", r.stdout);
        }
    }
    // `snapshots/` being a file.
    std::fs::remove_dir_all(&snaps).unwrap();
    std::fs::write(&snaps, b"not a folder").unwrap();
    for args in [&["list"][..], &["stats"], &["show", "alice"]] {
        let r = env.run(args);
        check(args, &r);
    }
}

#[test]
fn an_interrupted_salvage_is_marked_and_a_rerun_replaces_it() {
    let env = Env::with_agent("alice", "/r", NOW);
    // A segment name the salvage cannot read stops it partway, as a kill would.
    let blocker = env.dir.join("log/00000000000000000009.seg");
    std::fs::create_dir(&blocker).unwrap();
    let out = env.path("salvaged");
    let out_s = out.to_str().unwrap();
    env.run(&["repair", "--salvage", "--out", out_s])
        .fails(1, "");
    assert!(
        out.join("log").exists(),
        "the salvage stopped after it began"
    );
    env.run_in(&out, &["verify"]).fails(1, "unfinished salvage");
    env.run_in(&out, &["list"]).fails(1, "unfinished salvage");
    std::fs::remove_dir(&blocker).unwrap();
    env.ok(&["repair", "--salvage", "--out", out_s]);
    env.run_in(&out, &["verify"]).ok();
    assert!(env.run_in(&out, &["list"]).ok().contains("alice"));
    // A finished output is not replaced.
    env.run(&["repair", "--salvage", "--out", out_s])
        .fails(1, "not empty");
}
