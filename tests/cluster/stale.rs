//! The `stale` mark of a replica that lost its NATS quorum (docs/scaling.md
//! §8, PROTOCOL.md): two `serve --nats` daemons over a real 3-node cluster;
//! two of the three NATS servers SIGKILLed. Each daemon reports `stale:
//! true` in `hello` within a bounded time, keeps answering reads from its
//! mirror with the `stale` mark on each reply, and a write sent while stale
//! waits for the quorum instead of failing. With the servers restarted the
//! mark clears, the waiting write is stored once, and writes resume. Every
//! wait is a condition polled against a deadline.

use super::daemon::at;
use crate::support::cli::register_args;
use crate::support::cluster::NatsCluster;
use crate::support::daemon::{eventually_within, Conn, Daemon, Store};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const FLEET: &str = "stl";

fn call(store: &Store, method: &str, params: Value) -> Value {
    Conn::connect(&store.dir).call(json!({"id": 1, "method": method, "params": params}))
}

fn replica(store: &Store) -> Value {
    call(store, "hello", json!({}))["result"]["replica"].clone()
}

#[test]
fn a_replica_without_quorum_is_marked_stale_and_recovers() {
    let mut nats = NatsCluster::start(3);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(nats.wait_ready(FLEET));
    let urls = nats.urls().join(",");
    let hosts: Vec<(Store, Daemon)> = ["h0", "h1"]
        .iter()
        .map(|id| {
            let store = Store::new();
            let args = ["--nats", &urls, "--stream", FLEET, "--host-id", id];
            let daemon = Daemon::start(&store.dir, &args);
            (store, daemon)
        })
        .collect();
    let (h0, h1) = (&hosts[0].0, &hosts[1].0);
    h0.ok(&register_args(
        "w1",
        "claude",
        "/w",
        &at(1),
        &["--pid", "100"],
    ));
    for h in [h0, h1] {
        eventually_within("w1 on both hosts", Duration::from_secs(20), || {
            let got = call(h, "get", json!({"name": "w1"}));
            got.get("result").map(|_| ())
        });
        let r = replica(h);
        assert_eq!(r["stale"], false, "{r}");
        assert!(r["stale_since"].is_null(), "{r}");
        assert!(r["last_contact"].is_string(), "{r}");
        // In contact: replies carry no mark.
        let list = call(h, "list", json!({}));
        assert!(list.get("stale").is_none(), "{list}");
    }

    // Two of three servers die: no quorum anywhere.
    let killed_at = Instant::now();
    nats.kill(1);
    nats.kill(2);
    for h in [h0, h1] {
        let r = eventually_within("stale: true", Duration::from_secs(30), || {
            let r = replica(h);
            (r["stale"] == true).then_some(r)
        });
        let since = r["stale_since"].as_str().expect("stale_since is a time");
        let contact = r["last_contact"].as_str().expect("last_contact is a time");
        assert!(contact <= since, "{r}");
    }
    let detected = killed_at.elapsed();
    // Reads answer from the local mirror, marked stale.
    for h in [h0, h1] {
        let got = call(h, "get", json!({"name": "w1"}));
        assert_eq!(got["result"]["name"], "w1", "{got}");
        assert!(got["stale"]["since"].is_string(), "{got}");
        assert!(got["stale"]["last_contact"].is_string(), "{got}");
        let listed = h.ok(&["--json", "list"]);
        assert!(listed.contains("\"w1\""), "{listed}");
    }

    // A write sent while stale waits for the quorum (the publish is retried
    // with its message id), so it is stored once when the servers return.
    let writer = {
        let dir = h1.dir.clone();
        std::thread::spawn(move || {
            crate::support::daemon::bin()
                .arg("--dir")
                .arg(&dir)
                .args([
                    "status",
                    "w1",
                    "busy",
                    "--message",
                    "while stale",
                    "--at",
                    &at(2),
                ])
                .output()
                .unwrap()
        })
    };
    // The write is at the daemon (its connection open beside this one) and
    // unanswered while the quorum is gone.
    eventually_within("the write in flight", Duration::from_secs(20), || {
        let hello = call(h1, "hello", json!({}))["result"].clone();
        (hello["connections"].as_u64() >= Some(2)).then_some(())
    });
    assert!(!writer.is_finished(), "a write returned while stale");
    nats.restart(1);
    nats.restart(2);
    let restarted_at = Instant::now();
    for h in [h0, h1] {
        eventually_within("stale: false", Duration::from_secs(60), || {
            let r = replica(h);
            (r["stale"] == false && r["stale_since"].is_null()).then_some(())
        });
    }
    let recovered = restarted_at.elapsed();
    let out = writer.join().unwrap();
    assert!(out.status.success(), "write sent while stale: {out:?}");

    // Writes resume, and both hosts converge with the write stored once.
    h0.ok(&["heartbeat", "w1", "--pid", "100", "--at", &at(3)]);
    let last = eventually_within("the hosts to converge", Duration::from_secs(30), || {
        let lsns: Vec<u64> = [h0, h1]
            .iter()
            .map(|h| {
                call(h, "hello", json!({}))["result"]["last_lsn"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        (lsns[0] == lsns[1] && lsns[0] >= 3).then_some(lsns[0])
    });
    assert_eq!(
        last, 3,
        "registration, the status change once, the heartbeat"
    );
    for h in [h0, h1] {
        let got = call(h, "get", json!({"name": "w1"}));
        assert_eq!(got["result"]["status_message"], "while stale", "{got}");
        assert!(got.get("stale").is_none(), "{got}");
    }
    eprintln!(
        "stale detected {detected:?} after the kills; fresh {recovered:?} after the restarts"
    );
}
