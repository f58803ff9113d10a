//! Every rule and error of docs/behaviour.md §3 against the pure registry: command
//! validation, the fold, sweep and retention (no log involved).

use agentlog::model::{HostMode, Priority, Status, StatusCause};
use agentlog::registry::messages::{BODY_MAX, DEFAULT_TTL_MS};
use agentlog::registry::sweep::{MSG_LEASE_EXPIRED, MSG_LEASE_IDLE, MSG_PROCESS_GONE};
use agentlog::registry::*;
use agentlog::time::Timestamp;

const T0: Timestamp = Timestamp(1_796_040_000_000);

fn t(secs: i64) -> Timestamp {
    T0.add_secs(secs)
}

/// A state plus a log-like LSN counter.
struct Reg {
    s: State,
    lsn: Lsn,
    events: Vec<Event>,
}

impl Reg {
    fn new() -> Self {
        Reg {
            s: State::default(),
            lsn: 0,
            events: Vec::new(),
        }
    }
    fn apply(&mut self, e: Event) -> Lsn {
        self.lsn += 1;
        // Everything the fold sees also round-trips through the codec.
        let bytes = encode(&e);
        assert_eq!(decode(&bytes).unwrap(), e);
        self.s.apply_payload(self.lsn, &bytes).unwrap();
        self.events.push(e);
        self.lsn
    }
    fn register(
        &mut self,
        reg: Registration,
        at: Timestamp,
    ) -> Result<RegistrationKind, RegistryError> {
        let e = self.s.check_register(reg, at)?;
        let EventKind::AgentRegistered { kind, .. } = &e.kind else {
            unreachable!()
        };
        let kind = *kind;
        self.apply(e);
        Ok(kind)
    }
    fn reg(&mut self, name: &str, pid: u32, at: Timestamp) {
        self.register(with_pid(name, pid), at).unwrap();
    }
    fn heartbeat(
        &mut self,
        name: &str,
        pid: Option<u32>,
        at: Timestamp,
    ) -> Result<(), RegistryError> {
        self.s.check_heartbeat(name, pid)?;
        self.apply(Event {
            at,
            kind: EventKind::Heartbeat {
                agent: name.into(),
                pid,
            },
        });
        Ok(())
    }
    fn status(&mut self, name: &str, st: Status, at: Timestamp) -> Result<(), RegistryError> {
        let e = self.s.check_set_status(name, st, None, at)?;
        self.apply(e);
        Ok(())
    }
    fn post(&mut self, p: PostMessage, at: Timestamp) -> Result<Lsn, RegistryError> {
        match self.s.check_post(p, at)? {
            PostOutcome::Append(e) => Ok(self.apply(e)),
            PostOutcome::Existing(id) => Ok(id),
        }
    }
    fn read(&mut self, reader: &str, project: Option<&str>, now: Timestamp) -> Vec<Lsn> {
        let (msgs, e) = self.s.check_read(reader, project, now).unwrap();
        if let Some(e) = e {
            self.apply(e);
        }
        msgs.iter().map(|m| m.id).collect()
    }
    fn sweep(&mut self, now: Timestamp, probe: &dyn ProcessProbe) -> usize {
        let evs = sweep(&self.s, now, &SweepPolicy::default(), probe);
        let n = evs.len();
        for e in evs {
            self.apply(e);
        }
        n
    }
    fn agent(&self, name: &str) -> &agentlog::model::Agent {
        self.s.agent(name).unwrap()
    }
}

fn with_pid(name: &str, pid: u32) -> Registration {
    let mut r = Registration::new(name, "claude", "/work");
    r.pid = Some(pid);
    r
}

#[test]
fn register_new_renewal_new_life_and_name_held() {
    let mut r = Reg::new();
    assert_eq!(
        r.register(with_pid("a", 10), t(0)).unwrap(),
        RegistrationKind::New
    );
    r.status("a", Status::Busy, t(1)).unwrap();
    // Same pid renews: back to live, created_at kept, no duplicate.
    let mut again = with_pid("a", 10);
    again.role = Some("reviewer".into());
    assert_eq!(r.register(again, t(5)).unwrap(), RegistrationKind::Renewal);
    let a = r.agent("a");
    assert_eq!(
        (a.status, a.life, a.created_at, a.registered_at),
        (Status::Live, 1, t(0), t(5))
    );
    assert_eq!(a.role.as_deref(), Some("reviewer"));
    assert_eq!(r.s.agents().len(), 1);
    // Another pid while live: error naming the holder's pid.
    let e = r.register(with_pid("a", 11), t(6)).unwrap_err();
    assert!(
        matches!(e, RegistryError::NameHeld { pid: Some(10), .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("held by pid 10"), "{e}");
    // Same pid but a different process start time is another process.
    let mut first = with_pid("b", 20);
    first.pid_start_time = Some(111);
    r.register(first, t(0)).unwrap();
    let mut reused = with_pid("b", 20);
    reused.pid_start_time = Some(222);
    assert!(matches!(
        r.register(reused, t(1)).unwrap_err(),
        RegistryError::NameHeld { pid: Some(20), .. }
    ));
    // Finished holder: a new life starts, at the same position.
    r.status("a", Status::Exited, t(7)).unwrap();
    assert_eq!(
        r.register(with_pid("a", 11), t(8)).unwrap(),
        RegistrationKind::NewLife
    );
    let a = r.agent("a");
    assert_eq!(
        (a.life, a.created_at, a.pid, a.status),
        (2, t(8), Some(11), Status::Live)
    );
    assert_eq!(r.s.agents().as_slice()[0].name, "a");
    assert_eq!(r.s.anomalies(), 0);
}

#[test]
fn registration_fields_are_validated() {
    let r = Reg::new();
    let e =
        r.s.check_register(Registration::new("", "claude", "/"), t(0))
            .unwrap_err();
    assert_eq!(e.to_string(), "agent name must not be empty");
    let e =
        r.s.check_register(Registration::new(&"n".repeat(251), "claude", "/"), t(0))
            .unwrap_err();
    assert!(e.to_string().contains("251 bytes; the limit is 250"), "{e}");
    let e =
        r.s.check_register(Registration::new("a\nb", "claude", "/"), t(0))
            .unwrap_err();
    assert!(e.to_string().contains("control characters"), "{e}");
    let e =
        r.s.check_register(Registration::new("a", "", "/"), t(0))
            .unwrap_err();
    assert_eq!(e, RegistryError::Empty { field: "provider" });
}

#[test]
fn child_agents_need_a_live_parent() {
    let mut r = Reg::new();
    let mut child = with_pid("kid", 2);
    child.parent = Some("boss".into());
    let e = r.register(child.clone(), t(0)).unwrap_err();
    assert_eq!(e.to_string(), "parent agent `boss` of `kid` not found");
    r.reg("boss", 1, t(0));
    r.register(child.clone(), t(1)).unwrap();
    assert_eq!(r.agent("kid").parent.as_deref(), Some("boss"));
    r.status("boss", Status::Failed, t(2)).unwrap();
    child.name = "kid2".into();
    let e = r.register(child, t(3)).unwrap_err();
    assert!(
        matches!(
            e,
            RegistryError::ParentFinished {
                status: Status::Failed,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn heartbeat_errors_and_effects() {
    let mut r = Reg::new();
    let e = r.heartbeat("ghost", None, t(0)).unwrap_err();
    assert_eq!(e.to_string(), "agent `ghost` not found");
    r.reg("a", 10, t(0));
    r.heartbeat("a", Some(10), t(30)).unwrap();
    assert_eq!(r.agent("a").last_active, t(30));
    let e = r.heartbeat("a", Some(99), t(31)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "agent `a` is registered by pid 10; the request came from pid 99"
    );
    r.status("a", Status::Exited, t(32)).unwrap();
    let e = r.heartbeat("a", Some(10), t(33)).unwrap_err();
    assert!(e.to_string().contains("finished; register again"), "{e}");
    // A heartbeat does not move a commanded idle/busy status.
    r.reg("b", 11, t(0));
    r.status("b", Status::Busy, t(1)).unwrap();
    r.heartbeat("b", Some(11), t(2)).unwrap();
    assert_eq!(r.agent("b").status, Status::Busy);
    assert_eq!(r.s.anomalies(), 0);
}

#[test]
fn lease_expiry_goes_idle_or_exited_and_heartbeat_revives() {
    let mut r = Reg::new();
    let probe = NoProbe;
    r.reg("worker", 1, t(0));
    let mut inter = with_pid("tty", 2);
    inter.host_mode = Some(HostMode::Interactive);
    r.register(inter, t(0)).unwrap();
    let mut mcp = with_pid("mcp", 3);
    mcp.mcp_channel_id = Some("chan".into());
    r.register(mcp, t(0)).unwrap();
    // Exactly at the lease: nothing happens yet.
    assert_eq!(r.sweep(t(120), &probe), 0);
    assert_eq!(r.sweep(t(121), &probe), 3);
    let w = r.agent("worker");
    assert_eq!(
        (w.status, w.status_cause),
        (Status::Exited, StatusCause::LeaseExpired)
    );
    assert_eq!(w.status_message.as_deref(), Some(MSG_LEASE_EXPIRED));
    assert_eq!(w.last_active, t(0), "a sweep is not activity");
    for n in ["tty", "mcp"] {
        let a = r.agent(n);
        assert_eq!(
            (a.status, a.status_message.as_deref()),
            (Status::Idle, Some(MSG_LEASE_IDLE))
        );
    }
    // Idle agents are not swept again.
    assert_eq!(r.sweep(t(500), &probe), 0);
    // Revival by the same pid; another pid is refused.
    assert!(matches!(
        r.heartbeat("worker", Some(7), t(130)).unwrap_err(),
        RegistryError::PidMismatch {
            registered: 1,
            got: 7,
            ..
        }
    ));
    r.heartbeat("worker", Some(1), t(130)).unwrap();
    r.heartbeat("tty", Some(2), t(130)).unwrap();
    for n in ["worker", "tty"] {
        let a = r.agent(n);
        assert_eq!(
            (a.status, a.status_message.as_deref(), a.last_active),
            (Status::Live, None, t(130))
        );
    }
    // An idle set by command is not lease idle: heartbeat leaves it.
    r.status("mcp", Status::Idle, t(131)).unwrap();
    r.heartbeat("mcp", Some(3), t(132)).unwrap();
    assert_eq!(r.agent("mcp").status, Status::Idle);
}

#[test]
fn process_identity_gone_exits_the_agent() {
    let mut r = Reg::new();
    let mut a = with_pid("same", 100);
    a.pid_start_time = Some(5);
    r.register(a, t(0)).unwrap();
    let mut b = with_pid("reused", 200);
    b.pid_start_time = Some(5);
    r.register(b, t(0)).unwrap();
    r.reg("dead", 300, t(0));
    r.register(Registration::new("nopid", "codex", "/"), t(0))
        .unwrap();
    let mut probe = FakeProbe::default();
    probe.running.insert(100, Some(5));
    probe.running.insert(200, Some(6));
    assert_eq!(r.sweep(t(10), &probe), 2);
    assert_eq!(r.agent("same").status, Status::Live);
    assert_eq!(r.agent("nopid").status, Status::Live);
    for n in ["reused", "dead"] {
        let a = r.agent(n);
        assert_eq!(
            (a.status, a.status_cause),
            (Status::Exited, StatusCause::ProcessGone)
        );
        assert_eq!(a.status_message.as_deref(), Some(MSG_PROCESS_GONE));
        // Not revivable by heartbeat.
        assert!(r.s.check_heartbeat(n, a.pid).is_err());
    }
}

#[test]
fn set_status_update_and_remove() {
    let mut r = Reg::new();
    assert!(matches!(
        r.status("x", Status::Busy, t(0)).unwrap_err(),
        RegistryError::NotFound { .. }
    ));
    r.reg("a", 1, t(0));
    let e =
        r.s.check_set_status("a", Status::Busy, Some("compiling".into()), t(3))
            .unwrap();
    r.apply(e);
    let a = r.agent("a");
    assert_eq!(
        (a.status, a.status_message.as_deref(), a.last_active),
        (Status::Busy, Some("compiling"), t(3))
    );
    r.status("a", Status::Failed, t(4)).unwrap();
    r.status("a", Status::PermanentDead, t(5)).unwrap();
    let e = r.status("a", Status::Live, t(6)).unwrap_err();
    assert!(e.to_string().contains("needs a new registration"), "{e}");
    // Updates.
    let fields = FieldUpdates {
        host_mode: Some(Some(HostMode::Interactive)),
        codex_session_id: Some(Some("sess".into())),
        pid: Some(None),
        last_message_at: Some(Some(t(9))),
        ..Default::default()
    };
    let e = r.s.check_update("a", fields, t(7)).unwrap();
    r.apply(e);
    let a = r.agent("a");
    assert_eq!(a.host_mode, Some(HostMode::Interactive));
    assert_eq!(a.codex_session_id.as_deref(), Some("sess"));
    assert_eq!((a.pid, a.last_message_at), (None, Some(t(9))));
    assert!(matches!(
        r.s.check_update("a", FieldUpdates::default(), t(8))
            .unwrap_err(),
        RegistryError::NothingToUpdate { .. }
    ));
    assert!(r
        .s
        .check_update("nobody", FieldUpdates::default(), t(8))
        .is_err());
    // host_mode accepts exec|interactive only (parsed before it can be sent).
    let e = "tty".parse::<HostMode>().unwrap_err().to_string();
    assert!(e.contains("unknown host_mode `tty`"), "{e}");
    // Remove.
    let e = r.s.check_remove("a", t(9)).unwrap();
    r.apply(e);
    assert!(r.s.agent("a").is_none());
    assert!(r.s.check_remove("a", t(10)).is_err());
}

#[test]
fn messages_ttl_expiry_cap_and_limits() {
    let mut r = Reg::new();
    r.reg("a", 1, t(0));
    r.reg("b", 2, t(0));
    let id = r
        .post(PostMessage::new("a", Some("b"), "note", "hi"), t(1))
        .unwrap();
    let m = r.s.message(id).unwrap();
    assert_eq!(m.posted.expires_at, t(1).add_millis(DEFAULT_TTL_MS));
    assert_eq!(
        (m.posted.priority, m.posted.privacy),
        (Priority::Normal, agentlog::model::Privacy::Team)
    );
    // Expiry judged against `now`.
    let mut short = PostMessage::new("a", Some("b"), "note", "soon gone");
    short.ttl_ms = Some(10_000);
    let sid = r.post(short, t(2)).unwrap();
    assert_eq!(r.s.unread("b", None, t(11)).unwrap().len(), 2);
    assert_eq!(r.s.unread("b", None, t(12)).unwrap().len(), 1);
    // The fold drops it at the next post after its expiry.
    r.post(PostMessage::new("a", None, "x", "y"), t(12))
        .unwrap();
    assert!(r.s.message(sid).is_none());
    // Limits.
    let e =
        r.s.check_post(PostMessage::new("a", None, "", "b"), t(3))
            .unwrap_err();
    assert_eq!(e, RegistryError::Empty { field: "category" });
    let e =
        r.s.check_post(PostMessage::new("a", None, "c", ""), t(3))
            .unwrap_err();
    assert_eq!(
        e,
        RegistryError::Empty {
            field: "message body"
        }
    );
    assert!(r
        .s
        .check_post(
            PostMessage::new("a", None, "c", &"x".repeat(BODY_MAX)),
            t(3)
        )
        .is_ok());
    let e =
        r.s.check_post(
            PostMessage::new("a", None, "c", &"x".repeat(BODY_MAX + 1)),
            t(3),
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("65537 bytes; the limit is 65536"),
        "{e}"
    );
    assert!(matches!(
        r.s.check_post(PostMessage::new("zz", None, "c", "b"), t(3))
            .unwrap_err(),
        RegistryError::NotFound { .. }
    ));
    assert!(matches!(
        r.s.check_post(PostMessage::new("a", Some("zz"), "c", "b"), t(3))
            .unwrap_err(),
        RegistryError::NotFound { .. }
    ));
    let mut bad_ttl = PostMessage::new("a", None, "c", "b");
    bad_ttl.ttl_ms = Some(0);
    assert!(matches!(
        r.s.check_post(bad_ttl, t(3)).unwrap_err(),
        RegistryError::NotPositive { .. }
    ));
}

#[test]
fn the_cap_drops_the_oldest() {
    let mut r = Reg {
        s: State::new(200),
        lsn: 0,
        events: Vec::new(),
    };
    r.reg("a", 1, t(0));
    let ids: Vec<Lsn> = (0..205)
        .map(|i| {
            r.post(PostMessage::new("a", None, "c", &format!("m{i}")), t(1))
                .unwrap()
        })
        .collect();
    assert_eq!(r.s.messages().len(), 200);
    assert_eq!(r.s.messages().front().unwrap().id, ids[5]);
    assert!(r.s.message(ids[4]).is_none());
}

#[test]
fn broadcast_floor_project_scoping_and_read_receipts() {
    let mut r = Reg::new();
    r.reg("old", 1, t(0));
    // Broadcasts at t(0) and t(1000); the reader registers at t(1500):
    // floor = t(900), so only the second shows.
    let b1 = r
        .post(PostMessage::new("old", None, "c", "early"), t(0))
        .unwrap();
    let b2 = r
        .post(PostMessage::new("old", None, "c", "recent"), t(1000))
        .unwrap();
    r.reg("new", 2, t(1500));
    let mut scoped = PostMessage::new("old", Some("new"), "c", "in project");
    scoped.project_root = Some("/p/".into());
    let d = r.post(scoped, t(1501)).unwrap();
    let direct = r
        .post(
            PostMessage::new("old", Some("new"), "c", "no project"),
            t(1502),
        )
        .unwrap();
    let _ = b1;
    // Project scoping: only messages of that project (trailing slash ignored).
    let ids: Vec<Lsn> =
        r.s.unread("new", Some("/p"), t(1600))
            .unwrap()
            .iter()
            .map(|m| m.id)
            .collect();
    assert_eq!(ids, [d]);
    // Sender counts as having read its own messages.
    assert!(r.s.unread("old", None, t(1600)).unwrap().is_empty());
    // Read appends a receipt; a second read is empty.
    assert_eq!(r.read("new", None, t(1600)), [b2, d, direct]);
    assert!(r.read("new", None, t(1601)).is_empty());
    assert_eq!(r.s.message(d).unwrap().read_by, ["new"]);
    // Mark read: only unread live ids make a receipt.
    r.reg("third", 3, t(1500));
    let e =
        r.s.check_mark_read("third", &[b2, b2, 999], t(1602))
            .unwrap()
            .unwrap();
    assert_eq!(
        e.kind,
        EventKind::MessagesRead {
            reader: "third".into(),
            ids: vec![b2]
        }
    );
    r.apply(e);
    assert!(r
        .s
        .check_mark_read("third", &[b2], t(1603))
        .unwrap()
        .is_none());
    assert!(r.s.check_read("ghost", None, t(1)).is_err());
}

#[test]
fn request_id_idempotency_and_conflict() {
    let mut r = Reg::new();
    r.reg("a", 1, t(0));
    let keyed = |body: &str| {
        let mut p = PostMessage::new("a", None, "c", body);
        p.request_id = Some("req-1".into());
        p.project_root = Some("/p".into());
        p
    };
    let first = r.post(keyed("hello"), t(1)).unwrap();
    let lsn_before = r.lsn;
    assert_eq!(
        r.s.check_post(keyed("hello"), t(2)).unwrap(),
        PostOutcome::Existing(first)
    );
    assert_eq!(r.post(keyed("hello"), t(2)).unwrap(), first);
    assert_eq!(r.lsn, lsn_before, "nothing appended");
    let e = r.s.check_post(keyed("other"), t(2)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "request id `req-1` of agent `a` reused with different content"
    );
    // Another project is another key.
    let mut elsewhere = keyed("other");
    elsewhere.project_root = Some("/q".into());
    assert!(matches!(
        r.s.check_post(elsewhere, t(2)).unwrap(),
        PostOutcome::Append(_)
    ));
    // After expiry the id is free again.
    let later = t(1).add_millis(DEFAULT_TTL_MS);
    assert!(matches!(
        r.s.check_post(keyed("other"), later).unwrap(),
        PostOutcome::Append(_)
    ));
}

#[test]
fn logical_sessions_limits_and_ttl() {
    let mut r = Reg::new();
    let key = SessionKey::new("cli", "/w", "s1");
    let e =
        r.s.check_session(SessionOp::Open, key.clone(), None, t(0))
            .unwrap()
            .unwrap();
    r.apply(e);
    let e =
        r.s.check_session(SessionOp::Heartbeat, key.clone(), None, t(100))
            .unwrap()
            .unwrap();
    r.apply(e);
    assert_eq!(r.s.sessions()[&key].last_heartbeat, t(100));
    assert_eq!(r.s.live_sessions(t(280)).count(), 1);
    assert_eq!(r.s.live_sessions(t(281)).count(), 0);
    // Another session's event after the TTL prunes it from the state.
    let other = SessionKey::new("cli", "/w", "s2");
    let e =
        r.s.check_session(SessionOp::Open, other.clone(), None, t(281))
            .unwrap()
            .unwrap();
    r.apply(e);
    assert!(!r.s.sessions().contains_key(&key));
    // Closing a timed-out or unknown session appends nothing; a live one closes.
    assert!(r
        .s
        .check_session(SessionOp::Close, key.clone(), None, t(282))
        .unwrap()
        .is_none());
    let e =
        r.s.check_session(SessionOp::Close, other.clone(), None, t(282))
            .unwrap()
            .unwrap();
    r.apply(e);
    assert!(r.s.sessions().is_empty());
    // Field limits: 64 / 4096 / 256 bytes, non-empty, no control characters.
    let limits = [
        (
            SessionKey::new(&"s".repeat(65), "/w", "i"),
            "session source",
        ),
        (
            SessionKey::new("s", &"w".repeat(4097), "i"),
            "session workspace",
        ),
        (SessionKey::new("s", "/w", &"i".repeat(257)), "session id"),
    ];
    for (k, field) in limits {
        let e =
            r.s.check_session(SessionOp::Open, k, None, t(0))
                .unwrap_err();
        assert!(
            matches!(e, RegistryError::TooLong { field: f, .. } if f == field),
            "{e:?}"
        );
    }
    assert!(
        SessionKey::new(&"s".repeat(64), &"w".repeat(4096), &"i".repeat(256))
            .validate()
            .is_ok()
    );
    assert_eq!(
        SessionKey::new("", "/w", "i").validate().unwrap_err(),
        RegistryError::Empty {
            field: "session source"
        }
    );
    assert_eq!(
        SessionKey::new("s", "/w\t", "i").validate().unwrap_err(),
        RegistryError::ControlChars {
            field: "session workspace"
        }
    );
}

#[test]
fn events_naming_missing_agents_are_anomalies_not_panics() {
    let mut r = Reg::new();
    for kind in [
        EventKind::Heartbeat {
            agent: "nobody".into(),
            pid: None,
        },
        EventKind::StatusChanged {
            agent: "nobody".into(),
            status: Status::Busy,
            message: None,
            cause: StatusCause::Command,
        },
        EventKind::FieldsUpdated {
            agent: "nobody".into(),
            fields: FieldUpdates {
                pid: Some(Some(1)),
                ..Default::default()
            },
        },
        EventKind::AgentRemoved {
            agent: "nobody".into(),
        },
    ] {
        r.apply(Event { at: t(0), kind });
    }
    assert_eq!(r.s.anomalies(), 4);
    assert!(r.s.agents().is_empty());
    // A heartbeat on a commanded-finished agent is an anomaly too.
    r.reg("a", 1, t(0));
    r.status("a", Status::Failed, t(1)).unwrap();
    r.apply(Event {
        at: t(2),
        kind: EventKind::Heartbeat {
            agent: "a".into(),
            pid: Some(1),
        },
    });
    assert_eq!((r.s.anomalies(), r.agent("a").last_active), (5, t(1)));
}

#[test]
fn retention_retires_old_and_excess_finished_agents() {
    let mut r = Reg::new();
    let day = 24 * 3600;
    r.reg("live", 1, t(0));
    // 40 finished agents within the TTL, one older than the TTL.
    for i in 0..40 {
        let name = format!("f{i:02}");
        r.reg(&name, 100 + i, t(0));
        r.status(&name, Status::Exited, t(day + i as i64)).unwrap();
    }
    r.reg("ancient", 5, t(0));
    r.status("ancient", Status::Failed, t(1)).unwrap();
    let kept_msg = r
        .post(
            PostMessage::new("f00", None, "c", "from a retired sender"),
            t(day),
        )
        .unwrap();
    let mut short = PostMessage::new("live", None, "c", "b");
    short.ttl_ms = Some(50_000);
    let gone = r.post(short, t(day)).unwrap();
    r.read("live", None, t(day + 1));
    r.read("f01", None, t(day + 2));
    let key = SessionKey::new("s", "w", "i");
    let e =
        r.s.check_session(SessionOp::Open, key.clone(), None, t(0))
            .unwrap()
            .unwrap();
    r.apply(e);

    let now = t(day + 100);
    let ret = retention(&r.s, now, &RetentionPolicy::default());
    let mut expect: Vec<String> = (0..8).map(|i| format!("f{i:02}")).collect();
    expect.push("ancient".into());
    expect.sort();
    assert_eq!(
        ret.retired_agents.iter().cloned().collect::<Vec<_>>(),
        expect
    );
    assert_eq!(
        ret.expired_messages.iter().copied().collect::<Vec<_>>(),
        [gone]
    );
    assert_eq!(ret.timed_out_sessions.len(), 1);

    let mut s = r.s.clone();
    assert_eq!(s.retain(now, &RetentionPolicy::default()), ret);
    assert_eq!(s.agents().len(), 1 + 32);
    assert!(s.agent("f07").is_none() && s.agent("f08").is_some());
    assert!(s.message(gone).is_none());
    // The message of a retired sender stays; a retired reader's receipt goes.
    assert_eq!(s.message(kept_msg).unwrap().read_by, ["live"]);
    assert!(s.sessions().is_empty());
    // Idempotent.
    assert!(s
        .clone()
        .retain(now, &RetentionPolicy::default())
        .is_empty());

    // The compaction rule: the fold of the kept events equals the retained state.
    let kept = s.kept();
    let mut replay = State::default();
    let mut dropped = 0;
    for (i, e) in r.events.iter().enumerate() {
        let lsn = i as Lsn + 1;
        if kept.keeps(lsn, e) {
            replay.apply(lsn, e);
        } else {
            dropped += 1;
        }
    }
    assert!(
        dropped > 9 * 2,
        "retired agents' events are dropped ({dropped})"
    );
    assert_eq!(replay, s);
}
