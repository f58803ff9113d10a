//! The sweep across hosts (docs/scaling.md §7), pure: a pid is judged only
//! by the probe of the host the agent registered on. [`HostLocalProbe`]
//! answers for its host's agents and has no opinion on any other, so their
//! sweep is the lease rule alone; [`sweep_process_identity`] (what a host
//! that does not hold the sweeper lease runs) touches only its own agents;
//! and the two sweeps never act on one agent twice.

use agentlog::model::{Status, StatusCause};
use agentlog::registry::sweep::process_identity_check;
use agentlog::registry::*;
use agentlog::time::Timestamp;
use proptest::prelude::*;
use std::collections::HashMap;

const HOSTS: [Option<&str>; 3] = [None, Some("a"), Some("b")];

fn t(secs: i64) -> Timestamp {
    Timestamp(1_800_000_000_000 + secs * 1000)
}

/// A registry of agents `(name, host, pid, registered at)`.
fn registry(agents: &[(String, Option<&str>, Option<u32>, i64)]) -> State {
    let mut s = State::new(10);
    for (i, (name, host, pid, at)) in agents.iter().enumerate() {
        let mut reg = Registration::new(name, "codex", "/w");
        reg.pid = *pid;
        let e = Event {
            at: t(*at),
            kind: EventKind::AgentRegistered {
                reg: Box::new(reg),
                kind: RegistrationKind::New,
                host: host.map(str::to_string),
            },
        };
        s.apply(i as Lsn + 1, &e);
    }
    s
}

fn agents_of(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e.kind.subject_agent().map(str::to_string))
        .collect()
}

/// Every pid is dead on both hosts' probes: only host a's agent is judged
/// by a's probe, only host b's by b's; the agent of no host (or another
/// host) is swept by the lease alone, and not before it expires.
#[test]
fn a_host_probe_judges_only_its_own_agents() {
    let s = registry(&[
        ("on-a".into(), Some("a"), Some(100), 0),
        ("on-b".into(), Some("b"), Some(100), 0),
        ("nowhere".into(), None, Some(100), 0),
    ]);
    let dead = FakeProbe::default();
    let policy = SweepPolicy::default();
    let on_a = HostLocalProbe {
        host: "a",
        inner: &dead,
    };
    // Within the lease: a's probe marks only a's agent.
    let swept = sweep(&s, t(10), &policy, &on_a);
    assert_eq!(agents_of(&swept), ["on-a"]);
    assert!(matches!(
        &swept[0].kind,
        EventKind::StatusChanged {
            status: Status::Exited,
            cause: StatusCause::ProcessGone,
            ..
        }
    ));
    // b, not holding the lease, probes only b's agent.
    let on_b = HostLocalProbe {
        host: "b",
        inner: &dead,
    };
    assert_eq!(
        agents_of(&sweep_process_identity(&s, t(10), &on_b)),
        ["on-b"]
    );
    // Past the lease, the others go by lease expiry, not by a's probe.
    let late = sweep(&s, t(500), &policy, &on_a);
    let causes: Vec<_> = late
        .iter()
        .map(|e| match &e.kind {
            EventKind::StatusChanged { agent, cause, .. } => (agent.as_str(), *cause),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        causes,
        [
            ("on-a", StatusCause::ProcessGone),
            ("on-b", StatusCause::LeaseExpired),
            ("nowhere", StatusCause::LeaseExpired),
        ]
    );
    // A bare pid names no host: no opinion.
    assert_eq!(on_a.probe(100), ProcessState::Unknown);
}

fn agent_specs() -> impl Strategy<Value = Vec<(Option<&'static str>, Option<u32>, i64)>> {
    proptest::collection::vec(
        (
            proptest::sample::select(HOSTS.to_vec()),
            proptest::option::of(1u32..6),
            0i64..300,
        ),
        0..12,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A probe answering only for some agents: the sweep with host a's
    /// probe equals, agent by agent, the sweep with the real probe for a's
    /// agents and the lease-only sweep for every other agent; the sweep
    /// host b runs without the lease acts only on b's agents; and applying
    /// one sweep's changes leaves nothing for the other to do on the same
    /// agents (no agent swept twice).
    #[test]
    fn host_local_sweeps_answer_for_their_own_agents_only(
        specs in agent_specs(),
        alive_on_a in proptest::collection::hash_map(1u32..6, proptest::option::of(0u64..3), 0..5),
        alive_on_b in proptest::collection::hash_map(1u32..6, proptest::option::of(0u64..3), 0..5),
        now in 0i64..400,
    ) {
        let agents: Vec<_> = specs
            .iter()
            .enumerate()
            .map(|(i, (h, p, at))| (format!("g{i}"), *h, *p, *at))
            .collect();
        let s = registry(&agents);
        let probe_a = FakeProbe { running: alive_on_a.into_iter().collect::<HashMap<_, _>>() };
        let probe_b = FakeProbe { running: alive_on_b.into_iter().collect::<HashMap<_, _>>() };
        let policy = SweepPolicy::default();
        let now = t(now);
        let on_a = HostLocalProbe { host: "a", inner: &probe_a };
        let on_b = HostLocalProbe { host: "b", inner: &probe_b };

        let holder = sweep(&s, now, &policy, &on_a);
        let mut expected = Vec::new();
        for a in s.agents().iter() {
            let probe: &dyn ProcessProbe = if a.host.as_deref() == Some("a") { &probe_a } else { &NoProbe };
            expected.extend(sweep_agent(a, now, &policy, probe));
        }
        prop_assert_eq!(&holder, &expected);

        let local_b = sweep_process_identity(&s, now, &on_b);
        for e in &local_b {
            let name = e.kind.subject_agent().unwrap();
            let a = s.agent(name).unwrap();
            prop_assert_eq!(a.host.as_deref(), Some("b"));
            prop_assert_eq!(Some(e.clone()), process_identity_check(a, now, &probe_b));
        }

        // Either order, the second sweep finds nothing left to do on an
        // agent the first one finished.
        let mut after_holder = s.clone();
        for (i, e) in holder.iter().enumerate() {
            after_holder.apply(1000 + i as Lsn, e);
        }
        let again = sweep_process_identity(&after_holder, now, &on_b);
        for name in agents_of(&again) {
            prop_assert!(!agents_of(&holder).contains(&name), "{} swept twice", name);
        }
        let mut after_b = s.clone();
        for (i, e) in local_b.iter().enumerate() {
            after_b.apply(1000 + i as Lsn, e);
        }
        let then_holder = sweep(&after_b, now, &policy, &on_a);
        for name in agents_of(&then_holder) {
            prop_assert!(!agents_of(&local_b).contains(&name), "{} swept twice", name);
        }
    }
}
