//! Crash test with real processes: a child store appends durable commands
//! while snapshotting (every few events and on demand) and exporting; the
//! parent SIGKILLs it at random moments and reopens. Every reopen must
//! succeed, keep every acknowledged command, equal a full refold of the log,
//! and never find a partial `registry.json`.

use crate::support::store::*;
use agentlog::log::Durability;
use agentlog::registry::*;
use agentlog::store::{Store, StoreOptions};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const CHILD: &str = "AGENTLOG_TEST_STORE_SNAPSHOT_CHILD";
const KILLS: u64 = 30;

fn opts(dir: &Path) -> StoreOptions {
    StoreOptions {
        command_durability: Durability::Durable,
        heartbeat_durability: Durability::Durable,
        snapshot_every_events: 25,
        snapshot_every_secs: 0,
        snapshots_kept: 2,
        export_path: Some(dir.join("registry.json")),
        ..lazy_opts()
    }
}

/// Child mode: register a few agents, then heartbeat and change status
/// forever, snapshotting on demand every 40 commands; prints each
/// acknowledged LSN.
#[test]
fn snapshot_child() {
    let Ok(dir) = std::env::var(CHILD) else {
        return;
    };
    let dir = Path::new(&dir);
    let store = Store::open(&dir.join("store"), opts(dir)).unwrap();
    let names = ["ann", "ben", "cat"];
    let mut k: i64 = store.applied_lsn() as i64;
    for (i, n) in names.iter().enumerate() {
        if store.state().agent(n).is_none() {
            let mut r = Registration::new(n, "claude", "/w");
            r.pid = Some(10 + i as u32);
            let (lsn, _) = store.register(r, Some(T0.add_millis(k))).unwrap();
            println!("ACK {lsn}");
        }
    }
    loop {
        k += 1;
        let i = (k % 3) as usize;
        let at = Some(T0.add_millis(k * 10));
        let lsn = if k % 7 == 0 {
            let s =
                [agentlog::model::Status::Busy, agentlog::model::Status::Idle][(k % 2) as usize];
            store.set_status(names[i], s, None, at).unwrap()
        } else {
            store.heartbeat(names[i], Some(10 + i as u32), at).unwrap()
        };
        println!("ACK {lsn}");
        if k % 40 == 0 {
            store.snapshot().unwrap();
        }
    }
}

#[test]
fn sigkill_during_snapshots_and_exports_loses_nothing_acknowledged() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut acked = 0u64;
    let mut used_snapshot = 0;
    for round in 0..KILLS {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let wait_for = 5 + (seed >> 33) % 80;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg(crate::support::test_name(module_path!(), "snapshot_child"))
            .args(["--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut seen = 0;
        for line in out.lines() {
            let Ok(line) = line else { break };
            if let Some(lsn) = line.strip_prefix("ACK ") {
                acked = acked.max(lsn.parse().unwrap());
                seen += 1;
                if seen >= wait_for {
                    break;
                }
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let store = Store::open(&dir.join("store"), opts(dir))
            .unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
        let last = store.log().last_lsn().unwrap_or(0);
        assert!(
            last >= acked,
            "round {round}: lost acked lsn {acked} (log ends at {last})"
        );
        assert_eq!(store.state(), refold(&store), "round {round}");
        used_snapshot += usize::from(store.open_report().snapshot_lsn.is_some());
        if let Ok(bytes) = std::fs::read(dir.join("registry.json")) {
            let v: serde_json::Value = serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("round {round}: partial registry.json: {e}"));
            assert_eq!(v["schema_version"], 4);
        }
        drop(store); // not a clean close: the next child starts from here
    }
    assert!(used_snapshot > 0, "no reopen resumed from a snapshot");
}
