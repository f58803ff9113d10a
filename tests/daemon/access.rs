//! Who may write (docs/behaviour.md §6): peers other than the daemon's uid and root only
//! observe unless `--allow-uid`/`--allow-gid` says otherwise, and every
//! event appended through the daemon records the peer's uid and pid.
//! The test runs the CLI as uid 65534 (`nobody`); it needs root.

use crate::support::daemon::{bin, Daemon, Store};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Output;

const NOBODY: u32 = 65534;

/// Fails (never skips) off root: an access test that passes by not running
/// proves nothing. CI runs as root.
fn needs_root() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test switches to uid {NOBODY} and needs root"
    );
}

/// Lets any uid reach the socket: the daemon, not the file mode, decides.
fn open_up(s: &Store) {
    std::fs::set_permissions(s.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&s.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(s.socket(), std::fs::Permissions::from_mode(0o666)).unwrap();
}

fn as_nobody(s: &Store, args: &[&str]) -> (Output, u32) {
    let child = bin()
        .arg("--dir")
        .arg(&s.dir)
        .args(args)
        .uid(NOBODY)
        .gid(NOBODY)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    (child.wait_with_output().unwrap(), pid)
}

#[test]
fn an_observer_reads_but_its_writes_are_refused() {
    needs_root();
    let s = Store::new();
    s.ok(&["register", "w1", "--provider", "claude", "--cwd", "/w"]);
    let _d = Daemon::start(&s.dir, &[]);
    open_up(&s);
    let (out, _) = as_nobody(&s, &["heartbeat", "w1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("uid 65534") && err.contains("may only observe"),
        "{err}"
    );
    assert_eq!(
        s.ok(&["--json", "log"]).lines().count(),
        1,
        "nothing appended"
    );
    // Reads work.
    let (out, _) = as_nobody(&s, &["list"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("w1"));
    let (out, _) = as_nobody(&s, &["audit", "w1"]);
    assert!(out.status.success(), "{out:?}");
    let (out, _) = as_nobody(&s, &["--json", "verify"]);
    assert!(out.status.success());
    // On the raw protocol: `hello` says the peer may not write, and a write
    // gets the stable code `forbidden` (PROTOCOL.md, "Errors").
    let talk = r#"
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rw")
for req in ({"id": 1, "method": "hello"},
            {"id": 2, "method": "heartbeat", "params": {"name": "w1"}}):
    f.write(json.dumps(req) + "\n"); f.flush(); print(f.readline().strip())
"#;
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(talk)
        .arg(s.socket())
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let replies: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies[0]["result"]["writer"], json!(false), "{replies:?}");
    assert_eq!(
        replies[0]["result"]["peer"]["uid"],
        json!(NOBODY),
        "{replies:?}"
    );
    assert_eq!(replies[1]["error"]["code"], "forbidden", "{replies:?}");
    assert_eq!(replies[1]["id"], 2, "{replies:?}");
}

#[test]
fn an_allowed_uid_writes_and_the_log_records_who_asked() {
    needs_root();
    let s = Store::new();
    s.ok(&["register", "w1", "--provider", "claude", "--cwd", "/w"]);
    let _d = Daemon::start(&s.dir, &["--allow-uid", &NOBODY.to_string()]);
    open_up(&s);
    let (out, pid) = as_nobody(&s, &["heartbeat", "w1"]);
    assert!(out.status.success(), "{out:?}");
    let log = s.ok(&["--json", "log"]);
    let events: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2);
    // The direct registration has no origin; the daemon's append has one.
    assert_eq!(events[0].get("origin"), None);
    assert_eq!(events[1]["origin"], json!({"uid": NOBODY, "pid": pid}));
    let text = s.ok(&["log"]);
    assert!(
        text.contains(&format!("[uid {NOBODY} pid {pid}]")),
        "{text}"
    );
}
