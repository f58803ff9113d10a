//! Three hosts, one registry: agents register, heartbeat, change status and
//! message each other through different nodes of a real 3-node NATS
//! cluster; every node's local store converges to byte-identical
//! `registry.json` exports at the same stream sequence, and a node whose
//! store is closed and reopened resumes from its sequence without refolding.

use crate::support::cluster::*;
use agentlog::model::Status;
use agentlog::registry::{PostMessage, Registration, RegistryError};

fn reg(name: &str, pid: u32) -> Registration {
    let mut r = Registration::new(name, "claude", "/work");
    r.pid = Some(pid);
    r.project_root = "/work".into();
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hosts_converge_to_identical_exports() {
    let nats = NatsCluster::start(3);
    nats.wait_ready("conv").await;
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        nodes.push(node(d.path(), vec![nats.url(i)], "conv", &format!("host{i}")).await);
    }
    let host = |i: usize| &nodes[i % 3];

    // Agents register through different hosts.
    let names: Vec<String> = (0..9).map(|i| format!("agent-{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        let at = T0.add_secs(i as i64);
        host(i)
            .register(reg(n, 100 + i as u32), Some(at))
            .await
            .unwrap();
    }
    let all: Vec<&_> = nodes.iter().collect();
    converge(&all).await;

    // Heartbeats (lazy and durable), status changes and messages, each
    // through a host other than the one the agent registered on.
    for round in 0..5i64 {
        for (i, n) in names.iter().enumerate() {
            let at = T0.add_secs(100 + round * 10 + i as i64);
            let pid = Some(100 + i as u32);
            if round % 2 == 0 {
                lazy_heartbeat(host(i + 1), n, pid, Some(at)).await.unwrap();
            } else {
                durable_heartbeat(host(i + 2), n, pid, Some(at))
                    .await
                    .unwrap();
            }
        }
    }
    host(1)
        .set_status(
            "agent-0",
            Status::Busy,
            Some("compiling".into()),
            Some(T0.add_secs(200)),
        )
        .await
        .unwrap();
    host(2)
        .set_status("agent-4", Status::Exited, None, Some(T0.add_secs(201)))
        .await
        .unwrap();
    let mut ids = Vec::new();
    for i in 0..9usize {
        let mut post = PostMessage::new(
            &names[i],
            Some(&names[(i + 1) % 9]),
            "note",
            &format!("hello from {i}"),
        );
        post.request_id = Some(format!("req-{i}"));
        let id = host(i + 2)
            .post_message(post.clone(), Some(T0.add_secs(300)))
            .await
            .unwrap();
        // A retry through another host gets the same id (message-id dedupe).
        let again = host(i + 1)
            .post_message(post, Some(T0.add_secs(301)))
            .await
            .unwrap();
        assert_eq!(id, again, "a retried post keeps its id");
        ids.push(id);
    }
    // A request id whose message has expired is free again, as on one
    // host: a new post with it is a new message, not a duplicate of the
    // expired one (inside JetStream's duplicate window too).
    let mut brief = PostMessage::new(&names[3], Some(&names[5]), "note", "brief");
    brief.request_id = Some("req-brief".into());
    brief.ttl_ms = Some(1_000);
    let first = host(0)
        .post_message(brief.clone(), Some(T0.add_secs(320)))
        .await
        .unwrap();
    let second = host(1)
        .post_message(brief, Some(T0.add_secs(330)))
        .await
        .unwrap();
    assert!(
        second > first,
        "a new message after expiry: {first} then {second}"
    );
    let last = converge(&all).await;
    assert!(last >= second);
    for n in &nodes {
        let st = n.store().state();
        assert!(
            st.messages().iter().any(|m| m.id == second),
            "{second} on every host"
        );
    }
    // agent-1 reads its message through a third host.
    let read = host(0)
        .read_messages("agent-1", None, Some(T0.add_secs(310)))
        .await
        .unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].id, ids[0]);
    assert_eq!(read[0].posted.from, "agent-0");
    // A finished agent's heartbeat is refused on every host alike.
    for i in 0..3 {
        let err = lazy_heartbeat(host(i), "agent-4", Some(104), Some(T0.add_secs(320))).await;
        assert!(
            matches!(
                err,
                Err(agentlog::cluster::ClusterError::Registry(
                    RegistryError::Finished { .. }
                ))
            ),
            "host {i}: {err:?}"
        );
    }
    // A last durable heartbeat per host: its ack orders after the host's
    // earlier lazy publishes on the same connection.
    for (i, name) in names.iter().enumerate().take(3) {
        durable_heartbeat(host(i), name, Some(100 + i as u32), Some(T0.add_secs(400)))
            .await
            .unwrap();
    }

    let seq = converge(&all).await;
    for n in &all {
        assert_eq!(n.applied(), seq);
        assert_eq!(
            n.store().log().last_lsn(),
            Some(seq),
            "LSN = stream sequence"
        );
    }
    let out = tempfile::tempdir().unwrap();
    let bytes = exports(&all, out.path());
    assert!(bytes[0].len() > 100);
    assert_eq!(bytes[0], bytes[1], "host0 and host1 exports differ");
    assert_eq!(bytes[0], bytes[2], "host0 and host2 exports differ");
    let states: Vec<_> = all.iter().map(|n| n.store().state()).collect();
    for s in &states {
        assert_eq!(s.agent("agent-0").unwrap().status, Status::Busy);
        assert_eq!(s.agent("agent-4").unwrap().status, Status::Exited);
        let retried = s
            .messages()
            .iter()
            .filter(|m| m.posted.body != "brief")
            .count();
        assert_eq!(retried, 9, "the retries were stored once");
        assert!(s.message(ids[0]).unwrap().is_read_by("agent-1"));
        assert_eq!(s.anomalies(), 0);
        assert_eq!(
            s.agent("agent-0").unwrap().last_active,
            states[0].agent("agent-0").unwrap().last_active
        );
    }

    // Host 0 restarts on its store: it resumes from its sequence (the close
    // snapshotted; nothing is refolded), catches up with what the others
    // wrote meanwhile, and its local log verifies clean.
    let n0 = nodes.remove(0);
    n0.close().await.unwrap();
    // (agent-4 finished: its heartbeat would be refused.)
    for i in (0..9usize).filter(|i| *i != 4) {
        let at = T0.add_secs(500 + i as i64);
        durable_heartbeat(&nodes[i % 2], &names[i], Some(100 + i as u32), Some(at))
            .await
            .unwrap();
    }
    let store = agentlog::store::Store::open(dirs[0].path(), store_options()).unwrap();
    assert_eq!(store.open_report().snapshot_lsn, Some(seq));
    assert_eq!(
        store.open_report().events_folded,
        0,
        "reopen refolded the log"
    );
    let n0 = agentlog::cluster::ClusterNode::start(
        store,
        cluster_options(vec![nats.url(0)], "conv", "host0"),
    )
    .await
    .unwrap();
    nodes.insert(0, n0);
    let all: Vec<&_> = nodes.iter().collect();
    let seq2 = converge(&all).await;
    assert_eq!(seq2, seq + 8);
    let bytes = exports(&all, out.path());
    assert_eq!(bytes[0], bytes[1]);
    assert_eq!(bytes[0], bytes[2]);
    let report = agentlog::log::verify(&dirs[0].path().join("log")).unwrap();
    assert!(report.is_clean(), "{:?}", report.bad);
    assert_eq!(report.last_lsn, Some(seq2));
    for n in nodes {
        n.close().await.unwrap();
    }
}

/// The mirror's append keeps LSN = stream sequence: a sequence the stream's
/// compaction deleted before this host read it is held by a `Purged`
/// filler (folding to nothing); an older sequence or an undecodable payload
/// is refused, naming the LSN, and nothing is appended.
#[test]
fn replicated_appends_fill_gaps_and_refuse_old_sequences_and_bad_payloads() {
    use agentlog::registry::{decode, encode, Event, EventKind};
    let dir = tempfile::tempdir().unwrap();
    let store = agentlog::store::Store::open(dir.path(), store_options()).unwrap();
    let event = Event {
        at: T0,
        kind: EventKind::AgentRegistered {
            reg: Box::new(reg("solo", 7)),
            kind: agentlog::registry::RegistrationKind::New,
            host: None,
        },
    };
    store.append_replicated(1, &encode(&event)).unwrap();
    let bad = store
        .append_replicated(2, &[0xee, 1, 2])
        .unwrap_err()
        .to_string();
    assert!(bad.contains("lsn 2"), "{bad}");
    assert_eq!(store.log().last_lsn(), Some(1));
    // Sequences 2 and 3 were deleted from the stream: 4 comes next.
    let beat = Event {
        at: T0.add_secs(1),
        kind: EventKind::Heartbeat {
            agent: "solo".into(),
            pid: Some(7),
        },
    };
    store.append_replicated(4, &encode(&beat)).unwrap();
    let kinds: Vec<(u64, EventKind)> = store
        .view()
        .iter_from(1)
        .map(|r| {
            let r = r.unwrap();
            (r.lsn, decode(r.payload).unwrap().kind)
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            (1, event.kind.clone()),
            (2, EventKind::Purged),
            (3, EventKind::Purged),
            (4, beat.kind.clone())
        ]
    );
    let old = store
        .append_replicated(4, &encode(&beat))
        .unwrap_err()
        .to_string();
    assert!(
        old.contains("lsn 4") && old.contains("already holds up to lsn 4"),
        "{old}"
    );
    assert_eq!(store.applied_lsn(), 4);
    let solo = store.state().agent("solo").unwrap().clone();
    assert_eq!((solo.pid, solo.last_active), (Some(7), T0.add_secs(1)));
    assert_eq!(store.state().anomalies(), 0, "fillers fold to nothing");
}
