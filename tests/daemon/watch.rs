//! `watch`: history then live, exactly once and in LSN order across
//! reconnects; filters; registry changes; stream errors that do not end the
//! stream; a lagging watcher gets `lagged` and never stalls writers.

use crate::support::daemon;

use crate::support::daemon::{bin, eventually, register, Conn, Daemon, Store, NOW};
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
    daemon::eventually("the watcher to lag", || {
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
    let mut child = daemon::bin()
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

/// Reads the daemon holds waiting for mail (`hello`'s `reads_waiting`).
fn reads_waiting(dir: &std::path::Path) -> u64 {
    let hello = Conn::connect(dir).call(json!({"method": "hello"}));
    hello["result"]["reads_waiting"].as_u64().unwrap()
}

/// A store with agents `a` and `b`.
fn mailboxes() -> Store {
    let s = Store::new();
    for name in ["a", "b"] {
        s.ok(&["register", name, "--provider", "claude", "--cwd", "/w"]);
    }
    s
}

#[test]
fn a_waiting_read_through_the_daemon_is_woken_by_a_post_from_another_process() {
    let s = mailboxes();
    let _d = Daemon::start(&s.dir, &[]);
    let started = Instant::now();
    let waiter = bin()
        .arg("--dir")
        .arg(&s.dir)
        .args(["--json", "read", "b", "--wait", "120"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Post only once the daemon holds the read waiting, so the post wakes it.
    eventually("the read to wait in the daemon", || {
        (reads_waiting(&s.dir) == 1).then_some(())
    });
    let posted: Value =
        serde_json::from_str(&s.ok(&["--json", "post", "--from", "a", "--to", "b", "wake up"]))
            .unwrap();
    let out = waiter.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["messages"][0]["id"], posted["id"], "{v}");
    assert_eq!(v["messages"][0]["body"], "wake up");
    assert_eq!(v["timed_out"], false);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "woken long before its timeout"
    );
    assert_eq!(reads_waiting(&s.dir), 0);
    // It was marked read: nothing is left for the next reader.
    let again: Value = serde_json::from_str(&s.ok(&["--json", "read", "b"])).unwrap();
    assert_eq!(again["messages"], json!([]));
}

#[test]
fn a_waiting_read_through_the_daemon_times_out_exactly_as_the_direct_one() {
    let s = mailboxes();
    let direct_json = s.ok(&["--json", "read", "b", "--wait", "0.2"]);
    let direct_text = s.ok(&["read", "b", "--wait", "0.05"]);
    let direct_unknown = s.run(&["read", "nobody", "--wait", "60"]);
    let _d = Daemon::start(&s.dir, &[]);
    let started = Instant::now();
    let served_json = s.ok(&["--json", "read", "b", "--wait", "0.3"]);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "the read waited its time"
    );
    let v: Value = serde_json::from_str(&served_json).unwrap();
    assert_eq!(v["timed_out"], true, "{v}");
    assert_eq!(v["messages"], json!([]));
    assert_eq!(served_json, direct_json);
    assert_eq!(s.ok(&["read", "b", "--wait", "0.05"]), direct_text);
    assert!(direct_text.contains("timed out"), "{direct_text}");
    // An unknown agent fails at once, with the direct path's message.
    let started = Instant::now();
    let unknown = s.run(&["read", "nobody", "--wait", "60"]);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(
        (unknown.status.code(), &unknown.stderr),
        (direct_unknown.status.code(), &direct_unknown.stderr)
    );
    assert_eq!(unknown.status.code(), Some(1));
}

#[test]
fn of_two_waiting_reads_one_gets_the_mail_and_the_other_waits_on() {
    let s = mailboxes();
    let d = Daemon::start(&s.dir, &[]);
    let read = |wait: f64| json!({"id": 1, "method": "read", "params": {"name": "b", "wait": wait, "at": NOW, "clock": NOW}});
    let mut first = Conn::connect(&s.dir);
    let mut second = Conn::connect(&s.dir);
    first.send(&read(1.5));
    second.send(&read(1.5));
    eventually("both reads to wait", || {
        (reads_waiting(&s.dir) == 2).then_some(())
    });
    let mut poster = Conn::connect(&s.dir);
    let posted = poster.call(json!({"id": 2, "method": "post", "params": {"from": "a", "to": "b", "text": "only one", "at": NOW, "clock": NOW}}));
    let id = posted["result"]["id"].clone();
    assert!(id.is_u64(), "{posted}");
    let (r1, r2) = (first.recv().unwrap(), second.recv().unwrap());
    let mut got: Vec<_> = [&r1, &r2]
        .iter()
        .map(|r| {
            (
                r["result"]["timed_out"].clone(),
                r["result"]["messages"].clone(),
            )
        })
        .collect();
    got.sort_by_key(|(t, _)| t.to_string());
    assert_eq!(got[0].0, json!(false), "{r1} {r2}");
    assert_eq!(got[0].1[0]["id"], id);
    assert_eq!(
        got[1],
        (json!(true), json!([])),
        "the other timed out empty"
    );
    // A shutdown ends a wait at once, with a reason.
    first.send(&read(120.0));
    eventually("the read to wait", || {
        (reads_waiting(&s.dir) == 1).then_some(())
    });
    let started = Instant::now();
    let (status, err) = d.stop();
    assert!(status.success(), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
    let r = first.recv().unwrap();
    assert_eq!(r["error"]["code"], "shutting_down", "{r}");
}

#[test]
fn a_waiting_read_whose_client_left_marks_nothing_read() {
    let s = mailboxes();
    let _d = Daemon::start(&s.dir, &[]);
    let mut control = Conn::connect(&s.dir);
    let mut gone = Conn::connect(&s.dir);
    gone.send(&json!({"id": 1, "method": "read", "params": {"name": "b", "wait": 60, "at": NOW, "clock": NOW}}));
    eventually("the read to wait", || {
        (reads_waiting(&s.dir) == 1).then_some(())
    });
    drop(gone); // as a Ctrl-C'd `read --wait` does
    let posted = control.call(json!({"id": 2, "method": "post", "params": {"from": "a", "to": "b", "text": "keep me", "at": NOW, "clock": NOW}}));
    // The woken read ends and its connection with it.
    eventually("the left client's connection to end", || {
        let h = control.call(json!({"method": "hello"}));
        (h["result"]["connections"] == json!(1)).then_some(())
    });
    let page = control
        .call(json!({"id": 3, "method": "read", "params": {"name": "b", "at": NOW, "clock": NOW}}));
    assert_eq!(
        page["result"]["messages"][0]["id"], posted["result"]["id"],
        "the mail stayed unread: {page}"
    );
}

/// The library's client reads a `latest` watch whole: its first look's
/// `present` line is an item, and the stream goes on after it (it once
/// ended there, "unexpected watch line").
#[test]
fn the_rust_client_reads_a_latest_watch_past_its_present_line() {
    use agentlog::daemon::client::{Client, WatchItem};
    let s = Store::new();
    let _d = Daemon::start(&s.dir, &[]);
    let mut c = Conn::connect(&s.dir);
    register(&mut c, "w1");
    let mut w = Client::connect(&s.dir)
        .unwrap()
        .watch(json!({"changes": true, "latest": true}))
        .unwrap();
    let mut present = None;
    let mut busy = false;
    let mut asked = false;
    while !busy {
        match w.next().expect("the stream goes on").unwrap() {
            WatchItem::Present(p) => present = Some(p),
            WatchItem::Change(ch) => busy = ch["row"]["status"] == "busy",
            other => panic!("unexpected item {other:?}"),
        }
        if present.is_some() && !asked {
            asked = true;
            c.call(json!({"method": "status", "params": {"name": "w1", "status": "busy", "at": NOW, "clock": NOW}}));
        }
    }
    let present = present.expect("a present item");
    assert_eq!(present["agents"], json!(["w1"]), "{present}");
}

/// The daemon's threads now (`/proc/<pid>/task`).
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count()
}

#[test]
fn sixty_four_watchers_share_a_bounded_set_of_reader_threads_and_each_gets_every_event() {
    let s = Store::new();
    let d = Daemon::start(&s.dir, &[]);
    let pid = d.pid();
    let mut w = Conn::connect(&s.dir);
    register(&mut w, "t1");
    // The threads of a daemon serving one writer and one watcher.
    let mut first = watch(&s.dir, json!({}));
    heartbeats(&mut w, "t1", 200);
    for _ in 0..200 {
        let r = first.recv().unwrap();
        assert!(r["event"]["lsn"].is_u64(), "{r}");
    }
    let one = threads(pid);

    // 63 more, some filtered; each step of each watcher is a log read off
    // the async workers.
    let from = 202;
    let mut watchers: Vec<Conn> = (0..63)
        .map(|i| match i % 3 {
            0 => watch(&s.dir, json!({"from": from, "agent": "t1"})),
            1 => watch(&s.dir, json!({"from": from, "kinds": ["Heartbeat"]})),
            _ => watch(&s.dir, json!({"from": from})),
        })
        .collect();
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(threads(pid), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    // One commit at a time, so every watcher wakes for each.
    let n = 300;
    for _ in 0..n {
        heartbeats(&mut w, "t1", 1);
    }
    for (i, c) in watchers.iter_mut().enumerate() {
        for k in 0..n {
            let r = c.recv().unwrap();
            let lsn = r["event"]["lsn"].as_u64();
            assert_eq!(lsn, Some(from + k as u64), "watcher {i}: {r}");
        }
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    sampler.join().unwrap();
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("daemon threads: {one} with one watcher, at most {peak} with 64");
    // The readers are a fixed pool; a few threads of slack for the
    // daemon's own duties (publish, snapshot) that may start meanwhile.
    assert!(
        peak <= one + 4,
        "{peak} threads with 64 watchers, {one} with one"
    );
    drop(d);
}
