//! The stream's compaction where one marker is not enough (docs/scaling.md
//! §6): a compaction whose marker would exceed the servers' largest message
//! publishes several, each naming part of what it drops, and every host —
//! one folding all along, one that starts afterwards — ends at
//! retention(fold before); a compactor that fails after its marker and a
//! few deletions leaves records the marker names in the stream, and the
//! next compaction, through another host, deletes them.

use crate::support::cluster::*;
use agentlog::cluster::{ClusterNode, MARKER_HEADROOM};
use agentlog::compact::CompactOptions;
use agentlog::model::Status;
use agentlog::registry::{
    decode, EventKind, Lsn, PostMessage, Registration, RetentionPolicy, SessionKey, SessionOp,
    State,
};
use agentlog::store::Store;
use agentlog::time::Timestamp;
use async_nats::jetstream::stream::RawMessageErrorKind;
use std::path::Path;

/// Every finished agent retired, messages expired: two days after [`T0`].
fn retention() -> CompactOptions {
    CompactOptions {
        policy: RetentionPolicy {
            presence_ttl_ms: 3_600_000,
            keep_finished: 0,
        },
        ..CompactOptions::default()
    }
}

fn later() -> Timestamp {
    T0.add_secs(2 * 86_400)
}

async fn host_with(
    dir: &Path,
    servers: Vec<String>,
    fleet: &str,
    name: &str,
    tune: impl FnOnce(&mut agentlog::cluster::ClusterOptions),
) -> ClusterNode {
    let store = Store::open(dir, store_options()).expect("open local store");
    let mut opts = cluster_options(servers, fleet, name);
    tune(&mut opts);
    ClusterNode::start(store, opts)
        .await
        .expect("start cluster node")
}

/// A history through `node`: `retired` agents that register and exit, two
/// that stay, posts between those two that expire, and a session that
/// opens and closes. Returns the retired names.
async fn history(node: &ClusterNode, retired: usize) -> Vec<String> {
    let mut names = Vec::new();
    for i in 0..retired + 2 {
        let name = if i < retired {
            format!("retired-agent-number-{i:03}")
        } else {
            format!("stays-{i}")
        };
        let mut r = Registration::new(&name, "claude", "/work");
        r.pid = Some(1000 + i as u32);
        let at = T0.add_secs(i as i64);
        node.register(r, Some(at)).await.unwrap();
        if i < retired {
            node.set_status(&name, Status::Exited, None, Some(at.add_secs(1)))
                .await
                .unwrap();
            names.push(name);
        }
    }
    let (a, b) = (format!("stays-{retired}"), format!("stays-{}", retired + 1));
    for i in 0..6 {
        let mut post = PostMessage::new(&a, Some(&b), "note", &format!("note {i}"));
        post.ttl_ms = Some(60_000);
        node.post_message(post, Some(T0.add_secs(600 + i)))
            .await
            .unwrap();
    }
    let key = SessionKey::new("cli", "/work", "s-1");
    let at = T0.add_secs(700);
    node.session(SessionOp::Open, key.clone(), Some(60_000), Some(at))
        .await
        .unwrap();
    node.session(SessionOp::Close, key, None, Some(at.add_secs(1)))
        .await
        .unwrap();
    names
}

/// Every record of the stream up to `last`: sequence and event.
async fn stream_records(node: &ClusterNode, last: Lsn) -> Vec<(Lsn, EventKind)> {
    let stream = node
        .jetstream()
        .get_stream(node.subjects().stream_name())
        .await
        .unwrap();
    let mut held = Vec::new();
    for seq in 1..=last {
        match stream.get_raw_message(seq).await {
            Ok(m) => held.push((seq, decode(&m.payload).unwrap().kind)),
            Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => {}
            Err(e) => panic!("get stream sequence {seq}: {e}"),
        }
    }
    held
}

/// The records of `held` at or below `upto` that concern what `named`
/// (a marker's agents, messages and sessions) names.
fn named_left<'a>(
    held: &'a [(Lsn, EventKind)],
    upto: Lsn,
    agents: &[String],
    messages: &[Lsn],
    sessions: &[SessionKey],
) -> Vec<&'a (Lsn, EventKind)> {
    held.iter()
        .filter(|(seq, kind)| {
            *seq <= upto
                && (kind
                    .subject_agent()
                    .is_some_and(|a| agents.iter().any(|n| n == a))
                    || messages.contains(seq)
                    || kind.session().is_some_and(|k| sessions.contains(k)))
        })
        .collect()
}

/// What the markers of `held` name, with their `upto`.
fn marker_names(held: &[(Lsn, EventKind)]) -> (Lsn, Vec<String>, Vec<Lsn>, Vec<SessionKey>) {
    let (mut upto, mut agents, mut messages, mut sessions) = (0, vec![], vec![], vec![]);
    for (_, kind) in held {
        if let EventKind::StreamCompacted {
            upto: u,
            agents: a,
            messages: m,
            sessions: s,
        } = kind
        {
            upto = *u;
            agents.extend(a.iter().cloned());
            messages.extend(m.iter().copied());
            sessions.extend(s.iter().cloned());
        }
    }
    (upto, agents, messages, sessions)
}

fn same_registry(what: &str, got: &State, want: &State) {
    assert_eq!(got.agents(), want.agents(), "{what}: agents");
    assert_eq!(got.messages(), want.messages(), "{what}: messages");
    assert_eq!(got.sessions(), want.sessions(), "{what}: sessions");
    assert_eq!(got.drops(), want.drops(), "{what}: drop tally");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marker_over_the_message_limit_is_split_and_every_host_ends_at_retention() {
    let nats = NatsCluster::start(3);
    nats.wait_ready("split").await;
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    // The default limit is the servers' largest message (1 MB by default).
    let plain = node(dirs[1].path(), nats.urls(), "split", "plain").await;
    assert_eq!(plain.marker_max_bytes(), 1024 * 1024 - MARKER_HEADROOM);
    const LIMIT: usize = 600;
    let compactor = host_with(dirs[0].path(), nats.urls(), "split", "small", |o| {
        o.compaction.marker_max_bytes = Some(LIMIT)
    })
    .await;
    let retired = history(&compactor, 40).await;
    let before = converge(&[&compactor, &plain]).await;
    let mut expected = compactor.store().state();
    expected.retain(later(), &retention().policy);

    let report = compactor
        .compact_stream(None, later(), &retention())
        .await
        .unwrap();
    assert_eq!(report.agents_retired.len(), 40, "{report:?}");
    let last = converge(&[&compactor, &plain]).await;
    let held = stream_records(&plain, last).await;
    let markers: Vec<Lsn> = held
        .iter()
        .filter(|(_, k)| matches!(k, EventKind::StreamCompacted { .. }))
        .map(|(s, _)| *s)
        .collect();
    // One marker would not fit: consecutive markers right after `before`.
    assert!(markers.len() > 1, "{markers:?}");
    assert_eq!(markers, ((before + 1)..=last).collect::<Vec<_>>());
    let stream = plain
        .jetstream()
        .get_stream(plain.subjects().stream_name())
        .await
        .unwrap();
    for &seq in &markers {
        let m = stream.get_raw_message(seq).await.unwrap();
        assert!(
            m.payload.len() <= LIMIT,
            "marker at {seq}: {} bytes",
            m.payload.len()
        );
    }
    let (upto, agents, messages, sessions) = marker_names(&held);
    assert_eq!(upto, before);
    let mut named = agents.clone();
    named.sort();
    assert_eq!(named, retired, "the markers name every retired agent once");
    assert_eq!((messages.len(), sessions.len()), (6, 1));
    let left = named_left(&held, upto, &agents, &messages, &sessions);
    assert!(left.is_empty(), "left in the stream: {left:?}");

    for (what, n) in [("compactor", &compactor), ("plain", &plain)] {
        same_registry(what, &n.store().state(), &expected);
    }
    let fresh = node(dirs[2].path(), nats.urls(), "split", "fresh").await;
    fresh.wait_applied(last).await.unwrap();
    same_registry("fresh host", &fresh.store().state(), &expected);
    for n in [compactor, plain, fresh] {
        n.close().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_compaction_deletes_what_a_failed_compactor_left_in_the_stream() {
    let nats = NatsCluster::start(3);
    nats.wait_ready("died").await;
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let dying = host_with(dirs[0].path(), nats.urls(), "died", "dying", |o| {
        o.compaction.fail_after_deletions = Some(3)
    })
    .await;
    let other = node(dirs[1].path(), nats.urls(), "died", "other").await;
    history(&dying, 8).await;
    let before = converge(&[&dying, &other]).await;
    let mut expected = dying.store().state();
    expected.retain(later(), &retention().policy);

    let err = dying
        .compact_stream(None, later(), &retention())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("injected fault"), "{err}");
    // The marker landed and decides every fold; what it names is partly
    // still in the stream.
    let last = converge(&[&dying, &other]).await;
    assert_eq!(last, before + 1, "one marker");
    let held = stream_records(&other, last).await;
    let (upto, agents, messages, sessions) = marker_names(&held);
    assert_eq!(upto, before);
    let left = named_left(&held, upto, &agents, &messages, &sessions).len();
    assert!(left > 0, "the fault left nothing to finish");
    for (what, n) in [("dying", &dying), ("other", &other)] {
        same_registry(what, &n.store().state(), &expected);
    }

    // The next compaction, through the other host, finishes the deletions.
    let report = other
        .compact_stream(None, later(), &retention())
        .await
        .unwrap();
    assert!(report.agents_retired.is_empty(), "{report:?}");
    let last = converge(&[&dying, &other]).await;
    assert_eq!(last, before + 1, "no new marker");
    let held = stream_records(&other, last).await;
    let left = named_left(&held, upto, &agents, &messages, &sessions);
    assert!(left.is_empty(), "left in the stream: {left:?}");
    for (what, n) in [("dying", &dying), ("other", &other)] {
        same_registry(what, &n.store().state(), &expected);
    }
    let fresh = node(dirs[2].path(), nats.urls(), "died", "fresh").await;
    fresh.wait_applied(last).await.unwrap();
    same_registry("fresh host", &fresh.store().state(), &expected);
    for n in [dying, other, fresh] {
        n.close().await.unwrap();
    }
}
