//! Helpers shared by the compaction tests and the fold property test
//! (`tests/registry/fold_props.rs`): a random command generator
//! (validated commands only, as a Store would append them), log setup and
//! history comparison.

use agentlog::log::{Log, LogOptions};
use agentlog::model::{HostMode, Status, TransportClient};
use agentlog::registry::*;
use agentlog::time::Timestamp;
use proptest::prelude::*;
use std::path::Path;

pub const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

#[derive(Debug, Clone)]
pub enum Op {
    Register {
        name: usize,
        pid: u32,
        parent: Option<usize>,
        interactive: bool,
    },
    /// `count` heartbeats 1 ms apart; pid 0 = the agent's current pid.
    Heartbeat {
        name: usize,
        pid: u32,
        count: u8,
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

pub fn op() -> impl Strategy<Value = Op> {
    let n = 0..NAMES.len();
    prop_oneof![
        3 => (n.clone(), 1u32..4, proptest::option::of(0..NAMES.len()), any::<bool>())
            .prop_map(|(name, pid, parent, interactive)| Op::Register { name, pid, parent, interactive }),
        5 => (n.clone(), 0u32..4, 1u8..6).prop_map(|(name, pid, count)| Op::Heartbeat { name, pid, count }),
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
pub fn run(ops: &[Op], max_messages: usize) -> (State, Vec<Event>, Timestamp) {
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
            Op::Heartbeat { name, pid, count } => {
                let pid = match *pid {
                    0 => s.agent(NAMES[*name]).and_then(|a| a.pid),
                    p => Some(p),
                };
                if s.check_heartbeat(NAMES[*name], pid).is_ok() {
                    for i in 0..*count {
                        out.push(Event {
                            at: now.add_millis(i64::from(i)),
                            kind: EventKind::Heartbeat {
                                agent: NAMES[*name].into(),
                                pid,
                            },
                        });
                    }
                    now = now.add_millis(i64::from(*count));
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
                            ..Default::default()
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

/// Small segments, no flusher: many segments from little data.
pub fn small_opts() -> LogOptions {
    LogOptions {
        segment_size: 16 * 1024,
        max_record_size: 4096,
        flush_interval: None,
        ..Default::default()
    }
}

pub fn open(dir: &Path) -> Log {
    Log::open(dir, small_opts()).expect("open log").0
}

/// Appends events (Lazy); returns their LSNs.
pub fn append_all(log: &Log, events: &[Event]) -> Vec<Lsn> {
    events
        .iter()
        .map(|e| {
            log.append(&encode(e), agentlog::log::Durability::Lazy)
                .expect("append")
        })
        .collect()
}

/// All (lsn, event) of a log.
pub fn read_events(log: &Log) -> Vec<(Lsn, Event)> {
    log.view()
        .iter()
        .map(|r| {
            let r = r.expect("valid record");
            (r.lsn, decode(r.payload).expect("decodable"))
        })
        .collect()
}

/// Fold of (lsn, event) pairs.
pub fn fold(events: &[(Lsn, Event)], max_messages: usize) -> State {
    let mut s = State::new(max_messages);
    for (l, e) in events {
        s.apply(*l, e);
    }
    s
}

/// Checks that `after` is `before` with every record of agents not in
/// `keep` gone and, per kept agent, only middle heartbeats of same-pid runs
/// missing: non-heartbeat events identical, the first and last heartbeat of
/// every run present. Returns a description of the first difference.
pub fn history_preserved(
    before: &[(Lsn, Event)],
    after: &[(Lsn, Event)],
    keep: &dyn Fn(&str) -> bool,
) -> Result<(), String> {
    use std::collections::{BTreeMap, BTreeSet};
    let after_lsns: BTreeMap<Lsn, &Event> = after.iter().map(|(l, e)| (*l, e)).collect();
    for (l, e) in after {
        if !before.iter().any(|(bl, be)| bl == l && be == e) {
            return Err(format!("lsn {l} is new or changed: {e:?}"));
        }
    }
    // Per agent: its subject events in order, split into heartbeat runs.
    let mut per_agent: BTreeMap<&str, Vec<(Lsn, &Event)>> = BTreeMap::new();
    for (l, e) in before {
        if let Some(a) = e.kind.subject_agent() {
            per_agent.entry(a).or_default().push((*l, e));
        }
    }
    for (agent, evs) in per_agent {
        if !keep(agent) {
            continue;
        }
        let mut run: Vec<Lsn> = Vec::new();
        let mut run_pid: Option<Option<u32>> = None;
        let mut must: BTreeSet<Lsn> = BTreeSet::new();
        let close = |run: &mut Vec<Lsn>, must: &mut BTreeSet<Lsn>| {
            if let (Some(f), Some(l)) = (run.first(), run.last()) {
                must.insert(*f);
                must.insert(*l);
            }
            run.clear();
        };
        for (l, e) in evs {
            match &e.kind {
                EventKind::Heartbeat { pid, .. } => {
                    if run_pid != Some(*pid) {
                        close(&mut run, &mut must);
                        run_pid = Some(*pid);
                    }
                    run.push(l);
                }
                EventKind::MessagePosted(_) | EventKind::MessagesRead { .. } => {
                    close(&mut run, &mut must);
                    run_pid = None;
                }
                _ => {
                    close(&mut run, &mut must);
                    run_pid = None;
                    must.insert(l);
                }
            }
        }
        close(&mut run, &mut must);
        for l in must {
            if !after_lsns.contains_key(&l) {
                return Err(format!("agent {agent}: lsn {l} of its history is missing"));
            }
        }
    }
    Ok(())
}
