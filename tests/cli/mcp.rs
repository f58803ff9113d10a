//! `agentlog mcp` driven by real MCP clients: the official Python SDK
//! (PyPI `mcp`, installed by the test set-up, `support::prereq`) runs
//! `tests/mcp/drive.py` against the store directly and through a running
//! `agentlog serve`; the MCP Inspector's CLI mode (npm) lists the tools and
//! calls one. No hand-written stand-in client.
//!
//! The driver asserts the protocol side (schemas, every tool, two sessions
//! messaging, cancellation, a subscription's update, refusals as `isError`,
//! presence ending with the session); this side checks its summary against
//! the bounds and the store against the way the calls went.

use crate::support::daemon::{bin, Daemon, Store, NOW};
use crate::support::prereq;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The bound on a waiting read's wake-up after the post that it waits for.
const WAKE_BOUND_MS: f64 = 100.0;
/// A subscribed client hears of a change within this (generous: the
/// notification crosses two processes; measured figures are far lower).
const UPDATE_BOUND_MS: f64 = 1000.0;

fn agentlog() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_agentlog"))
}

fn driver() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/drive.py")
}

/// Runs the Python SDK scenario on `dir`; returns its summary.
fn drive(dir: &Path) -> Value {
    let out = Command::new(prereq::mcp_python())
        .arg(driver())
        .arg(agentlog())
        .arg(dir)
        .env("AGENTLOG_NOW", NOW)
        .output()
        .expect("run the MCP driver");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the MCP driver failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let last = stdout.lines().last().expect("a summary line");
    // The measured figures, for `--nocapture` (README, "Coding agents over MCP").
    eprintln!("mcp driver summary: {last}");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("summary `{last}`: {e}"))
}

fn figures(summary: &Value, key: &str) -> Vec<f64> {
    summary[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} in {summary}"))
        .iter()
        .map(|v| v.as_f64().expect("a number"))
        .collect()
}

/// The bounds on the driver's measurements, and the refusals'
/// messages (the CLI's own).
fn check_summary(summary: &Value) {
    let after_answer = figures(summary, "wake_after_post_answer_ms");
    let after_sent = figures(summary, "wake_after_post_sent_ms");
    assert_eq!(after_answer.len(), 3, "{summary}");
    assert!(
        after_answer.iter().all(|&ms| ms <= WAKE_BOUND_MS),
        "a waiting read answered more than {WAKE_BOUND_MS} ms after the post was committed: {summary}"
    );
    let best = after_sent.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        best <= WAKE_BOUND_MS,
        "no round woke the read within {WAKE_BOUND_MS} ms of the post request: {summary}"
    );
    let update = summary["update_after_status_ms"]
        .as_f64()
        .expect("a number");
    assert!(update <= UPDATE_BOUND_MS, "{summary}");
    let refusals: Vec<&str> = summary["refusals"]
        .as_array()
        .expect("refusals")
        .iter()
        .map(|v| v.as_str().expect("text"))
        .collect();
    assert_eq!(refusals[0], "agent `ghost` not found", "{summary}");
    assert!(refusals[1].contains("unknown status `sleepy`"), "{summary}");
    assert!(refusals[2].contains("--lsn"), "{summary}");
    assert!(refusals[3].contains("`wait`"), "{summary}");
    assert!(refusals[4].contains("`nobody`"), "{summary}");
}

/// `agentlog --json log` of `dir`, one event a line.
fn events(dir: &Path) -> Vec<Value> {
    let out = bin()
        .arg("--dir")
        .arg(dir)
        .args(["--no-daemon", "--json", "log"])
        .output()
        .expect("agentlog log");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Both agents registered through MCP are attached to their sessions'
/// transports and ended `idle` with the session.
fn check_store(store: &Store) {
    for (name, client) in [("alpha", "drive-a/1.0"), ("beta", "drive-b/2.0")] {
        let shown: Value = serde_json::from_str(&store.ok(&["--json", "show", name])).unwrap();
        assert_eq!(shown["transport_client"], client, "{shown}");
        assert_eq!(shown["status"], "idle", "{shown}");
        assert_eq!(
            shown["status_message"], "disconnected: the MCP session ended",
            "{shown}"
        );
    }
}

#[test]
fn the_python_sdk_drives_every_tool_on_a_store_without_a_daemon() {
    let store = Store::new();
    let summary = drive(&store.dir);
    check_summary(&summary);
    check_store(&store);
    // Run directly: no event carries a daemon peer's origin.
    let log = events(&store.dir);
    assert!(log.len() > 20, "{log:?}");
    assert!(log.iter().all(|e| e.get("origin").is_none()), "{log:?}");
}

#[test]
fn the_python_sdk_drives_the_same_scenario_through_a_running_daemon() {
    let store = Store::new();
    let daemon = Daemon::start(&store.dir, &[]);
    let summary = drive(&store.dir);
    check_summary(&summary);
    check_store(&store);
    // Every event went through the daemon (it records each peer's origin),
    // the session-end `idle`s included.
    let log = events(&store.dir);
    assert!(log.len() > 20, "{log:?}");
    assert!(log.iter().all(|e| e.get("origin").is_some()), "{log:?}");
    let (status, stderr) = daemon.stop();
    assert!(status.success(), "{stderr}");
}

#[test]
fn the_mcp_inspector_lists_the_tools_and_calls_one() {
    let store = Store::new();
    let inspector = prereq::mcp_inspector();
    let run = |extra: &[&str]| -> Value {
        let out = Command::new(&inspector)
            .arg("--cli")
            .arg(agentlog())
            .arg("--dir")
            .arg(&store.dir)
            .arg("mcp")
            .args(extra)
            .env("AGENTLOG_NOW", NOW)
            .output()
            .expect("run the MCP Inspector");
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
    };
    let listed = run(&["--method", "tools/list"]);
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(
        names,
        [
            "register",
            "heartbeat",
            "set_status",
            "post",
            "read",
            "list",
            "show",
            "audit",
            "replay"
        ]
    );
    let called = run(&["--method", "tools/call", "--tool-name", "list"]);
    assert_eq!(called["isError"], false, "{called}");
    assert_eq!(
        called["structuredContent"]["agents"],
        serde_json::json!([]),
        "{called}"
    );
}
