//! The real server clusters `bench cluster` measures: three `nats-server`
//! processes with JetStream routed to each other, and three `etcd` members,
//! all on loopback ports and under one temporary directory.
//!
//! Invariants: a [`Cluster`] owns its processes and SIGKILLs and reaps every
//! one of them when it drops (at the end of a run and on any error), before
//! the directory holding their data is removed; a binary is found through
//! its environment variable or `PATH`, and its absence is an error naming
//! both; a cluster is handed out only once it answers (JetStream can create
//! an R3 stream; every etcd member reports itself healthy).

use super::{BenchError, Result};
use crate::cluster::{ensure_stream, FleetSubjects};
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a cluster may take to answer after its processes started.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// The server binary named `name`: `$env` if set (it must be a file), else
/// the first `name` on `PATH`. The error names both, and how to install it.
pub fn find_binary(env: &str, name: &str, install: &str) -> std::result::Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(env) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "{env}={} is not a file (it should be the `{name}` binary)",
                p.display()
            ))
        };
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!("`{name}` not found: set {env} to its path or put it on PATH ({install})")
        })
}

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

fn free_port() -> Result<u16> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| BenchError::io("cannot bind a loopback port on", "127.0.0.1:0", e))
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
        let child = cmd
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

    /// `members` nats-server processes with JetStream in `dir`, routed to
    /// each other; returned once the fleet's stream exists at `replicas`.
    pub fn nats(
        binary: &Path,
        dir: &Path,
        members: usize,
        fleet: &str,
        replicas: usize,
    ) -> Result<Cluster> {
        let mut c = Cluster::empty("NATS");
        let client: Vec<u16> = (0..members).map(|_| free_port()).collect::<Result<_>>()?;
        let route: Vec<u16> = (0..members).map(|_| free_port()).collect::<Result<_>>()?;
        for i in 0..members {
            let routes: Vec<String> = (0..members)
                .filter(|j| *j != i)
                .map(|j| format!("nats://127.0.0.1:{}", route[j]))
                .collect();
            let mut cmd = Command::new(binary);
            cmd.args(["-js", "-a", "127.0.0.1", "-n", &format!("n{i}")])
                .args(["-p", &client[i].to_string()])
                .arg("-sd")
                .arg(dir.join(format!("n{i}")))
                .args(["--cluster_name", "agentlog-bench"])
                .args(["--cluster", &format!("nats://127.0.0.1:{}", route[i])])
                .args(["--routes", &routes.join(",")]);
            c.spawn(cmd, dir.join(format!("n{i}.log")))?;
            c.urls.push(format!("nats://127.0.0.1:{}", client[i]));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| BenchError::Run(format!("cannot start a tokio runtime: {e}")))?;
        let subjects = FleetSubjects::new(fleet).map_err(|e| BenchError::Config(e.to_string()))?;
        let ready = rt.block_on(async {
            let deadline = Instant::now() + READY_WITHIN;
            let mut last = String::from("no answer");
            while Instant::now() < deadline {
                match async_nats::connect(c.urls.clone()).await {
                    Ok(client) => {
                        let js = async_nats::jetstream::ContextBuilder::new()
                            .timeout(Duration::from_secs(2))
                            .build(client);
                        match ensure_stream(&js, &subjects, replicas).await {
                            Ok(_) => return Ok(()),
                            Err(e) => last = e.to_string(),
                        }
                    }
                    Err(e) => last = e.to_string(),
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(last)
        });
        match ready {
            Ok(()) => Ok(c),
            Err(why) => Err(c.not_ready(&format!("within {READY_WITHIN:?}: {why}"))),
        }
    }

    /// `members` etcd members in `dir` forming one new cluster;
    /// returned once every member answers `/health` with `true`.
    pub fn etcd(binary: &Path, dir: &Path, members: usize) -> Result<Cluster> {
        let mut c = Cluster::empty("etcd");
        let client: Vec<u16> = (0..members).map(|_| free_port()).collect::<Result<_>>()?;
        let peer: Vec<u16> = (0..members).map(|_| free_port()).collect::<Result<_>>()?;
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
