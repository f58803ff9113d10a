//! The real server clusters `bench cluster` measures: three `nats-server`
//! processes with JetStream routed to each other (a [`NatsCluster`], shared
//! with the cluster tests), and three `etcd` members (a [`Cluster`]), all on
//! loopback ports and under one temporary directory.
//!
//! Invariants: a cluster owns its processes and SIGKILLs and reaps every
//! one of them when it drops (at the end of a run and on any error), before
//! the directory holding their data is removed; a binary is found through
//! its environment variable or `PATH`, and its absence is an error naming
//! both; a cluster is handed out only once it answers (JetStream can create
//! an R3 stream; every etcd member reports itself healthy).

use super::nats::free_port;
pub use super::nats::{find_binary, NatsCluster};
use super::{BenchError, Result};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a cluster may take to answer after its processes started.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// The first line `binary --version` prints (for the report).
pub fn version_of(binary: &Path) -> Result<String> {
    let out = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| BenchError::io("cannot run", binary, e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

/// `members` nats-server processes with JetStream in `dir`, routed to each
/// other; returned once the fleet's stream exists at `replicas`.
pub fn nats_cluster(
    binary: &Path,
    dir: &Path,
    members: usize,
    fleet: &str,
    replicas: usize,
) -> Result<NatsCluster> {
    let mut c =
        NatsCluster::start(binary, dir, members, "agentlog-bench").map_err(BenchError::Run)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::Run(format!("cannot start a tokio runtime: {e}")))?;
    match rt.block_on(c.wait_ready(fleet, replicas, READY_WITHIN)) {
        Ok(()) => Ok(c),
        Err(why) => Err(BenchError::Run(c.failure(&why))),
    }
}

/// Server processes killed together when dropped.
pub struct Cluster {
    what: &'static str,
    children: Vec<Child>,
    logs: Vec<PathBuf>,
    /// Client URLs, one per member, in member order.
    pub urls: Vec<String>,
}

impl Cluster {
    fn empty(what: &'static str) -> Cluster {
        Cluster {
            what,
            children: Vec::new(),
            logs: Vec::new(),
            urls: Vec::new(),
        }
    }

    /// Starts `cmd` with stderr (and stdout) appended to `log`.
    fn spawn(&mut self, mut cmd: Command, log: PathBuf) -> Result<()> {
        let file = File::create(&log).map_err(|e| BenchError::io("cannot create", &log, e))?;
        let err = file
            .try_clone()
            .map_err(|e| BenchError::io("cannot reopen", &log, e))?;
        // Killed with the thread that starts it (`bench cluster`'s main
        // thread), also when the harness is SIGKILLed.
        let child = agentlog::internals::die_with_spawning_thread(&mut cmd)
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .map_err(|e| BenchError::io("cannot start", cmd.get_program(), e))?;
        self.children.push(child);
        self.logs.push(log);
        Ok(())
    }

    /// An error for a cluster that did not come up: why, and the end of
    /// each member's log.
    fn not_ready(&mut self, why: &str) -> BenchError {
        let mut text = format!("the {} cluster did not answer: {why}", self.what);
        for (i, log) in self.logs.iter().enumerate() {
            if let Ok(Some(status)) = self.children[i].try_wait() {
                text.push_str(&format!("\nmember {i} exited with {status}"));
            }
            let body = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = body.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            text.push_str(&format!("\n--- {} ---\n{}", log.display(), tail.join("\n")));
        }
        BenchError::Run(text)
    }

    /// Process ids of the members.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// `members` etcd members in `dir` forming one new cluster;
    /// returned once every member answers `/health` with `true`.
    pub fn etcd(binary: &Path, dir: &Path, members: usize) -> Result<Cluster> {
        let mut c = Cluster::empty("etcd");
        let port = || free_port().map_err(BenchError::Run);
        let client: Vec<u16> = (0..members).map(|_| port()).collect::<Result<_>>()?;
        let peer: Vec<u16> = (0..members).map(|_| port()).collect::<Result<_>>()?;
        let initial: Vec<String> = (0..members)
            .map(|i| format!("e{i}=http://127.0.0.1:{}", peer[i]))
            .collect();
        for i in 0..members {
            let client_url = format!("http://127.0.0.1:{}", client[i]);
            let peer_url = format!("http://127.0.0.1:{}", peer[i]);
            let mut cmd = Command::new(binary);
            cmd.args(["--name", &format!("e{i}")])
                .arg("--data-dir")
                .arg(dir.join(format!("e{i}")))
                .args(["--listen-client-urls", &client_url])
                .args(["--advertise-client-urls", &client_url])
                .args(["--listen-peer-urls", &peer_url])
                .args(["--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &initial.join(",")])
                .args(["--initial-cluster-state", "new"])
                .args(["--initial-cluster-token", "agentlog-bench"])
                .args(["--logger", "zap", "--log-level", "warn"]);
            c.spawn(cmd, dir.join(format!("e{i}.log")))?;
            c.urls.push(client_url);
        }
        let deadline = Instant::now() + READY_WITHIN;
        for url in c.urls.clone() {
            let probe = super::etcd::EtcdClient::new(&url);
            loop {
                let why = match probe.healthy() {
                    Ok(true) => break,
                    Ok(false) => format!("{url}/health: not healthy yet"),
                    Err(e) => e,
                };
                if Instant::now() >= deadline {
                    return Err(c.not_ready(&format!("within {READY_WITHIN:?}: {why}")));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(c)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
