//! Attach through the daemon (issue 29): a lease's client is bound to the
//! peer's uid, an observer uid sees its `actions` and cannot renew or
//! release another uid's lease, `watch` changes report lease changes, and
//! reachability probes record an outage of a real HTTP server that stops
//! and starts with exactly two events (and a successful attach ends one).
//! The uid tests run the CLI as uid 65534 (`nobody`); they need root.

use crate::support::daemon::{bin, eventually, register, Conn, Daemon, Store};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const NOBODY: u32 = 65534;

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

fn as_nobody(s: &Store, args: &[&str]) -> Output {
    bin()
        .arg("--dir")
        .arg(&s.dir)
        .args(args)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn events(s: &Store) -> Vec<Value> {
    s.ok(&["--json", "log"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_kind(s: &Store, kind: &str) -> Vec<Value> {
    events(s)
        .into_iter()
        .filter(|e| e["kind"] == kind)
        .collect()
}

#[test]
fn an_observer_uid_gets_its_own_actions_and_cannot_renew_or_release_another_uids_lease() {
    needs_root();
    let s = Store::new();
    s.ok(&["register", "w1", "--provider", "claude", "--cwd", "/w"]);
    let _d = Daemon::start(&s.dir, &[]);
    open_up(&s);
    // Root (the daemon's owner) controls and observes.
    s.ok(&["attach", "w1", "--controller", "--client", "ui"]);
    s.ok(&["attach", "w1", "--observer", "--client", "root-view"]);

    // Nobody may observe: its lease is bound to its uid.
    let out = as_nobody(&s, &["attach", "w1", "--observer", "--client", "viewer"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = as_nobody(&s, &["--json", "show", "w1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["actions"], json!(["observe"]), "{seen}");
    let viewer = seen["observers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["client"] == "viewer")
        .cloned()
        .unwrap();
    assert_eq!(viewer["uid"], json!(NOBODY));
    assert_eq!(seen["owner"]["controller"]["client"], "ui");
    assert_eq!(seen["owner"]["controller"]["uid"], 0);
    // The same read by root: it holds the controller lease and owns the daemon.
    let mine: Value = serde_json::from_str(&s.ok(&["--json", "show", "w1"])).unwrap();
    assert_eq!(
        mine["actions"],
        json!(["observe", "control", "write", "administer"])
    );
    let list: Value = serde_json::from_slice(&as_nobody(&s, &["--json", "list"]).stdout).unwrap();
    assert_eq!(list["agents"][0]["actions"], json!(["observe"]), "{list}");

    // Nobody renews its own lease, but not root's, and cannot release it.
    let out = as_nobody(&s, &["attach", "w1", "--observer", "--client", "viewer"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = as_nobody(&s, &["attach", "w1", "--observer", "--client", "root-view"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("is bound to uid 0; uid 65534 may not renew or release it"),
        "{}",
        stderr(&out)
    );
    let out = as_nobody(&s, &["detach", "w1", "--client", "ui"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("bound to uid 0"), "{}", stderr(&out));
    // A controller lease needs write access.
    let out = as_nobody(&s, &["attach", "w1", "--controller", "--client", "mine"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("may only observe"),
        "{}",
        stderr(&out)
    );

    // Root administers: it may release nobody's lease.
    s.ok(&["detach", "w1", "--client", "viewer"]);
    let renewed = of_kind(&s, "LeaseRenewed");
    assert_eq!(renewed.len(), 1, "{renewed:?}");
    assert_eq!(renewed[0]["origin"]["uid"], json!(NOBODY));
    let released = of_kind(&s, "LeaseReleased");
    assert_eq!(
        released[0]["event"]["Runtime"]["LeaseReleased"]["by"],
        json!({"peer": {"uid": 0}})
    );
}

#[test]
fn watch_changes_report_lease_changes_as_updates() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &[]);
    let mut w = Conn::connect(&s.dir);
    let r = w.call(json!({"id": "w", "method": "watch", "params": {"changes": true}}));
    assert_eq!(r["result"]["watching"], json!(true), "{r}");
    let mut c = Conn::connect(&s.dir);
    register(&mut c, "w1");
    s.ok(&["attach", "w1", "--observer", "--client", "o1"]);
    s.ok(&["attach", "w1", "--controller", "--client", "c1"]);
    s.ok(&["detach", "w1", "--client", "o1"]);
    let mut seen = Vec::new();
    for _ in 0..4 {
        let ch = w.recv().unwrap()["change"].clone();
        let observers: Vec<String> = ch["row"]["observers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["client"].as_str().unwrap().to_string())
            .collect();
        seen.push((
            ch["type"].as_str().unwrap().to_string(),
            ch["row"]["owner"]["controller"]["client"].clone(),
            observers,
        ));
    }
    assert_eq!(
        seen,
        vec![
            ("added".into(), Value::Null, vec![]),
            ("updated".into(), Value::Null, vec!["o1".to_string()]),
            ("updated".into(), json!("c1"), vec!["o1".to_string()]),
            ("updated".into(), json!("c1"), vec![]),
        ]
    );
}

/// A real HTTP server on `listener`'s port answering every request with
/// 200 until `stop` is set; dropping the listener when it stops.
fn serve_http(listener: TcpListener, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    conn.set_nonblocking(false).unwrap();
                    conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                    let mut buf = [0u8; 1024];
                    let _ = conn.read(&mut buf);
                    let _ = conn.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("accept: {e}"),
            }
        }
    })
}

fn metric(body: &str, name: &str) -> f64 {
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{body}"))
}

#[test]
fn an_outage_of_a_real_http_server_that_stops_and_starts_is_two_events() {
    let s = Store::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let server = serve_http(listener, stop.clone());
    let endpoint = format!("http://{addr}/health");
    s.ok(&[
        "register",
        "w1",
        "--provider",
        "claude",
        "--cwd",
        "/w",
        "--endpoint",
        &endpoint,
    ]);
    let _d = Daemon::start(
        &s.dir,
        &[
            "--probe-every-ms",
            "50",
            "--probe-timeout-ms",
            "500",
            "--http",
            "127.0.0.1:0",
        ],
    );
    let web = {
        let mut c = Conn::connect(&s.dir);
        let hello = c.call(json!({"id": 1, "method": "hello"}));
        format!("http://{}", hello["result"]["http"].as_str().unwrap())
    };
    let metrics = || -> String {
        ureq::get(&format!("{web}/metrics"))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap()
    };
    // Answering: a few rounds, no outage.
    std::thread::sleep(Duration::from_millis(300));
    assert!(of_kind(&s, "OutageStarted").is_empty());

    // It stops: one event at the first failure, none for the ones after.
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    eventually("the outage to start", || {
        (!of_kind(&s, "OutageStarted").is_empty()).then_some(())
    });
    let show = eventually("several failed probes", || {
        let v: Value = serde_json::from_str(&s.ok(&["--json", "show", "w1"])).unwrap();
        (v["outage"]["failures"].as_u64()? >= 4).then_some(v)
    });
    assert_eq!(show["outage"]["open"], json!(true), "{show}");
    assert_eq!(show["outage"]["endpoint"], json!(endpoint));
    assert_eq!(metric(&metrics(), "agentlog_outages_open"), 1.0);
    assert_eq!(of_kind(&s, "OutageStarted").len(), 1);
    let failed_so_far = show["outage"]["failures"].as_u64().unwrap();

    // It starts again on the same port: the outage ends, with its count.
    let listener = TcpListener::bind(addr).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let server = serve_http(listener, stop.clone());
    let ended = eventually("the outage to end", || {
        of_kind(&s, "OutageEnded").into_iter().next()
    });
    let body = &ended["event"]["Runtime"]["OutageEnded"];
    assert_eq!(body["ended_by"], "probe");
    assert!(
        body["failures"].as_u64().unwrap() >= failed_so_far,
        "{ended}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let outage_events: Vec<Value> = events(&s)
        .into_iter()
        .filter(|e| e["kind"].as_str().unwrap().starts_with("Outage"))
        .collect();
    assert_eq!(outage_events.len(), 2, "{outage_events:?}");
    let show: Value = serde_json::from_str(&s.ok(&["--json", "show", "w1"])).unwrap();
    assert_eq!(show["outage"]["open"], json!(false));
    assert_eq!(show["outage"]["ended_by"], json!("probe"));
    let text = metrics();
    assert_eq!(metric(&text, "agentlog_outages_open"), 0.0);
    assert!(metric(&text, "agentlog_probe_failures_total") >= failed_so_far as f64);
    let list: Value = serde_json::from_str(&s.ok(&["--json", "list"])).unwrap();
    assert_eq!(list["agents"][0]["outage"]["failures"], body["failures"]);
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
}

#[test]
fn a_successful_attach_ends_an_outage() {
    let s = Store::new();
    let gone = s.tmp.path().join("nobody-listens.sock");
    let endpoint = format!("unix:{}", gone.display());
    s.ok(&[
        "register",
        "w1",
        "--provider",
        "claude",
        "--cwd",
        "/w",
        "--endpoint",
        &endpoint,
    ]);
    let _d = Daemon::start(&s.dir, &["--probe-every-ms", "3600000"]);
    eventually("the outage to start", || {
        (!of_kind(&s, "OutageStarted").is_empty()).then_some(())
    });
    s.ok(&["attach", "w1", "--observer", "--client", "ui"]);
    let kinds: Vec<String> = events(&s)
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "AgentRegistered",
            "EndpointSet",
            "OutageStarted",
            "LeaseAcquired",
            "OutageEnded"
        ]
    );
    let ended = of_kind(&s, "OutageEnded");
    assert_eq!(
        ended[0]["event"]["Runtime"]["OutageEnded"]["ended_by"],
        "attach"
    );
}
