//! `watch`: history then live, exactly once and in LSN order across
//! reconnects; filters; registry changes; stream errors that do not end the
//! stream; a lagging watcher gets `lagged` and never stalls writers.

mod daemon_support;

use daemon_support::{register, Conn, Daemon, Store, NOW};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Sends `n` heartbeats of `agent`, pipelined 500 at a time (a client that
/// writes without reading fills both socket buffers), and waits for their
/// answers.
fn heartbeats(c: &mut Conn, agent: &str, n: usize) {
    let mut left = n;
    while left > 0 {
        let k = left.min(500);
        let mut batch = Vec::new();
        for i in 0..k {
            let req = json!({"id": i, "method": "heartbeat", "params": {"name": agent, "at": NOW}});
            batch.extend(serde_json::to_vec(&req).unwrap());
            batch.push(b'\n');
        }
        c.send_raw(&batch);
        for _ in 0..k {
            let r = c.recv().unwrap();
            assert!(r["result"]["lsn"].is_u64(), "{r}");
        }
        left -= k;
    }
}

fn watch(dir: &std::path::Path, params: Value) -> Conn {
    let mut c = Conn::connect(dir);
    let r = c.call(json!({"id": "w", "method": "watch", "params": params}));
    assert_eq!(r["result"]["watching"], json!(true), "{r}");
    c
}

#[test]
fn a_watcher_that_reconnects_with_from_sees_every_event_once_in_order() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &[]);
    let mut w = Conn::connect(&s.dir);
    register(&mut w, "w1");
    heartbeats(&mut w, "w1", 500); // history: lsn 1..=501
    let total = 3001;
    let dir = s.dir.clone();
    let writer = std::thread::spawn(move || {
        let mut c = Conn::connect(&dir);
        for _ in 0..5 {
            heartbeats(&mut c, "w1", 500); // live: up to lsn 3001
        }
    });
    let mut seen = Vec::new();
    let mut from = 1;
    // Reconnect after every 700 events.
    while seen.len() < total {
        let mut c = watch(&s.dir, json!({"from": from}));
        for _ in 0..700 {
            if seen.len() == total {
                break;
            }
            let r = c.recv().unwrap();
            assert_eq!(r["id"], json!("w"));
            let lsn = r["event"]["lsn"].as_u64().unwrap_or_else(|| panic!("{r}"));
            seen.push(lsn);
            from = lsn + 1;
        }
    }
    writer.join().unwrap();
    let expected: Vec<u64> = (1..=total as u64).collect();
    assert_eq!(seen, expected);
}

#[test]
fn filters_by_agent_and_kind() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &[]);
    let mut c = Conn::connect(&s.dir);
    register(&mut c, "a");
    register(&mut c, "b");
    heartbeats(&mut c, "a", 3);
    heartbeats(&mut c, "b", 3);
    c.call(json!({"method": "status", "params": {"name": "b", "status": "busy"}}));
    let mut w = watch(
        &s.dir,
        json!({"from": 1, "agent": "b", "kinds": ["Heartbeat", "StatusChanged"]}),
    );
    let kinds: Vec<(u64, String)> = (0..4)
        .map(|_| {
            let e = w.recv().unwrap()["event"].clone();
            assert!(e["what"].as_str().unwrap().contains('b') || e["kind"] == "StatusChanged");
            (
                e["lsn"].as_u64().unwrap(),
                e["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            (6, "Heartbeat".into()),
            (7, "Heartbeat".into()),
            (8, "Heartbeat".into()),
            (9, "StatusChanged".into())
        ]
    );
    let bad = Conn::connect(&s.dir).call(json!({"method": "watch", "params": {"kinds": ["Nap"]}}));
    assert_eq!(bad["error"]["code"], json!("usage"));
}

#[test]
fn changes_stream_added_updated_removed() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &[]);
    let mut w = watch(&s.dir, json!({"changes": true}));
    let mut c = Conn::connect(&s.dir);
    register(&mut c, "w1");
    c.call(json!({"method": "status", "params": {"name": "w1", "status": "busy", "at": NOW, "clock": NOW}}));
    c.call(json!({"method": "remove", "params": {"name": "w1", "at": NOW, "clock": NOW}}));
    let mut changes = Vec::new();
    for _ in 0..3 {
        let ch = w.recv().unwrap()["change"].clone();
        changes.push((
            ch["type"].as_str().unwrap().to_string(),
            ch["row"]["status"].clone(),
        ));
    }
    assert_eq!(
        changes,
        vec![
            ("added".into(), json!("live")),
            ("updated".into(), json!("busy")),
            ("removed".into(), Value::Null)
        ]
    );
}

#[test]
fn a_lagging_watcher_gets_lagged_and_never_stalls_writers() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &["--watch-buffer", "16"]);
    let mut c = Conn::connect(&s.dir);
    register(&mut c, "w1");
    // A watcher that does not read.
    let mut w = watch(&s.dir, json!({"from": 1}));
    let n = 30_000;
    let started = Instant::now();
    heartbeats(&mut c, "w1", n);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "writers stalled: {took:?}");
    daemon_support::eventually("the watcher to lag", || {
        let h = c.call(json!({"method": "hello"}));
        (h["result"]["watchers_lagged"] == json!(1)).then_some(())
    });
    // It gets what was buffered, in order, then `lagged` with the LSN after
    // the last one, then the end of the stream.
    let mut next = 1;
    let resume = loop {
        let r = w.recv().expect("stream ends with lagged");
        if let Some(l) = r.get("lagged") {
            break l["resume_from"].as_u64().unwrap();
        }
        assert_eq!(r["event"]["lsn"], json!(next));
        next += 1;
    };
    assert_eq!(resume, next);
    assert!(resume < n as u64, "the watcher should have lagged");
    assert!(w.recv().is_none());
    // Resuming from there sees the rest exactly once.
    let mut w = watch(&s.dir, json!({"from": resume}));
    for lsn in resume..=(n as u64 + 1) {
        assert_eq!(w.recv().unwrap()["event"]["lsn"], json!(lsn));
    }
}

#[test]
fn the_cli_watch_prints_the_stream() {
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &[]);
    s.ok(&["register", "w1", "--provider", "claude", "--cwd", "/w"]);
    s.ok(&["heartbeat", "w1"]);
    let mut child = daemon_support::bin()
        .arg("--dir")
        .arg(&s.dir)
        .args(["--json", "watch", "--from", "1", "--agent", "w1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    for _ in 0..2 {
        let mut l = String::new();
        std::io::BufRead::read_line(&mut out, &mut l).unwrap();
        lines.push(serde_json::from_str::<Value>(&l).unwrap());
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(lines[0]["event"]["kind"], json!("AgentRegistered"));
    assert_eq!(lines[1]["event"]["lsn"], json!(2));
    // Without a daemon, watch says so.
    let other = Store::new();
    let out = other.run(&["watch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a running daemon"));
}
