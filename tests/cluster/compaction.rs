//! Compaction across the cluster holds the retention invariant, over random
//! histories (docs/scaling.md §6): the validated commands of
//! `support::ops::op()` are published as facts through three nodes of a real
//! 3-node NATS cluster (round robin), the stream is compacted through one of
//! them at a random `now` and policy, and then every host's fold, a host
//! that was closed before the compaction and comes back, and a fresh host
//! that reads the compacted stream from an empty store all equal
//! retention(fold before) — agents with every field, messages with read
//! receipts, request ids, sessions. A fresh host's log keeps the history of
//! every kept agent but for collapsed heartbeats, and the stream shrank.
//! Half the cases lower the compactor's marker limit, so the markers split.

use crate::support::cluster::*;
use crate::support::ops::{history_preserved, op, read_events, run};
use agentlog::cluster::ClusterNode;
use agentlog::compact::CompactOptions;
use agentlog::registry::{Event, EventKind, Lsn, RetentionPolicy, State};
use agentlog::store::{CommandSink, Store, StoreOptions};
use async_nats::jetstream::stream::RawMessageErrorKind;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::path::Path;
use std::sync::Arc;

/// A small cap, so cap drops (and their records) occur.
const MAX_MESSAGES: usize = 5;

async fn host(dir: &Path, servers: Vec<String>, fleet: &str, name: &str) -> ClusterNode {
    host_with_markers(dir, servers, fleet, name, None).await
}

/// A host whose markers are at most `marker_max_bytes` (the servers' limit
/// when `None`).
async fn host_with_markers(
    dir: &Path,
    servers: Vec<String>,
    fleet: &str,
    name: &str,
    marker_max_bytes: Option<usize>,
) -> ClusterNode {
    let opts = StoreOptions {
        max_messages: MAX_MESSAGES,
        ..store_options()
    };
    let store = Store::open(dir, opts).expect("open local store");
    let mut cluster = cluster_options(servers, fleet, name);
    cluster.compaction.marker_max_bytes = marker_max_bytes;
    ClusterNode::start(store, cluster)
        .await
        .expect("start cluster node")
}

fn same_registry(what: &str, got: &State, want: &State) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.agents(), want.agents(), "{}: agents", what);
    prop_assert_eq!(got.messages(), want.messages(), "{}: messages", what);
    prop_assert_eq!(got.requests(), want.requests(), "{}: request ids", what);
    prop_assert_eq!(got.sessions(), want.sessions(), "{}: sessions", what);
    prop_assert_eq!(got.drops(), want.drops(), "{}: drop tally", what);
    Ok(())
}

/// Publishes `event` through `node` as one command (conditional on its
/// subject, as every command; from a blocking thread, as the daemon does).
async fn publish(node: &Arc<ClusterNode>, event: Event) -> Lsn {
    let node = node.clone();
    tokio::task::spawn_blocking(move || {
        let done = CommandSink::command(&*node, None, &mut |_| Ok(vec![event.clone()]))
            .expect("publish an event");
        done[0].0
    })
    .await
    .expect("publishing task")
}

#[derive(Debug)]
struct Case {
    ops: Vec<crate::support::ops::Op>,
    later: i64,
    ttl: i64,
    keep: usize,
    keep_all_heartbeats: bool,
    compactor: usize,
    offline_at: f64,
    marker_max_bytes: Option<usize>,
}

prop_compose! {
    fn case()(
        ops in proptest::collection::vec(op(), 10..70),
        later in 0i64..200_000,
        ttl in 1i64..400_000,
        keep in 0usize..4,
        keep_all_heartbeats in any::<bool>(),
        compactor in 0usize..3,
        offline_at in 0.0f64..1.0,
        // 80 bytes fit the empty marker and its largest name (a session
        // key of `ops`); a full marker of these histories takes up to ~350.
        marker_max_bytes in prop_oneof![Just(None), (80usize..300).prop_map(Some)],
    ) -> Case {
        Case {
            ops,
            later,
            ttl,
            keep,
            keep_all_heartbeats,
            compactor,
            offline_at,
            marker_max_bytes,
        }
    }
}

async fn check(nats: &NatsCluster, fleet: &str, c: Case) -> Result<(), TestCaseError> {
    let (_, events, end) = run(&c.ops, MAX_MESSAGES);
    let dirs: Vec<_> = (0..5).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = Vec::new();
    for (i, d) in dirs.iter().take(3).enumerate() {
        let limit = c.marker_max_bytes.filter(|_| i == c.compactor);
        let n =
            host_with_markers(d.path(), vec![nats.url(i)], fleet, &format!("h{i}"), limit).await;
        nodes.push(Arc::new(n));
    }
    // A host that folds part of the history, then is away while the
    // stream is compacted.
    let away = host(dirs[3].path(), nats.urls(), fleet, "away").await;
    let split = (events.len() as f64 * c.offline_at) as usize;
    for (i, e) in events.iter().enumerate() {
        let lsn = publish(&nodes[i % 3], e.clone()).await;
        prop_assert_eq!(lsn, i as Lsn + 1, "stream sequence = position");
        if i + 1 == split {
            away.wait_applied(lsn).await.unwrap();
        }
    }
    let away_at = away.applied();
    away.close().await.unwrap();
    let all: Vec<&ClusterNode> = nodes.iter().map(|n| &**n).collect();
    converge(&all).await;

    let now = end.add_millis(c.later);
    let opts = CompactOptions {
        policy: RetentionPolicy {
            presence_ttl_ms: c.ttl,
            keep_finished: c.keep,
        },
        keep_all_heartbeats: c.keep_all_heartbeats,
        dry_run: false,
    };
    let before_events = read_events(nodes[0].store().log());
    let mut expected = nodes[0].store().state();
    expected.retain(now, &opts.policy);
    let stream_before = nodes[0].stream_last_sequence().await.unwrap();
    let report = nodes[c.compactor]
        .compact_stream(None, now, &opts)
        .await
        .unwrap();
    let last = converge(&all).await;
    for (i, n) in nodes.iter().enumerate() {
        same_registry(&format!("host h{i}"), &n.store().state(), &expected)?;
        // The mirror compacted its log up to the marker: its fold is the state.
        let refolded = crate::support::ops::fold(&read_events(n.store().log()), MAX_MESSAGES);
        same_registry(&format!("refold of h{i}'s log"), &refolded, &expected)?;
    }
    // Back after the compaction, from where it stopped (gaps held by fillers).
    let away = host(dirs[3].path(), nats.urls(), fleet, "away").await;
    prop_assert_eq!(away.store().open_report().events_folded, 0);
    away.wait_applied(last).await.unwrap();
    same_registry(
        &format!("host away since sequence {away_at}"),
        &away.store().state(),
        &expected,
    )?;
    // A host that starts after the compaction on an empty store.
    let fresh = host(dirs[4].path(), nats.urls(), fleet, "fresh").await;
    fresh.wait_applied(last).await.unwrap();
    same_registry("fresh host", &fresh.store().state(), &expected)?;
    // The stream keeps every kept agent's history but for collapsed
    // heartbeats, and the markers are its new records (one unless the
    // compactor's limit split them).
    let mut stream = nodes[0]
        .jetstream()
        .get_stream(nodes[0].subjects().stream_name())
        .await
        .unwrap();
    let mut held: Vec<(Lsn, Event)> = Vec::new();
    let mut markers = 0;
    for seq in 1..=last {
        let m = match stream.get_raw_message(seq).await {
            Ok(m) => m,
            Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => continue, // deleted
            Err(e) => panic!("get stream sequence {seq}: {e}"),
        };
        let e = agentlog::registry::decode(&m.payload).unwrap();
        match e.kind {
            EventKind::StreamCompacted { .. } => {
                markers += 1;
                let limit = c.marker_max_bytes.unwrap_or(usize::MAX);
                prop_assert!(
                    m.payload.len() <= limit,
                    "marker at {}: {} bytes",
                    seq,
                    m.payload.len()
                );
            }
            _ => held.push((seq, e)),
        }
    }
    history_preserved(&before_events, &held, &|a| expected.agents().contains(a))
        .map_err(TestCaseError::fail)?;
    let info = stream.info().await.unwrap();
    if report.events_dropped > 0 {
        prop_assert!(markers >= 1);
        if c.marker_max_bytes.is_none() {
            prop_assert_eq!(markers, 1);
        }
        prop_assert_eq!(
            info.state.last_sequence,
            stream_before + markers,
            "the markers"
        );
        prop_assert!(
            held.len() < before_events.len(),
            "{} records left of {}",
            held.len(),
            before_events.len()
        );
    } else {
        prop_assert_eq!(markers, 0);
        prop_assert_eq!(info.state.last_sequence, stream_before);
    }
    away.close().await.unwrap();
    fresh.close().await.unwrap();
    for n in nodes {
        Arc::try_unwrap(n).unwrap().close().await.unwrap();
    }
    Ok(())
}

/// 12 random histories (10–70 commands each) on one NATS cluster, a stream
/// (fleet) of their own each.
#[test]
fn compaction_of_the_stream_is_retention_of_the_fold_on_every_host() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let nats = NatsCluster::start(3);
    rt.block_on(nats.wait_ready("warmup"));
    let mut runner = TestRunner::new(Config {
        cases: 12,
        failure_persistence: None,
        ..Config::default()
    });
    let n = std::sync::atomic::AtomicUsize::new(0);
    let result = runner.run(&case(), |c| {
        let i = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        rt.block_on(check(&nats, &format!("cp{i}"), c))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
