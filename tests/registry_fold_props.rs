//! Property tests of the pure fold over random command sequences:
//! the codec round-trips, the payload fold equals the event fold, state
//! serialization round-trips, and the compaction rule holds (folding only the
//! events retention keeps gives the retained state).

use agentlog::model::{HostMode, Status, TransportClient};
use agentlog::registry::*;
use agentlog::time::Timestamp;
use proptest::prelude::*;

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

#[derive(Debug, Clone)]
enum Op {
    Register {
        name: usize,
        pid: u32,
        parent: Option<usize>,
        interactive: bool,
    },
    Heartbeat {
        name: usize,
        pid: u32,
    },
    Status {
        name: usize,
        status: usize,
    },
    Update {
        name: usize,
        pid: u32,
    },
    Remove {
        name: usize,
    },
    Post {
        from: usize,
        to: Option<usize>,
        body: u8,
        ttl_s: u8,
        rid: Option<u8>,
        project: bool,
    },
    Read {
        name: usize,
        project: bool,
    },
    MarkRead {
        name: usize,
        back: u8,
    },
    Session {
        op: u8,
        id: u8,
    },
    Sweep {
        alive_mask: u8,
    },
    Advance {
        secs: u16,
    },
    /// A registration through a transport: registration + client, one batch.
    RegisterTransport {
        name: usize,
        pid: u32,
        client: u8,
    },
    /// An `update` with labels: 0 display name, 1 clear it, 2 a transport
    /// reconnect, 3 detach, 4 fields and display name and client together.
    Label {
        name: usize,
        which: u8,
        n: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let n = 0..NAMES.len();
    prop_oneof![
        1 => (n.clone(), 1u32..4, proptest::option::of(0..NAMES.len()), any::<bool>())
            .prop_map(|(name, pid, parent, interactive)| Op::Register { name, pid, parent, interactive }),
        4 => (n.clone(), 1u32..4).prop_map(|(name, pid)| Op::Heartbeat { name, pid }),
        1 => (n.clone(), 0..Status::ALL.len()).prop_map(|(name, status)| Op::Status { name, status }),
        1 => (n.clone(), 1u32..4).prop_map(|(name, pid)| Op::Update { name, pid }),
        1 => (n.clone()).prop_map(|name| Op::Remove { name }),
        3 => (n.clone(), proptest::option::of(0..NAMES.len()), 0u8..3, 1u8..200, proptest::option::of(0u8..3), any::<bool>())
            .prop_map(|(from, to, body, ttl_s, rid, project)| Op::Post { from, to, body, ttl_s, rid, project }),
        1 => (n.clone(), any::<bool>()).prop_map(|(name, project)| Op::Read { name, project }),
        1 => (n.clone(), 0u8..10).prop_map(|(name, back)| Op::MarkRead { name, back }),
        1 => (0u8..3, 0u8..3).prop_map(|(op, id)| Op::Session { op, id }),
        1 => (any::<u8>()).prop_map(|alive_mask| Op::Sweep { alive_mask }),
        2 => (0u16..400).prop_map(|secs| Op::Advance { secs }),
        1 => (n.clone(), 1u32..4, 0u8..3).prop_map(|(name, pid, client)| Op::RegisterTransport { name, pid, client }),
        2 => (n.clone(), 0u8..5, 0u8..3).prop_map(|(name, which, n)| Op::Label { name, which, n }),
    ]
}

/// Runs the commands against a state, returning the appended events.
fn run(ops: &[Op], max_messages: usize) -> (State, Vec<Event>, Timestamp) {
    let mut s = State::new(max_messages);
    let mut events: Vec<Event> = Vec::new();
    let mut now = Timestamp(1_796_040_000_000);
    for o in ops {
        now = now.add_millis(7);
        let mut out: Vec<Event> = Vec::new();
        match o {
            Op::Register {
                name,
                pid,
                parent,
                interactive,
            } => {
                let mut r = Registration::new(NAMES[*name], "claude", "/w");
                r.pid = Some(*pid);
                r.parent = parent.map(|p| NAMES[p].to_string());
                if *interactive {
                    r.host_mode = Some(HostMode::Interactive);
                }
                out.extend(s.check_register(r, now).ok());
            }
            Op::Heartbeat { name, pid } => {
                if s.check_heartbeat(NAMES[*name], Some(*pid)).is_ok() {
                    out.push(Event {
                        at: now,
                        kind: EventKind::Heartbeat {
                            agent: NAMES[*name].into(),
                            pid: Some(*pid),
                        },
                    });
                }
            }
            Op::Status { name, status } => out.extend(
                s.check_set_status(NAMES[*name], Status::ALL[*status], Some("m".into()), now)
                    .ok(),
            ),
            Op::Update { name, pid } => {
                let f = FieldUpdates {
                    pid: Some(Some(*pid)),
                    log_path: Some(Some("/l".into())),
                    ..Default::default()
                };
                out.extend(s.check_update(NAMES[*name], f, now).ok());
            }
            Op::Remove { name } => out.extend(s.check_remove(NAMES[*name], now).ok()),
            Op::Post {
                from,
                to,
                body,
                ttl_s,
                rid,
                project,
            } => {
                let mut p = PostMessage::new(
                    NAMES[*from],
                    to.map(|t| NAMES[t]),
                    "c",
                    &format!("body{body}"),
                );
                p.ttl_ms = Some(i64::from(*ttl_s) * 1000);
                p.request_id = rid.map(|r| format!("r{r}"));
                p.project_root = project.then(|| "/p".to_string());
                if let Ok(PostOutcome::Append(e)) = s.check_post(p, now) {
                    out.push(e);
                }
            }
            Op::Read { name, project } => {
                if let Ok((_, Some(e))) = s.check_read(NAMES[*name], project.then_some("/p"), now) {
                    out.push(e);
                }
            }
            Op::MarkRead { name, back } => {
                let ids: Vec<Lsn> = (0..3)
                    .map(|i| (events.len() as u64).saturating_sub(u64::from(*back) + i))
                    .collect();
                if let Ok(Some(e)) = s.check_mark_read(NAMES[*name], &ids, now) {
                    out.push(e);
                }
            }
            Op::Session { op, id } => {
                let sop = [SessionOp::Open, SessionOp::Heartbeat, SessionOp::Close][*op as usize];
                let key = SessionKey::new("src", "/w", &format!("s{id}"));
                if let Ok(Some(e)) = s.check_session(sop, key, Some(60_000), now) {
                    out.push(e);
                }
            }
            Op::Sweep { alive_mask } => {
                let mut probe = FakeProbe::default();
                for pid in 1..4u32 {
                    if alive_mask & (1 << pid) != 0 {
                        probe.running.insert(pid, None);
                    }
                }
                out = sweep(&s, now, &SweepPolicy::default(), &probe);
            }
            Op::Advance { secs } => now = now.add_secs(i64::from(*secs)),
            Op::RegisterTransport { name, pid, client } => {
                let mut r = Registration::new(NAMES[*name], "claude", "/w");
                r.pid = Some(*pid);
                if let Ok(e) = s.check_register(r, now) {
                    let c = TransportClient::parse(&format!("ide{client}/1.{client}"));
                    out.push(e);
                    out.extend(
                        labels::transport_event(NAMES[*name], c, TransportCause::Registration, now)
                            .ok(),
                    );
                }
            }
            Op::Label { name, which, n } => {
                let agent = NAMES[*name];
                let client = || TransportClient::parse(&format!("ide{n}/2.{n}"));
                match which {
                    0 => out.extend(
                        s.check_display_name(agent, Some(format!("Name {n}")), now)
                            .ok(),
                    ),
                    1 => out.extend(s.check_display_name(agent, None, now).ok()),
                    2 => out.extend(
                        s.check_transport_client(
                            agent,
                            Some(client()),
                            TransportCause::Reconnect,
                            now,
                        )
                        .ok(),
                    ),
                    3 => out.extend(
                        s.check_transport_client(agent, None, TransportCause::Reconnect, now)
                            .ok(),
                    ),
                    _ => {
                        let update = labels::AgentUpdate {
                            fields: FieldUpdates {
                                log_path: Some(Some(format!("/l{n}"))),
                                ..Default::default()
                            },
                            display_name: Some(format!("Both {n}")),
                            transport_client: Some(client()),
                        };
                        if let Ok(evs) = s.check_agent_update(agent, update, now) {
                            out.extend(evs);
                        }
                    }
                }
            }
        }
        for e in out {
            events.push(e.clone());
            s.apply(events.len() as Lsn, &e);
        }
    }
    (s, events, now)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn fold_is_deterministic_and_codec_faithful(ops in proptest::collection::vec(op(), 1..120)) {
        let (state, events, _) = run(&ops, 5);
        // Commands never produce anomalies.
        prop_assert_eq!(state.anomalies(), 0);
        let mut via_bytes = State::new(5);
        let mut via_events = State::new(5);
        for (i, e) in events.iter().enumerate() {
            let bytes = encode(e);
            prop_assert_eq!(&decode(&bytes).unwrap(), e);
            via_bytes.apply_payload(i as Lsn + 1, &bytes).unwrap();
            via_events.apply(i as Lsn + 1, e);
        }
        prop_assert_eq!(&via_bytes, &state);
        prop_assert_eq!(&via_events, &state);
        let snap = bincode::serde::encode_to_vec(&state, bincode::config::standard()).unwrap();
        let (back, _): (State, usize) = bincode::serde::decode_from_slice(&snap, bincode::config::standard()).unwrap();
        prop_assert_eq!(back, state);
    }

    #[test]
    fn folding_kept_events_gives_the_retained_state(
        ops in proptest::collection::vec(op(), 1..120),
        later in 0i64..200_000,
        ttl in 1i64..400_000,
        keep in 0usize..4,
    ) {
        let (state, events, end) = run(&ops, 5);
        let policy = RetentionPolicy { presence_ttl_ms: ttl, keep_finished: keep };
        let now = end.add_millis(later);
        let mut retained = state.clone();
        retained.retain(now, &policy);
        let kept = retained.kept();
        let mut compacted = State::new(5);
        for (i, e) in events.iter().enumerate() {
            if kept.keeps(i as Lsn + 1, e) {
                compacted.apply(i as Lsn + 1, e);
            }
        }
        prop_assert_eq!(compacted, retained);
    }
}
