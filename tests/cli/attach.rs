//! CLI tests of the runtime-registry seed's attach rules (issue 29):
//! endpoint fields as events (shown by `show`, `list --json` and `audit`,
//! never exported), one controller and many observers, renewal, detach,
//! take-over only after expiry, the sweep expiring leases, and the
//! `list --view runtime` mapping. Every time is explicit (`--at`).

use crate::support::cli::{register_args, Env};
use serde_json::Value;

const T0: &str = "2026-11-30T12:00:00Z";

fn at(hms: &str) -> String {
    format!("2026-11-30T{hms}Z")
}

fn kinds(env: &Env) -> Vec<String> {
    env.ok(&["--json", "log"])
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["kind"].as_str().unwrap().to_string()
        })
        .collect()
}

fn agent_row<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no row for {name}: {list}"))
}

#[test]
fn endpoint_fields_are_events_shown_by_show_list_and_audit_and_never_exported() {
    let env = Env::new();
    env.ok(&["init"]);
    env.ok(&register_args(
        "a",
        "claude",
        "/w",
        T0,
        &[
            "--endpoint",
            "http://127.0.0.1:9/a",
            "--capability",
            "http",
            "--capability",
            "acp",
            "--model",
            "opus",
            "--title",
            "Fix the build",
            "--persistence-location",
            "/var/sessions/a.jsonl",
            "--supervisor",
            "4242",
        ],
    ));
    assert_eq!(kinds(&env), ["AgentRegistered", "EndpointSet"]);
    let show = env.json(&["show", "a"]);
    assert_eq!(show["endpoint"], "http://127.0.0.1:9/a");
    assert_eq!(show["capabilities"], serde_json::json!(["http", "acp"]));
    assert_eq!(show["model"], "opus");
    assert_eq!(show["title"], "Fix the build");
    assert_eq!(show["persistence_location"], "/var/sessions/a.jsonl");
    assert_eq!(show["supervisor"], 4242);
    assert_eq!(show["observers"], serde_json::json!([]));
    assert_eq!(show["owner"]["controller"], Value::Null);
    assert_eq!(show["outage"], Value::Null);

    // The agent moves: one more event, which audit shows.
    env.ok(&[
        "update",
        "a",
        "--endpoint",
        "unix:/run/a.sock",
        "--at",
        &at("12:01:00"),
    ]);
    let list = env.json(&["list"]);
    let row = agent_row(&list, "a");
    assert_eq!(row["endpoint"], "unix:/run/a.sock");
    assert_eq!(row["model"], "opus", "untouched fields stay");
    let audit = env.ok(&["audit", "a"]);
    assert!(
        audit.contains("endpoint fields: endpoint=http://127.0.0.1:9/a")
            && audit.contains("endpoint fields: endpoint=unix:/run/a.sock"),
        "{audit}"
    );

    // Never in the schema-v4 export.
    let out = env.path("registry.json");
    env.ok(&["export", "--out", out.to_str().unwrap()]);
    let text = std::fs::read_to_string(&out).unwrap();
    for key in [
        "endpoint",
        "capabilities",
        "opus",
        "Fix the build",
        "supervisor",
    ] {
        assert!(!text.contains(key), "`{key}` exported: {text}");
    }

    // Bad input is refused, naming the field, and appends nothing.
    let before = kinds(&env).len();
    env.run(&["update", "a", "--title", "tab\there"])
        .fails(1, "title contains control characters");
    assert_eq!(kinds(&env).len(), before);
}

#[test]
fn one_controller_many_observers_renewal_take_over_and_the_sweep() {
    let env = Env::with_agent("a", "/w", T0);
    let attach = |args: &[&str], hms: &str| {
        let mut a = vec!["attach", "a"];
        a.extend_from_slice(args);
        let t = at(hms);
        a.extend_from_slice(&["--at", &t]);
        env.run(&a)
    };
    attach(
        &["--controller", "--client", "c1", "--ttl", "60"],
        "12:00:10",
    )
    .ok();
    // A second controller is refused, naming the holder and its expiry.
    attach(&["--controller", "--client", "c2"], "12:00:20").fails(
        1,
        "agent `a` is controlled by client `c1` until 2026-11-30T12:01:10.000Z",
    );
    // --take-over before expiry is refused too.
    attach(
        &["--controller", "--client", "c2", "--take-over"],
        "12:00:20",
    )
    .fails(1, "--take-over works only after that");
    // Any number of observers.
    for c in ["o1", "o2", "o3"] {
        attach(&["--observer", "--client", c, "--ttl", "30"], "12:00:30").ok();
    }
    let show = env.json(&["show", "a", "--at", &at("12:00:35")]);
    assert_eq!(show["owner"]["controller"]["client"], "c1");
    // This process owns the store and holds the controller lease (judged
    // at the read's time).
    assert_eq!(
        show["actions"],
        serde_json::json!(["observe", "control", "write", "administer"])
    );
    let observers: Vec<&str> = show["observers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["client"].as_str().unwrap())
        .collect();
    assert_eq!(observers, ["o1", "o2", "o3"]);
    // Renewal: the same client again moves its expiry.
    attach(
        &["--controller", "--client", "c1", "--ttl", "60"],
        "12:00:40",
    )
    .ok();
    let show = env.json(&["show", "a"]);
    assert_eq!(
        show["owner"]["controller"]["expires_at"],
        "2026-11-30T12:01:40Z"
    );
    // A detach ends one observer's lease.
    env.ok(&["detach", "a", "--client", "o3", "--at", &at("12:00:45")]);
    env.run(&["detach", "a", "--client", "o3", "--at", &at("12:00:46")])
        .fails(1, "client `o3` holds no lease on agent `a`");

    // After expiry: a plain attach is told to take over; --take-over works.
    attach(&["--controller", "--client", "c2"], "12:02:00")
        .fails(1, "expired at 2026-11-30T12:01:40.000Z");
    attach(
        &["--controller", "--client", "c2", "--take-over"],
        "12:02:00",
    )
    .ok();
    let show = env.json(&["show", "a"]);
    assert_eq!(show["owner"]["controller"]["client"], "c2");

    // The sweep expires the observers' leases (ended 00:01:00), each its own
    // event with the sweep as actor.
    env.ok(&["sweep", "--now", &at("12:02:30")]);
    let show = env.json(&["show", "a"]);
    assert_eq!(show["observers"], serde_json::json!([]));
    assert_eq!(show["owner"]["controller"]["client"], "c2");
    let log = env.ok(&["--json", "log"]);
    let released: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == "LeaseReleased")
        .collect();
    let me = format!(
        "{{\"peer\":{{\"uid\":{}}}}}",
        rustix::process::geteuid().as_raw()
    );
    let reasons: Vec<String> = released
        .iter()
        .map(|v| {
            let r = &v["event"]["Runtime"]["LeaseReleased"];
            format!(
                "{}:{}:{}",
                r["client"].as_str().unwrap(),
                r["reason"],
                r["by"]
            )
        })
        .collect();
    assert_eq!(
        reasons,
        [
            format!("o3:\"detached\":{me}"),
            format!("c1:\"taken_over\":{me}"),
            "o1:\"expired\":\"sweep\"".to_string(),
            "o2:\"expired\":\"sweep\"".to_string(),
        ]
    );
    let audit = env.ok(&["audit", "a"]);
    assert!(
        audit.contains("observer `o1` expired") && audit.contains("by the sweep"),
        "{audit}"
    );
    // A finished agent takes no new lease.
    env.ok(&["status", "a", "exited", "--at", &at("12:03:00")]);
    attach(&["--observer", "--client", "late"], "12:03:10").fails(1, "finished");
}

#[test]
fn the_runtime_view_maps_statuses_to_the_seeds_states() {
    let env = Env::new();
    env.ok(&["init"]);
    for (name, status) in [
        ("idle-one", "idle"),
        ("busy-one", "busy"),
        ("restarting-one", "restarting"),
        ("exited-one", "exited"),
        ("live-one", "live"),
    ] {
        env.ok(&register_args(name, "claude", "/w", T0, &[]));
        env.ok(&["status", name, status, "--at", T0]);
    }
    env.ok(&[
        "attach",
        "busy-one",
        "--controller",
        "--client",
        "ui",
        "--at",
        T0,
    ]);
    let v = env.json(&["list", "--all", "--view", "runtime"]);
    let state = |n: &str| {
        agent_row(&v, n)["runtime_state"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(state("idle-one"), "idle");
    assert_eq!(state("live-one"), "idle");
    assert_eq!(state("busy-one"), "busy");
    assert_eq!(state("restarting-one"), "shutting_down");
    assert_eq!(state("exited-one"), "persisted");
    let table = env.ok(&["list", "--all", "--view", "runtime"]);
    let busy = table.lines().find(|l| l.starts_with("busy-one")).unwrap();
    let cols: Vec<&str> = busy.split_whitespace().collect();
    assert_eq!(
        cols[..5],
        ["busy-one", "busy", "busy", "-", "ui"],
        "{table}"
    );
    assert!(
        table.lines().next().unwrap().contains("CONTROLLER"),
        "{table}"
    );
    // The plain list stays as it was.
    assert!(!env.ok(&["list"]).contains("STATE"));
}

#[test]
fn runtime_facts_survive_a_snapshot_and_reopen() {
    let env = Env::with_agent("a", "/w", T0);
    env.ok(&["update", "a", "--endpoint", "unix:/s", "--at", T0]);
    env.ok(&["attach", "a", "--observer", "--client", "o1", "--at", T0]);
    env.ok(&["snapshot"]);
    env.ok(&["attach", "a", "--observer", "--client", "o2", "--at", T0]);
    let show = env.json(&["show", "a"]);
    assert_eq!(show["endpoint"], "unix:/s");
    assert_eq!(show["observers"].as_array().unwrap().len(), 2);
}
