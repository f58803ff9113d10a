//! Exactly what retention names disappears: more than 32 finished
//! agents, some older than the TTL, a removed one, expired messages; the 32
//! most recent finished agents stay. Also: the dry run, the JSON report, the
//! droppable estimate, online compaction under 4 appending threads, and the
//! steady-fleet disk bound.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::fleet::{simulate_steady_fleet, FleetParams};
use crate::support::ops::*;
use agentlog::compact::{compact_log, AutoPolicy, CompactOptions, DropEstimator};
use agentlog::log::{verify, Durability, Log};
use agentlog::model::Status;
use agentlog::registry::state::DEFAULT_MAX_MESSAGES;
use agentlog::registry::*;
use agentlog::time::Timestamp;

const H: i64 = 3600 * 1000;

/// (LSN, payload) of every acknowledged append.
type Acked = Vec<(Lsn, Vec<u8>)>;

/// A history built through validated commands.
struct Hist {
    s: State,
    events: Vec<Event>,
}

impl Hist {
    fn push(&mut self, e: Event) -> Lsn {
        self.events.push(e);
        let lsn = self.events.len() as Lsn;
        self.s.apply(lsn, self.events.last().unwrap());
        lsn
    }
    fn register(&mut self, name: &str, at: Timestamp) {
        let mut r = Registration::new(name, "claude", "/w");
        r.pid = Some(7);
        let e = self.s.check_register(r, at).unwrap();
        self.push(e);
    }
    fn heartbeats(&mut self, name: &str, from: Timestamp, n: i64) {
        for i in 0..n {
            self.push(Event {
                at: from.add_millis(i * 1000),
                kind: EventKind::Heartbeat {
                    agent: name.into(),
                    pid: Some(7),
                },
            });
        }
    }
    fn finish(&mut self, name: &str, at: Timestamp) {
        let e = self
            .s
            .check_set_status(name, Status::Exited, None, at)
            .unwrap();
        self.push(e);
    }
    fn post(&mut self, from: &str, ttl_ms: i64, at: Timestamp) -> Lsn {
        let mut p = PostMessage::new(
            from,
            Some("live-1"),
            "c",
            &format!("b{}", self.events.len()),
        );
        p.ttl_ms = Some(ttl_ms);
        match self.s.check_post(p, at).unwrap() {
            PostOutcome::Append(e) => self.push(e),
            o => panic!("post not appended: {o:?}"),
        }
    }
}

fn done(i: usize) -> String {
    format!("done-{i:02}")
}

/// 45 finished agents (5 finished 29 h before `now`, 40 within the TTL), a
/// removed one, 5 live ones heartbeating; 3 expired and 3 live messages.
fn scenario() -> (Hist, Timestamp) {
    let t0 = Timestamp::from_secs(1_800_000_000);
    let mut h = Hist {
        s: State::default(),
        events: Vec::new(),
    };
    for i in 0..5 {
        h.register(&format!("live-{i}"), t0);
    }
    h.register("gone", t0);
    for i in 0..45 {
        h.register(&done(i), t0);
        h.heartbeats(&done(i), t0.add_millis(1000), 3);
    }
    let kept_msg_from_retired = h.post("done-00", 48 * H, t0.add_millis(10_000));
    for i in 0..5 {
        h.finish(&done(i), t0.add_millis(H));
    }
    let gone = h.s.check_remove("gone", t0.add_millis(2 * H)).unwrap();
    h.push(gone);
    let expired: Vec<Lsn> = (0..3)
        .map(|_| h.post("live-0", H, t0.add_millis(3 * H)))
        .collect();
    for i in 5..45 {
        h.finish(&done(i), t0.add_millis(10 * H + i as i64 * 60_000));
    }
    let live: Vec<Lsn> = (0..2)
        .map(|_| h.post("live-0", 48 * H, t0.add_millis(20 * H)))
        .collect();
    // live-1 reads an expired, a live and the retired sender's message.
    let read =
        h.s.check_mark_read(
            "live-1",
            &[expired[0], live[0], kept_msg_from_retired],
            t0.add_millis(21 * H),
        )
        .unwrap()
        .unwrap();
    h.push(read);
    for i in 0..5 {
        h.heartbeats(&format!("live-{i}"), t0.add_millis(22 * H), 20);
    }
    (h, t0.add_millis(30 * H))
}

#[test]
fn exactly_the_retired_agents_and_expired_messages_disappear() {
    let (h, now) = scenario();
    let tmp = tempfile::tempdir().unwrap();
    let log = open(tmp.path());
    append_all(&log, &h.events);
    let before = read_events(&log);
    let opts = CompactOptions::default();

    // Dry run: reports, changes nothing.
    let dry = CompactOptions {
        dry_run: true,
        ..opts
    };
    let (plan, _) = compact_log(&log, DEFAULT_MAX_MESSAGES, now, &dry).unwrap();
    assert!(plan.report.dry_run);
    assert_eq!(read_events(&log), before, "a dry run changed the log");
    assert_eq!(plan.report.generation, plan.report.generation_before);

    // The estimate the auto policy uses matches the plan.
    let est = DropEstimator::from_view(&log.view())
        .unwrap()
        .estimate(&h.s, now, &opts);
    assert!(est.total_bytes > 0 && est.total_bytes <= log.stats().bytes);
    assert_eq!(est.droppable_bytes, plan.report.bytes_dropped);

    let (c, full) = compact_log(&log, DEFAULT_MAX_MESSAGES, now, &opts).unwrap();
    let r = &c.report;
    let retired: BTreeSet<String> = (0..13).map(done).collect();
    assert_eq!(
        r.agents_retired.iter().cloned().collect::<BTreeSet<_>>(),
        retired
    );
    assert_eq!(r.messages_dropped, 3);
    assert_eq!(r.generation, r.generation_before + 1);
    assert!(r.bytes_after < r.bytes_before);
    assert_eq!(
        (
            r.events_kept,
            r.events_dropped,
            r.bytes_dropped,
            r.heartbeats_collapsed
        ),
        (
            plan.report.events_kept,
            plan.report.events_dropped,
            plan.report.bytes_dropped,
            plan.report.heartbeats_collapsed
        ),
        "the dry run predicted a different outcome"
    );
    // 5 live agents x 20 heartbeats collapse to 2 each; the 32 kept finished
    // agents' 3-heartbeat runs lose their middle one.
    assert_eq!(r.heartbeats_collapsed, 5 * 18 + 32);

    // The state: live agents + the 32 most recent finished ones.
    let mut names: BTreeSet<String> = (13..45).map(done).collect();
    names.extend((0..5).map(|i| format!("live-{i}")));
    let got: BTreeSet<String> = full.agents().iter().map(|a| a.name.clone()).collect();
    assert_eq!(got, names);
    let mut expected = h.s.clone();
    expected.retain(now, &opts.policy);
    assert_eq!(full.agents(), expected.agents());
    assert_eq!(full.messages(), expected.messages());
    assert_eq!(full.messages().len(), 3);
    assert!(full.messages().iter().all(|m| m.posted.expires_at > now));

    // The log: no record of a retired or removed agent, no expired post.
    let after = read_events(&log);
    assert_eq!(after.len() as u64, r.events_kept);
    for (lsn, e) in &after {
        if let Some(a) = e.kind.subject_agent() {
            if !matches!(e.kind, EventKind::MessagePosted(_)) {
                assert!(
                    names.contains(a),
                    "lsn {lsn}: event of retired agent {a} survived"
                );
            }
        }
        if let EventKind::MessagePosted(_) = e.kind {
            assert!(
                full.message(*lsn).is_some(),
                "lsn {lsn}: dropped message's post survived"
            );
        }
    }
    assert!(!after.iter().any(|(_, e)| e.kind.concerns_agent("gone")));
    assert_eq!(
        fold(&after, DEFAULT_MAX_MESSAGES).agents(),
        expected.agents()
    );

    // JSON report (what `agentlog compact --json` prints).
    let j = serde_json::to_value(r).unwrap();
    for k in [
        "bytes_before",
        "bytes_after",
        "events_kept",
        "events_dropped",
        "agents_retired",
        "messages_dropped",
        "heartbeats_collapsed",
        "generation",
        "duration_ms",
    ] {
        assert!(j.get(k).is_some(), "report lacks {k}: {j}");
    }

    // Reopen: verify clean, same records; compacting again drops nothing more.
    drop(log);
    assert!(verify(tmp.path()).unwrap().bad.is_empty());
    let log = open(tmp.path());
    assert_eq!(read_events(&log), after);
    let (again, _) = compact_log(&log, DEFAULT_MAX_MESSAGES, now, &opts).unwrap();
    assert_eq!(again.report.events_dropped, 0);
    assert_eq!(again.report.generation, again.report.generation_before);
}

#[test]
fn online_compaction_keeps_every_acknowledged_event() {
    let (h, now) = scenario();
    let tmp = tempfile::tempdir().unwrap();
    let log = Arc::new(open(tmp.path()));
    append_all(&log, &h.events);
    log.sync().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Acked>> = Arc::default();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (log, acked, stop) = (log.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut k = 0u64;
                // At least 150 events each, and on until compaction is done.
                while k < 150 || !stop.load(Ordering::Acquire) {
                    let e = Event {
                        at: now.add_millis(k as i64),
                        kind: EventKind::FieldsUpdated {
                            agent: format!("live-{w}"),
                            fields: FieldUpdates {
                                log_path: Some(Some(format!("/log/{w}/{k}"))),
                                ..Default::default()
                            },
                        },
                    };
                    let p = encode(&e);
                    let lsn = log.append(&p, Durability::Durable).unwrap();
                    acked.lock().unwrap().push((lsn, p));
                    k += 1;
                }
            })
        })
        .collect();
    let mut compactions = 0;
    let mut generations = BTreeSet::new();
    for _ in 0..4 {
        let (c, _) =
            compact_log(&log, DEFAULT_MAX_MESSAGES, now, &CompactOptions::default()).unwrap();
        generations.insert(c.report.generation);
        compactions += 1;
    }
    stop.store(true, Ordering::Release);
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(compactions, 4);
    assert!(!generations.is_empty());
    let check = |log: &Log| {
        let all: std::collections::BTreeMap<Lsn, Vec<u8>> = log
            .view()
            .iter()
            .map(|r| {
                let r = r.unwrap();
                (r.lsn, r.payload.to_vec())
            })
            .collect();
        let acked = acked.lock().unwrap();
        assert!(acked.len() >= 600);
        for (lsn, p) in acked.iter() {
            assert_eq!(
                all.get(lsn),
                Some(p),
                "acknowledged lsn {lsn} lost or changed"
            );
        }
    };
    check(&log);
    // Retired agents are gone; the writers' agents were never retired.
    let state = fold(&read_events(&log), DEFAULT_MAX_MESSAGES);
    assert!(state.agent("done-00").is_none());
    assert_eq!(
        state
            .agent("live-3")
            .unwrap()
            .log_path
            .as_deref()
            .map(|p| p.starts_with("/log/3/")),
        Some(true)
    );
    let log = Arc::try_unwrap(log).unwrap();
    log.close().unwrap();
    assert!(verify(tmp.path()).unwrap().bad.is_empty());
    check(&open(tmp.path()));
}

#[test]
fn steady_fleet_disk_stays_below_twice_the_live_history_plus_a_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let p = FleetParams {
        agents: 100,
        rate: 100,
        simulated_secs: 3 * 3600,
        lifetime_secs: 1800,
        sample_secs: 1800,
        segment_size: 1 << 20,
        prepare_ahead: false,
        auto: AutoPolicy {
            min_bytes: 0,
            ..AutoPolicy::default()
        },
        compact: CompactOptions::default(),
    };
    let points = simulate_steady_fleet(&tmp.path().join("fleet"), &p).unwrap();
    assert_eq!(points.len(), 6);
    let total_written = points.last().unwrap().events * 30;
    for pt in &points {
        assert!(
            pt.disk_bytes <= pt.bound_bytes,
            "disk {} above the bound {} at {} s: {pt:?}",
            pt.disk_bytes,
            pt.bound_bytes,
            pt.sim_secs
        );
    }
    let last = points.last().unwrap();
    assert!(last.compactions > 0);
    // Far less than what was written: it is bounded, not growing.
    assert!(last.disk_bytes < total_written / 4, "{last:?}");
}
