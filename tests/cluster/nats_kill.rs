//! A NATS server SIGKILLed under load, then restarted, several times: no
//! acknowledged event is lost (R3 keeps a quorum), the writers resume, and
//! every host — including one that starts afterwards on an empty store —
//! holds each acknowledged event at its acknowledged sequence.

use crate::support::cluster::*;
use agentlog::cluster::ClusterNode;
use agentlog::registry::{decode, EventKind, Registration};
use agentlog::time::Timestamp;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KILLS: usize = 3;
const WRITERS: usize = 4;
/// Acknowledged writes to see after each kill and each restart.
const PROGRESS: usize = 30;

type Acked = Arc<Mutex<Vec<(u64, String, Timestamp)>>>;

async fn wait_progress(acked: &Acked, from: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(40);
    while acked.lock().unwrap().len() < from + PROGRESS {
        assert!(
            Instant::now() < deadline,
            "writers did not resume {what}: {} acks, wanted {}",
            acked.lock().unwrap().len(),
            from + PROGRESS
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_nats_servers_lose_nothing_acknowledged() {
    let mut nats = NatsCluster::start(3);
    nats.wait_ready("kill").await;
    let da = tempfile::tempdir().unwrap();
    let a = Arc::new(node(da.path(), nats.urls(), "kill", "a").await);
    for w in 0..WRITERS {
        let mut r = Registration::new(&format!("w{w}"), "claude", "/k");
        r.pid = Some(w as u32 + 1);
        a.register(r, Some(T0)).await.unwrap();
    }

    let stop = Arc::new(AtomicBool::new(false));
    let acked: Acked = Arc::default();
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (a, stop, acked) = (a.clone(), stop.clone(), acked.clone());
        writers.push(tokio::spawn(async move {
            let agent = format!("w{w}");
            let mut i = 0i64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let at = T0.add_millis(i * 10 + w as i64);
                let seq = a
                    .heartbeat_durable(&agent, Some(w as u32 + 1), Some(at))
                    .await
                    .unwrap_or_else(|e| panic!("writer {w} write {i}: {e}"));
                acked.lock().unwrap().push((seq, agent.clone(), at));
            }
        }));
    }

    for round in 0..KILLS {
        let victim = round % 3;
        wait_stream_healthy(a.jetstream(), "kill").await;
        let before = acked.lock().unwrap().len();
        nats.kill(victim);
        wait_progress(&acked, before, &format!("after server {victim} was killed")).await;
        let before = acked.lock().unwrap().len();
        nats.restart(victim);
        wait_progress(&acked, before, &format!("after server {victim} restarted")).await;
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }

    let acked = acked.lock().unwrap().clone();
    let db = tempfile::tempdir().unwrap();
    let fresh = node(db.path(), nats.urls(), "kill", "fresh").await;
    let seq = converge(&[&a, &fresh]).await;
    let mut seqs: Vec<u64> = acked.iter().map(|(s, ..)| *s).collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(
        seqs.len(),
        acked.len(),
        "two writes acknowledged at one sequence"
    );
    for n in [&*a, &fresh] {
        let view = n.store().view();
        let mut found = 0;
        for rec in view.iter_from(0) {
            let rec = rec.unwrap();
            let e = decode(rec.payload).unwrap();
            if let EventKind::Heartbeat { agent, .. } = &e.kind {
                if let Some((_, want, at)) = acked.iter().find(|(s, ..)| *s == rec.lsn) {
                    assert_eq!((agent, e.at), (want, *at), "lsn {}", rec.lsn);
                    found += 1;
                }
            }
        }
        assert_eq!(found, acked.len(), "acknowledged heartbeats missing");
        assert_eq!(n.store().log().last_lsn(), Some(seq));
    }
    let out = tempfile::tempdir().unwrap();
    let bytes = exports(&[&*a, &fresh], out.path());
    assert_eq!(bytes[0], bytes[1]);
    fresh.close().await.unwrap();
    let a: ClusterNode = Arc::try_unwrap(a).unwrap();
    a.close().await.unwrap();
}
