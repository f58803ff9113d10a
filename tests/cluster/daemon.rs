//! `agentlog serve --nats`: three daemon processes, each on its own store
//! directory, over a real 3-node NATS JetStream cluster on loopback (no
//! mock), as if on three hosts. The real CLI and the Python client talk to
//! them through their sockets, unchanged. Every nats-server and daemon is
//! killed when its guard drops, also when a test panics.
//!
//! Event times are explicit (`--at`, `at`, AGENTLOG_NOW). The periodic sweep
//! runs on the real clock, so the sweep test registers agents at a fixed time
//! long past: their leases are over whenever the test runs.

use crate::support::cli::register_args;
use crate::support::cluster::NatsCluster;
use crate::support::daemon::{bin, eventually, Conn, Daemon, Store, NOW};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A host: a store directory and the daemon serving it as a replica.
pub(super) struct Host {
    pub(super) store: Store,
    args: Vec<String>,
    daemon: Option<Daemon>,
}

impl Host {
    pub(super) fn start(nats: &NatsCluster, fleet: &str, id: &str, extra: &[&str]) -> Host {
        let mut args = vec![
            "--nats".to_string(),
            nats.urls().join(","),
            "--stream".into(),
            fleet.into(),
            "--host-id".into(),
            id.into(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let mut h = Host {
            store: Store::new(),
            args,
            daemon: None,
        };
        h.restart();
        h
    }

    /// Starts the daemon again on the host's directory (from the test's
    /// own thread: the daemon dies with the thread that started it).
    pub(super) fn restart(&mut self) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        self.daemon = Some(Daemon::start(&self.store.dir, &args));
    }

    /// SIGKILLs the daemon (no snapshot, its socket file left behind).
    pub(super) fn kill(&mut self) {
        self.daemon.take().expect("the host's daemon runs").kill();
    }

    /// Stops the daemon with SIGTERM; its exit status and stderr.
    pub(super) fn stop(&mut self) -> (std::process::ExitStatus, String) {
        self.daemon.take().expect("the host's daemon runs").stop()
    }

    /// Sends `sig` to the daemon (SIGSTOP, SIGCONT).
    pub(super) fn signal(&self, sig: rustix::process::Signal) {
        self.daemon().signal(sig);
    }

    pub(super) fn dir(&self) -> &Path {
        &self.store.dir
    }

    fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect("the host's daemon runs")
    }

    pub(super) fn hello(&self) -> Value {
        let mut c = Conn::connect(self.dir());
        c.call(json!({"id": 0, "method": "hello"}))["result"].clone()
    }

    fn last_lsn(&self) -> u64 {
        self.hello()["last_lsn"]
            .as_u64()
            .expect("hello has last_lsn")
    }

    #[track_caller]
    pub(super) fn ok(&self, args: &[&str]) -> String {
        self.store.ok(args)
    }

    /// `register NAME --provider claude --cwd /w --pid PID` at `at(secs)`.
    #[track_caller]
    pub(super) fn register(&self, name: &str, pid: &str, secs: u64) -> String {
        self.ok(&register_args(
            name,
            "claude",
            "/w",
            &at(secs),
            &["--pid", pid],
        ))
    }

    /// The log as `log --json` prints it: LSN → event line.
    pub(super) fn log(&self) -> BTreeMap<u64, Value> {
        self.ok(&["log", "--json"])
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (v["lsn"].as_u64().unwrap(), v)
            })
            .collect()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// A cluster whose JetStream answers (the fleet's stream exists).
pub(super) fn cluster(fleet: &str) -> NatsCluster {
    let nats = NatsCluster::start(3);
    runtime().block_on(nats.wait_ready(fleet));
    nats
}

/// Waits until every host folded the same last sequence; returns it.
pub(super) fn converge(hosts: &[&Host]) -> u64 {
    eventually("the hosts to converge", || {
        let lsns: Vec<u64> = hosts.iter().map(|h| h.last_lsn()).collect();
        lsns.iter().all(|&l| l == lsns[0]).then_some(lsns[0])
    })
}

/// Each host's `registry.json` export, as bytes.
pub(super) fn exports(hosts: &[&Host], tmp: &Path) -> Vec<Vec<u8>> {
    hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let out = tmp.join(format!("export-{i}.json"));
            h.ok(&["export", "--out", out.to_str().unwrap()]);
            std::fs::read(&out).unwrap()
        })
        .collect()
}

pub(super) fn at(secs: u64) -> String {
    format!("2030-01-01T00:{:02}:{:02}Z", secs / 60, secs % 60)
}

#[test]
fn cli_and_python_through_three_replicated_daemons() {
    let nats = cluster("dmn");
    let mut hosts: Vec<Host> = ["h0", "h1", "h2"]
        .iter()
        .map(|id| Host::start(&nats, "dmn", id, &[]))
        .collect();
    let hello = hosts[1].hello();
    assert_eq!(hello["replica"]["stream"], "AGENTLOG_DMN", "{hello}");
    assert_eq!(hello["replica"]["host"], "h1", "{hello}");

    // Agents on every host: register, heartbeat, status, through the CLI.
    for (i, h) in hosts.iter().enumerate() {
        let (name, pid) = (format!("a{i}"), format!("{}", 100 + i));
        h.register(&name, &pid, 1);
        h.ok(&["heartbeat", &name, "--pid", &pid, "--at", &at(2)]);
        h.ok(&[
            "status",
            &name,
            "busy",
            "--message",
            "building",
            "--at",
            &at(3),
        ]);
    }
    // A host validates against the fold of the whole fleet: a0 lives on h0,
    // and h2 refuses its heartbeat with the wrong pid, as one store would.
    let out = hosts[2]
        .store
        .run(&["heartbeat", "a0", "--pid", "999", "--at", &at(4)]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("pid"),
        "{out:?}"
    );

    // Messages across hosts: posted on one, read (waiting for it) on another.
    let posted = hosts[0].ok(&[
        "--json",
        "post",
        "--from",
        "a0",
        "--to",
        "a1",
        "hello a1",
        "--at",
        &at(5),
    ]);
    let posted: Value = serde_json::from_str(&posted).unwrap();
    let read = hosts[1].ok(&["--json", "read", "a1", "--wait", "10", "--at", &at(6)]);
    let read: Value = serde_json::from_str(&read).unwrap();
    assert_eq!(read["messages"][0]["body"], "hello a1", "{read}");
    assert_eq!(read["messages"][0]["id"], posted["id"], "{read} {posted}");
    hosts[2].ok(&[
        "post",
        "--from",
        "a2",
        "--to",
        "a0",
        "from h2",
        "--request-id",
        "r1",
        "--at",
        &at(7),
    ]);
    // The same request id retried through another host keeps its message.
    let again = hosts[1].ok(&[
        "--json",
        "post",
        "--from",
        "a2",
        "--to",
        "a0",
        "from h2",
        "--request-id",
        "r1",
        "--at",
        &at(8),
    ]);
    let read0 = hosts[0].ok(&["--json", "read", "a0", "--wait", "10", "--at", &at(9)]);
    let read0: Value = serde_json::from_str(&read0).unwrap();
    assert_eq!(read0["messages"].as_array().unwrap().len(), 1, "{read0}");
    assert_eq!(
        read0["messages"][0]["id"],
        serde_json::from_str::<Value>(&again).unwrap()["id"]
    );

    // Register races through two hosts: exactly one wins each.
    let (mut c0, mut c1) = (Conn::connect(hosts[0].dir()), Conn::connect(hosts[1].dir()));
    const RACES: usize = 40;
    for r in 0..RACES {
        let reg = |pid: u32| {
            json!({"id": r, "method": "register", "params": {"name": format!("race{r}"),
                "provider": "codex", "cwd": "/r", "pid": pid, "at": NOW, "clock": NOW}})
        };
        c0.send(&reg(1));
        c1.send(&reg(2));
        let answers = [c0.recv().unwrap(), c1.recv().unwrap()];
        let won: Vec<&Value> = answers
            .iter()
            .filter(|a| a.get("result").is_some())
            .collect();
        assert_eq!(won.len(), 1, "race {r}: {answers:?}");
        let lost = answers.iter().find(|a| a.get("error").is_some()).unwrap();
        assert_eq!(lost["error"]["code"], "refused", "race {r}: {lost}");
        assert!(
            lost["error"]["message"].as_str().unwrap().contains("pid"),
            "{lost}"
        );
    }

    // Convergence: all three at the same sequence, byte-identical exports.
    let last = converge(&[&hosts[0], &hosts[1], &hosts[2]]);
    let tmp = tempfile::tempdir().unwrap();
    let ex = exports(&[&hosts[0], &hosts[1], &hosts[2]], tmp.path());
    assert!(
        ex[0] == ex[1] && ex[1] == ex[2],
        "exports differ at sequence {last}"
    );
    let log = hosts[2].log();
    assert_eq!(
        log.keys().copied().collect::<Vec<_>>(),
        (1..=last).collect::<Vec<_>>()
    );
    let registrations = log
        .values()
        .filter(|e| e["kind"] == "AgentRegistered")
        .filter(|e| {
            e["event"]["AgentRegistered"]["reg"]["name"]
                .as_str()
                .unwrap()
                .starts_with("race")
        })
        .count();
    assert_eq!(
        registrations, RACES,
        "one registration per race in the stream"
    );
    // Events carry who asked (the CLI's pid), as on one host.
    // A heartbeat batch carries each heartbeat's origin in its entry.
    let asked = |e: &Value| e["origin"]["pid"].as_u64().is_some();
    assert!(
        log.values().all(|e| asked(e)
            || e["event"]["HeartbeatBatch"]["beats"]
                .as_array()
                .is_some_and(|beats| beats.iter().all(asked))),
        "{log:?}"
    );
    // Without its daemon a replica refuses writes (they would fork the log).
    let h1 = hosts[1].daemon.take().unwrap();
    let (status, _) = h1.stop();
    assert!(status.success());
    let out = hosts[1]
        .store
        .run(&["heartbeat", "a1", "--pid", "101", "--at", &at(10)]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("replica of fleet `dmn`"),
        "{out:?}"
    );
    hosts[1].ok(&["list"]);
    hosts[1].restart();
    // A clean stop snapshots: the restart folds nothing and resumes there.
    let replica = hosts[1].hello()["replica"].clone();
    assert_eq!(
        (replica["resumed_at"].as_u64(), replica["open"].as_u64()),
        (Some(last), Some(0)),
        "{replica}"
    );

    // The Python client, unchanged, against a replicated daemon: its whole
    // suite, each daemon it starts joining this cluster.
    let py = std::process::Command::new("python3")
        .args(["-m", "unittest", "discover", "-s"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python"))
        .env("AGENTLOG_BIN", env!("CARGO_BIN_EXE_agentlog"))
        .env(
            "AGENTLOG_SERVE_ARGS",
            format!(
                "--nats {} --stream py --host-id py --sweep-every 0",
                nats.urls().join(",")
            ),
        )
        .output()
        .expect("run python3");
    assert!(
        py.status.success(),
        "python client suite failed:\n{}",
        String::from_utf8_lossy(&py.stderr)
    );
    let ran = String::from_utf8_lossy(&py.stderr);
    assert!(ran.contains("OK") && !ran.contains("skipped"), "{ran}");
}

/// `agentlog compact` through a replica's daemon compacts the fleet's
/// stream (docs/scaling.md §6): the retired agent and the expired message
/// leave the stream and every host, a heartbeat run collapses, every host's
/// log follows (and verifies), a host started afterwards on an empty store
/// exports the same registry, and the retired name registers again.
#[test]
fn compact_through_a_replica_compacts_the_stream_for_every_host() {
    let nats = cluster("cmp");
    let no_sweep = ["--sweep-every", "0"];
    let hosts: Vec<Host> = ["h0", "h1", "h2"]
        .iter()
        .map(|id| Host::start(&nats, "cmp", id, &no_sweep))
        .collect();
    for (i, h) in hosts.iter().enumerate() {
        let (name, pid) = (format!("a{i}"), format!("{}", 100 + i));
        h.register(&name, &pid, 1);
    }
    for s in 2..8 {
        hosts[0].ok(&["heartbeat", "a0", "--pid", "100", "--at", &at(s)]);
    }
    hosts[2].ok(&["status", "a2", "exited", "--at", &at(9)]);
    hosts[1].ok(&[
        "post",
        "--from",
        "a1",
        "--to",
        "a0",
        "soon gone",
        "--ttl-hours",
        "1",
        "--at",
        &at(10),
    ]);
    let before = converge(&[&hosts[0], &hosts[1], &hosts[2]]);

    // Two days later: a2 (finished) is retired, the message expired.
    let now = "2030-01-03T00:00:00Z";
    let out = hosts[1].ok(&["--json", "compact", "--now", now, "--force-now"]);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["agents_retired"], json!(["a2"]), "{report}");
    assert_eq!(report["messages_dropped"], 1, "{report}");
    assert_eq!(report["heartbeats_collapsed"], 4, "{report}");
    let last = converge(&[&hosts[0], &hosts[1], &hosts[2]]);
    assert_eq!(last, before + 1, "one marker");
    let tmp = tempfile::tempdir().unwrap();
    let ex = exports(&[&hosts[0], &hosts[1], &hosts[2]], tmp.path());
    assert!(ex[0] == ex[1] && ex[1] == ex[2], "exports differ at {last}");
    for h in &hosts {
        let list: Value = serde_json::from_str(&h.ok(&["--json", "list"])).unwrap();
        let names: Vec<&str> = list["agents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a0", "a1"], "{list}");
        // The local log was compacted up to the marker: no record of a2,
        // the post or the middle heartbeats; it verifies clean.
        let log = h.log();
        let records = log.values().filter(|e| e["kind"] != "StreamCompacted");
        assert!(
            records.clone().all(|e| !e.to_string().contains("\"a2\"")),
            "{log:?}"
        );
        assert!(
            records.clone().all(|e| e["kind"] != "MessagePosted"),
            "{log:?}"
        );
        // a0's run keeps its first and last heartbeat (each a lazy
        // heartbeat's batch of one on a replica).
        assert_eq!(
            log.values()
                .filter(|e| e["kind"] == "Heartbeat" || e["kind"] == "HeartbeatBatch")
                .count(),
            2,
            "{log:?}"
        );
        assert!(
            log.values().any(|e| e["kind"] == "StreamCompacted"),
            "{log:?}"
        );
        h.ok(&["verify"]);
    }
    // The compaction lock was released: another compaction runs (nothing to drop).
    let again: Value =
        serde_json::from_str(&hosts[2].ok(&["--json", "compact", "--now", now, "--force-now"]))
            .unwrap();
    assert_eq!(again["events_dropped"], 0, "{again}");
    // The retired name registers again (the expectation on its purged
    // subject is corrected from the stream), through a host that folded it.
    hosts[2].ok(&register_args(
        "a2",
        "codex",
        "/w",
        &at(30),
        &["--pid", "7"],
    ));
    // A host that starts now, on an empty store, reads the compacted stream.
    let late = Host::start(&nats, "cmp", "h3", &no_sweep);
    let all = [&hosts[0], &hosts[1], &hosts[2], &late];
    let last = converge(&all);
    let ex = exports(&all, tmp.path());
    assert!(ex.iter().all(|e| *e == ex[0]), "exports differ at {last}");
    late.ok(&["verify"]);
}

/// Sends durable heartbeats of `agent` through `dir`'s daemon until it goes
/// away or `stop` is set; records each acknowledged (LSN, agent).
fn writer(dir: &Path, agent: &str, stop: Arc<AtomicBool>, acked: Arc<Mutex<Vec<(u64, String)>>>) {
    let Some(mut c) = Conn::try_connect(dir) else {
        return;
    };
    for i in 1.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let req = json!({"id": i, "method": "heartbeat", "params": {"name": agent, "durable": true,
            "at": at(20 + i / 1000)}});
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        if std::io::Write::write_all(&mut c.writer, &line).is_err() {
            return;
        }
        let mut reply = String::new();
        match std::io::BufRead::read_line(&mut c.reader, &mut reply) {
            Ok(n) if n > 0 => {}
            _ => return, // the daemon went away
        }
        let reply: Value = serde_json::from_str(&reply).unwrap();
        match reply["result"]["lsn"].as_u64() {
            Some(lsn) => acked.lock().unwrap().push((lsn, agent.to_string())),
            None => panic!("heartbeat of {agent} through {}: {reply}", dir.display()),
        }
    }
}

#[test]
fn a_daemon_killed_under_writes_resumes_from_its_sequence() {
    let nats = cluster("kil");
    let mut hosts: Vec<Host> = ["k0", "k1", "k2"]
        .iter()
        .map(|id| Host::start(&nats, "kil", id, &[]))
        .collect();
    for (i, h) in [&hosts[0], &hosts[2]].iter().enumerate() {
        h.ok(&register_args(
            &format!("w{i}"),
            "claude",
            "/k",
            &at(1),
            &[],
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<(u64, String)>>> = Arc::default();
    let spawn = |dir: &Path, agent: &str| {
        let (dir, agent, stop, acked) = (
            dir.to_path_buf(),
            agent.to_string(),
            stop.clone(),
            acked.clone(),
        );
        std::thread::spawn(move || writer(&dir, &agent, stop, acked))
    };
    let acked_by = |agent: &str| {
        acked
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, a)| a == agent)
            .count()
    };
    let w0 = spawn(hosts[0].dir(), "w0");
    let w1 = spawn(hosts[2].dir(), "w1");
    eventually("writes through the victim", || {
        (acked_by("w1") >= 30).then_some(())
    });
    let victim = hosts[2].daemon.take().unwrap();
    victim.kill();
    w1.join().unwrap();
    let victim_acked = acked
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, a)| a == "w1")
        .map(|(l, _)| *l)
        .max()
        .unwrap();
    // The stream moves on while the host is down.
    let before = acked_by("w0");
    eventually("writes while the victim is down", || {
        (acked_by("w0") >= before + 30).then_some(())
    });
    hosts[2].restart();
    let replica = hosts[2].hello()["replica"].clone();
    let resumed = replica["resumed_at"].as_u64().unwrap();
    // It resumes from its own sequence (every write it acknowledged is in
    // its local log), not from the stream's start.
    assert!(resumed >= victim_acked, "{replica} vs acked {victim_acked}");
    let w1 = spawn(hosts[2].dir(), "w1");
    eventually("writes through the restarted host", || {
        (acked_by("w1") >= 40).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    w0.join().unwrap();
    w1.join().unwrap();

    let last = converge(&[&hosts[0], &hosts[1], &hosts[2]]);
    assert!(last > resumed, "caught up from {resumed} to {last}");
    // Nothing acknowledged was lost: each acked LSN holds that heartbeat.
    let log = hosts[2].log();
    for (lsn, agent) in acked.lock().unwrap().iter() {
        let e = &log[lsn];
        assert_eq!(
            (
                e["kind"].as_str(),
                e["event"]["Heartbeat"]["agent"].as_str()
            ),
            (Some("Heartbeat"), Some(agent.as_str())),
            "lsn {lsn}: {e}"
        );
    }
    let verify = hosts[2].store.run(&["verify"]);
    assert!(verify.status.success(), "{verify:?}");
    let tmp = tempfile::tempdir().unwrap();
    let ex = exports(&[&hosts[0], &hosts[1], &hosts[2]], tmp.path());
    assert!(
        ex[0] == ex[1] && ex[1] == ex[2],
        "exports differ at sequence {last}"
    );
}

/// Sweep events (lease expiry, or a process gone on its agent's host) in a
/// host's log: agent → sweeping daemon pids.
fn sweeps(h: &Host) -> HashMap<String, Vec<u64>> {
    let mut by_agent: HashMap<String, Vec<u64>> = HashMap::new();
    for e in h.log().values() {
        let change = &e["event"]["StatusChanged"];
        if change["cause"] == "lease_expired" || change["cause"] == "process_gone" {
            let agent = change["agent"].as_str().unwrap().to_string();
            by_agent
                .entry(agent)
                .or_default()
                .push(e["origin"]["pid"].as_u64().unwrap());
        }
    }
    by_agent
}

#[test]
fn a_paused_sweeper_loses_its_lease_and_no_agent_is_swept_twice() {
    let nats = cluster("swp");
    let sweeping = ["--sweep-every", "1", "--lease-ttl", "2"];
    let hosts: Vec<Host> = ["s0", "s1", "s2"]
        .iter()
        .map(|id| Host::start(&nats, "swp", id, &sweeping))
        .collect();
    let holder = eventually("a host to hold the sweeper lease", || {
        let held: Vec<usize> = (0..3)
            .filter(|&i| hosts[i].hello()["replica"]["sweeper"] == true)
            .collect();
        (held.len() == 1).then(|| held[0])
    });
    let other = (holder + 1) % 3;
    // Registered long ago: their leases are over whenever this runs.
    let register = |h: &Host, names: std::ops::Range<usize>| {
        for i in names {
            let name = format!("x{i}");
            let out = bin()
                .env("AGENTLOG_NOW", "2020-01-01T00:00:00Z")
                .arg("--dir")
                .arg(h.dir())
                .args(["register", &name, "--provider", "codex", "--cwd", "/s"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        }
    };
    register(&hosts[other], 0..5);
    let first = eventually("the holder to sweep the first agents", || {
        let s = sweeps(&hosts[other]);
        (s.len() == 5).then_some(s)
    });
    let holder_pid = u64::from(hosts[holder].daemon().pid());
    assert!(
        first.values().all(|pids| pids == &[holder_pid]),
        "{first:?} (holder pid {holder_pid})"
    );

    // Pause the holder past its lease: another host takes over the sweeps.
    hosts[holder].daemon().signal(rustix::process::Signal::STOP);
    register(&hosts[other], 5..10);
    let second = eventually("another host to sweep the later agents", || {
        let s = sweeps(&hosts[other]);
        (s.len() == 10).then_some(s)
    });
    hosts[holder].daemon().signal(rustix::process::Signal::CONT);
    for i in 5..10 {
        let pids = &second[&format!("x{i}")];
        assert!(
            pids.len() == 1 && pids[0] != holder_pid,
            "x{i} swept by {pids:?} (paused holder {holder_pid})"
        );
    }
    // The resumed host catches up and runs sweep rounds without the lease.
    let rounds = hosts[holder].hello()["replica"]["sweep_rounds"]
        .as_u64()
        .unwrap();
    let last = converge(&[&hosts[0], &hosts[1], &hosts[2]]);
    eventually("two sweep rounds on the resumed host", || {
        let r = hosts[holder].hello()["replica"].clone();
        (r["sweep_rounds"].as_u64().unwrap() >= rounds + 2).then_some(())
    });
    assert_eq!(hosts[holder].hello()["replica"]["sweeper"], false);
    let last = converge(&[&hosts[0], &hosts[1], &hosts[2]]).max(last);
    let swept = sweeps(&hosts[holder]);
    assert_eq!(swept.len(), 10, "{swept:?}");
    assert!(
        swept.values().all(|p| p.len() == 1),
        "an agent swept twice: {swept:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let ex = exports(&[&hosts[0], &hosts[1], &hosts[2]], tmp.path());
    assert!(
        ex[0] == ex[1] && ex[1] == ex[2],
        "exports differ at sequence {last}"
    );
}

/// One sweep path on a replica (docs/scaling.md §7): an explicit `sweep`
/// through a daemon goes through the fleet's sweeper lease, as the periodic
/// sweep does. The first host asked takes the lease and sweeps (the changes
/// carry the requester's pid); another host is refused, naming the holder;
/// asked again, the holder sweeps nothing; every agent is swept once.
#[test]
fn an_explicit_sweep_on_a_replica_goes_through_the_sweeper_lease() {
    let nats = cluster("xsw");
    let no_sweep = ["--sweep-every", "0"];
    let hosts: Vec<Host> = ["x0", "x1"]
        .iter()
        .map(|id| Host::start(&nats, "xsw", id, &no_sweep))
        .collect();
    for (i, name) in ["q0", "q1", "q2"].iter().enumerate() {
        let pid = format!("{}", 300 + i);
        hosts[i % 2].register(name, &pid, 1);
    }
    converge(&[&hosts[0], &hosts[1]]);
    let later = "2030-01-01T01:00:00Z";
    let swept: Value =
        serde_json::from_str(&hosts[1].ok(&["--json", "sweep", "--now", later, "--force-time"]))
            .unwrap();
    assert_eq!(swept["changes"].as_array().unwrap().len(), 3, "{swept}");
    let out = hosts[0]
        .store
        .run(&["sweep", "--now", later, "--force-time"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("host x1 holds the sweeper lease"), "{err}");
    let again: Value =
        serde_json::from_str(&hosts[1].ok(&["--json", "sweep", "--now", later, "--force-time"]))
            .unwrap();
    assert_eq!(again["changes"], json!([]), "{again}");
    converge(&[&hosts[0], &hosts[1]]);
    let by_agent = sweeps(&hosts[0]);
    assert_eq!(by_agent.len(), 3, "{by_agent:?}");
    let daemon_pid = u64::from(hosts[1].daemon().pid());
    for (agent, pids) in &by_agent {
        assert_eq!(pids.len(), 1, "{agent} swept {pids:?}");
        // Asked for by the CLI process, not decided by the daemon's clock.
        assert_ne!(pids[0], daemon_pid, "{agent}");
    }
}
