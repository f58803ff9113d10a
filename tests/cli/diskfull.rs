//! Full-disk suite: a store on a small tmpfs whose free space is
//! then used up by a filler file, and every write command run at that
//! moment. The log's preallocated segment still has room, so each command's
//! event commits; what fails is what needs new space (the close-time
//! snapshot, an explicit snapshot or export). Nothing committed is reported
//! as failed, and no message is lost or counted read without delivery.
//!
//! Mounting needs root; where it fails, the suite says so and makes the
//! snapshots fail instead by turning `snapshots/` into a file (the same
//! failure the close path sees on a full disk).

use crate::support::cli::{bin, register_args, Run};
use crate::support::tmpfs::{fill_leaving, try_mount};
use std::path::Path;

const NOW: &str = "2026-11-30T12:00:00Z";

fn at(hms: &str) -> String {
    format!("2026-11-30T{hms}Z")
}

fn run(dir: &Path, args: &[&str]) -> Run {
    let out = bin()
        .env("AGENTLOG_NOW", NOW)
        .arg("--dir")
        .arg(dir)
        .args(args)
        .output()
        .expect("run agentlog");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn events(dir: &Path) -> usize {
    run(dir, &["--json", "log"]).ok().lines().count()
}

#[test]
fn every_write_command_at_the_moment_space_runs_out() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    // One 64 MiB segment plus a little: the filler takes the rest.
    let mount = try_mount(&mnt, 72);
    let dir = mnt.join("store");
    run(&dir, &["init"]).ok();
    for name in ["alice", "bob"] {
        run(&dir, &register_args(name, "codex", "/", NOW, &[])).ok();
    }
    let first: u64 = run(
        &dir,
        &[
            "post",
            "--from",
            "alice",
            "--to",
            "bob",
            "before",
            "--at",
            &at("12:00:10"),
        ],
    )
    .ok()
    .trim()
    .parse()
    .unwrap();
    if mount.is_some() {
        fill_leaving(&mnt.join("filler"), 0);
        println!("disk full: tmpfs of 72 MiB filled to ENOSPC");
    } else {
        println!("cannot mount a tmpfs (not root?): making snapshots fail through a `snapshots` file instead");
        let snaps = dir.join("snapshots");
        let _ = std::fs::remove_dir_all(&snaps);
        std::fs::write(&snaps, b"x").unwrap();
    }

    let writes: Vec<Vec<String>> = [
        vec!["register", "carol", "--provider", "codex", "--cwd", "/"],
        vec!["heartbeat", "alice"],
        vec!["status", "alice", "busy", "--message", "working"],
        vec!["update", "alice", "--log-path", "/tmp/a.log"],
        vec![
            "sessions",
            "open",
            "--source",
            "s",
            "--workspace",
            "w",
            "--session-id",
            "1",
        ],
        vec!["sweep"],
        vec!["post", "--from", "alice", "--to", "bob", "during"],
        vec!["remove", "carol"],
    ]
    .into_iter()
    .map(|v| v.into_iter().map(String::from).collect())
    .collect();
    for (i, w) in writes.iter().enumerate() {
        let mut args: Vec<&str> = w.iter().map(String::as_str).collect();
        let t = at(&format!("12:01:{:02}", i));
        if args[0] != "sweep" {
            args.extend(["--at", &t]);
        }
        let before = events(&dir);
        let r = run(&dir, &args);
        let after = events(&dir);
        if after > before {
            assert_eq!(
                r.code,
                0,
                "`{}` committed but reported failure: {}",
                w.join(" "),
                r.stderr
            );
        } else if args[0] != "sweep" {
            // (A sweep with no lease due commits nothing and succeeds.)
            assert_ne!(
                r.code,
                0,
                "`{}` committed nothing yet reported success",
                w.join(" ")
            );
        }
    }
    let r = run(
        &dir,
        &[
            "--json",
            "post",
            "--from",
            "bob",
            "--to",
            "alice",
            "last",
            "--at",
            &at("12:02:00"),
        ],
    );
    let last = r.json()["id"].as_u64().expect("post reports its id");

    // Reads deliver everything, once; nothing was lost or counted read.
    let read = run(&dir, &["--json", "read", "bob", "--at", &at("12:03:00")]);
    let ids: Vec<u64> = read.json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "both messages to bob: {ids:?}");
    assert_eq!(ids[0], first);
    let alice = run(&dir, &["--json", "read", "alice", "--at", &at("12:03:00")]);
    assert_eq!(alice.json()["messages"][0]["id"].as_u64(), Some(last));
    let again = run(&dir, &["--json", "read", "bob", "--at", &at("12:04:00")]);
    assert!(again.json()["messages"].as_array().unwrap().is_empty());

    // What needs new space fails with a clear error and changes nothing.
    if mount.is_some() {
        let r = run(&dir, &["snapshot"]);
        assert_ne!(r.code, 0);
        assert!(
            r.stderr.contains("agentlog: ") && r.stderr.contains("No space left"),
            "{}",
            r.stderr
        );
        // Space freed: the store works as before.
        std::fs::remove_file(mnt.join("filler")).unwrap();
        run(&dir, &["snapshot"]).ok();
    }
    assert!(run(&dir, &["verify"]).code == 0);
}
