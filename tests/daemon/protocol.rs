//! The daemon protocol over a raw socket (PROTOCOL.md): framing errors and
//! limits, pipelining, half-closed connections, many connections, and the
//! daemon's life (second serve refused, stale socket, graceful shutdown).

use crate::support::daemon;

use crate::support::daemon::{bin, eventually, register, Conn, Daemon, Store, NOW};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;

fn code(resp: &Value) -> &str {
    resp["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error: {resp}"))
}

#[test]
fn malformed_json_and_unknown_methods_are_answered_and_the_connection_stays_open() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &[]);
    let mut c = Conn::connect(&s.dir);
    c.send_raw(b"{not json\n");
    let r = c.recv().unwrap();
    assert_eq!((code(&r), &r["id"]), ("parse_error", &Value::Null));
    c.send_raw(b"[1,2]\n");
    assert_eq!(code(&c.recv().unwrap()), "parse_error");
    let r = c.call(json!({"id": 7}));
    assert_eq!((code(&r), &r["id"]), ("bad_request", &json!(7)));
    let r = c.call(json!({"id": "u", "method": "frobnicate"}));
    assert_eq!((code(&r), &r["id"]), ("unknown_method", &json!("u")));
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("frobnicate"));
    // Parameters the CLI would refuse: the CLI's message, exit 2.
    let r =
        c.call(json!({"id": 1, "method": "status", "params": {"name": "w", "status": "sleepy"}}));
    assert_eq!((code(&r), &r["error"]["exit"]), ("usage", &json!(2)));
    let r =
        c.call(json!({"id": 2, "method": "heartbeat", "params": {"name": "w", "colour": "red"}}));
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("unknown parameter `colour`"));
    // A refused command: the registry's message, exit 1.
    let r = c.call(json!({"id": 3, "method": "heartbeat", "params": {"name": "ghost"}}));
    assert_eq!((code(&r), &r["error"]["exit"]), ("refused", &json!(1)));
    assert!(r["error"]["message"].as_str().unwrap().contains("ghost"));
    // Still open and working.
    let r = c.call(json!({"id": 9, "method": "hello"}));
    assert_eq!(r["result"]["protocol"], json!(1));
    assert_eq!(r["id"], json!(9));
}

#[test]
fn an_over_long_line_gets_an_error_and_the_connection_closes() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &["--max-line", "1024"]);
    let mut c = Conn::connect(&s.dir);
    // Just under the limit is fine.
    let pad = "x".repeat(900);
    let r = c.call(json!({"id": 1, "method": "hello", "pad": pad}));
    assert_eq!(r["result"]["protocol"], json!(1));
    let mut long = vec![b'a'; 4096];
    long.push(b'\n');
    c.send_raw(&long);
    let r = c.recv().unwrap();
    assert_eq!(code(&r), "line_too_long");
    assert!(
        c.recv().is_none(),
        "connection must close after an over-long line"
    );
    // Other clients are unaffected.
    let mut other = Conn::connect(&s.dir);
    assert_eq!(
        other.call(json!({"method": "hello"}))["result"]["protocol"],
        json!(1)
    );
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &[]);
    let mut c = Conn::connect(&s.dir);
    assert!(register(&mut c, "w1")["result"]["lsn"].is_u64());
    let n = 2000;
    let mut batch = Vec::new();
    for i in 0..n {
        let req = if i % 500 == 250 {
            json!({"id": i, "method": "get", "params": {"name": "w1"}})
        } else {
            json!({"id": i, "method": "heartbeat", "params": {"name": "w1", "at": NOW}})
        };
        batch.extend(serde_json::to_vec(&req).unwrap());
        batch.push(b'\n');
    }
    c.send_raw(&batch);
    let mut last = 1;
    for i in 0..n {
        let r = c.recv().unwrap();
        assert_eq!(r["id"], json!(i), "responses out of order");
        if i % 500 == 250 {
            assert_eq!(r["result"]["name"], json!("w1"));
        } else {
            let lsn = r["result"]["lsn"].as_u64().unwrap();
            assert_eq!(lsn, last + 1);
            last = lsn;
        }
    }
}

#[test]
fn a_half_closed_connection_gets_every_answer_then_eof() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &[]);
    let mut c = Conn::connect(&s.dir);
    register(&mut c, "w1");
    for i in 0..10 {
        c.send(&json!({"id": i, "method": "heartbeat", "params": {"name": "w1"}}));
    }
    // The last request has no newline: it still counts.
    c.send_raw(br#"{"id":10,"method":"hello"}"#);
    c.writer.shutdown(std::net::Shutdown::Write).unwrap();
    for i in 0..=10 {
        assert_eq!(c.recv().unwrap()["id"], json!(i));
    }
    assert!(c.recv().is_none());
}

fn raise_nofile(n: u64) {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    let max = lim.maximum.unwrap_or(u64::MAX);
    if lim.current.is_some_and(|c| c < n) {
        lim.current = Some(n.min(max));
        setrlimit(Resource::Nofile, lim).unwrap();
    }
}

#[test]
fn a_thousand_concurrent_connections_are_all_served() {
    raise_nofile(4096);
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &[]);
    register(&mut Conn::connect(&s.dir), "w1");
    let mut conns: Vec<Conn> = (0..1000).map(|_| Conn::connect(&s.dir)).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        c.send(&json!({"id": i, "method": "heartbeat", "params": {"name": "w1"}}));
    }
    let mut lsns = Vec::new();
    for (i, c) in conns.iter_mut().enumerate() {
        let r = c.recv().unwrap();
        assert_eq!(r["id"], json!(i));
        lsns.push(r["result"]["lsn"].as_u64().unwrap());
    }
    lsns.sort();
    lsns.dedup();
    assert_eq!(lsns.len(), 1000, "every heartbeat got its own LSN");
    let hello = conns[0].call(json!({"method": "hello"}));
    assert!(hello["result"]["connections"].as_u64().unwrap() >= 1000);
}

#[test]
fn connections_over_the_limit_are_refused_and_idle_ones_closed() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &["--max-connections", "3", "--idle-timeout", "1"]);
    let mut first = Conn::connect(&s.dir);
    // The start-up probe's connection may not be closed on the server yet.
    daemon::eventually("only this connection to be open", || {
        let h = first.call(json!({"method": "hello"}));
        (h["result"]["connections"] == json!(1)).then_some(())
    });
    let mut held = vec![first, Conn::connect(&s.dir), Conn::connect(&s.dir)];
    for c in &mut held {
        assert_eq!(
            c.call(json!({"method": "hello"}))["result"]["protocol"],
            json!(1)
        );
    }
    let mut extra = Conn::connect(&s.dir);
    let r = extra.recv().unwrap();
    assert_eq!(code(&r), "too_many_connections");
    assert!(extra.recv().is_none());
    // The held ones idle out (no request for 1 s) and are closed with a reason.
    for c in &mut held {
        let r = c.recv().unwrap();
        assert_eq!(code(&r), "idle_timeout");
        assert!(c.recv().is_none());
    }
    // Then there is room again.
    let mut c = eventually("a free connection slot", || {
        let mut c = Conn::connect(&s.dir);
        use std::io::Write;
        c.writer.write_all(b"{\"method\":\"hello\"}\n").ok()?;
        c.recv()?.get("result").is_some().then_some(c)
    });
    assert_eq!(
        c.call(json!({"method": "hello"}))["result"]["protocol"],
        json!(1)
    );
}

#[test]
fn a_second_serve_is_refused_and_names_the_pid() {
    let s = Store::new();
    let d = Daemon::start(&s.dir, &[]);
    let out = s.run(&["serve"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("pid {}", d.pid())), "{err}");
    // The first one still serves.
    assert_eq!(
        Conn::connect(&s.dir).call(json!({"method": "hello"}))["result"]["pid"],
        json!(d.pid())
    );
}

#[test]
fn socket_and_directory_are_private() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &[]);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&s.dir), 0o700);
    assert_eq!(mode(&s.socket()), 0o600);
}

#[test]
fn a_stale_socket_is_never_trusted_and_is_replaced() {
    let s = Store::new();
    let d = Daemon::start(&s.dir, &[]);
    register(&mut Conn::connect(&s.dir), "w1");
    d.kill();
    assert!(s.socket().exists(), "kill -9 leaves the socket file");
    assert!(UnixStream::connect(s.socket()).is_err());
    // The CLI sees "no daemon" (connection refused) and works directly.
    s.ok(&["heartbeat", "w1"]);
    let d2 = Daemon::start(&s.dir, &[]);
    let mut c = Conn::connect(&s.dir);
    let hello = c.call(json!({"method": "hello"}));
    assert_eq!(hello["result"]["pid"], json!(d2.pid()));
    assert_eq!(hello["result"]["last_lsn"], json!(2));
}

#[test]
fn graceful_shutdown_leaves_a_clean_store_and_a_fresh_registry_json() {
    let s = Store::new();
    let d = Daemon::start(&s.dir, &["--publish-every-ms", "0"]);
    let mut c = Conn::connect(&s.dir);
    register(&mut c, "w1");
    register(&mut c, "w2");
    let r = c.call(json!({"id": 1, "method": "status", "params": {"name": "w2", "status": "busy", "message": "building"}}));
    assert!(r["result"]["lsn"].is_u64(), "{r}");
    // A client still connected when the daemon stops.
    let (status, err) = d.stop();
    assert!(status.success(), "serve exited {status}: {err}");
    assert!(c.recv().is_none_or(|r| code(&r) == "shutting_down"));
    assert!(!s.socket().exists(), "the socket is removed");
    let reg: Value =
        serde_json::from_slice(&std::fs::read(s.dir.join("registry.json")).unwrap()).unwrap();
    let text = reg.to_string();
    assert!(
        text.contains("\"w1\"") && text.contains("\"busy\""),
        "{text}"
    );
    assert!(s.ok(&["verify"]).contains("clean"));
    assert!(std::fs::read_dir(s.dir.join("snapshots")).unwrap().count() >= 1);
    // The store opens directly afterwards (the lock was released).
    s.ok(&["--no-daemon", "heartbeat", "w1"]);
}

#[test]
fn the_cli_goes_through_the_daemon_with_the_same_output() {
    let s = Store::new();
    s.ok(&["register", "w1", "--provider", "claude", "--cwd", "/w"]);
    let direct_list = s.ok(&["list"]);
    let direct_json = s.ok(&["--json", "list"]);
    let direct_err = s.run(&["heartbeat", "ghost"]);
    let d = Daemon::start(&s.dir, &[]);
    assert_eq!(s.ok(&["list"]), direct_list);
    assert_eq!(s.ok(&["--json", "list"]), direct_json);
    let err = s.run(&["heartbeat", "ghost"]);
    assert_eq!(
        (err.status.code(), &err.stderr),
        (direct_err.status.code(), &direct_err.stderr)
    );
    // A write through the daemon records the client's pid.
    let child = bin()
        .arg("--dir")
        .arg(&s.dir)
        .args(["heartbeat", "w1"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    assert!(child.wait_with_output().unwrap().status.success());
    let log = s.ok(&["--json", "log", "--from", "2"]);
    let ev: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(ev["origin"], json!({"uid": 0, "pid": pid}));
    // --no-daemon waits for the lock, then gives up naming the holder.
    let out = s.run(&["--no-daemon", "--lock-timeout", "0.2", "heartbeat", "w1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("pid {}", d.pid())));
}
