//! A routed `nats-server` cluster with JetStream on loopback: what
//! `bench cluster` measures against, and what the cluster tests run on
//! (`tests/support/cluster.rs` includes this file by path). Hence it uses only
//! std, tokio, async-nats and agentlog's public API, and reports failures as
//! text the caller wraps in its own error.
//!
//! Invariants: a member keeps its ports, store directory and log file across
//! [`NatsCluster::kill`] and [`NatsCluster::restart`], so a restarted member
//! rejoins as itself; every running member is SIGKILLed and reaped when the
//! cluster drops, before the caller removes the directory holding their
//! data, and SIGKILLed by the kernel when the thread that started it exits
//! (a test process killed outright runs no `Drop`), so a cluster stays on
//! the thread that started it; a binary is found through its environment variable or `PATH`, and
//! its absence is an error naming both.

// The benches use the lookup and readiness, the tests also kill and restart.
#![allow(dead_code)]

use agentlog::cluster::{ensure_stream, FleetSubjects};
use std::fs::OpenOptions;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The server binary named `name`: `$env` if set (it must be a file), else
/// the first `name` on `PATH`. The error names both, and how to install it.
pub fn find_binary(env: &str, name: &str, install: &str) -> Result<PathBuf, String> {
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

/// A loopback port nobody listens on right now.
pub fn free_port() -> Result<u16, String> {
    hold_port(&mut Vec::new())
}

/// A loopback port nobody listens on, kept bound by a listener pushed on
/// `held` until the caller drops it.
fn hold_port(held: &mut Vec<TcpListener>) -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot bind a loopback port on 127.0.0.1:0: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("cannot read a bound port's address: {e}"))?
        .port();
    held.push(listener);
    Ok(port)
}

struct Member {
    name: String,
    client_port: u16,
    route_port: u16,
    store: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// `nats-server` processes with JetStream, each routed to all the others.
pub struct NatsCluster {
    binary: PathBuf,
    cluster_name: String,
    members: Vec<Member>,
    /// Client URLs, one per member, in member order.
    pub urls: Vec<String>,
}

impl NatsCluster {
    /// Starts `members` servers of cluster `cluster_name`, each with its
    /// store directory `dir/n<i>` and its log `dir/n<i>.log`. They may not
    /// answer yet: see [`NatsCluster::wait_ready`].
    pub fn start(
        binary: &Path,
        dir: &Path,
        members: usize,
        cluster_name: &str,
    ) -> Result<NatsCluster, String> {
        let mut c = NatsCluster {
            binary: binary.to_path_buf(),
            cluster_name: cluster_name.to_string(),
            members: Vec::with_capacity(members),
            urls: Vec::with_capacity(members),
        };
        // Every listener is held until all ports are picked, so no two
        // members are handed the same one.
        let mut held = Vec::with_capacity(2 * members);
        for i in 0..members {
            let (client_port, route_port) = (hold_port(&mut held)?, hold_port(&mut held)?);
            c.members.push(Member {
                name: format!("n{i}"),
                client_port,
                route_port,
                store: dir.join(format!("n{i}")),
                log: dir.join(format!("n{i}.log")),
                child: None,
            });
            c.urls.push(format!("nats://127.0.0.1:{client_port}"));
        }
        drop(held);
        for i in 0..members {
            c.spawn(i)?;
        }
        for i in 0..members {
            c.await_listening(i)?;
        }
        Ok(c)
    }

    /// Waits until member `i` listens on its ports. A port picked free can
    /// be taken before the server binds it (another process's listener or
    /// outgoing connection): such a member is started again on fresh ports
    /// (the others learn its route from it), a few times at most.
    fn await_listening(&mut self, i: usize) -> Result<(), String> {
        const ATTEMPTS: usize = 4;
        for _ in 0..ATTEMPTS {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let log = self.log_of(i);
                if log.contains("Listening for route connections") {
                    return Ok(());
                }
                let exited = match self.members[i].child.as_mut().map(Child::try_wait) {
                    Some(Ok(Some(_))) => true,
                    Some(Err(e)) => return Err(format!("cannot wait for nats member {i}: {e}")),
                    _ => false,
                };
                if exited && log.contains("address already in use") {
                    break;
                }
                if exited || Instant::now() >= deadline {
                    return Err(self.failure(&format!("member {i} did not start listening")));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            self.members[i].child = None;
            std::fs::remove_file(&self.members[i].log)
                .map_err(|e| format!("cannot remove {}: {e}", self.members[i].log.display()))?;
            let client_port = free_port()?;
            let route_port = free_port()?;
            let m = &mut self.members[i];
            (m.client_port, m.route_port) = (client_port, route_port);
            self.urls[i] = format!("nats://127.0.0.1:{client_port}");
            self.spawn(i)?;
        }
        Err(self.failure(&format!(
            "member {i} found its ports taken {ATTEMPTS} times"
        )))
    }

    /// Starts member `i` with stdout and stderr appended to its log.
    fn spawn(&mut self, i: usize) -> Result<(), String> {
        let routes: Vec<String> = (self.members.iter().enumerate())
            .filter(|(j, _)| *j != i)
            .map(|(_, m)| format!("nats://127.0.0.1:{}", m.route_port))
            .collect();
        let m = &self.members[i];
        let open_log = || {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&m.log)
                .map_err(|e| format!("cannot open {}: {e}", m.log.display()))
        };
        let mut cmd = Command::new(&self.binary);
        let child = agentlog::internals::die_with_spawning_thread(&mut cmd)
            .args(["-js", "-a", "127.0.0.1", "-n", &m.name])
            .args(["-p", &m.client_port.to_string()])
            .arg("-sd")
            .arg(&m.store)
            .args(["--cluster_name", &self.cluster_name])
            .args(["--cluster", &format!("nats://127.0.0.1:{}", m.route_port)])
            .args(["--routes", &routes.join(",")])
            .stdin(Stdio::null())
            .stdout(open_log()?)
            .stderr(open_log()?)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.binary.display()))?;
        self.members[i].child = Some(child);
        Ok(())
    }

    /// Process ids of the running members.
    pub fn pids(&self) -> Vec<u32> {
        self.members
            .iter()
            .filter_map(|m| m.child.as_ref().map(std::process::Child::id))
            .collect()
    }

    /// SIGKILLs member `i` and reaps it (its store directory stays).
    pub fn kill(&mut self, i: usize) -> Result<(), String> {
        let Some(mut child) = self.members[i].child.take() else {
            return Err(format!("nats member {i} is not running"));
        };
        child
            .kill()
            .and_then(|()| child.wait().map(drop))
            .map_err(|e| format!("cannot kill nats member {i}: {e}"))
    }

    /// Starts member `i` again on its ports and store directory.
    pub fn restart(&mut self, i: usize) -> Result<(), String> {
        if self.members[i].child.is_some() {
            return Err(format!("nats member {i} is running"));
        }
        self.spawn(i)
    }

    /// What member `i` logged so far.
    pub fn log_of(&self, i: usize) -> String {
        std::fs::read_to_string(&self.members[i].log).unwrap_or_default()
    }

    /// Waits until JetStream answers: the fleet's stream exists (created if
    /// absent) at `replicas` replicas, which needs a meta leader and known
    /// peers. The error says why within `within` (see also
    /// [`NatsCluster::failure`]).
    pub async fn wait_ready(
        &self,
        fleet: &str,
        replicas: usize,
        within: Duration,
    ) -> Result<(), String> {
        let subjects = FleetSubjects::new(fleet).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + within;
        let mut last = String::from("no answer");
        while Instant::now() < deadline {
            match async_nats::connect(self.urls.clone()).await {
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
        Err(format!(
            "JetStream did not answer within {within:?}: {last}"
        ))
    }

    /// `why` the cluster failed, with each member's exit status (if it
    /// exited) and the last lines of its log.
    pub fn failure(&mut self, why: &str) -> String {
        let mut text = format!("the NATS cluster failed: {why}");
        for (i, m) in self.members.iter_mut().enumerate() {
            if let Some(Ok(Some(status))) = m.child.as_mut().map(Child::try_wait) {
                text.push_str(&format!("\nmember {i} exited with {status}"));
            }
            let body = std::fs::read_to_string(&m.log).unwrap_or_default();
            let mut tail: Vec<&str> = body.lines().rev().take(5).collect();
            tail.reverse();
            text.push_str(&format!(
                "\n--- {} ---\n{}",
                m.log.display(),
                tail.join("\n")
            ));
        }
        text
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}
