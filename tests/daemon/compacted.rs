//! Compaction is visible to watchers (issue 30, finding 2): an agent that
//! `compact` retires reaches a `watch --changes` stream (and
//! `/api/events?changes=true`, the same watch) as `removed`, and a watch that
//! resumes from inside the compacted range gets an explicit `compacted` item
//! with the rows to restart from, never a silent gap.

use crate::support::daemon::{Conn, Daemon, Store};
use serde_json::{json, Value};
use std::time::Duration;

/// Two days after the tests' clock: `a1`, finished at the clock, is retired.
const LATER: &str = "2030-01-03T00:00:00Z";

/// Reads watch items until `done` says the collected ones suffice.
fn collect(c: &mut Conn, mut done: impl FnMut(&[Value]) -> bool) -> Vec<Value> {
    c.reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut items = Vec::new();
    while !done(&items) {
        items.push(c.recv().expect("the watch goes on"));
    }
    items
}

fn has_change(items: &[Value], kind: &str, agent: &str) -> bool {
    items
        .iter()
        .any(|i| i["change"]["type"] == kind && i["change"]["agent"] == agent)
}

#[test]
fn a_retirement_reaches_watchers_and_a_resume_into_the_compacted_range_is_told() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &[]);
    for name in ["a1", "a2"] {
        s.ok(&["register", name, "--provider", "claude", "--cwd", "/w"]);
    }
    s.ok(&["status", "a1", "exited"]);
    let mut w = Conn::connect(&s.dir);
    let started =
        w.call(json!({"id": 7, "method": "watch", "params": {"from": 1, "changes": true}}));
    assert_eq!(started["result"]["watching"], true, "{started}");
    let history = collect(&mut w, |items| items.len() == 3);
    assert!(has_change(&history, "added", "a1") && has_change(&history, "updated", "a1"));
    let report = s.ok(&["--json", "compact", "--now", LATER, "--force-now"]);
    assert!(report.contains("a1"), "a1 retired: {report}");
    s.ok(&["heartbeat", "a2"]);
    let live = collect(&mut w, |items| has_change(items, "updated", "a2"));
    assert!(has_change(&live, "removed", "a1"), "{live:?}");
    assert!(!has_change(&live, "removed", "a2"), "{live:?}");
    // The served registry agrees.
    assert!(!s.ok(&["list", "--all"]).contains("a1"));
    // A client that had seen LSN 1 only resumes from 2: records it never
    // saw were compacted away, and it is told so with the rows to keep.
    for changes in [true, false] {
        let mut r = Conn::connect(&s.dir);
        let started =
            r.call(json!({"id": 8, "method": "watch", "params": {"from": 2, "changes": changes}}));
        assert_eq!(started["result"]["watching"], true, "{started}");
        let first = collect(&mut r, |items| !items.is_empty()).remove(0);
        let compacted = &first["compacted"];
        assert!(compacted.is_object(), "{first}");
        let names: Vec<&str> = compacted["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a2"], "{first}");
        let resume = compacted["resume_from"].as_u64().unwrap();
        assert_eq!(compacted["lsn"].as_u64().unwrap() + 1, resume);
        // What follows starts after the compacted range.
        let next = collect(&mut r, |items| !items.is_empty()).remove(0);
        let lsn = next["change"]["lsn"]
            .as_u64()
            .or(next["event"]["lsn"].as_u64())
            .unwrap();
        assert!(lsn >= resume, "{next}");
    }
    // From 1 the compacted log is read whole: no `compacted` item.
    let mut r = Conn::connect(&s.dir);
    r.call(json!({"id": 9, "method": "watch", "params": {"from": 1, "changes": true}}));
    let first = collect(&mut r, |items| !items.is_empty()).remove(0);
    assert!(first.get("compacted").is_none(), "{first}");
}
