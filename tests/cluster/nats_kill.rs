//! A NATS server SIGKILLed under load, then restarted, 10 times
//! (docs/scaling.md §8):
//! no acknowledged event is lost (R3 keeps a quorum), every writer resumes
//! after each kill and each restart, and every host — including one that
//! starts afterwards on an empty store — holds each acknowledged event at
//! its acknowledged sequence. Each step waits on a condition (a stream
//! healthy again, each writer's acknowledgements), never a fixed sleep; the
//! time of each round is printed.

use crate::support::cluster::*;
use agentlog::cluster::ClusterNode;
use agentlog::registry::{decode, EventKind, Registration};
use agentlog::time::Timestamp;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KILLS: usize = 10;
const WRITERS: usize = 4;
/// Acknowledged writes each writer must add after each kill and restart.
const PROGRESS: usize = 3;

type Acked = Arc<Mutex<Vec<(u64, String, Timestamp)>>>;

/// Acknowledged writes per writer so far.
fn per_writer(acked: &Acked) -> Vec<usize> {
    let acked = acked.lock().unwrap();
    (0..WRITERS)
        .map(|w| {
            let agent = format!("w{w}");
            acked.iter().filter(|(_, a, _)| *a == agent).count()
        })
        .collect()
}

/// Waits until every writer has `PROGRESS` more acknowledged writes than
/// in `from`: each one resumed, not just the fastest.
async fn wait_progress(acked: &Acked, from: &[usize], what: &str) {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let now = per_writer(acked);
        if now.iter().zip(from).all(|(n, f)| *n >= f + PROGRESS) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "writers did not all resume {what}: acks per writer {now:?}, from {from:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
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
                let seq = durable_heartbeat(&a, &agent, Some(w as u32 + 1), Some(at))
                    .await
                    .unwrap_or_else(|e| panic!("writer {w} write {i}: {e}"));
                acked.lock().unwrap().push((seq, agent.clone(), at));
            }
        }));
    }

    for round in 0..KILLS {
        let victim = round % 3;
        let t0 = Instant::now();
        wait_stream_healthy(a.jetstream(), "kill").await;
        let healthy = t0.elapsed();
        let before = per_writer(&acked);
        nats.kill(victim);
        let what = format!("after server {victim} was killed (round {round})");
        wait_progress(&acked, &before, &what).await;
        let resumed = t0.elapsed();
        let before = per_writer(&acked);
        nats.restart(victim);
        let what = format!("after server {victim} restarted (round {round})");
        wait_progress(&acked, &before, &what).await;
        eprintln!(
            "round {round}: server {victim}; healthy after {healthy:?}, writers resumed \
             after the kill at {resumed:?}, after the restart at {:?}",
            t0.elapsed()
        );
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
