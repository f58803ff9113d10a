//! Lazy heartbeats through the cluster (docs/scaling.md §5): each host
//! coalesces the lazy heartbeats it accepted into one stream message per
//! batch (event tag 15), every host folds a batch as its heartbeats, a
//! heartbeat that lands after its agent changed hands folds as the late
//! heartbeat it is, and a replica daemon answers many lazy heartbeats in
//! flight on one connection, in order, each with its batch's sequence.
//! All on a real 3-node NATS cluster on loopback.

use crate::support::cluster::*;
use crate::support::daemon::{eventually, register, Conn, Daemon, Store};
use agentlog::cluster::ClusterNode;
use agentlog::registry::{EventKind, Registration};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::Write;
use std::time::Duration;

fn reg(name: &str, pid: u32) -> Registration {
    let mut r = Registration::new(name, "claude", "/work");
    r.pid = Some(pid);
    r
}

/// A node whose heartbeat batches stay open for `window` unless flushed.
async fn batching_node(
    dir: &std::path::Path,
    url: String,
    fleet: &str,
    host: &str,
    window: Duration,
) -> ClusterNode {
    let store = agentlog::store::Store::open(dir, store_options()).unwrap();
    let mut opts = cluster_options(vec![url], fleet, host);
    opts.heartbeat_batches.window = window;
    ClusterNode::start(store, opts).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lazy_heartbeats_are_batched_and_every_host_folds_each_one() {
    let nats = NatsCluster::start(3);
    nats.wait_ready("hb").await;
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    // Host 0 batches for up to 10 s: only a flush (or a full batch) seals.
    let long = Duration::from_secs(10);
    let mut nodes = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        let window = if i == 0 {
            long
        } else {
            Duration::from_millis(2)
        };
        nodes.push(batching_node(d.path(), nats.url(i), "hb", &format!("h{i}"), window).await);
    }
    let all: Vec<&_> = nodes.iter().collect();
    let names: Vec<String> = (0..8).map(|i| format!("w{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        nodes[i % 3]
            .register(reg(n, 100 + i as u32), Some(T0))
            .await
            .unwrap();
    }
    let before = converge(&all).await;

    // 8 agents × 5 heartbeats through host 0, one open batch.
    let mut tickets = Vec::new();
    for round in 1..=5i64 {
        for (i, n) in names.iter().enumerate() {
            let at = T0.add_secs(round * 10 + i as i64);
            let t = lazy_heartbeat(&nodes[0], n, Some(100 + i as u32), Some(at))
                .await
                .unwrap();
            tickets.push(t);
        }
    }
    // Refused before it joins a batch: the wrong pid.
    let e = lazy_heartbeat(&nodes[0], "w1", Some(999), Some(T0))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("pid"), "{e}");
    let flushed = nodes[0].flush_heartbeats().await;
    let mut seqs = BTreeSet::new();
    for t in tickets {
        seqs.insert(t.wait().await.unwrap());
    }
    // 40 heartbeats, one stream message.
    assert_eq!(seqs.into_iter().collect::<Vec<_>>(), vec![before + 1]);
    assert_eq!(flushed, before + 1);
    assert_eq!(converge(&all).await, before + 1);
    for node in &nodes {
        node.store().with_state(|s, _| {
            for (i, n) in names.iter().enumerate() {
                let a = s.agent(n).unwrap();
                assert_eq!(a.last_active, T0.add_secs(50 + i as i64), "{n}");
                assert_eq!(a.last_event_lsn, before + 1, "{n}");
            }
        });
        // History (audit) shows each heartbeat, at the batch's LSN.
        let h = node.store().history("w3").unwrap();
        let beats: Vec<_> = h
            .iter()
            .filter(|(_, e)| matches!(e.kind, EventKind::Heartbeat { .. }))
            .map(|(lsn, e)| (*lsn, e.at))
            .collect();
        let want: Vec<_> = (1..=5)
            .map(|r| (before + 1, T0.add_secs(r * 10 + 3)))
            .collect();
        assert_eq!(beats, want);
    }

    // A heartbeat accepted for w2 (pid 102) on host 0; before its batch is
    // sealed, host 1 removes w2 and registers it again with pid 7. The
    // batch lands after both: its heartbeat folds as a late one with
    // another pid (an anomaly, no effect), identically on every host.
    let late = lazy_heartbeat(&nodes[0], "w2", Some(102), Some(T0.add_secs(900)))
        .await
        .unwrap();
    let kept = lazy_heartbeat(&nodes[0], "w5", Some(105), Some(T0.add_secs(901)))
        .await
        .unwrap();
    let anomalies = nodes[1].store().state().anomalies();
    let removed = nodes[1].remove("w2", Some(T0.add_secs(800))).await.unwrap();
    let (again, _) = nodes[1]
        .register(reg("w2", 7), Some(T0.add_secs(801)))
        .await
        .unwrap();
    nodes[0].flush_heartbeats().await;
    let batch = late.wait().await.unwrap();
    assert_eq!(kept.wait().await.unwrap(), batch);
    assert!(
        removed < again && again < batch,
        "{removed} {again} {batch}"
    );
    converge(&all).await;
    for node in &nodes {
        let s = node.store().state();
        let w2 = s.agent("w2").unwrap();
        assert_eq!((w2.pid, w2.last_active), (Some(7), T0.add_secs(801)));
        assert_eq!(s.agent("w5").unwrap().last_active, T0.add_secs(901));
        assert_eq!(s.anomalies(), anomalies + 1);
    }
    let tmp = tempfile::tempdir().unwrap();
    let ex = exports(&all, tmp.path());
    assert!(ex.windows(2).all(|w| w[0] == w[1]), "exports differ");

    // A restarted host refolds the batches from its local log alike.
    let n2 = nodes.pop().unwrap();
    let rows = |s: &agentlog::registry::State| s.agents().iter().cloned().collect::<Vec<_>>();
    let want = rows(&n2.store().state());
    n2.close().await.unwrap();
    let store = agentlog::store::Store::open(dirs[2].path(), store_options()).unwrap();
    assert_eq!(rows(&store.state()), want);
    store.close().unwrap();
    for n in nodes {
        n.close().await.unwrap();
    }
}

/// `agentlog serve --nats` on one host of a 3-server cluster.
fn replica_daemon(nats: &NatsCluster, fleet: &str) -> (Store, Daemon) {
    let store = Store::new();
    let urls = nats.urls().join(",");
    let args = ["--nats", &urls, "--stream", fleet, "--host-id", "p0"];
    let daemon = Daemon::start(&store.dir, &args);
    (store, daemon)
}

#[test]
fn a_replica_answers_pipelined_lazy_heartbeats_in_order_with_their_batch_lsn() {
    let nats = NatsCluster::start(3);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(nats.wait_ready("pipe"));
    let (store, _daemon) = replica_daemon(&nats, "pipe");
    let mut c = Conn::connect(&store.dir);
    for n in ["p1", "p2"] {
        let r = register(&mut c, n);
        assert!(r["result"]["lsn"].as_u64().is_some(), "{r}");
    }
    // 600 heartbeats written at once, before any reply is read; one for an
    // agent nobody registered and one durable in the middle.
    let n = 600;
    let mut lines = Vec::new();
    for i in 0..n {
        let doc = match i {
            250 => json!({"id": i, "method": "heartbeat", "params": {"name": "ghost"}}),
            400 => {
                json!({"id": i, "method": "heartbeat", "params": {"name": "p2", "durable": true}})
            }
            _ => {
                let name = ["p1", "p2"][i % 2];
                json!({"id": i, "method": "heartbeat", "params": {"name": name}})
            }
        };
        serde_json::to_writer(&mut lines, &doc).unwrap();
        lines.push(b'\n');
    }
    c.writer.write_all(&lines).unwrap();
    let replies: Vec<Value> = (0..n).map(|_| c.recv().expect("a reply")).collect();
    let ids: Vec<u64> = replies.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(
        ids,
        (0..n as u64).collect::<Vec<_>>(),
        "replies in request order"
    );
    assert!(
        replies[250]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ghost"),
        "{}",
        replies[250]
    );
    let lsn = |i: usize| {
        replies[i]["result"]["lsn"]
            .as_u64()
            .unwrap_or_else(|| panic!("reply {i}: {}", replies[i]))
    };
    let lazy: BTreeSet<u64> = (0..n)
        .filter(|i| ![250, 400].contains(i))
        .map(lsn)
        .collect();
    // One message per batch, not per heartbeat.
    assert!(
        lazy.len() * 10 <= n,
        "{} batches for {n} heartbeats",
        lazy.len()
    );
    // The durable one is answered after the lazy ones before it were folded,
    // and is its own message after them.
    let before: Vec<u64> = (0..400).filter(|&i| i != 250).map(lsn).collect();
    assert!(before.iter().all(|&l| l < lsn(400)));
    // Every LSN answered is folded here: p1's last heartbeat is at the
    // batch its reply named, and `log` shows the batches.
    let last_p1 = lsn(n - 2);
    eventually("the last batch in the log", || {
        let log = store.ok(&["log", "--json", "--from", &last_p1.to_string()]);
        let first: Value = serde_json::from_str(log.lines().next()?).ok()?;
        (first["lsn"] == last_p1).then_some(())
    });
    let log = store.ok(&["log", "--json", "--from", &last_p1.to_string()]);
    let first: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(first["kind"], "HeartbeatBatch", "{first}");
    let audit = store.ok(&["audit", "p1"]);
    assert!(audit.contains("heartbeats ×298"), "{audit}");
}
