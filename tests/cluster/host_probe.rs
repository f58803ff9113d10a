//! The host-local process probe in cluster sweeps (docs/scaling.md §7), on
//! a real 3-node NATS cluster: every registration records the host it was
//! made on, and a host's probe judges only its own agents' pids. Hosts a
//! and b share this machine, so host a is given a probe table that says
//! the opposite of b's real `/proc` about b's pids: a must not act on it.
//! Host b, not holding the sweeper lease, marks its own agent whose process
//! is gone; a live process on b is swept by no one; a sweep of the lease
//! holder racing b's probe acts once per agent; and once b is gone its
//! agents are swept by lease expiry alone, by the holder.

use crate::support::cluster::*;
use agentlog::cluster::{ClusterNode, LeaseKey, SweepLease};
use agentlog::model::{Status, StatusCause};
use agentlog::probe::SharedProbe;
use agentlog::registry::{decode, EventKind, FakeProbe, Registration};
use agentlog::store::Store;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const FLEET: &str = "probe";

async fn node_with_probe(dir: &Path, url: String, host: &str, probe: SharedProbe) -> ClusterNode {
    let store = Store::open(dir, store_options()).expect("open local store");
    let mut o = cluster_options(vec![url], FLEET, host);
    o.probe = probe;
    ClusterNode::start(store, o).await.expect("start node")
}

async fn register(n: &ClusterNode, name: &str, pid: u32) {
    let mut r = Registration::new(name, "codex", "/s");
    r.pid = Some(pid);
    n.register(r, Some(T0)).await.expect("register");
}

/// A pid that was this machine's and is no more: a child that exited.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let pid = child.id();
    child.wait().expect("reap true");
    pid
}

/// Every status change in `n`'s log, by agent: (cause, how many).
fn status_changes(n: &ClusterNode) -> BTreeMap<String, Vec<StatusCause>> {
    let mut out: BTreeMap<String, Vec<StatusCause>> = BTreeMap::new();
    for r in n.store().view().iter_from(0) {
        if let EventKind::StatusChanged { agent, cause, .. } =
            decode(r.unwrap().payload).unwrap().kind
        {
            out.entry(agent).or_default().push(cause);
        }
    }
    out
}

fn swept(changes: &[(u64, agentlog::registry::Event)]) -> Vec<String> {
    let mut names: Vec<String> = changes
        .iter()
        .filter_map(|(_, e)| e.kind.subject_agent().map(str::to_string))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_host_probes_only_its_own_agents_and_no_agent_is_swept_twice() {
    let nats = NatsCluster::start(3);
    nats.wait_ready(FLEET).await;
    let gone_on_b = dead_pid();
    let alive_on_b = std::process::id();
    let gone_on_a = dead_pid();
    // Host a's table: b's dead pid runs here, b's live pid and a's own
    // agent's pid are gone. Host b asks the real /proc.
    let table_a = FakeProbe {
        running: HashMap::from([(gone_on_b, None)]),
    };
    let (da, db, dc) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let a = node_with_probe(da.path(), nats.url(0), "a", SharedProbe(Arc::new(table_a))).await;
    let b = node_with_probe(db.path(), nats.url(1), "b", SharedProbe::default()).await;
    let ttl = Duration::from_secs(60);
    let la = SweepLease::open(a.jetstream(), FLEET, "a", LeaseKey::Sweeper, ttl, 3)
        .await
        .unwrap();
    let lb = SweepLease::open(b.jetstream(), FLEET, "b", LeaseKey::Sweeper, ttl, 3)
        .await
        .unwrap();
    assert!(la.acquire_or_renew().await.unwrap(), "a takes the lease");

    register(&a, "a-gone", gone_on_a).await;
    register(&b, "b-gone", gone_on_b).await;
    register(&b, "b-live", alive_on_b).await;
    converge(&[&a, &b]).await;
    // Every host folds the host each registration recorded, a host that
    // joins later too (the stream holds it).
    let c = node(dc.path(), vec![nats.url(2)], FLEET, "c").await;
    converge(&[&a, &b, &c]).await;
    for n in [&a, &b, &c] {
        let hosts: Vec<_> = ["a-gone", "b-gone", "b-live"]
            .iter()
            .map(|name| n.store().state().agent(name).unwrap().host.clone())
            .collect();
        assert_eq!(
            hosts,
            [Some("a".into()), Some("b".into()), Some("b".into())]
        );
    }

    // Within every lease: the holder judges only its own agent's pid (not
    // b's, though its table calls b's live pid gone and b's dead pid
    // running); b, without the lease, judges only its own.
    let now = T0.add_secs(10);
    assert_eq!(swept(&a.sweep(&la, now).await.unwrap()), ["a-gone"]);
    assert!(!lb.held());
    assert_eq!(swept(&b.sweep(&lb, now).await.unwrap()), ["b-gone"]);
    assert!(a.sweep(&la, now).await.unwrap().is_empty());
    assert!(b.sweep(&lb, now).await.unwrap().is_empty());
    converge(&[&a, &b, &c]).await;
    for n in [&a, &b, &c] {
        let s = n.store().state();
        assert_eq!(
            s.agent("b-gone").unwrap().status_cause,
            StatusCause::ProcessGone
        );
        assert_eq!(s.agent("b-gone").unwrap().status, Status::Exited);
        assert_eq!(s.agent("b-live").unwrap().status, Status::Live);
    }

    // Races: past the lease, the holder's lease sweep and b's probe want
    // the same agents of b whose processes are gone; the conditional
    // publishes let one change through per agent.
    let racers: Vec<String> = (0..12).map(|i| format!("r{i}")).collect();
    for name in &racers {
        register(&b, name, gone_on_b).await;
    }
    converge(&[&a, &b]).await;
    let later = T0.add_secs(500);
    let (sa, sb) = tokio::join!(a.sweep(&la, later), b.sweep(&lb, later));
    let (sa, sb) = (swept(&sa.unwrap()), swept(&sb.unwrap()));
    let mut both: Vec<String> = sa.iter().chain(&sb).cloned().collect();
    both.sort();
    // Each racer once, by one host; b-live's lease lapsed: the holder's.
    let mut expected: Vec<String> = racers.clone();
    expected.push("b-live".into());
    expected.sort();
    assert_eq!(both, expected, "holder swept {sa:?}, b swept {sb:?}");

    // Host b is gone: its agents are swept by lease expiry only, by the
    // holder, though a's table calls their pids gone.
    let mut r = Registration::new("b-left", "codex", "/s");
    r.pid = Some(alive_on_b);
    b.register(r, Some(T0.add_secs(900))).await.unwrap();
    converge(&[&a, &b, &c]).await;
    b.close().await.unwrap();
    assert!(a.sweep(&la, T0.add_secs(1000)).await.unwrap().is_empty());
    let swept_late = a.sweep(&la, T0.add_secs(1100)).await.unwrap();
    assert_eq!(swept(&swept_late), ["b-left"]);
    assert!(matches!(
        &swept_late[0].1.kind,
        EventKind::StatusChanged {
            cause: StatusCause::LeaseExpired,
            ..
        }
    ));
    converge(&[&a, &c]).await;

    for n in [&a, &c] {
        let changes = status_changes(n);
        for name in &racers {
            assert_eq!(changes[name].len(), 1, "{name} swept {:?}", changes[name]);
        }
        assert_eq!(changes["b-gone"], [StatusCause::ProcessGone]);
        assert_eq!(changes["a-gone"], [StatusCause::ProcessGone]);
        assert_eq!(changes["b-live"], [StatusCause::LeaseExpired]);
        assert_eq!(changes["b-left"], [StatusCause::LeaseExpired]);
    }
    la.release().await.unwrap();
    a.close().await.unwrap();
    c.close().await.unwrap();
}
