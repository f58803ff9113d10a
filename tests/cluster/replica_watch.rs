//! A replica (`serve --nats`) looks like a local daemon to `watch` and to
//! `compact --dry-run`: the raw protocol against a replica whose lazy
//! heartbeats went to the stream in batches (one `HeartbeatBatch` record,
//! one LSN, several agents' beats) gets one `Heartbeat` event per beat,
//! shaped exactly as a local daemon's, all at the batch's LSN; the agent
//! filter keeps the beats of that agent inside a batch; `from` in the middle
//! of the history starts at a whole batch; a lagging watcher's
//! `resume_from` never splits a batch; `changes` gives one change per beat;
//! over HTTP only a batch's last event carries the SSE id.
//! A dry run through a replica plans over the stream and publishes nothing;
//! the daemon's auto-compaction on replicas compacts the stream once.

use super::daemon::{at, cluster, converge, Host};
use crate::support::cli::register_args;
use crate::support::daemon::{bin, eventually, eventually_within, Conn, Daemon, Store};
use crate::support::http::{token, with_token, Sse};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const AGENTS: [(&str, &str); 3] = [("w0", "100"), ("w1", "101"), ("w2", "102")];

/// Sends `rounds` heartbeats of every agent of [`AGENTS`] through `dir`'s
/// daemon in one pipelined write (round `r` at `at(secs + r)`), and waits
/// for every answer.
fn pipelined_beats(dir: &Path, rounds: u64, secs: u64) {
    let mut c = Conn::connect(dir);
    let mut bytes = Vec::new();
    for r in 0..rounds {
        for (name, pid) in AGENTS {
            let req = json!({"id": r, "method": "heartbeat",
                "params": {"name": name, "pid": pid.parse::<u32>().unwrap(), "at": at(secs + r)}});
            bytes.extend(serde_json::to_vec(&req).unwrap());
            bytes.push(b'\n');
        }
    }
    c.send_raw(&bytes);
    for _ in 0..rounds as usize * AGENTS.len() {
        let r = c.recv().expect("a heartbeat answer");
        assert!(r["result"]["lsn"].is_u64(), "{r}");
    }
}

/// Opens a watch with `params` on `dir`'s daemon.
fn watch(dir: &Path, params: Value) -> Conn {
    let c = Conn::connect(dir);
    c.reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut c = c;
    let r = c.call(json!({"id": "w", "method": "watch", "params": params}));
    assert_eq!(r["result"]["watching"], json!(true), "{r}");
    c
}

/// The next `n` items of a watch.
fn items(c: &mut Conn, n: usize) -> Vec<Value> {
    (0..n).map(|_| c.recv().expect("a watch item")).collect()
}

/// What `watch` should send for the log `log` (LSN → `log --json` line):
/// each record as `(lsn, kind, agent)`, a batch as one `Heartbeat` per beat
/// in order, at the batch's LSN.
fn expected(log: &BTreeMap<u64, Value>) -> Vec<(u64, String, String)> {
    let mut out = Vec::new();
    for (&lsn, e) in log {
        let kind = e["kind"].as_str().unwrap().to_string();
        if let Some(beats) = e["event"]["HeartbeatBatch"]["beats"].as_array() {
            for b in beats {
                let agent = b["agent"].as_str().unwrap().to_string();
                out.push((lsn, "Heartbeat".to_string(), agent));
            }
            continue;
        }
        let body = &e["event"][kind.as_str()];
        let agent = body["agent"]
            .as_str()
            .or(body["reg"]["name"].as_str())
            .unwrap_or_else(|| panic!("no agent in {e}"))
            .to_string();
        out.push((lsn, kind, agent));
    }
    out
}

/// A watch item as `(lsn, kind, agent)`.
fn seen(item: &Value) -> (u64, String, String) {
    let e = &item["event"];
    let kind = e["kind"].as_str().unwrap_or_else(|| panic!("{item}"));
    let body = &e["event"][kind];
    let agent = body["agent"].as_str().or(body["reg"]["name"].as_str());
    (
        e["lsn"].as_u64().unwrap(),
        kind.to_string(),
        agent.unwrap().to_string(),
    )
}

/// A heartbeat event as a watch sends it, without what differs between
/// two stores (its LSN and who asked).
fn shape(item: &Value) -> Value {
    let mut e = item["event"].clone();
    let o = e.as_object_mut().unwrap();
    o.remove("lsn");
    let origin = o.remove("origin");
    assert!(origin.is_some_and(|o| o["pid"].is_u64()), "{item}");
    e
}

#[test]
fn watch_through_a_replica_expands_heartbeat_batches_as_a_local_daemon_shows_heartbeats() {
    let nats = cluster("rwt");
    let extra = ["--watch-buffer", "4", "--http", "127.0.0.1:0"];
    let h = Host::start(&nats, "rwt", "h0", &extra);
    for (i, (name, pid)) in AGENTS.iter().enumerate() {
        h.register(name, pid, i as u64);
    }
    // Pipelined lazy heartbeats of three agents share batches: until one
    // batch holds beats of two agents (a round's three beats are read in
    // one go, within the 2 ms a batch stays open).
    let mut secs = 10;
    eventually("a batch holding several agents' beats", || {
        pipelined_beats(h.dir(), 5, secs);
        secs += 5;
        h.log()
            .values()
            .any(|e| {
                e["event"]["HeartbeatBatch"]["beats"]
                    .as_array()
                    .is_some_and(|b| b.iter().any(|x| x["agent"] != b[0]["agent"]))
            })
            .then_some(())
    });
    h.ok(&["status", "w1", "busy", "--at", &at(secs)]);
    let log = h.log();
    let want = expected(&log);
    let batch_lsn = *log
        .iter()
        .find(|(_, e)| {
            e["event"]["HeartbeatBatch"]["beats"]
                .as_array()
                .is_some_and(|b| b.len() > 1)
        })
        .unwrap()
        .0;

    // Everything from the start: no HeartbeatBatch, one Heartbeat per beat.
    let mut c = watch(h.dir(), json!({"from": 1}));
    let got = items(&mut c, want.len());
    assert_eq!(got.iter().map(seen).collect::<Vec<_>>(), want);
    // Each beat keeps its own time: an agent's beats are at the times sent.
    let w0_times: Vec<&str> = got
        .iter()
        .filter(|i| i["event"]["kind"] == "Heartbeat" && seen(i).2 == "w0")
        .map(|i| i["event"]["at"].as_str().unwrap())
        .collect();
    assert_eq!(w0_times.len() as u64, secs - 10, "{w0_times:?}");
    assert!(w0_times.windows(2).all(|w| w[0] < w[1]), "{w0_times:?}");

    // The same shape as a local daemon's heartbeat event.
    let first_w0 = got
        .iter()
        .find(|i| i["event"]["kind"] == "Heartbeat" && seen(i).2 == "w0")
        .unwrap();
    let local = Store::new();
    let _d = Daemon::start(&local.dir, &[]);
    local.ok(&register_args(
        "w0",
        "claude",
        "/w",
        &at(0),
        &["--pid", "100"],
    ));
    local.ok(&["heartbeat", "w0", "--pid", "100", "--at", &at(10)]);
    let mut lc = watch(&local.dir, json!({"from": 1, "kinds": ["heartbeat"]}));
    let local_beat = lc.recv().unwrap();
    assert_eq!(shape(first_w0), shape(&local_beat));

    // The agent filter keeps that agent's beats inside the batches.
    let w1: Vec<_> = want.iter().filter(|w| w.2 == "w1").cloned().collect();
    let mut c = watch(h.dir(), json!({"from": 1, "agent": "w1"}));
    assert_eq!(
        items(&mut c, w1.len()).iter().map(seen).collect::<Vec<_>>(),
        w1
    );
    // Kinds select the beats (a batch is never sent as such).
    let beats: Vec<_> = want
        .iter()
        .filter(|w| w.1 == "Heartbeat")
        .cloned()
        .collect();
    let mut c = watch(h.dir(), json!({"from": 1, "kinds": ["Heartbeat"]}));
    assert_eq!(
        items(&mut c, beats.len())
            .iter()
            .map(seen)
            .collect::<Vec<_>>(),
        beats
    );
    // From a batch's LSN in the middle of the history: that batch whole.
    let tail: Vec<_> = want.iter().filter(|w| w.0 >= batch_lsn).cloned().collect();
    let mut c = watch(h.dir(), json!({"from": batch_lsn}));
    assert_eq!(
        items(&mut c, tail.len())
            .iter()
            .map(seen)
            .collect::<Vec<_>>(),
        tail
    );

    // The same over HTTP (`/api/events`): of a batch's events only the last
    // carries the SSE id (its LSN), so a reconnect inside it gets it whole.
    let base = format!("http://{}", h.hello()["http"].as_str().unwrap());
    let in_batch = want.iter().filter(|w| w.0 == batch_lsn).count();
    let url = format!("{base}/api/events?from={batch_lsn}");
    let mut sse = Sse::open(&with_token(&url, &token(h.dir())), None);
    assert_eq!(sse.next().0, "watching");
    for i in 0..in_batch {
        let (name, data, id) = sse.next();
        assert_eq!(
            (name.as_str(), &data["kind"]),
            ("event", &json!("Heartbeat"))
        );
        assert_eq!(data["lsn"], batch_lsn, "{data}");
        assert_eq!(id, (i + 1 == in_batch).then_some(batch_lsn), "{data}");
    }
    drop(sse);

    // Changes: one `updated` per beat of w1, as one record per heartbeat
    // gives on a local daemon (each beat has its own time).
    let w1_beats = w1.iter().filter(|w| w.1 == "Heartbeat").count();
    let mut c = watch(h.dir(), json!({"from": 1, "agent": "w1", "changes": true}));
    let changes = items(&mut c, 2 + w1_beats);
    let types: Vec<&str> = changes
        .iter()
        .map(|i| i["change"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(types[0], "added");
    assert!(types[1..].iter().all(|t| *t == "updated"), "{types:?}");
    assert_eq!(changes.last().unwrap()["change"]["row"]["status"], "busy");

    // A lagging watcher: `resume_from` never falls inside a batch, and
    // resuming from it completes the history exactly once. Many batches
    // (one round of beats each), more than the socket buffers hold.
    for r in 0..400 {
        // Times stay within the daemon's 5-minute future-time bound of
        // its fixed clock (2030-01-01T00:00Z): 100 distinct seconds reused.
        pipelined_beats(h.dir(), 1, secs + 1 + r % 100);
    }
    let log = h.log();
    let want = expected(&log);
    let lagged_before = h.hello()["watchers_lagged"].as_u64().unwrap();
    let mut c = watch(h.dir(), json!({"from": 1}));
    eventually("the watcher to lag", || {
        (h.hello()["watchers_lagged"].as_u64().unwrap() > lagged_before).then_some(())
    });
    let mut got = Vec::new();
    let resume = loop {
        let item = c.recv().expect("items, then lagged");
        if let Some(r) = item["lagged"]["resume_from"].as_u64() {
            break r;
        }
        got.push(seen(&item));
    };
    assert!(resume > 1 && (got.len()) < want.len(), "{resume}");
    let sent_whole = want.iter().take_while(|w| w.0 < resume).count();
    assert_eq!(got, want[..sent_whole], "resume_from {resume}");
    let mut c = watch(h.dir(), json!({"from": resume}));
    let rest = items(&mut c, want.len() - sent_whole);
    assert_eq!(
        rest.iter().map(seen).collect::<Vec<_>>(),
        want[sent_whole..]
    );
}

/// Replicas of `fleet` with these host ids, without periodic sweeps.
fn quiet_hosts(
    nats: &crate::support::cluster::NatsCluster,
    fleet: &str,
    ids: &[&str],
) -> Vec<Host> {
    ids.iter()
        .map(|id| Host::start(nats, fleet, id, &["--sweep-every", "0"]))
        .collect()
}

/// `compact --dry-run` through a replica reports what the stream's
/// compaction then drops (the same plan, at the stream's last sequence, as
/// the local dry run prints it) and publishes nothing: no marker, no lock
/// held (the compaction it described then runs), every host's log unchanged.
#[test]
fn compact_dry_run_through_a_replica_plans_over_the_stream_and_publishes_nothing() {
    let nats = cluster("cdr");
    let hosts = quiet_hosts(&nats, "cdr", &["d0", "d1"]);
    hosts[0].register("a0", "100", 1);
    hosts[1].register("a1", "101", 2);
    for s in 3..8 {
        hosts[0].ok(&["heartbeat", "a0", "--pid", "100", "--at", &at(s)]);
    }
    hosts[1].ok(&["status", "a1", "exited", "--at", &at(9)]);
    let last = converge(&[&hosts[0], &hosts[1]]);
    let now = "2030-01-03T00:00:00Z";
    // Written through d0, asked of d1 at once: the dry run plans at the
    // stream's last sequence, whatever d1's mirror folded by then.
    hosts[0].ok(&["status", "a0", "busy", "--at", &at(20)]);
    let dry: Value =
        serde_json::from_str(&hosts[1].ok(&["--json", "compact", "--dry-run", "--now", now]))
            .unwrap();
    assert_eq!(dry["dry_run"], true, "{dry}");
    assert_eq!(dry["upto_lsn"], last + 1, "{dry}");
    assert_eq!(dry["agents_retired"], json!(["a1"]), "{dry}");
    assert_eq!(dry["heartbeats_collapsed"], 3, "{dry}");
    let text = hosts[1].ok(&["compact", "--dry-run", "--now", now]);
    assert!(text.contains("(dry run: nothing changed)"), "{text}");
    assert!(text.contains("would drop"), "{text}");
    // Nothing was published: both hosts still at the same last sequence.
    assert_eq!(converge(&[&hosts[0], &hosts[1]]), last + 1);
    assert!(
        hosts[0]
            .log()
            .values()
            .all(|e| e["kind"] != "StreamCompacted"),
        "a dry run published a marker"
    );
    // The compaction it described: the same drops, then one marker.
    let real: Value =
        serde_json::from_str(&hosts[0].ok(&["--json", "compact", "--now", now, "--force-now"]))
            .unwrap();
    for key in [
        "upto_lsn",
        "events_dropped",
        "events_kept",
        "heartbeats_collapsed",
        "agents_retired",
        "messages_dropped",
        "sessions_dropped",
    ] {
        assert_eq!(dry[key], real[key], "{key}: dry {dry} vs real {real}");
    }
    assert_eq!(real["dry_run"], false);
    assert_eq!(converge(&[&hosts[0], &hosts[1]]), last + 2);
}

/// The daemon's auto-compaction (its trigger every 10 s: half of a log of
/// at least 1 MiB droppable) on two replicas at once: one compacts the
/// stream (the expired posts go from every host), the other finds nothing
/// left; one marker in all. Times are long past (2020): the trigger judges
/// at the real clock, and these posts expired whenever the test runs.
#[test]
fn auto_compaction_on_replicas_compacts_the_stream_once() {
    let nats = cluster("acp");
    let hosts = quiet_hosts(&nats, "acp", &["c0", "c1"]);
    let long_ago = |h: &Host, args: &[&str]| {
        let out = bin()
            .env("AGENTLOG_NOW", "2020-01-01T02:00:00Z")
            .arg("--dir")
            .arg(h.dir())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    for (name, h) in [("sender", &hosts[0]), ("reader", &hosts[1])] {
        long_ago(
            h,
            &register_args(name, "codex", "/c", "2020-01-01T00:00:00Z", &[]),
        );
    }
    // 20 posts of 60 KB with an hour to live: 1.2 MB, all droppable.
    let body = "x".repeat(60_000);
    for i in 0..20 {
        let at = format!("2020-01-01T01:00:{i:02}Z");
        let post = [
            "post",
            "--from",
            "sender",
            "--to",
            "reader",
            &body,
            "--ttl-hours",
            "1",
            "--at",
            &at,
        ];
        long_ago(&hosts[i % 2], &post);
    }
    let posted = converge(&[&hosts[0], &hosts[1]]);
    let compacted = eventually_within("an auto-compaction", Duration::from_secs(60), || {
        let markers: Vec<u64> = hosts[0]
            .log()
            .iter()
            .filter(|(_, e)| e["kind"] == "StreamCompacted")
            .map(|(l, _)| *l)
            .collect();
        (!markers.is_empty()).then_some(markers)
    });
    assert_eq!(compacted, [posted + 1], "one marker right after the posts");
    let last = converge(&[&hosts[0], &hosts[1]]);
    // Each mirror compacts its log after folding the marker (a rewrite of
    // 1.2 MB, which `last_lsn` does not wait for).
    for h in &hosts {
        eventually("the local log to drop the posts", || {
            let log = h.log();
            log.values()
                .all(|e| e["kind"] != "MessagePosted")
                .then_some(())
        });
    }
    // A check on each host that ends after its log dropped the posts (one
    // every 10 s) finds nothing more to drop.
    let rounds = |h: &Host| h.hello()["compaction_rounds"].as_u64().unwrap();
    let before: Vec<u64> = hosts.iter().map(rounds).collect();
    for (h, before) in hosts.iter().zip(before) {
        eventually_within("an auto-compaction check", Duration::from_secs(30), || {
            (rounds(h) > before).then_some(())
        });
    }
    assert_eq!(converge(&[&hosts[0], &hosts[1]]), last, "a second marker");
}
