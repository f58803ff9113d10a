//! Sweeps across hosts: the sweeper lease in a JetStream KV bucket lets
//! exactly one host sweep; when the holder stops renewing (paused, gone)
//! another host takes the lease after its TTL, and the old holder, when it
//! comes back, finds its lease lost and sweeps nothing. No agent is swept
//! twice.

use crate::support::cluster::*;
use agentlog::cluster::{LeaseKey, SweepLease};
use agentlog::model::{Status, StatusCause};
use agentlog::registry::{decode, EventKind, Registration};
use std::time::{Duration, Instant};

fn lease_expiries(n: &agentlog::cluster::ClusterNode) -> Vec<String> {
    n.store()
        .view()
        .iter_from(0)
        .filter_map(|r| {
            let e = decode(r.unwrap().payload).unwrap();
            match e.kind {
                EventKind::StatusChanged {
                    agent,
                    cause: StatusCause::LeaseExpired,
                    ..
                } => Some(agent),
                _ => None,
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_host_sweeps_and_a_paused_holder_loses_the_lease() {
    let nats = NatsCluster::start(3);
    nats.wait_ready("sweep").await;
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = node(da.path(), vec![nats.url(0)], "sweep", "a").await;
    let b = node(db.path(), vec![nats.url(1)], "sweep", "b").await;
    let ttl = Duration::from_secs(2);
    let la = SweepLease::open(a.jetstream(), "sweep", "a", LeaseKey::Sweeper, ttl, 3)
        .await
        .unwrap();
    let lb = SweepLease::open(b.jetstream(), "sweep", "b", LeaseKey::Sweeper, ttl, 3)
        .await
        .unwrap();

    for i in 0..5 {
        let r = Registration::new(&format!("x{i}"), "codex", "/s");
        a.register(r, Some(T0)).await.unwrap();
    }
    converge(&[&a, &b]).await;
    // Both hosts sweep at once, past every lease: one acts, one does not.
    let now = T0.add_secs(200);
    let (sa, sb) = tokio::join!(a.sweep(&la, now), b.sweep(&lb, now));
    let (sa, sb) = (sa.unwrap(), sb.unwrap());
    assert!(
        (sa.len(), sb.len()) == (5, 0) || (sa.len(), sb.len()) == (0, 5),
        "swept by a: {}, by b: {}",
        sa.len(),
        sb.len()
    );
    let (holder, holder_lease, other, other_lease) = if sa.is_empty() {
        (&b, &lb, &a, &la)
    } else {
        (&a, &la, &b, &lb)
    };
    // Sweeping again changes nothing: every agent is already exited.
    assert!(holder
        .sweep(holder_lease, now.add_secs(1))
        .await
        .unwrap()
        .is_empty());

    // The holder pauses (stops renewing). New agents register; the other
    // host takes the lease once it expired and sweeps them.
    for i in 0..3 {
        let r = Registration::new(&format!("y{i}"), "codex", "/s");
        other.register(r, Some(T0.add_secs(1000))).await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while !other_lease.acquire_or_renew().await.unwrap() {
        assert!(
            Instant::now() < deadline,
            "lease not taken over within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let later = T0.add_secs(1200);
    let swept = other.sweep(other_lease, later).await.unwrap();
    assert_eq!(swept.len(), 3);
    // The paused holder resumes: its lease is lost, it sweeps nothing.
    converge(&[&a, &b]).await;
    assert!(holder.sweep(holder_lease, later).await.unwrap().is_empty());

    let seq = converge(&[&a, &b]).await;
    assert_eq!(seq, 5 + 5 + 3 + 3);
    for n in [&a, &b] {
        let mut swept = lease_expiries(n);
        swept.sort();
        assert_eq!(swept, ["x0", "x1", "x2", "x3", "x4", "y0", "y1", "y2"]);
        let state = n.store().state();
        assert!(state.agents().iter().all(|ag| ag.status == Status::Exited));
    }
    other_lease.release().await.unwrap();
    a.close().await.unwrap();
    b.close().await.unwrap();
}
