//! One host of `bench cluster` (the hidden `bench cluster-host` subcommand):
//! a process that plays one machine of the fleet. It reads its
//! [`HostSpec`] as one JSON line on stdin, then one [`HostCommand`] per line,
//! and answers each with one JSON line, `{"Ok": HostReply}` or
//! `{"Err": "why"}`.
//!
//! Against NATS it opens a [`ClusterNode`] over its own store directory
//! and talks to its own NATS server (as if each host had one); against etcd
//! it talks to its own etcd member through the JSON gateway. The agents of
//! host `h` are those whose index is `h` modulo the number of hosts; each of
//! its workers owns a disjoint share of them, so no two workers of the run
//! ever write one agent's subject (or key) at once.
//!
//! Visibility: every durable write carries `"<host>:<CLOCK_MONOTONIC ns>"`
//! taken just before it is sent (a status message on NATS, the value on
//! etcd). Each host's watcher (the records its mirror folds, handed over
//! by [`ClusterNode::follow_folded`], on NATS; a prefix watch on etcd)
//! reads what arrives and records, for every write of another host, its
//! clock now minus the stamp. All processes run on one machine, so they
//! share CLOCK_MONOTONIC.

use super::baseline::agent_name;
use super::clients_worker::{agents_of, Tally};
use super::etcd::EtcdClient;
use super::latency::{Histogram, HistogramParts};
use super::{BenchError, Result};
use agentlog::cluster::{ClusterNode, ClusterOptions, DurableStages};
use agentlog::log::Durability::{Durable, Lazy};
use agentlog::model::Status;
use agentlog::registry::{codec, decode, EventKind, Registration};
use agentlog::store::{Store, StoreOptions};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Lease of the etcd side's agents: long enough to outlive a run.
const ETCD_LEASE_TTL_S: u64 = 600;
/// The etcd keys of agents (and of the watch's stop markers).
const ETCD_PREFIX: &str = "agents/";

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the run.
pub fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// What one host is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostSpec {
    pub host: usize,
    pub hosts: usize,
    pub agents: usize,
    /// Workers of this host in the heartbeat and durable phases.
    pub concurrency: usize,
    pub seconds: f64,
}

/// A measured phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Lazy heartbeats (NATS) or lease keep-alives (etcd).
    Heartbeats,
    /// Status changes acknowledged by the stream (NATS) or puts (etcd),
    /// `concurrency` workers per host.
    Durable,
    /// The same writes from one worker per host: the cross-host visibility
    /// of a lightly loaded cluster.
    Visibility,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum HostCommand {
    /// Open a node over the store in `dir`, connected to `servers`.
    NatsOpen {
        dir: PathBuf,
        servers: Vec<String>,
        fleet: String,
        replicas: usize,
    },
    /// Talk to the etcd member at `url`.
    EtcdOpen { url: String },
    /// Register this host's agents (NATS) or grant their leases and put
    /// their keys (etcd); answers the last sequence (revision) written.
    Setup,
    /// Arm the watcher, then run `phase` from CLOCK_MONOTONIC `start_ns`
    /// for the spec's seconds.
    Phase { phase: Phase, start_ns: u64 },
    /// Everything up to sequence `seq` is written: wait until this host has
    /// seen it, stop the watcher and report what it measured.
    Drain { seq: u64 },
    /// Close the node (or the etcd connection).
    Close,
    /// Answer, then exit.
    Exit,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseResult {
    pub workers: usize,
    /// Acknowledged operations.
    pub ops: u64,
    pub failed: u64,
    pub first_error: Option<String>,
    /// CLOCK_MONOTONIC when the last worker's last operation was answered.
    pub end_ns: u64,
    /// The last sequence (NATS) or revision (etcd) this host wrote; on
    /// NATS after a lazy phase, a durable heartbeat's, published behind
    /// the lazy ones on the same connection (so all of them are stored).
    pub fence: u64,
    /// Latency of each acknowledged operation.
    pub latency: HistogramParts,
    /// Where this host's durable commands spent the phase (NATS durable
    /// and visibility phases).
    #[serde(default)]
    pub stages: Option<DurableStages>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DrainResult {
    /// Heartbeats this host folded up to the drained sequence since the
    /// phase began (a batch counts each of its heartbeats; NATS only).
    pub heartbeats: u64,
    /// CLOCK_MONOTONIC when this host's mirror last advanced, i.e. when it
    /// had folded everything up to the drained sequence (NATS; 0 on etcd).
    pub reached_ns: u64,
    /// Now minus stamp of each other host's write this host saw.
    pub visibility: HistogramParts,
}

/// Externally tagged: an internally tagged enum would buffer its content,
/// which cannot hold a histogram's `u128` sum.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostReply {
    Done { seq: u64 },
    Phase(PhaseResult),
    Drain(DrainResult),
}

/// `"<host>:<ns>"`.
fn parse_stamp(s: &str) -> Option<(usize, u64)> {
    let (h, t) = s.split_once(':')?;
    Some((h.parse().ok()?, t.parse().ok()?))
}

fn run_err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Run(e.to_string())
}

/// The indices of the agents that worker `w` of `workers` on this host
/// writes: the fleet's agents dealt over every host's workers.
fn share_of(spec: &HostSpec, w: usize, workers: usize) -> Vec<usize> {
    agents_of(
        w * spec.hosts + spec.host,
        workers * spec.hosts,
        spec.agents,
    )
}

/// The names of [`share_of`].
fn share(spec: &HostSpec, w: usize, workers: usize) -> Vec<String> {
    share_of(spec, w, workers)
        .into_iter()
        .map(agent_name)
        .collect()
}

/// Workers of `phase`: never more than this host has agents.
fn workers_of(spec: &HostSpec, phase: Phase) -> usize {
    let mine = (spec.host..spec.agents).step_by(spec.hosts).count().max(1);
    match phase {
        Phase::Visibility => 1,
        _ => spec.concurrency.min(mine),
    }
}

fn wait_until(start_ns: u64) {
    std::thread::sleep(Duration::from_nanos(start_ns.saturating_sub(mono_ns())));
}

/// What a host's watcher measured: other hosts' stamps, when its mirror
/// reached the drained sequence, heartbeats folded.
type Followed = (Histogram, u64, u64);

/// What the NATS watcher has read so far.
struct Follower {
    me: usize,
    stamps: bool,
    hist: Histogram,
    heartbeats: u64,
    /// The highest sequence read (or folded before the watcher started).
    seen: u64,
    reached_ns: u64,
}

impl Follower {
    fn note(&mut self, seq: u64, payload: &[u8]) -> std::result::Result<(), String> {
        let now = mono_ns();
        self.reached_ns = now;
        self.seen = self.seen.max(seq);
        if !self.stamps {
            self.heartbeats +=
                codec::heartbeat_count(payload).map_err(|e| format!("lsn {seq}: {e}"))?;
            return Ok(());
        }
        let event = decode(payload).map_err(|e| format!("lsn {seq}: {e}"))?;
        if let EventKind::StatusChanged {
            message: Some(m), ..
        } = &event.kind
        {
            match parse_stamp(m) {
                Some((h, t)) if h != self.me => self.hist.record(now.saturating_sub(t)),
                _ => {}
            }
        }
        Ok(())
    }
}

/// The NATS watcher: reads every record the mirror folds until told the
/// drained sequence, decoding status stamps when `stamps` and counting the
/// heartbeats folded otherwise.
async fn follow_mirror(
    node: Arc<ClusterNode>,
    me: usize,
    stamps: bool,
    mut target: watch::Receiver<Option<u64>>,
) -> std::result::Result<Followed, String> {
    let mut records = node.follow_folded();
    let mut f = Follower {
        me,
        stamps,
        hist: Histogram::new(),
        heartbeats: 0,
        // Folded before the tap: not this phase's.
        seen: node.applied(),
        reached_ns: mono_ns(),
    };
    loop {
        // The mirror hands a record over before it announces it: once
        // `applied` is read, every record up to it is in the channel.
        let applied = node.applied();
        while let Ok((seq, payload)) = records.try_recv() {
            f.note(seq, &payload)?;
        }
        if let Some(t) = *target.borrow() {
            if f.seen.max(applied) >= t {
                return Ok((f.hist, f.reached_ns, f.heartbeats));
            }
        }
        tokio::select! {
            r = records.recv() => match r {
                Some((seq, payload)) => f.note(seq, &payload)?,
                None => return Err("the mirror stopped handing over records".into()),
            },
            _ = target.changed() => {}
        }
    }
}

type NatsWatch = tokio::task::JoinHandle<std::result::Result<Followed, String>>;
type EtcdWatch = std::thread::JoinHandle<std::result::Result<Histogram, String>>;

enum Backend {
    Idle,
    Nats {
        node: Arc<ClusterNode>,
        watcher: Option<(watch::Sender<Option<u64>>, NatsWatch)>,
    },
    Etcd {
        url: String,
        /// Lease of each agent, by agent index.
        leases: Arc<Vec<i64>>,
        watcher: Option<EtcdWatch>,
    },
}

struct Host {
    spec: HostSpec,
    rt: tokio::runtime::Runtime,
    backend: Backend,
}

impl Host {
    fn handle(&mut self, cmd: HostCommand) -> Result<HostReply> {
        match (cmd, &mut self.backend) {
            (
                HostCommand::NatsOpen {
                    dir,
                    servers,
                    fleet,
                    replicas,
                },
                Backend::Idle,
            ) => {
                let store = Store::open(&dir, StoreOptions::default())?;
                let mut opts =
                    ClusterOptions::new(servers, &fleet, &format!("host{}", self.spec.host));
                opts.replicas = replicas;
                let node = self
                    .rt
                    .block_on(ClusterNode::start(store, opts))
                    .map_err(run_err)?;
                self.backend = Backend::Nats {
                    node: Arc::new(node),
                    watcher: None,
                };
                Ok(HostReply::Done { seq: 0 })
            }
            (HostCommand::EtcdOpen { url }, Backend::Idle) => {
                self.backend = Backend::Etcd {
                    url,
                    leases: Arc::new(Vec::new()),
                    watcher: None,
                };
                Ok(HostReply::Done { seq: 0 })
            }
            (HostCommand::Setup, Backend::Nats { node, .. }) => {
                let seq = self.rt.block_on(nats_setup(&self.spec, node.clone()))?;
                Ok(HostReply::Done { seq })
            }
            (HostCommand::Setup, Backend::Etcd { url, leases, .. }) => {
                let (granted, seq) = etcd_setup(&self.spec, url)?;
                *leases = Arc::new(granted);
                Ok(HostReply::Done { seq })
            }
            (HostCommand::Phase { phase, start_ns }, Backend::Nats { node, watcher }) => {
                let (tx, rx) = watch::channel(None);
                let follow =
                    follow_mirror(node.clone(), self.spec.host, phase != Phase::Heartbeats, rx);
                *watcher = Some((tx, self.rt.spawn(follow)));
                let r = self
                    .rt
                    .block_on(nats_phase(&self.spec, node.clone(), phase, start_ns))?;
                Ok(HostReply::Phase(r))
            }
            (
                HostCommand::Phase { phase, start_ns },
                Backend::Etcd {
                    url,
                    leases,
                    watcher,
                },
            ) => {
                if phase != Phase::Heartbeats {
                    let w = EtcdClient::new(url)
                        .watch_prefix(ETCD_PREFIX)
                        .map_err(BenchError::Run)?;
                    let me = self.spec.host;
                    *watcher = Some(std::thread::spawn(move || follow_etcd(w, me)));
                }
                let r = etcd_phase(&self.spec, url, leases.clone(), phase, start_ns)?;
                Ok(HostReply::Phase(r))
            }
            (HostCommand::Drain { seq }, Backend::Nats { watcher, .. }) => {
                let (tx, task) = watcher
                    .take()
                    .ok_or_else(|| run_err("drain without a phase"))?;
                tx.send_replace(Some(seq));
                let (hist, reached_ns, heartbeats) = self
                    .rt
                    .block_on(task)
                    .map_err(run_err)?
                    .map_err(BenchError::Run)?;
                Ok(HostReply::Drain(DrainResult {
                    heartbeats,
                    reached_ns,
                    visibility: hist.to_parts(),
                }))
            }
            (HostCommand::Drain { .. }, Backend::Etcd { url, watcher, .. }) => {
                let hist = match watcher.take() {
                    Some(w) => {
                        let stop = format!("{ETCD_PREFIX}~stop-{}", self.spec.host);
                        EtcdClient::new(url)
                            .put(&stop, "stop", 0)
                            .map_err(BenchError::Run)?;
                        w.join()
                            .map_err(|p| BenchError::WriterPanicked(format!("{p:?}")))?
                            .map_err(BenchError::Run)?
                    }
                    None => Histogram::new(),
                };
                Ok(HostReply::Drain(DrainResult {
                    heartbeats: 0,
                    reached_ns: 0,
                    visibility: hist.to_parts(),
                }))
            }
            (HostCommand::Close, Backend::Nats { .. }) => {
                let Backend::Nats { node, watcher } =
                    std::mem::replace(&mut self.backend, Backend::Idle)
                else {
                    unreachable!("matched above")
                };
                if let Some((_, task)) = watcher {
                    task.abort();
                    let _ = self.rt.block_on(task);
                }
                let node = Arc::try_unwrap(node)
                    .map_err(|_| run_err("the cluster node is still in use at close"))?;
                self.rt.block_on(node.close()).map_err(run_err)?;
                Ok(HostReply::Done { seq: 0 })
            }
            (HostCommand::Close, _) => {
                self.backend = Backend::Idle;
                Ok(HostReply::Done { seq: 0 })
            }
            (cmd, _) => Err(run_err(format!(
                "host {}: {cmd:?} does not apply now",
                self.spec.host
            ))),
        }
    }
}

async fn nats_setup(spec: &HostSpec, node: Arc<ClusterNode>) -> Result<u64> {
    let workers = workers_of(spec, Phase::Durable);
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let (node, names) = (node.clone(), share(spec, w, workers));
            tokio::spawn(async move {
                let mut last = 0;
                for name in names {
                    let reg = Registration::new(&name, "claude", "/home/dev/proj");
                    let (lsn, _) = node
                        .register(reg, None)
                        .await
                        .map_err(|e| format!("registering {name}: {e}"))?;
                    last = last.max(lsn);
                }
                Ok::<u64, String>(last)
            })
        })
        .collect();
    let mut last = 0;
    for t in tasks {
        last = last.max(t.await.map_err(run_err)?.map_err(BenchError::Run)?);
    }
    Ok(last)
}

async fn nats_phase(
    spec: &HostSpec,
    node: Arc<ClusterNode>,
    phase: Phase,
    start_ns: u64,
) -> Result<PhaseResult> {
    let workers = workers_of(spec, phase);
    let seconds = Duration::from_secs_f64(spec.seconds);
    tokio::time::sleep(Duration::from_nanos(start_ns.saturating_sub(mono_ns()))).await;
    let stages_before = node.durable_stages();
    let me = spec.host;
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let (node, names) = (node.clone(), share(spec, w, workers));
            tokio::spawn(async move {
                let mut t = Tally::new();
                let mut last = 0;
                let start = Instant::now();
                for name in names.iter().cycle() {
                    if start.elapsed() >= seconds {
                        break;
                    }
                    let began = Instant::now();
                    let r = match phase {
                        Phase::Heartbeats => node
                            .heartbeat(None, name, None, None, Lazy)
                            .await
                            .map(|_| 0),
                        Phase::Durable | Phase::Visibility => {
                            let stamp = format!("{me}:{}", mono_ns());
                            node.set_status(name, Status::Busy, Some(stamp), None).await
                        }
                    };
                    match r {
                        Ok(seq) => {
                            t.ok(began.elapsed());
                            last = last.max(seq);
                        }
                        Err(e) => t.error(false, || format!("{name}: {e}")),
                    }
                }
                (t, last)
            })
        })
        .collect();
    let mut all = Tally::new();
    let mut fence = 0;
    for task in tasks {
        let (t, last) = task.await.map_err(run_err)?;
        all.merge(t);
        fence = fence.max(last);
    }
    let end_ns = mono_ns();
    let stages = (phase != Phase::Heartbeats).then(|| node.durable_stages().since(&stages_before));
    if phase == Phase::Heartbeats {
        // Every lazy heartbeat accepted is in a batch stored and folded
        // here (or counted failed); the durable one lands after them all.
        node.flush_heartbeats().await;
        let lost = node.heartbeats_failed();
        if lost > 0 {
            all.error(false, || {
                format!("{lost} lazy heartbeats in failed batches")
            });
        }
        let name = agent_name(spec.host);
        let durable = async {
            node.heartbeat(None, &name, None, None, Durable)
                .await?
                .wait()
                .await
        };
        fence = durable
            .await
            .map_err(|e| run_err(format!("the durable heartbeat after the lazy ones: {e}")))?;
    }
    let mut result = all.into_phase(workers, end_ns, fence);
    result.stages = stages;
    Ok(result)
}

/// Grants each of this host's agents a lease and puts its key under it;
/// returns the leases by agent index (0 for other hosts' agents) and the
/// last revision.
fn etcd_setup(spec: &HostSpec, url: &str) -> Result<(Vec<i64>, u64)> {
    let workers = workers_of(spec, Phase::Durable);
    let threads: Vec<_> = (0..workers)
        .map(|w| {
            let indices = share_of(spec, w, workers);
            let url = url.to_string();
            std::thread::spawn(move || {
                let c = EtcdClient::new(&url);
                let mut out = Vec::with_capacity(indices.len());
                let mut rev = 0;
                for i in indices {
                    let lease = c.grant(ETCD_LEASE_TTL_S)?;
                    let key = format!("{ETCD_PREFIX}{}", agent_name(i));
                    rev = rev.max(c.put(&key, "registered", lease)?);
                    out.push((i, lease));
                }
                Ok::<_, String>((out, rev))
            })
        })
        .collect();
    let mut leases = vec![0; spec.agents];
    let mut last = 0;
    for t in threads {
        let (granted, rev) = t
            .join()
            .map_err(|p| BenchError::WriterPanicked(format!("{p:?}")))?
            .map_err(BenchError::Run)?;
        for (i, lease) in granted {
            leases[i] = lease;
        }
        last = last.max(rev as u64);
    }
    Ok((leases, last))
}

fn etcd_phase(
    spec: &HostSpec,
    url: &str,
    leases: Arc<Vec<i64>>,
    phase: Phase,
    start_ns: u64,
) -> Result<PhaseResult> {
    let workers = workers_of(spec, phase);
    let seconds = Duration::from_secs_f64(spec.seconds);
    let me = spec.host;
    let threads: Vec<_> = (0..workers)
        .map(|w| {
            let indices = share_of(spec, w, workers);
            let (url, leases) = (url.to_string(), leases.clone());
            std::thread::spawn(move || {
                let c = EtcdClient::new(&url);
                let keys: Vec<String> = indices
                    .iter()
                    .map(|&i| format!("{ETCD_PREFIX}{}", agent_name(i)))
                    .collect();
                let mut t = Tally::new();
                let mut last = 0;
                wait_until(start_ns);
                let start = Instant::now();
                for (&i, key) in indices.iter().zip(&keys).cycle() {
                    if start.elapsed() >= seconds {
                        break;
                    }
                    let began = Instant::now();
                    let r = match phase {
                        Phase::Heartbeats => c.keepalive(leases[i]).map(|()| 0),
                        Phase::Durable | Phase::Visibility => {
                            let stamp = format!("{me}:{}", mono_ns());
                            c.put(key, &stamp, leases[i])
                        }
                    };
                    match r {
                        Ok(rev) => {
                            t.ok(began.elapsed());
                            last = last.max(rev as u64);
                        }
                        Err(e) => t.error(false, || e),
                    }
                }
                (t, last)
            })
        })
        .collect();
    let mut all = Tally::new();
    let mut fence = 0;
    for th in threads {
        let (t, last) = th
            .join()
            .map_err(|p| BenchError::WriterPanicked(format!("{p:?}")))?;
        all.merge(t);
        fence = fence.max(last);
    }
    Ok(all.into_phase(workers, mono_ns(), fence))
}

/// The etcd watcher: records other hosts' stamps until it sees this host's
/// stop key (put at the drain, after every host's writes were answered).
fn follow_etcd(mut w: super::etcd::Watch, me: usize) -> std::result::Result<Histogram, String> {
    let stop = format!("{ETCD_PREFIX}~stop-{me}");
    let mut hist = Histogram::new();
    loop {
        let puts = w.next_puts()?;
        let now = mono_ns();
        for (key, value) in puts {
            if key == stop {
                return Ok(hist);
            }
            match parse_stamp(&value) {
                Some((h, t)) if h != me => hist.record(now.saturating_sub(t)),
                _ => {}
            }
        }
    }
}

impl Tally {
    fn into_phase(self, workers: usize, end_ns: u64, fence: u64) -> PhaseResult {
        PhaseResult {
            workers,
            ops: self.ops,
            failed: self.failed + self.refused,
            first_error: self.first_error,
            end_ns,
            fence,
            latency: self.hist.to_parts(),
            stages: None,
        }
    }
}

/// Runs one host: `input` carries the spec line, then commands; `output`
/// gets one reply line per command. Ends at the end of `input`.
pub fn run_host(mut input: impl BufRead, mut output: impl Write) -> Result<()> {
    let io = |e| BenchError::io("cluster host pipe", "stdin/stdout", e);
    let mut line = String::new();
    input.read_line(&mut line).map_err(io)?;
    let spec: HostSpec = serde_json::from_str(&line)
        .map_err(|e| BenchError::Run(format!("bad host spec {line:?}: {e}")))?;
    if spec.hosts == 0 || spec.host >= spec.hosts || spec.agents == 0 || spec.concurrency == 0 {
        return Err(BenchError::Run(format!(
            "host spec needs host < hosts and agents, concurrency ≥ 1: {line}"
        )));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| run_err(format!("cannot start a tokio runtime: {e}")))?;
    let mut host = Host {
        spec,
        rt,
        backend: Backend::Idle,
    };
    loop {
        line.clear();
        if input.read_line(&mut line).map_err(io)? == 0 {
            return Ok(());
        }
        let (reply, exit) = match serde_json::from_str::<HostCommand>(&line) {
            Ok(HostCommand::Exit) => (Ok(HostReply::Done { seq: 0 }), true),
            Ok(cmd) => (host.handle(cmd).map_err(|e| e.to_string()), false),
            Err(e) => (Err(format!("bad host command {line:?}: {e}")), false),
        };
        let text = serde_json::to_string(&reply).expect("a host reply serializes");
        writeln!(output, "{text}")
            .and_then(|_| output.flush())
            .map_err(io)?;
        if exit {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_parse_and_shares_split_a_hosts_agents() {
        assert_eq!(parse_stamp("2:12345"), Some((2, 12345)));
        assert_eq!(parse_stamp("stop"), None);
        assert_eq!(parse_stamp("x:1"), None);
        let spec = HostSpec {
            host: 1,
            hosts: 3,
            agents: 10,
            concurrency: 2,
            seconds: 1.0,
        };
        assert_eq!(workers_of(&spec, Phase::Durable), 2);
        assert_eq!(workers_of(&spec, Phase::Visibility), 1);
        let mut all: Vec<String> = (0..2).flat_map(|w| share(&spec, w, 2)).collect();
        all.sort();
        let want: Vec<String> = [1, 4, 7].into_iter().map(agent_name).collect();
        assert_eq!(all, want);
        assert!(mono_ns() > 0 && mono_ns() <= mono_ns());
    }

    #[test]
    fn a_host_refuses_commands_out_of_order_and_bad_specs() {
        let spec = r#"{"host":0,"hosts":3,"agents":5,"concurrency":2,"seconds":1.0}"#;
        let input = format!("{spec}\n{{\"cmd\":\"setup\"}}\nnot json\n");
        let mut out = Vec::new();
        run_host(input.as_bytes(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].contains("does not apply now"), "{text}");
        assert!(lines[1].contains("bad host command"), "{text}");
        let bad = run_host(
            "{\"host\":3,\"hosts\":3,\"agents\":5,\"concurrency\":1,\"seconds\":1}\n".as_bytes(),
            Vec::new(),
        )
        .unwrap_err();
        assert!(bad.to_string().contains("host < hosts"), "{bad}");
    }
}
