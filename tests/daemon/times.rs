//! The future-time rule on every path into the daemon (issue 30, finding
//! 14): a heartbeat's `at` more than 5 minutes after the clock is refused on
//! the hot path, the fast path and the Python client's call as the CLI
//! refuses it, against the same clock: the daemon's own (it ignores its
//! environment's `$AGENTLOG_NOW`), or the request's `clock`.

use crate::support::daemon::{register, Conn, Daemon, Store};
use serde_json::{json, Value};

const FAR: &str = "9999-12-31T00:00:00Z";
/// A past time: inside the bound whenever the test runs.
const PAST: &str = "2026-11-30T12:00:00Z";

fn last_active(s: &Store) -> String {
    let rows: Value = serde_json::from_str(&s.ok(&["--json", "list"])).unwrap();
    rows["agents"][0]["last_active"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_far_future_heartbeat_is_refused_on_every_path() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &[]);
    let mut c = Conn::connect(&s.dir);
    assert!(register(&mut c, "w1")["result"].is_object());
    // The hot path (a line of exactly the plain shape, lazy and durable),
    // pipelined, and the fast path (a top-level key the hot path does not
    // take sends the line through the parser to the same heartbeat).
    let lines = [
        format!(r#"{{"id":0,"method":"heartbeat","params":{{"name":"w1","at":"{FAR}"}},"x":1}}"#),
        format!(r#"{{"id":1,"method":"heartbeat","params":{{"name":"w1","at":"{FAR}"}}}}"#),
        format!(
            r#"{{"id":2,"method":"heartbeat","params":{{"name":"w1","at":"{FAR}","durable":true}}}}"#
        ),
        format!(r#"{{"id":3,"method":"heartbeat","params":{{"name":"w1","at":"{PAST}"}}}}"#),
    ];
    c.send_raw(format!("{}\n", lines.join("\n")).as_bytes());
    let replies: Vec<Value> = (0..4).map(|_| c.recv().unwrap()).collect();
    for r in &replies[..3] {
        assert_eq!(r["error"]["code"], "usage", "{replies:?}");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(msg.contains("more than 5 minutes after the clock"), "{msg}");
    }
    assert!(replies[3]["result"]["lsn"].is_u64(), "{replies:?}");
    assert!(!last_active(&s).starts_with("9999"), "{}", last_active(&s));
    // The Python client's heartbeat.
    let py = r#"
import sys
sys.path.insert(0, sys.argv[2])
from agentlog_client import Client, UsageError
with Client(sys.argv[1]) as c:
    try:
        c.heartbeat("w1", at=sys.argv[3])
        print("accepted")
    except UsageError as e:
        print("refused:", e.message)
"#;
    let clients = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/python");
    let out = std::process::Command::new("python3")
        .args(["-c", py])
        .arg(&s.dir)
        .arg(clients)
        .arg(FAR)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with("refused:"), "{out:?}");
    assert!(!last_active(&s).starts_with("9999"), "{}", last_active(&s));
    // `force_time` still stores a future time on purpose, and a `clock`
    // parameter moves the bound as `$AGENTLOG_NOW` does for the CLI.
    let r = c.call(json!({"id": 4, "method": "heartbeat",
        "params": {"name": "w1", "at": "2031-01-01T00:00:00Z", "clock": "2031-01-01T00:00:00Z"}}));
    assert!(r["result"]["lsn"].is_u64(), "{r}");
    let r = c.call(json!({"id": 5, "method": "heartbeat",
        "params": {"name": "w1", "at": "2032-01-01T00:00:00Z", "force_time": true}}));
    assert!(r["result"]["lsn"].is_u64(), "{r}");
    assert!(last_active(&s).starts_with("2032-01-01"));
}
