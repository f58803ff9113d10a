//! A test process SIGKILLed while it holds a NATS cluster leaves no
//! `nats-server` behind: a SIGKILLed process runs no `Drop` guard, so the
//! servers are tied to the thread that started them by the kernel's
//! parent-death signal (src/bench/nats.rs).

use crate::support::cluster::NatsCluster;
use crate::support::daemon::eventually;
use rustix::process::{kill_process, Pid, Signal};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Set for the child process only: it then holds a cluster.
const CHILD: &str = "AGENTLOG_TEST_HOLD_NATS";

/// The child's part (a no-op in a normal run): starts a cluster, prints its
/// servers' pids, and holds it until stdin closes.
#[test]
fn holds_a_cluster_until_stdin_closes() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let nats = NatsCluster::start(3);
    let pids: Vec<String> = nats.pids().iter().map(u32::to_string).collect();
    println!("PIDS {}", pids.join(" "));
    std::io::stdin().read_line(&mut String::new()).unwrap();
    drop(nats);
}

#[test]
fn a_sigkilled_test_process_leaves_no_nats_server_running() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let name = crate::support::test_name(module_path!(), "holds_a_cluster_until_stdin_closes");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([&name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let servers = Servers(
        out.lines()
            .map_while(Result::ok)
            .find_map(|l| {
                // libtest prints the test's name on the same line first.
                let pids = l.split_once("PIDS ")?.1.split(' ');
                Some(pids.map(|p| p.parse().unwrap()).collect())
            })
            .expect("the child prints its servers' pids"),
    );
    assert_eq!(servers.running().len(), 3, "three servers before the kill");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    eventually("the servers to die with the SIGKILLed test", || {
        servers.running().is_empty().then_some(())
    });
}

/// Server pids; any still running are SIGKILLed on drop, so a failing run
/// leaves nothing behind either.
struct Servers(Vec<i32>);

impl Servers {
    /// The pids that are live processes (a zombie awaiting its reaper is
    /// not: it has exited).
    fn running(&self) -> Vec<i32> {
        let live = |pid: &&i32| match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => !matches!(
                stat.rsplit_once(") ").map(|(_, rest)| rest.as_bytes()[0]),
                Some(b'Z' | b'X')
            ),
            Err(_) => false,
        };
        self.0.iter().filter(live).copied().collect()
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for pid in self.running() {
            let _ = kill_process(Pid::from_raw(pid).unwrap(), Signal::KILL);
        }
    }
}
