//! `agentlog bench soak`: the daemon under everything at once for a long
//! run, crashed on a schedule, and the whole history judged afterwards.
//!
//! On a fresh store this run starts `agentlog serve --http 127.0.0.1:0`,
//! registers the fleet, then for the run's length keeps up: client
//! processes writing at a steady total rate ([`super::soak_worker`], each
//! acknowledged write recorded with its LSN); socket watchers that read and
//! watchers that never read, SSE clients, a `/metrics` scraper and a
//! compaction every period ([`super::soak_load`]); and a `kill -9` of the
//! daemon every period, after which the log's last LSN is read (what
//! survived) and the daemon restarted on the same store. Every 250 ms it
//! samples the daemon's `/proc/<pid>/status` (VmHWM, VmRSS, RssAnon) and
//! counts `/proc/<pid>/fd`; every second it asks `hello` for
//! `watchers_lagged`.
//!
//! At the end the daemon is stopped gracefully and [`super::soak_check`]
//! judges every acknowledgement against what survived each kill and the
//! final log. The report holds the lost acknowledged writes (must be 0),
//! the daemon's peak RSS and descriptors against stated bounds, the
//! per-minute write rate and latency, kills and restarts, compactions and
//! the side load's counts. `passed` is false when a write was lost, a
//! bound was passed, or a kill or compaction that was due did not happen.

use super::clients::{init_store, register_fleet, serve_command, Server, Worker};
use super::cluster_host::mono_ns;
use super::heartbeats::work_dir;
use super::latency::{Histogram, LatencySummary};
use super::machine::MachineInfo;
use super::soak_check::{check_history, minutes, read_acks, HistoryCheck, Kill, MinuteRow};
use super::soak_load::{self as load, LoadReport, Shared};
use super::soak_worker::{SoakWorkerResult, SoakWorkerSpec};
use super::{BenchError, Result};
use agentlog::daemon::client::Client;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `bench soak` runs.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// The agentlog binary: the daemon and the client processes run it.
    pub exe: PathBuf,
    pub seconds: f64,
    pub agents: usize,
    /// Client processes.
    pub clients: usize,
    /// Writes per second of all client processes together.
    pub rate: f64,
    /// Every Nth write of a process is a durable `status` (0: none).
    pub status_every: u64,
    /// Socket watchers, `idle_watchers` of them never reading.
    pub watchers: usize,
    pub idle_watchers: usize,
    /// SSE clients of `/api/events`.
    pub sse: usize,
    /// Seconds between `/metrics` scrapes, compactions, kills (0: none).
    pub scrape_every: f64,
    pub compact_every: f64,
    pub kill_every: f64,
    /// The bounds the daemon's peak RSS and descriptors must stay under.
    pub rss_bound_bytes: u64,
    pub fd_bound: u64,
    /// Where the run's directory goes (a temporary one when `None`).
    pub dir: Option<PathBuf>,
}

impl SoakConfig {
    /// The soak: 10 minutes, 1,000 agents, 8 client processes, 50
    /// watchers (10 never reading), 5 SSE clients, a scrape a second, a
    /// compaction every 30 s, a kill every 60 s.
    pub fn full(exe: PathBuf) -> SoakConfig {
        SoakConfig {
            exe,
            seconds: 600.0,
            agents: 1000,
            clients: 8,
            rate: 2000.0,
            status_every: 10,
            watchers: 50,
            idle_watchers: 10,
            sse: 5,
            scrape_every: 1.0,
            compact_every: 30.0,
            kill_every: 60.0,
            rss_bound_bytes: 512 << 20,
            fd_bound: 512,
            dir: None,
        }
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(BenchError::Config(m));
        if self.agents == 0 || self.clients == 0 {
            return bad("--agents and --clients must be at least 1".into());
        }
        if self.idle_watchers > self.watchers {
            return bad(format!(
                "--idle-watchers {} is more than --watchers {}",
                self.idle_watchers, self.watchers
            ));
        }
        let periods = [
            ("--scrape-every", self.scrape_every),
            ("--compact-every", self.compact_every),
            ("--kill-every", self.kill_every),
        ];
        for (flag, v) in periods {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("{flag} must be 0 (never) or positive, got {v}"));
            }
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0) {
            return bad(format!("--seconds must be positive, got {}", self.seconds));
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return bad(format!("--rate must be positive, got {}", self.rate));
        }
        Ok(())
    }
}

/// What the client processes did, summed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakWrites {
    pub sent: u64,
    pub acked: u64,
    /// Cut by a kill before their reply (the checker asks nothing of them).
    pub unacked: u64,
    pub errors: u64,
    pub reconnects: u64,
    pub first_error: Option<String>,
    /// Acknowledged writes over the run's length.
    pub writes_per_s: f64,
}

/// The daemon's resources, sampled every 250 ms over all its lives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DaemonUse {
    /// The largest VmHWM (peak RSS) of any of the daemon's lives.
    pub peak_rss_bytes: u64,
    /// The largest RssAnon sampled (heap and stacks; the rest is mapped log).
    pub peak_rss_anon_bytes: u64,
    /// The most open descriptors sampled.
    pub peak_fds: u64,
    /// Open descriptors at the end, before the graceful stop.
    pub final_fds: u64,
    pub rss_bound_bytes: u64,
    pub fd_bound: u64,
    pub within_bounds: bool,
    pub samples: u64,
    /// `watchers_lagged` of `hello`, summed over the daemon's lives.
    pub watchers_lagged: u64,
}

/// `bench soak --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SoakReport {
    pub seconds: f64,
    pub agents: usize,
    pub clients: usize,
    pub rate: f64,
    pub status_every: u64,
    pub watchers: usize,
    pub idle_watchers: usize,
    pub sse: usize,
    pub scrape_every_s: f64,
    pub compact_every_s: f64,
    pub kill_every_s: f64,
    /// Acknowledged writes lost (must be 0): `history.lost`.
    pub lost_acked_writes: u64,
    pub writes: SoakWrites,
    /// Every acknowledged write's latency (send to reply).
    pub latency: LatencySummary,
    /// The highest full minute's p99 over the lowest (1: flat).
    pub p99_spread: f64,
    pub minutes: Vec<MinuteRow>,
    pub kills: u64,
    pub restarts: u64,
    /// From the kill to the new daemon listening.
    pub restart_ms_max: f64,
    pub restart_ms_mean: f64,
    pub daemon: DaemonUse,
    pub load: LoadReport,
    pub history: HistoryCheck,
    pub kill_log: Vec<Kill>,
    pub passed: bool,
    pub machine: MachineInfo,
}

/// The daemon of the run: its store, its current life and what it cost.
struct Daemon {
    exe: PathBuf,
    store: PathBuf,
    logs: PathBuf,
    server: Option<Server>,
    lives: usize,
}

impl Daemon {
    /// Starts a life of the daemon and publishes its HTTP address.
    fn start(&mut self, sh: &Shared) -> Result<()> {
        let mut cmd = serve_command(&self.exe, &self.store);
        cmd.args(["--http", "127.0.0.1:0"]);
        let log = self.logs.join(format!("serve-{}.log", self.lives));
        self.server = Some(Server::start(cmd, "daemon", log)?);
        self.lives += 1;
        let hello = Client::connect(&self.store)
            .and_then(|mut c| c.call("hello", json!({})))
            .map_err(|e| BenchError::Run(format!("hello after the daemon started: {e}")))?;
        let addr = hello.result["http"].as_str().map(str::to_string);
        let token_path = self.store.join("http.token");
        let token = std::fs::read_to_string(&token_path)
            .map_err(|e| BenchError::io("cannot read", &token_path, e))?;
        *sh.token.lock().unwrap_or_else(|e| e.into_inner()) = token.trim().to_string();
        *sh.http.lock().unwrap_or_else(|e| e.into_inner()) = addr;
        Ok(())
    }

    fn pid(&self) -> Option<u32> {
        self.server.as_ref().map(Server::pid)
    }
}

/// `/proc/<pid>/status`'s VmHWM, VmRSS and RssAnon (bytes), and the
/// number of open descriptors.
fn sample(pid: u32) -> Option<(u64, u64, u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = |f: &str| super::rss::parse_status_kb(&status, f).map(|k| k * 1024);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some((kb("VmHWM")?, kb("VmRSS")?, kb("RssAnon").unwrap_or(0), fds))
}

/// `hello`'s `watchers_lagged` of the daemon serving `dir`.
fn watchers_lagged(dir: &Path) -> Option<u64> {
    let r = Client::connect(dir)
        .and_then(|mut c| c.call("hello", json!({})))
        .ok()?;
    r.result["watchers_lagged"].as_u64()
}

/// The log's last LSN as the files hold it (the daemon dead).
fn surviving_lsn(store: &Path) -> Result<u64> {
    let log = agentlog::StoreLayout::new(store).log();
    Ok(agentlog::LogReader::open_with(&log, true)?
        .last_lsn()
        .unwrap_or(0))
}

/// Starts the client processes, writing until `until` (CLOCK_MONOTONIC).
fn start_clients(
    cfg: &SoakConfig,
    store: &Path,
    acks: &[PathBuf],
    until: u64,
) -> Result<Vec<Worker>> {
    let mut workers = Vec::with_capacity(cfg.clients);
    for (w, path) in acks.iter().enumerate() {
        let spec = SoakWorkerSpec {
            dir: store.to_path_buf(),
            worker: w,
            procs: cfg.clients,
            agents: cfg.agents,
            rate: cfg.rate / cfg.clients as f64,
            until_mono_ns: until,
            status_every: cfg.status_every,
            acks: path.clone(),
        };
        let mut cmd = Command::new(&cfg.exe);
        cmd.args(["bench", "soak-worker"])
            .env_remove("AGENTLOG_NOW");
        let mut worker = Worker::spawn(cmd, &cfg.exe)?;
        let text = serde_json::to_string(&spec).expect("a worker spec serializes");
        // A worker that died already is reported when its result is read.
        let _ = writeln!(worker.stdin, "{text}").and_then(|_| worker.stdin.flush());
        workers.push(worker);
    }
    Ok(workers)
}

/// Starts the side load's threads.
fn start_load(cfg: &SoakConfig, sh: &Arc<Shared>) -> Vec<std::thread::JoinHandle<()>> {
    let mut threads = Vec::new();
    let mut spawn = |f: Box<dyn FnOnce(&Shared) + Send>| {
        let sh = sh.clone();
        threads.push(std::thread::spawn(move || f(&sh)));
    };
    let agents = cfg.agents;
    for i in 0..cfg.watchers - cfg.idle_watchers {
        spawn(Box::new(move |sh| load::reading_watcher(sh, i, agents)));
    }
    for _ in 0..cfg.idle_watchers {
        spawn(Box::new(load::idle_watcher));
    }
    for i in 0..cfg.sse {
        spawn(Box::new(move |sh| load::sse_client(sh, i)));
    }
    if cfg.scrape_every > 0.0 {
        let p = Duration::from_secs_f64(cfg.scrape_every);
        spawn(Box::new(move |sh| load::scraper(sh, p)));
    }
    if cfg.compact_every > 0.0 {
        let p = Duration::from_secs_f64(cfg.compact_every);
        spawn(Box::new(move |sh| load::compactor(sh, p)));
    }
    threads
}

/// What the run loop measured.
#[derive(Default)]
struct Observed {
    kills: Vec<Kill>,
    restart_ms: Vec<f64>,
    /// `(t_ns, VmRSS, fds)` per sample.
    samples: Vec<(u64, u64, u64)>,
    daemon: DaemonUse,
}

/// Samples the daemon and kills it on schedule until `until`.
fn run_loop(cfg: &SoakConfig, d: &mut Daemon, sh: &Shared, until: u64) -> Result<Observed> {
    let mut o = Observed::default();
    let kill_every = (cfg.kill_every > 0.0).then(|| Duration::from_secs_f64(cfg.kill_every));
    let mut next_kill = kill_every.map(|p| Instant::now() + p);
    let (mut next_sample, mut next_hello) = (Instant::now(), Instant::now());
    let mut lagged_this_life = 0;
    while mono_ns() < until {
        let now = Instant::now();
        if let Some(pid) = d.pid().filter(|_| now >= next_sample) {
            next_sample = now + Duration::from_millis(250);
            if let Some((hwm, rss, anon, fds)) = sample(pid) {
                let u = &mut o.daemon;
                u.peak_rss_bytes = u.peak_rss_bytes.max(hwm);
                u.peak_rss_anon_bytes = u.peak_rss_anon_bytes.max(anon);
                u.peak_fds = u.peak_fds.max(fds);
                u.final_fds = fds;
                u.samples += 1;
                o.samples.push((mono_ns(), rss, fds));
            }
        }
        if now >= next_hello {
            next_hello = now + Duration::from_secs(1);
            if let Some(n) = watchers_lagged(&d.store) {
                lagged_this_life = n;
            }
        }
        if next_kill.is_some_and(|k| now >= k) {
            next_kill = kill_every.map(|p| now + p);
            *sh.http.lock().unwrap_or_else(|e| e.into_inner()) = None;
            let t_ns = mono_ns();
            d.server
                .take()
                .expect("the daemon runs between kills")
                .kill_hard()?;
            o.kills.push(Kill {
                t_ns,
                recovered_lsn: surviving_lsn(&d.store)?,
            });
            o.daemon.watchers_lagged += std::mem::take(&mut lagged_this_life);
            d.start(sh)?;
            o.restart_ms.push((mono_ns() - t_ns) as f64 / 1e6);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Some(n) = watchers_lagged(&d.store) {
        lagged_this_life = lagged_this_life.max(n);
    }
    o.daemon.watchers_lagged += lagged_this_life;
    Ok(o)
}

/// Reads every client process's result line and sums them.
fn collect_clients(workers: &mut [Worker]) -> Result<SoakWrites> {
    let mut w = SoakWrites::default();
    for (i, worker) in workers.iter_mut().enumerate() {
        let line = worker.line(&format!("soak client process #{i}"), "it reported")?;
        let r: SoakWorkerResult = serde_json::from_str(&line).map_err(|e| {
            BenchError::Run(format!("soak client process #{i} reported {line:?}: {e}"))
        })?;
        w.sent += r.sent;
        w.acked += r.acked;
        w.unacked += r.unacked;
        w.errors += r.errors;
        w.reconnects += r.reconnects;
        w.first_error = w.first_error.take().or(r.first_error);
    }
    Ok(w)
}

/// `agentlog bench soak`.
pub fn run_soak(cfg: &SoakConfig) -> Result<SoakReport> {
    cfg.validate()?;
    let (root, _guard) = work_dir(cfg.dir.as_deref())?;
    let run = tempfile::Builder::new()
        .prefix("soak-")
        .tempdir_in(&root)
        .map_err(|e| BenchError::io("cannot create a run directory in", &root, e))?;
    let machine = MachineInfo::probe(run.path())?;
    let store = run.path().join("store");
    init_store(&cfg.exe, &store)?;
    let sh = Shared::new(store.clone());
    let mut d = Daemon {
        exe: cfg.exe.clone(),
        store: store.clone(),
        logs: run.path().to_path_buf(),
        server: None,
        lives: 0,
    };
    d.start(&sh)?;
    register_fleet(&store, cfg.agents)?;
    let acks: Vec<PathBuf> = (0..cfg.clients)
        .map(|w| run.path().join(format!("acks-{w}.txt")))
        .collect();
    let threads = start_load(cfg, &sh);
    let start = mono_ns();
    let until = start + (cfg.seconds * 1e9) as u64;
    let observed = start_clients(cfg, &store, &acks, until)
        .and_then(|workers| Ok((run_loop(cfg, &mut d, &sh, until)?, workers)));
    // Whatever happened, the side load stops and the daemon with it.
    sh.stop.store(true, Ordering::Release);
    let writes = observed.and_then(|(o, mut workers)| Ok((o, collect_clients(&mut workers)?)));
    let stopped = d.server.take().map_or(Ok(()), Server::stop);
    for t in threads {
        let _ = t.join();
    }
    let (mut o, mut writes) = writes?;
    stopped?;
    let acks = read_acks(&acks)?;
    let history = check_history(&acks, &o.kills, &store, cfg.agents)?;
    writes.writes_per_s = writes.acked as f64 / cfg.seconds;
    let mut all = Histogram::new();
    for a in &acks {
        all.record(a.line.latency_ns);
    }
    let latency = all.summary().ok_or_else(|| BenchError::NothingMeasured {
        phase: "soak".into(),
        detail: format!(
            "no acknowledged write ({} sent, {} errors; first: {})",
            writes.sent,
            writes.errors,
            writes.first_error.as_deref().unwrap_or("none")
        ),
    })?;
    let mut rows = minutes(&acks, start, cfg.seconds);
    let last = rows.len() - 1;
    for &(t, rss, fds) in &o.samples {
        let m = ((t.saturating_sub(start)) / 60_000_000_000) as usize;
        if let Some(r) = rows.get_mut(m.min(last)) {
            r.peak_rss_bytes = r.peak_rss_bytes.max(rss);
            r.peak_fds = r.peak_fds.max(fds);
        }
    }
    let full: Vec<f64> = rows
        .iter()
        .filter(|r| cfg.seconds >= 60.0 * (r.minute as f64 + 1.0) && r.writes > 0)
        .map(|r| r.p99_us)
        .collect();
    let p99_spread = match (
        full.iter().copied().reduce(f64::max),
        full.iter().copied().reduce(f64::min),
    ) {
        (Some(hi), Some(lo)) if lo > 0.0 => hi / lo,
        _ => 1.0,
    };
    o.daemon.rss_bound_bytes = cfg.rss_bound_bytes;
    o.daemon.fd_bound = cfg.fd_bound;
    o.daemon.within_bounds =
        o.daemon.peak_rss_bytes <= cfg.rss_bound_bytes && o.daemon.peak_fds <= cfg.fd_bound;
    let load = sh.counters.report();
    let kills = o.kills.len() as u64;
    let due = |every: f64| {
        if every > 0.0 {
            (cfg.seconds / every).floor() as u64
        } else {
            0
        }
    };
    // A round due in the run's last moments may still be under way.
    let passed = history.lost == 0
        && o.daemon.within_bounds
        && kills + 1 >= due(cfg.kill_every)
        && load.compactions + 1 >= due(cfg.compact_every);
    let n = o.restart_ms.len().max(1) as f64;
    Ok(SoakReport {
        seconds: cfg.seconds,
        agents: cfg.agents,
        clients: cfg.clients,
        rate: cfg.rate,
        status_every: cfg.status_every,
        watchers: cfg.watchers,
        idle_watchers: cfg.idle_watchers,
        sse: cfg.sse,
        scrape_every_s: cfg.scrape_every,
        compact_every_s: cfg.compact_every,
        kill_every_s: cfg.kill_every,
        lost_acked_writes: history.lost,
        writes,
        latency,
        p99_spread,
        minutes: rows,
        kills,
        restarts: o.restart_ms.len() as u64,
        restart_ms_max: o.restart_ms.iter().copied().fold(0.0, f64::max),
        restart_ms_mean: o.restart_ms.iter().sum::<f64>() / n,
        daemon: o.daemon,
        load,
        history,
        kill_log: o.kills,
        passed,
        machine,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_configurations_are_refused() {
        let ok = SoakConfig::full("agentlog".into());
        assert!(ok.validate().is_ok());
        let idle = SoakConfig {
            idle_watchers: 51,
            ..ok.clone()
        };
        assert!(idle
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--idle-watchers"));
        let kill = SoakConfig {
            kill_every: -1.0,
            ..ok.clone()
        };
        assert!(kill
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--kill-every"));
        let none = SoakConfig { clients: 0, ..ok };
        assert!(none.validate().is_err());
    }

    #[test]
    fn the_daemon_is_sampled_from_proc() {
        let (hwm, rss, _, fds) = sample(std::process::id()).unwrap();
        assert!(hwm >= rss && rss > 0 && fds >= 3, "{hwm} {rss} {fds}");
        assert_eq!(sample(u32::MAX), None);
    }
}
