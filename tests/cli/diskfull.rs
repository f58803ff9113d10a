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

/// Issue 30, finding 12: once some space is free after a full disk,
/// `compact` reclaims. Its first step seals the active segment; the
/// successor must not be preallocated to the size of the free space, or
/// compaction's own output finds none ("disk full" from the one command
/// that would free room). The segment is full of heartbeats (nothing of it
/// is unused room a seal would give back), which compact to a little.
#[test]
fn compact_reclaims_once_some_space_is_free_after_a_full_disk() {
    use agentlog::{Store, StoreOptions, Timestamp};
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    // Two 64 MiB segments, then the filler.
    let _mount = try_mount(&mnt, 160).expect("mounting a tmpfs needs root (as the CI runs)");
    let dir = mnt.join("store");
    run(&dir, &["init"]).ok();
    // 4,000 agents (about 0.5 MiB of registrations to keep), 8 of them
    // finished early enough to retire.
    let rows: Vec<serde_json::Value> = (0..4000)
        .map(|i| {
            let done = i < 40;
            serde_json::json!({
                "name": format!("agent-{i:04}"), "provider": "claude",
                "cwd": "/work/some/project/directory", "log_path": null,
                "created_at": format!("2026-11-30T10:{:02}:00Z", i % 60),
                "status": if done { "exited" } else { "live" },
            })
        })
        .collect();
    let fleet = tmp.path().join("fleet.json");
    let doc = serde_json::json!({"schema_version": 4, "agents": rows});
    std::fs::write(&fleet, serde_json::to_vec(&doc).unwrap()).unwrap();
    run(&dir, &["import", fleet.to_str().unwrap()]).ok();
    // Heartbeats through a whole first segment and until the second is
    // full but for 128 KiB: the room its seal gives back is less than the
    // compacted log needs, so compaction depends on what the seal installs.
    let store = Store::open(&dir, StoreOptions::short_lived()).unwrap();
    let t0 = Timestamp::parse_rfc3339("2026-11-30T11:00:00Z").unwrap();
    let mut ms: i64 = 0;
    let mut second_starts_at = None;
    loop {
        for i in 40..140 {
            ms += 1;
            let name = format!("agent-{i:04}");
            store
                .heartbeat(&name, None, Some(t0.add_millis(ms)))
                .unwrap();
        }
        let st = store.log().stats();
        if st.segments < 2 {
            continue;
        }
        // Within one round (about 5 KiB) of where the second began.
        let start = *second_starts_at.get_or_insert(st.bytes);
        if st.bytes - start >= (64 << 20) - (128 << 10) {
            assert_eq!(st.segments, 2, "the second segment filled up");
            break;
        }
    }
    drop(store);

    // The disk fills up, then 16 MiB are freed: far more than the
    // compacted log needs, far less than a segment.
    fill_leaving(&mnt.join("filler"), 16 << 20);
    let r = run(&dir, &["compact", "--now", &at("12:00:00")]);
    assert_eq!(r.code, 0, "compact with 16 MiB free: {}", r.stderr);
    assert!(r.stdout.contains("agents retired: 8"), "{}", r.stdout);
    assert_eq!(run(&dir, &["--json", "verify"]).json()["clean"], true);
    // The store goes on writing in the room that is left.
    run(&dir, &["heartbeat", "agent-3999", "--at", &at("12:01:00")]).ok();
    let listed = run(&dir, &["--json", "list", "--all"]).json();
    assert_eq!(listed["agents"].as_array().unwrap().len(), 3992);
}
