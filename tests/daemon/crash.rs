//! Crashes of the daemon: `agentlog serve` is killed with SIGKILL
//! 30 times while 8 client streams keep sending durable commands (`status`,
//! `post`, `register`), each command a real `agentlog` CLI process. Every
//! command a client saw acknowledged (exit 0 and its JSON answer) is logged.
//! After each kill the daemon is restarted on the stale socket it left (it
//! must replace it, never trust it), and then every acknowledged command so
//! far must be in the log (`log --json`, through the new daemon) and
//! `verify` must find the store clean.
//!
//! The kill lands at a different point of each round: after a varying number
//! of acknowledgements, while the other clients are mid-request. A command
//! caught by the kill fails (the connection closes) or, once the daemon is
//! gone, runs directly on the store (the socket refuses): both are what a
//! user would see, and a direct acknowledgement must persist just the same.

use crate::support::daemon::{bin, eventually, Daemon, Store};
use serde_json::Value;
use std::collections::HashSet;
use std::process::Output;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

const CLIENTS: usize = 8;
const KILLS: usize = 30;

/// One acknowledged command: the event kind it appended and the unique
/// token it carried (a status message, a message body, an agent name).
#[derive(Debug, Clone)]
struct Ack {
    kind: &'static str,
    token: String,
}

/// What the client streams share with the test.
#[derive(Default)]
struct Fleet {
    /// Whether clients may start commands (false while the daemon restarts).
    running: Mutex<bool>,
    resumed: Condvar,
    stop: AtomicBool,
    /// Commands started and not finished.
    in_flight: AtomicUsize,
    acks: Mutex<Vec<Ack>>,
    /// Failed commands' exit status and stderr (each must be the kill's doing).
    failures: Mutex<Vec<String>>,
}

impl Fleet {
    fn set_running(&self, on: bool) {
        *self.running.lock().unwrap() = on;
        self.resumed.notify_all();
    }

    /// Blocks until clients may run; false once the test stops them.
    fn wait_running(&self) -> bool {
        let mut on = self.running.lock().unwrap();
        while !*on && !self.stop.load(Ordering::Acquire) {
            on = self.resumed.wait(on).unwrap();
        }
        !self.stop.load(Ordering::Acquire)
    }

    fn acked(&self) -> usize {
        self.acks.lock().unwrap().len()
    }
}

/// Client `n`'s `seq`-th command: its arguments and what it appends.
fn command(n: usize, seq: u64) -> (Vec<String>, Ack) {
    let me = format!("w{n}");
    let token = format!("{me}-{seq}");
    let s = |x: &str| x.to_string();
    match seq % 3 {
        0 => (
            vec![s("status"), me, s("busy"), s("--message"), token.clone()],
            Ack {
                kind: "StatusChanged",
                token,
            },
        ),
        1 => (
            vec![
                s("post"),
                s("--from"),
                me,
                s("--to"),
                format!("w{}", (n + 1) % CLIENTS),
                token.clone(),
            ],
            Ack {
                kind: "MessagePosted",
                token,
            },
        ),
        _ => (
            vec![
                s("register"),
                token.clone(),
                s("--provider"),
                s("codex"),
                s("--cwd"),
                s("/w"),
            ],
            Ack {
                kind: "AgentRegistered",
                token,
            },
        ),
    }
}

/// Runs client `n` until stopped: one CLI process per command, logging each
/// acknowledged one.
fn client(fleet: &Fleet, store: &std::path::Path, n: usize) {
    let mut seq = 0u64;
    while fleet.wait_running() {
        let _counted = InFlight::start(&fleet.in_flight);
        // Paused between the check and here: this command does not start.
        if !*fleet.running.lock().unwrap() {
            continue;
        }
        seq += 1;
        let (args, ack) = command(n, seq);
        let out = bin()
            .arg("--dir")
            .arg(store)
            .arg("--json")
            .args(&args)
            .output()
            .expect("run agentlog");
        record(fleet, &args, ack, &out);
    }
}

/// Counts a command in flight until dropped (even by a failed assertion, so
/// the test reports it instead of waiting for the count).
struct InFlight<'a>(&'a AtomicUsize);

impl InFlight<'_> {
    fn start(n: &AtomicUsize) -> InFlight<'_> {
        n.fetch_add(1, Ordering::AcqRel);
        InFlight(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn record(fleet: &Fleet, args: &[String], ack: Ack, out: &Output) {
    if out.status.success() {
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "agentlog {args:?} exited 0 with no JSON answer ({e}): {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert!(
            answer["lsn"].is_u64() || answer["id"].is_u64(),
            "{args:?}: {answer}"
        );
        fleet.acks.lock().unwrap().push(ack);
    } else {
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        fleet
            .failures
            .lock()
            .unwrap()
            .push(format!("{args:?}: {}: {err}", out.status));
    }
}

/// Every token of `kind` found in the log's events.
fn logged(store: &Store) -> HashSet<(String, String)> {
    let log = store.ok(&["--json", "log"]);
    let mut found = HashSet::new();
    for line in log.lines() {
        let ev: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let kind = ev["kind"].as_str().unwrap_or_default().to_string();
        // The token is a whole string somewhere in the event's fields.
        let mut strings = Vec::new();
        collect_strings(&ev["event"], &mut strings);
        for s in strings {
            found.insert((kind.clone(), s));
        }
    }
    found
}

fn collect_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

/// Checks every acknowledged command is in the log and the store is clean.
#[track_caller]
fn check(store: &Store, fleet: &Fleet, round: usize) {
    let found = logged(store);
    let acks = fleet.acks.lock().unwrap().clone();
    let missing: Vec<_> = acks
        .iter()
        .filter(|a| !found.contains(&(a.kind.to_string(), a.token.clone())))
        .collect();
    assert!(
        missing.is_empty(),
        "after kill {round}: {} of {} acknowledged commands are missing: {missing:?}",
        missing.len(),
        acks.len()
    );
    let verify = store.ok(&["verify"]);
    assert!(verify.contains("clean"), "after kill {round}: {verify}");
}

#[test]
fn every_acknowledged_command_survives_thirty_kills_of_the_daemon() {
    let started = Instant::now();
    let store = Store::new();
    for n in 0..CLIENTS {
        store.ok(&[
            "register",
            &format!("w{n}"),
            "--provider",
            "claude",
            "--cwd",
            "/w",
        ]);
    }
    let fleet = Arc::new(Fleet::default());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let (fleet, dir) = (fleet.clone(), store.dir.clone());
            std::thread::spawn(move || client(&fleet, &dir, n))
        })
        .collect();
    let mut daemon = Daemon::start(&store.dir, &[]);
    for round in 1..=KILLS {
        let before = fleet.acked();
        // A different number of acknowledgements before each kill.
        let target = before + CLIENTS + (round * 7) % 17;
        fleet.set_running(true);
        eventually("the clients' commands to be acknowledged", || {
            (fleet.acked() >= target).then_some(())
        });
        let pid = daemon.pid();
        daemon.kill();
        // Let the commands in flight finish (fail, or run directly), then
        // hold the clients while the daemon restarts.
        fleet.set_running(false);
        eventually("the commands in flight to finish", || {
            (fleet.in_flight.load(Ordering::Acquire) == 0).then_some(())
        });
        assert!(
            store.socket().exists(),
            "kill -9 of pid {pid} leaves its socket behind"
        );
        daemon = Daemon::start(&store.dir, &[]);
        assert_ne!(daemon.pid(), pid);
        check(&store, &fleet, round);
    }
    fleet.stop.store(true, Ordering::Release);
    fleet.set_running(false);
    for c in clients {
        c.join().unwrap();
    }
    let (status, err) = daemon.stop();
    assert!(status.success(), "serve exited {status}: {err}");
    check(&store, &fleet, KILLS);
    let acked = fleet.acked();
    let failures = fleet.failures.lock().unwrap();
    // A command fails only when the kill cut its connection.
    for f in failures.iter() {
        assert!(
            f.contains("daemon"),
            "a failure the kill does not explain: {f}"
        );
    }
    eprintln!(
        "{KILLS} kills: {acked} commands acknowledged, {} cut by a kill, {:.1} s",
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(acked >= KILLS * CLIENTS);
}
