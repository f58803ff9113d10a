//! CLI tests of the seeds' remaining operations, each mirroring the seed's
//! behaviour: paged reads (`--budget`: at least one, the rest left unread
//! and counted; `--limit`), waiting reads (woken by a post from another
//! process; timing out empty), display names, `list` filters, transport
//! presence flipping when a real process exits, and `show`.

use crate::support::cli::{bin, direct_only, register_args, Env};
use agentlog::probe::parse_start_time;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

const T0: &str = "2026-11-30T12:00:00Z";

fn at(hms: &str) -> String {
    format!("2026-11-30T{hms}Z")
}

/// `a` and `b` (claude, project /p) and `c` (codex, project /q).
fn fleet() -> Env {
    fleet_after(&["init"])
}

/// [`fleet`] in a store made by `init`.
fn fleet_after(init: &[&str]) -> Env {
    let env = Env::new();
    env.ok(init);
    for (name, provider, project) in [
        ("a", "claude", "/p"),
        ("b", "claude", "/p/"),
        ("c", "codex", "/q"),
    ] {
        env.ok(&register_args(
            name,
            provider,
            "/w",
            T0,
            &["--project-root", project],
        ));
    }
    env
}

fn post(env: &Env, from: &str, to: &str, text: &str, hms: &str) -> u64 {
    let v = env.json(&["post", "--from", from, "--to", to, text, "--at", &at(hms)]);
    v["id"].as_u64().unwrap()
}

fn ids(v: &serde_json::Value) -> Vec<u64> {
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_u64().unwrap())
        .collect()
}

#[test]
fn a_budget_shows_at_least_one_marks_only_what_it_showed_and_counts_the_rest() {
    let env = fleet();
    let m1 = post(&env, "a", "b", "first message", "12:00:01");
    let m2 = post(&env, "a", "b", "other message", "12:00:02");
    let m3 = post(&env, "a", "b", "third message", "12:00:03");
    // A budget smaller than any message still shows the oldest one.
    let v = env.json(&["read", "b", "--budget", "1", "--at", &at("12:01:00")]);
    assert_eq!(ids(&v), [m1]);
    assert_eq!(v["left"], 2);
    assert_eq!(v["agent"], "b", "existing keys stay");
    assert_eq!(v["timed_out"], false);
    // The text form prints the measured lines; the same size each here.
    let out = env.ok(&["read", "b", "--budget", "1", "--at", &at("12:01:00")]);
    let mut lines = out.lines();
    let line = lines.next().unwrap();
    assert!(
        line.starts_with(&format!("#{m2} "))
            && line.ends_with("a → b [note] normal: other message"),
        "{out}"
    );
    assert_eq!(lines.next(), Some("(1 more unread)"));
    // A budget of exactly one line (plus newline) holds it, not one more byte.
    let fits_one = (line.len() + 1).to_string();
    let v = env.json(&["read", "b", "--budget", &fits_one, "--at", &at("12:01:00")]);
    assert_eq!((ids(&v), v["left"].as_u64()), (vec![m3], Some(0)));
    let v = env.json(&["read", "b", "--budget", "1000", "--at", &at("12:01:00")]);
    assert_eq!((ids(&v).len(), v["left"].as_u64()), (0, Some(0)));
}

#[test]
fn a_limit_pages_by_count() {
    let env = fleet();
    let m: Vec<u64> = (1..=3)
        .map(|i| post(&env, "a", "b", &format!("m{i}"), &format!("12:00:0{i}")))
        .collect();
    let v = env.json(&["read", "b", "--limit", "2", "--at", &at("12:01:00")]);
    assert_eq!((ids(&v), v["left"].as_u64()), (m[..2].to_vec(), Some(1)));
    let v = env.json(&["read", "b", "--limit", "2", "--at", &at("12:01:00")]);
    assert_eq!((ids(&v), v["left"].as_u64()), (vec![m[2]], Some(0)));
    env.run(&["read", "b", "--limit", "0"]).fails(2, "--limit");
}

#[test]
fn a_paged_read_tells_of_messages_the_cap_dropped_as_the_plain_read_does() {
    let env = fleet_after(&["init", "--max-messages", "2"]);
    for (i, text) in ["one", "two", "three"].iter().enumerate() {
        post(&env, "a", "b", text, &format!("12:00:0{}", i + 1));
    }
    let note = "note: 1 message(s) to `b` or to all were dropped by the message cap: 1 from `a`";
    let plain = env.ok(&["read", "b", "--at", &at("12:01:00")]);
    assert!(plain.starts_with(note), "{plain}");
    // The drop stays told after the mail is read, on every kind of read.
    for paged in [["--limit", "1"], ["--budget", "1"]] {
        let mut args = vec!["read", "b"];
        args.extend(paged);
        let t = at("12:01:00");
        args.extend(["--at", &t]);
        let text = env.ok(&args);
        assert!(text.starts_with(note), "{paged:?}: {text}");
        let v = env.json(&args);
        assert_eq!(v["dropped"], serde_json::json!([{"from": "a", "count": 1}]));
    }
    let waited = env.json(&["read", "b", "--wait", "0.01", "--at", &at("12:01:00")]);
    assert_eq!(waited["dropped"][0]["count"], 1, "{waited}");
    assert_eq!(waited["timed_out"], true);
}

#[test]
fn a_wait_is_woken_by_a_post_from_another_process() {
    let env = fleet();
    // The direct wait (its debug line says when it blocks); the daemon's is
    // tests/daemon_watch.rs.
    direct_only(&env.dir);
    let now = at("12:05:00");
    let mut waiter = bin()
        .arg("--dir")
        .arg(&env.dir)
        .args(["--json", "read", "b", "--wait", "120", "--at", &now])
        .env("AGENTLOG_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Post only once the waiter says it is blocked (its stderr), so the
    // post really wakes it rather than being there from the start.
    let mut stderr = BufReader::new(waiter.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            panic!("waiter ended before waiting:\n{seen}");
        }
        seen.push_str(&line);
        if line.contains("waiting for unread messages") {
            break;
        }
    }
    let id = post(&env, "a", "b", "wake up", "12:04:00");
    let out = waiter.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ids(&v), [id]);
    assert_eq!(v["timed_out"], false);
    // It was marked read: nothing is left for the next reader.
    assert_eq!(ids(&env.json(&["read", "b", "--at", &now])).len(), 0);
}

#[test]
fn a_wait_that_times_out_exits_zero_and_empty() {
    let env = fleet();
    let v = env.json(&["read", "b", "--wait", "0.2", "--at", &at("12:05:00")]);
    assert_eq!(v["timed_out"], true);
    assert_eq!(ids(&v).len(), 0);
    let out = env.ok(&["read", "b", "--wait", "0.05", "--at", &at("12:05:00")]);
    assert!(out.contains("timed out"), "{out}");
    // Mail already there: no wait at all.
    post(&env, "a", "b", "hi", "12:04:00");
    let v = env.json(&["read", "b", "--wait", "60", "--at", &at("12:05:00")]);
    assert_eq!(
        (ids(&v).len(), &v["timed_out"]),
        (1, &serde_json::json!(false))
    );
    env.run(&["read", "nobody", "--wait", "1"])
        .fails(1, "not found");
    env.run(&["read", "b", "--wait=-1"]).fails(2, "seconds");
}

#[test]
fn display_names_are_validated_shown_audited_and_not_exported() {
    let env = fleet();
    env.ok(&[
        "update",
        "a",
        "--display-name",
        "Lead Reviewer",
        "--at",
        &at("12:00:05"),
    ]);
    let list = env.json(&["list"]);
    assert_eq!(list["agents"][0]["display_name"], "Lead Reviewer");
    assert!(env.ok(&["list"]).contains("Lead Reviewer"));
    let audit = env.ok(&["audit", "a"]);
    assert!(
        audit.contains("display name → \"Lead Reviewer\""),
        "{audit}"
    );
    env.run(&["update", "a", "--display-name", "bad\u{7}name"])
        .fails(1, "display name contains control characters");
    env.run(&["update", "a", "--display-name", &"x".repeat(300)])
        .fails(1, "display name is 300 bytes");
    env.run(&["update", "zz", "--display-name", "n"])
        .fails(1, "not found");
    let file = env.path("registry.json");
    env.ok(&["export", "--out", file.to_str().unwrap()]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        !text.contains("display_name") && !text.contains("Lead Reviewer"),
        "{text}"
    );
}

#[test]
fn list_filters_by_project_status_and_provider() {
    let env = fleet();
    env.ok(&["status", "c", "exited", "--at", &at("12:00:05")]);
    let names = |args: &[&str]| -> Vec<String> {
        let mut a = vec!["list"];
        a.extend_from_slice(args);
        env.json(&a)["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&["--project-root", "/p"]), ["a", "b"]);
    assert_eq!(
        names(&["--project-root", "/q"]),
        Vec::<String>::new(),
        "finished left out"
    );
    assert_eq!(names(&["--project-root", "/q", "--all"]), ["c"]);
    assert_eq!(names(&["--status", "exited"]), ["c"]);
    assert_eq!(names(&["--provider", "codex", "--all"]), ["c"]);
    assert_eq!(
        names(&["--provider", "claude", "--status", "live"]),
        ["a", "b"]
    );
    env.run(&["list", "--status", "Active"]).fails(2, "Active");
}

fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    parse_start_time(&stat).unwrap()
}

#[test]
fn presence_flips_when_the_process_exits() {
    let env = Env::new();
    env.ok(&["init"]);
    /// Kills the probed process however the test ends.
    struct Sleeper(std::process::Child);
    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Sleeper(
        std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    let start = start_time(pid).to_string();
    let pid_s = pid.to_string();
    env.ok(&register_args(
        "mcp1",
        "claude",
        "/w",
        T0,
        &[
            "--pid",
            &pid_s,
            "--pid-start-time",
            &start,
            "--transport-client",
            "cursor/1.0",
        ],
    ));
    // The same pid with another start time is another process.
    let wrong = (start_time(pid) + 1).to_string();
    env.ok(&register_args(
        "reused",
        "claude",
        "/w",
        T0,
        &["--pid", &pid_s, "--pid-start-time", &wrong],
    ));
    assert_eq!(env.run(&["presence", "mcp1"]).code, 0);
    assert_eq!(env.run(&["presence", "--any-transport"]).code, 0);
    let r = env.run(&["presence", "reused"]);
    assert!(
        r.code == 1 && r.stdout.contains("another process"),
        "{}",
        r.stdout
    );
    let v = env.run(&["--json", "presence", "mcp1"]).json();
    assert_eq!(v["live"], true);

    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let r = env.run(&["presence", "mcp1"]);
    assert!(r.code == 1 && r.stdout.contains("is gone"), "{}", r.stdout);
    assert_eq!(env.run(&["presence", "--any-transport"]).code, 1);
    env.run(&["presence", "nobody"]).fails(1, "not found");
    env.run(&["presence"]).fails(2, "required");
}

#[test]
fn a_transport_attached_agent_idles_on_a_lapsed_lease_and_audit_says_why() {
    let env = Env::new();
    env.ok(&["init"]);
    for (name, extra) in [("t", Some("zed/0.9")), ("w", None)] {
        let mut args = register_args(name, "claude", "/w", T0, &[]);
        if let Some(c) = extra {
            args.extend(["--transport-client", c]);
        }
        env.ok(&args);
    }
    env.ok(&[
        "update",
        "t",
        "--transport-client",
        "zed/1.0",
        "--at",
        &at("12:00:01"),
    ]);
    env.ok(&["sweep", "--now", &at("12:05:00")]);
    let list = env.json(&["list", "--all"]);
    assert_eq!(list["agents"][0]["status"], "idle");
    assert_eq!(list["agents"][0]["transport_client"], "zed/1.0");
    assert_eq!(list["agents"][1]["status"], "exited");
    let audit = env.json(&["audit", "t"]);
    let events = audit["events"].as_array().unwrap();
    let whats: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e["what"].as_str().unwrap(), e["why"].as_str().unwrap_or("")))
        .collect();
    assert!(
        whats.contains(&("transport client → zed/0.9", "attached at registration")),
        "{whats:?}"
    );
    assert!(
        whats.contains(&("transport client → zed/1.0", "client reconnected")),
        "{whats:?}"
    );
    env.run(&[
        "register",
        "x",
        "--provider",
        "claude",
        "--cwd",
        "/w",
        "--transport-client",
        "/1",
    ])
    .fails(1, "transport client name must not be empty");
}

#[test]
fn show_describes_one_agent_from_the_snapshot_and_tail() {
    let env = fleet();
    post(&env, "a", "b", "to b", "12:00:01");
    post(&env, "b", "a", "to a", "12:00:02");
    post(&env, "b", "a", "again", "12:00:03");
    env.ok(&["status", "b", "exited", "--at", &at("12:00:04")]);
    env.ok(&register_args("b", "claude", "/w", &at("12:00:05"), &[]));
    // A snapshot in the middle: `show` folds it and the tail only.
    env.ok(&["snapshot"]);
    let last = env.json(&["heartbeat", "b", "--at", &at("12:00:06")])["lsn"]
        .as_u64()
        .unwrap();
    let v = env.json(&["show", "b", "--at", &at("12:01:00")]);
    assert_eq!(v["name"], "b");
    assert_eq!(v["life"], 2);
    assert_eq!(v["sent"], 2);
    assert_eq!(v["unread"], 1);
    assert_eq!(v["last_event_lsn"], last);
    assert_eq!(
        v["project_root"], "",
        "the new life's registration set no project"
    );
    let a = env.json(&["show", "a", "--at", &at("12:01:00")]);
    assert_eq!(
        (a["unread"].as_u64(), a["sent"].as_u64()),
        (Some(2), Some(1))
    );
    let text = env.ok(&["show", "b", "--at", &at("12:01:00")]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("life") && l.ends_with(" 2")),
        "{text}"
    );
    env.run(&["show", "nobody"])
        .fails(1, "agent `nobody` not found");
}
