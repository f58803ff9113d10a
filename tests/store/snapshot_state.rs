//! Snapshots of the real registry [`State`]: for random histories, the state
//! loaded from a snapshot at any point plus the fold of the tail equals the
//! full fold (proptest), and a damaged newest snapshot falls back to an older
//! one that still yields the full fold.

use agentlog::internals::snapshot;
use agentlog::model::{Agent, Priority, Privacy, Status, StatusCause, TransportClient};
use agentlog::registry::{
    Event, EventKind, FieldUpdates, PostedMessage, Registration, RegistrationKind, SessionKey,
    State, TransportCause,
};
use agentlog::time::Timestamp;
use proptest::prelude::*;

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

fn arb_kind() -> impl Strategy<Value = EventKind> {
    let name = prop::sample::select(NAMES.to_vec()).prop_map(str::to_string);
    prop_oneof![
        (name.clone(), any::<Option<u32>>()).prop_map(|(n, pid)| {
            let mut reg = Registration::new(&n, "codex", "/p");
            reg.pid = pid;
            EventKind::AgentRegistered {
                reg: Box::new(reg),
                kind: RegistrationKind::New,
                host: None,
            }
        }),
        (name.clone(), "[a-z]{0,6}").prop_map(|(n, cwd)| {
            let mut a = Agent::new(&n, "gemini", &cwd, Timestamp::from_secs(1));
            a.extra = vec![("spawned_by_cwd".into(), format!("\"{cwd}\""))];
            EventKind::AgentImported(Box::new(a))
        }),
        (name.clone(), any::<Option<u32>>())
            .prop_map(|(agent, pid)| EventKind::Heartbeat { agent, pid }),
        (name.clone(), prop::sample::select(Status::ALL.to_vec())).prop_map(|(agent, status)| {
            EventKind::StatusChanged {
                agent,
                status,
                message: Some("why".into()),
                cause: StatusCause::Command,
            }
        }),
        (name.clone(), any::<Option<u32>>()).prop_map(|(agent, pid)| EventKind::FieldsUpdated {
            agent,
            fields: FieldUpdates {
                pid: Some(pid),
                codex_session_id: Some(Some("s".into())),
                ..FieldUpdates::default()
            },
        }),
        name.clone()
            .prop_map(|agent| EventKind::AgentRemoved { agent }),
        (name.clone(), prop::option::of(name.clone()), "[a-z]{1,8}").prop_map(
            |(from, to, body)| {
                EventKind::MessagePosted(PostedMessage {
                    from,
                    to,
                    category: "note".into(),
                    body,
                    priority: Priority::Normal,
                    privacy: Privacy::Team,
                    project_root: None,
                    expires_at: Timestamp::from_secs(1_000_000),
                    request_id: None,
                    digest: 0,
                })
            }
        ),
        (name.clone(), prop::collection::vec(1u64..40, 0..3))
            .prop_map(|(reader, ids)| EventKind::MessagesRead { reader, ids }),
        (name.clone(), prop::option::of("[A-Z][a-z]{0,5}")).prop_map(|(agent, display_name)| {
            EventKind::DisplayNameSet {
                agent,
                display_name,
            }
        }),
        (name.clone(), prop::option::of("[a-z]{1,4}(/[0-9])?")).prop_map(|(agent, c)| {
            EventKind::TransportClientSet {
                agent,
                client: c.as_deref().map(TransportClient::parse),
                cause: TransportCause::Reconnect,
            }
        }),
        (name, any::<bool>()).prop_map(|(w, open)| {
            let key = SessionKey {
                source: "mcp".into(),
                workspace: w,
                session_id: "s1".into(),
            };
            if open {
                EventKind::SessionOpened {
                    key,
                    ttl_ms: 180_000,
                }
            } else {
                EventKind::SessionClosed { key }
            }
        }),
    ]
}

fn fold(events: &[Event], mut state: State, first_lsn: u64) -> State {
    for (i, e) in events.iter().enumerate() {
        state.apply(first_lsn + i as u64, e);
    }
    state
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn snapshot_plus_tail_equals_the_full_fold(
        kinds in prop::collection::vec(arb_kind(), 0..40),
        cut in any::<prop::sample::Index>(),
    ) {
        let events: Vec<Event> = kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| Event { at: Timestamp::from_secs(100 + i as i64), kind })
            .collect();
        let full = fold(&events, State::new(8), 1);
        let k = cut.index(events.len() + 1);
        let dir = tempfile::tempdir().unwrap();
        // LSNs are 1-based: a snapshot at LSN k covers events[..k].
        snapshot::write(dir.path(), k as u64, &fold(&events[..k], State::new(8), 1), 2).unwrap();
        let loaded = snapshot::load_newest::<State>(dir.path()).unwrap().unwrap();
        prop_assert_eq!(loaded.lsn, k as u64);
        let resumed = fold(&events[k..], loaded.state, k as u64 + 1);
        prop_assert_eq!(resumed, full);
    }
}

#[test]
fn damaged_newest_snapshot_falls_back_and_still_equals_the_full_fold() {
    let events: Vec<Event> = (0..30)
        .map(|i| Event {
            at: Timestamp::from_secs(100 + i),
            kind: if i % 3 == 0 {
                EventKind::AgentRegistered {
                    reg: Box::new(Registration::new(
                        NAMES[(i / 3) as usize % 4],
                        "claude",
                        "/p",
                    )),
                    kind: RegistrationKind::New,
                    host: None,
                }
            } else {
                EventKind::Heartbeat {
                    agent: NAMES[(i / 3) as usize % 4].into(),
                    pid: None,
                }
            },
        })
        .collect();
    let full = fold(&events, State::default(), 1);
    let dir = tempfile::tempdir().unwrap();
    for k in [10usize, 20] {
        snapshot::write(
            dir.path(),
            k as u64,
            &fold(&events[..k], State::default(), 1),
            3,
        )
        .unwrap();
    }
    let newest = dir.path().join(snapshot::file_name(20));
    let mut bytes = std::fs::read(&newest).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&newest, bytes).unwrap();
    let loaded = snapshot::load_newest::<State>(dir.path()).unwrap().unwrap();
    assert_eq!(loaded.lsn, 10);
    assert_eq!(loaded.skipped.len(), 1);
    assert_eq!(fold(&events[10..], loaded.state, 11), full);
}
