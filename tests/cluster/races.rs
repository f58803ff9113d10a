//! Two hosts race to register the same name, many times, through different
//! servers of a real 3-node NATS cluster: exactly one wins each race, the
//! other gets "name held by pid N" naming the winner (docs/behaviour.md §3), and the
//! stream holds exactly one registration per name.

use crate::support::cluster::*;
use agentlog::cluster::ClusterError;
use agentlog::registry::{EventKind, Registration, RegistryError};

/// Races run; each is two concurrent conditional publishes plus the
/// loser's catch-up.
const ROUNDS: usize = 1_000;

fn reg(name: &str, pid: u32) -> Registration {
    let mut r = Registration::new(name, "codex", "/race");
    r.pid = Some(pid);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_of_two_racing_registrations_wins() {
    let nats = NatsCluster::start(3);
    nats.wait_ready("race").await;
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = node(da.path(), vec![nats.url(0)], "race", "a").await;
    let b = node(db.path(), vec![nats.url(1)], "race", "b").await;

    let mut wins = [0usize; 2];
    let mut winners = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let name = format!("racer-{round}");
        let at = T0.add_millis(round as i64);
        let (ra, rb) = tokio::join!(
            a.register(reg(&name, 10_000 + round as u32), Some(at)),
            b.register(reg(&name, 20_000 + round as u32), Some(at)),
        );
        let (winner_pid, loser) = match (ra, rb) {
            (Ok(_), Err(e)) => {
                wins[0] += 1;
                (10_000 + round as u32, e)
            }
            (Err(e), Ok(_)) => {
                wins[1] += 1;
                (20_000 + round as u32, e)
            }
            other => panic!("round {round}: not exactly one winner: {other:?}"),
        };
        match loser {
            ClusterError::Registry(RegistryError::NameHeld { agent, pid, .. }) => {
                assert_eq!(agent, name);
                assert_eq!(
                    pid,
                    Some(winner_pid),
                    "round {round}: loser names the winner"
                );
            }
            e => panic!("round {round}: loser failed with {e}, not NameHeld"),
        }
        winners.push(winner_pid);
    }
    // Both hosts won some races (both really raced).
    assert!(wins[0] > 0 && wins[1] > 0, "wins {wins:?}");

    let seq = converge(&[&a, &b]).await;
    assert_eq!(seq, ROUNDS as u64, "one stored registration per race");
    for n in [&a, &b] {
        let state = n.store().state();
        assert_eq!(state.anomalies(), 0);
        for (round, pid) in winners.iter().enumerate() {
            let name = format!("racer-{round}");
            assert_eq!(state.agent(&name).unwrap().pid, Some(*pid));
        }
        let regs = n
            .store()
            .view()
            .iter_from(0)
            .filter(|r| {
                let r = r.as_ref().unwrap();
                matches!(
                    agentlog::registry::decode(r.payload).unwrap().kind,
                    EventKind::AgentRegistered { .. }
                )
            })
            .count();
        assert_eq!(regs, ROUNDS);
    }
    let out = tempfile::tempdir().unwrap();
    let bytes = exports(&[&a, &b], out.path());
    assert_eq!(bytes[0], bytes[1]);
    a.close().await.unwrap();
    b.close().await.unwrap();
}
