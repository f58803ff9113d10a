//! `agentlog bench clients`: P separate client processes heartbeating one
//! fleet, through a daemon this run starts (`agentlog serve` on a fresh
//! store), and, in the same run, the same P processes against the protocol's
//! own bound (`--echo`: [`super::echo`]), SQLite and the whole-file JSON
//! rewrite (`--compare`).
//!
//! The client processes are this binary's Rust workers, or (`--client
//! python|node`, several in one run) the Python and Node client libraries'
//! own workers (`clients/python/bench_worker.py`, `clients/node/bench/
//! worker.js`), which speak the same pipe protocol: each library on a fresh
//! daemon, so the figures of one run compare libraries on equal terms. With
//! `python` and `--compare`, Python processes also run the same heartbeats
//! on Python's own sqlite3 (the peer a Python agent host would use). The
//! echo bound and the other peers always use the Rust workers.
//!
//! Each phase spawns the worker processes ([`super::clients_worker`], the
//! binary re-executed as `bench clients-worker`), waits until every one has
//! opened its connections, releases them together, and sums what they
//! measured: ops/s is the sum of each worker's acknowledged operations over
//! its own measured time, latencies come from their merged histograms. A
//! phase with no acknowledged operation is an error, never a rate. Servers
//! this run starts are children it stops (SIGTERM, then a bounded wait),
//! also when a phase fails.

use super::baseline::{agent_name, JsonRewriteRegistry};
use super::clients_worker::{Target, WorkerResult, WorkerSpec};
use super::heartbeats::{work_dir, HeartbeatTarget};
use super::latency::{Histogram, LatencySummary};
use super::machine::MachineInfo;
use super::{BenchError, Result};
use agentlog::daemon::client::Client;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The error `--compare` gives in a build without SQLite.
pub const NO_SQLITE: &str = "--compare needs the SQLite baseline, which this build of agentlog \
     leaves out: rebuild with the default cargo feature `sqlite-baseline`";

/// How the main phase's clients reach the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// Protocol requests on a connection kept open.
    Daemon,
    /// One `agentlog heartbeat` process per heartbeat (which goes through
    /// the daemon).
    Cli,
}

/// A client library whose processes `bench clients` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientLang {
    /// This binary's `bench clients-worker`.
    Rust,
    /// `clients/python/bench_worker.py` on `$AGENTLOG_PYTHON`, else `python3`.
    Python,
    /// `clients/node/bench/worker.js` on `$AGENTLOG_NODE`, else `node`.
    Node,
}

impl ClientLang {
    /// The phase through the daemon: `daemon` for the Rust workers (as
    /// before `--client`), else the library's name.
    pub fn phase(self) -> &'static str {
        match self {
            ClientLang::Rust => "daemon",
            ClientLang::Python => "python",
            ClientLang::Node => "node",
        }
    }

    /// The command that starts one worker process.
    fn worker_command(self, cfg: &ClientsConfig) -> Result<Command> {
        let program = |var: &str, default: &str| {
            std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from)
        };
        let (interpreter, script) = match self {
            ClientLang::Rust => {
                let mut cmd = Command::new(&cfg.exe);
                cmd.args(["bench", "clients-worker"]);
                return Ok(cmd);
            }
            ClientLang::Python => (
                program("AGENTLOG_PYTHON", "python3"),
                cfg.clients_dir.join("python").join("bench_worker.py"),
            ),
            ClientLang::Node => (
                program("AGENTLOG_NODE", "node"),
                cfg.clients_dir.join("node").join("bench").join("worker.js"),
            ),
        };
        if !script.is_file() {
            return Err(BenchError::Config(format!(
                "--client {}: no worker at {} (point --clients-dir at the repository's clients/)",
                self.phase(),
                script.display()
            )));
        }
        let mut cmd = Command::new(interpreter);
        cmd.arg(script);
        Ok(cmd)
    }
}

/// What `bench clients` runs.
#[derive(Debug, Clone)]
pub struct ClientsConfig {
    /// The agentlog binary: the daemon, the echo server and the workers run it.
    pub exe: PathBuf,
    pub procs: usize,
    /// Connections per process.
    pub conns: usize,
    pub agents: usize,
    pub seconds: f64,
    pub durable: bool,
    /// Requests in flight per connection.
    pub pipeline: usize,
    pub via: Via,
    pub compare: bool,
    pub echo: bool,
    /// Where the run's directory goes (a temporary one when `None`).
    pub dir: Option<PathBuf>,
    /// The daemon also serves `serve --http` here (to measure what an open
    /// live page and a scraper cost it).
    pub http: Option<String>,
    /// The client libraries, each run on a fresh daemon, in order; the first
    /// is the report's `main`.
    pub clients: Vec<ClientLang>,
    /// Where `python/` and `node/` are.
    pub clients_dir: PathBuf,
}

/// One phase: the P processes against one target.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseReport {
    /// `daemon`, `cli`, `echo`, `sqlite` or `json_rewrite`.
    pub target: String,
    pub processes: usize,
    pub connections: usize,
    pub pipeline: usize,
    pub ops: u64,
    /// The longest worker's measured time.
    pub seconds: f64,
    pub ops_per_s: f64,
    pub latency: LatencySummary,
    pub refused: u64,
    pub failed: u64,
    pub first_error: Option<String>,
    /// Events the daemon logged during the phase (daemon and cli phases):
    /// at least `ops`, as every acknowledged heartbeat is logged.
    pub events_logged: Option<u64>,
}

/// `bench clients --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientsReport {
    pub procs: usize,
    pub conns: usize,
    pub agents: usize,
    pub seconds: f64,
    pub durable: bool,
    pub pipeline: usize,
    pub via: Via,
    /// Through the daemon (`--via`), with the first `--client`.
    pub main: PhaseReport,
    /// Every `--client`'s phase through the daemon, `main` first.
    pub clients: Vec<PhaseReport>,
    pub echo: Option<PhaseReport>,
    pub sqlite: Option<PhaseReport>,
    /// Python processes on Python's sqlite3 (`--client python --compare`).
    pub python_sqlite: Option<PhaseReport>,
    pub json_rewrite: Option<PhaseReport>,
    /// `main / <other>` ops/s, for each other phase run (`echo`, `sqlite`,
    /// `python_sqlite`, `json_rewrite`).
    pub ratios: BTreeMap<String, f64>,
    /// `"<client> / <other>"` ops/s for every client phase against every
    /// other phase of the run (the other clients' included).
    pub pair_ratios: BTreeMap<String, f64>,
    pub machine: MachineInfo,
}

impl ClientsReport {
    /// Every phase run: the clients', then the peers'.
    pub fn phases(&self) -> impl Iterator<Item = &PhaseReport> {
        self.clients.iter().chain(
            [
                &self.echo,
                &self.sqlite,
                &self.python_sqlite,
                &self.json_rewrite,
            ]
            .into_iter()
            .flatten(),
        )
    }
}

impl ClientsConfig {
    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(BenchError::Config(m));
        if self.procs == 0 || self.conns == 0 || self.agents == 0 || self.pipeline == 0 {
            return bad("--procs, --conns, --agents and --pipeline must be at least 1".into());
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0) {
            return bad(format!("--seconds must be positive, got {}", self.seconds));
        }
        if self.clients.is_empty() {
            return bad("--client names at least one client library".into());
        }
        if self.via == Via::Cli && self.clients != [ClientLang::Rust] {
            return bad(
                "--via cli runs `agentlog heartbeat` processes: --client does not apply".into(),
            );
        }
        if self.via == Via::Cli && (self.conns > 1 || self.pipeline > 1 || self.durable) {
            return bad(
                "--via cli runs one `agentlog heartbeat` at a time per client process \
                 (lazy, as the CLI sends it): --conns, --pipeline and --durable do not apply"
                    .into(),
            );
        }
        if self.compare && !cfg!(feature = "sqlite-baseline") {
            return bad(NO_SQLITE.into());
        }
        Ok(())
    }
}

/// A server child (daemon or echo) stopped with SIGTERM when dropped
/// (also `bench soak`'s daemon, which it kills and restarts).
pub(super) struct Server {
    child: Child,
    what: &'static str,
    log: PathBuf,
    /// Kept open: a server writing to a closed stdout would fail.
    _stdout: Option<BufReader<ChildStdout>>,
}

impl Server {
    /// Starts `cmd` (stdout piped, stderr to `log`) and waits for the line it
    /// prints once it accepts connections.
    pub(super) fn start(mut cmd: Command, what: &'static str, log: PathBuf) -> Result<Server> {
        let err =
            std::fs::File::create(&log).map_err(|e| BenchError::io("cannot create", &log, e))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .map_err(|e| BenchError::io("cannot start the", what, e))?;
        let mut server = Server {
            child,
            what,
            log,
            _stdout: None,
        };
        let mut out = BufReader::new(server.child.stdout.take().expect("stdout is piped"));
        let mut line = String::new();
        if !matches!(out.read_line(&mut line), Ok(n) if n > 0) {
            return Err(server.failed("exited before listening"));
        }
        server._stdout = Some(out);
        Ok(server)
    }

    fn failed(&mut self, what: &str) -> BenchError {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        BenchError::Run(format!("the {} {what}: {}", self.what, log.trim()))
    }

    /// SIGTERM, then wait (its graceful shutdown) up to 60 s; a failed exit
    /// is an error carrying its log.
    pub(super) fn stop(mut self) -> Result<()> {
        let status = self.terminate();
        match status {
            Some(s) if s.success() => Ok(()),
            Some(s) => Err(self.failed(&format!("exited with {s}"))),
            None => Err(self.failed("did not stop within 60 s of SIGTERM")),
        }
    }

    /// Its process id.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL and reap: the crash `bench soak` inflicts.
    pub(super) fn kill_hard(mut self) -> Result<()> {
        self.child
            .kill()
            .and_then(|_| self.child.wait())
            .map(drop)
            .map_err(|e| BenchError::io("cannot kill the", self.what, e))
    }

    fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        if let Ok(Some(s)) = self.child.try_wait() {
            return Some(s);
        }
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(s)) => return Some(s),
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(_) => break,
            }
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.terminate().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn run_status(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| BenchError::Run(format!("cannot run {what}: {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    Err(BenchError::Run(format!(
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// A fresh store in `dir` served by a daemon child, with the fleet
/// registered through it.
fn start_daemon(cfg: &ClientsConfig, dir: &Path) -> Result<Server> {
    init_store(&cfg.exe, dir)?;
    let mut serve = serve_command(&cfg.exe, dir);
    if let Some(addr) = &cfg.http {
        serve.args(["--http", addr]);
    }
    let server = Server::start(serve, "daemon", dir.join("serve.log"))?;
    register_fleet(dir, cfg.agents)?;
    Ok(server)
}

/// `agentlog --dir DIR init`, without `$AGENTLOG_NOW`.
pub(super) fn init_store(exe: &Path, dir: &Path) -> Result<()> {
    let mut init = Command::new(exe);
    init.env_remove("AGENTLOG_NOW").arg("--dir").arg(dir);
    run_status(init.arg("init"), "agentlog init")
}

/// `agentlog --dir DIR serve` (more arguments may follow), without
/// `$AGENTLOG_NOW`.
pub(super) fn serve_command(exe: &Path, dir: &Path) -> Command {
    let mut serve = Command::new(exe);
    serve
        .env_remove("AGENTLOG_NOW")
        .arg("--dir")
        .arg(dir)
        .arg("serve");
    serve
}

/// Registers agents `0..agents` ([`agent_name`]) through the daemon
/// serving `dir`, pipelined 256 at a time.
pub(super) fn register_fleet(dir: &Path, agents: usize) -> Result<()> {
    let mut c = Client::connect(dir).map_err(|e| BenchError::Run(e.to_string()))?;
    for chunk in (0..agents).collect::<Vec<_>>().chunks(256) {
        for &i in chunk {
            let params =
                json!({"name": agent_name(i), "provider": "claude", "cwd": "/home/dev/proj"});
            c.send("register", params)
                .map_err(|e| BenchError::Run(format!("registering: {e}")))?;
        }
        for &i in chunk {
            c.recv().map_err(|e| {
                BenchError::Run(format!(
                    "registering {} through the daemon: {e}",
                    agent_name(i)
                ))
            })?;
        }
    }
    Ok(())
}

/// The daemon's last LSN.
fn last_lsn(dir: &Path) -> Result<u64> {
    let cfg = |e: agentlog::daemon::client::ClientError| BenchError::Run(format!("hello: {e}"));
    let reply = Client::connect(dir)
        .and_then(|mut c| c.call("hello", json!({})))
        .map_err(cfg)?;
    Ok(reply.result["last_lsn"].as_u64().unwrap_or(0))
}

/// A running worker process (also a `bench cluster` host).
pub(super) struct Worker {
    pub(super) child: Child,
    pub(super) stdin: ChildStdin,
    pub(super) stdout: BufReader<ChildStdout>,
}

impl Worker {
    /// Starts `cmd` with its stdin, stdout and stderr piped.
    pub(super) fn spawn(mut cmd: Command, exe: &Path) -> Result<Worker> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| BenchError::io("cannot start a worker process from", exe, e))?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        Ok(Worker {
            child,
            stdin: stdin.expect("stdin is piped"),
            stdout: BufReader::new(stdout.expect("stdout is piped")),
        })
    }

    /// The next line it prints; its end (or a read error) is an error
    /// carrying what it wrote on stderr.
    pub(super) fn line(&mut self, who: &str, what: &str) -> Result<String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(n) if n > 0 => Ok(line),
            _ => {
                let _ = self.child.kill();
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                Err(BenchError::Run(format!(
                    "{who} ended before {what}: {}",
                    err.trim()
                )))
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the P worker processes against `target`.
fn run_phase(
    cfg: &ClientsConfig,
    name: &str,
    target: Target,
    protocol: bool,
    lang: ClientLang,
) -> Result<PhaseReport> {
    let (conns, pipeline) = if protocol {
        (cfg.conns, cfg.pipeline)
    } else {
        (cfg.conns, 1)
    };
    let mut workers = Vec::with_capacity(cfg.procs);
    for w in 0..cfg.procs {
        let spec = WorkerSpec {
            target: target.clone(),
            worker: w,
            procs: cfg.procs,
            conns,
            pipeline,
            agents: cfg.agents,
            seconds: cfg.seconds,
            durable: cfg.durable,
        };
        let mut cmd = lang.worker_command(cfg)?;
        cmd.env_remove("AGENTLOG_NOW");
        let mut worker = Worker::spawn(cmd, &cfg.exe)?;
        let text = serde_json::to_string(&spec).expect("a worker spec serializes");
        // A worker that died already is reported by the `ready` read below.
        let _ = writeln!(worker.stdin, "{text}").and_then(|_| worker.stdin.flush());
        workers.push(worker);
    }
    for (i, w) in workers.iter_mut().enumerate() {
        let ready = w.line(&format!("client process #{i}"), "it was ready")?;
        if ready.trim() != "ready" {
            return Err(BenchError::Run(format!(
                "client process #{i} said {ready:?}, not `ready`"
            )));
        }
    }
    for w in &mut workers {
        let _ = writeln!(w.stdin, "go").and_then(|_| w.stdin.flush());
    }
    let mut results = Vec::with_capacity(workers.len());
    for (i, w) in workers.iter_mut().enumerate() {
        let line = w.line(&format!("client process #{i}"), "it reported")?;
        let r: WorkerResult = serde_json::from_str(&line)
            .map_err(|e| BenchError::Run(format!("client process #{i} reported {line:?}: {e}")))?;
        results.push(r);
    }
    phase_report(name, cfg.procs, cfg.procs * conns, pipeline, &results)
}

/// Sums the workers' measurements.
fn phase_report(
    name: &str,
    processes: usize,
    connections: usize,
    pipeline: usize,
    results: &[WorkerResult],
) -> Result<PhaseReport> {
    let mut hist = Histogram::new();
    let (mut ops, mut refused, mut failed, mut rate, mut seconds) = (0, 0, 0, 0.0, 0.0f64);
    let mut first_error = None;
    for r in results {
        hist.merge(&Histogram::from_parts(&r.latency).map_err(BenchError::Run)?);
        ops += r.ops;
        refused += r.refused;
        failed += r.failed;
        if r.ops > 0 && r.seconds > 0.0 {
            rate += r.ops as f64 / r.seconds;
        }
        seconds = seconds.max(r.seconds);
        first_error = first_error.or_else(|| r.first_error.clone());
    }
    let latency =
        hist.summary()
            .filter(|_| rate > 0.0)
            .ok_or_else(|| BenchError::NothingMeasured {
                phase: format!("clients/{name}"),
                detail: format!(
                    "0 acknowledged operations ({refused} refused, {failed} failed{})",
                    first_error
                        .as_deref()
                        .map(|e| format!("; first: {e}"))
                        .unwrap_or_default()
                ),
            })?;
    Ok(PhaseReport {
        target: name.to_string(),
        processes,
        connections,
        pipeline,
        ops,
        seconds,
        ops_per_s: rate,
        latency,
        refused,
        failed,
        first_error,
        events_logged: None,
    })
}

/// `agentlog bench clients`.
pub fn run_clients(cfg: &ClientsConfig) -> Result<ClientsReport> {
    cfg.validate()?;
    let (root, _guard) = work_dir(cfg.dir.as_deref())?;
    let run = tempfile::Builder::new()
        .prefix("clients-")
        .tempdir_in(&root)
        .map_err(|e| BenchError::io("cannot create a run directory in", &root, e))?;
    let machine = MachineInfo::probe(run.path())?;
    let mut clients = Vec::with_capacity(cfg.clients.len());
    for (i, &lang) in cfg.clients.iter().enumerate() {
        let store = match i {
            0 => run.path().join("store"),
            _ => run.path().join(format!("store-{}", lang.phase())),
        };
        let daemon = start_daemon(cfg, &store)?;
        let before = last_lsn(&store)?;
        let (name, target, protocol) = match cfg.via {
            Via::Daemon => (lang.phase(), Target::Daemon { dir: store.clone() }, true),
            Via::Cli => {
                let t = Target::Cli {
                    exe: cfg.exe.clone(),
                    dir: store.clone(),
                };
                ("cli", t, false)
            }
        };
        let mut phase = run_phase(cfg, name, target, protocol, lang)?;
        phase.events_logged = Some(last_lsn(&store)? - before);
        daemon.stop()?;
        clients.push(phase);
    }
    let main = clients[0].clone();
    let echo = if cfg.echo {
        let dir = run.path().join("echo");
        std::fs::create_dir(&dir).map_err(|e| BenchError::io("cannot create", &dir, e))?;
        let mut cmd = Command::new(&cfg.exe);
        cmd.args(["bench", "echo-server", "--socket"])
            .arg(agentlog::daemon::socket_path(&dir));
        let server = Server::start(cmd, "echo server", dir.join("echo.log"))?;
        let phase = run_phase(cfg, "echo", Target::Echo { dir }, true, ClientLang::Rust)?;
        server.stop()?;
        Some(phase)
    } else {
        None
    };
    let (sqlite, json_rewrite) = if cfg.compare {
        (
            Some(sqlite_phase(cfg, run.path(), ClientLang::Rust)?),
            Some(json_phase(cfg, run.path())?),
        )
    } else {
        (None, None)
    };
    let python_sqlite = if cfg.compare && cfg.clients.contains(&ClientLang::Python) {
        Some(sqlite_phase(cfg, run.path(), ClientLang::Python)?)
    } else {
        None
    };
    let peers: Vec<&PhaseReport> = [&echo, &sqlite, &python_sqlite, &json_rewrite]
        .into_iter()
        .flatten()
        .collect();
    let mut ratios = BTreeMap::new();
    for p in &peers {
        ratios.insert(p.target.clone(), main.ops_per_s / p.ops_per_s);
    }
    let mut pair_ratios = BTreeMap::new();
    for (i, c) in clients.iter().enumerate() {
        let others = clients.iter().skip(i + 1).chain(peers.iter().copied());
        for o in others {
            let key = format!("{} / {}", c.target, o.target);
            pair_ratios.insert(key, c.ops_per_s / o.ops_per_s);
        }
    }
    Ok(ClientsReport {
        procs: cfg.procs,
        conns: cfg.conns,
        agents: cfg.agents,
        seconds: cfg.seconds,
        durable: cfg.durable,
        pipeline: main.pipeline,
        via: cfg.via,
        main,
        clients,
        echo,
        sqlite,
        python_sqlite,
        json_rewrite,
        ratios,
        pair_ratios,
        machine,
    })
}

/// The SQLite baseline on a fresh database, through the Rust workers
/// (`rusqlite`) or Python's `sqlite3` (same schema, pragmas and UPDATE).
#[cfg(feature = "sqlite-baseline")]
fn sqlite_phase(cfg: &ClientsConfig, run: &Path, lang: ClientLang) -> Result<PhaseReport> {
    let (name, file) = match lang {
        ClientLang::Python => ("python_sqlite", "agents-python.db"),
        _ => ("sqlite", "agents.db"),
    };
    let path = run.join(file);
    super::sqlite::create(&path, cfg.agents)?;
    run_phase(cfg, name, Target::Sqlite { path }, false, lang)
}

#[cfg(not(feature = "sqlite-baseline"))]
fn sqlite_phase(_: &ClientsConfig, _: &Path, _: ClientLang) -> Result<PhaseReport> {
    Err(BenchError::Run(NO_SQLITE.into()))
}

fn json_phase(cfg: &ClientsConfig, run: &Path) -> Result<PhaseReport> {
    let dir = run.join("json");
    JsonRewriteRegistry::new(&dir)?.register_all(cfg.agents)?;
    run_phase(
        cfg,
        "json_rewrite",
        Target::JsonRewrite { dir },
        false,
        ClientLang::Rust,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::latency::Histogram;

    fn result(ops: u64, seconds: f64, failed: u64) -> WorkerResult {
        let mut h = Histogram::new();
        for i in 0..ops {
            h.record(1_000 + i);
        }
        WorkerResult {
            ops,
            refused: 0,
            failed,
            seconds,
            first_error: (failed > 0).then(|| "boom".to_string()),
            latency: h.to_parts(),
        }
    }

    #[test]
    fn a_phase_sums_each_workers_rate() {
        let p = phase_report("x", 2, 2, 1, &[result(100, 1.0, 0), result(50, 0.5, 1)]).unwrap();
        assert_eq!((p.ops, p.failed), (150, 1));
        assert!((p.ops_per_s - 200.0).abs() < 1e-9, "{p:?}");
        assert_eq!(p.latency.count, 150);
        assert_eq!(p.first_error.as_deref(), Some("boom"));
        let e = phase_report("x", 1, 1, 1, &[result(0, 1.0, 3)]).unwrap_err();
        assert!(
            e.to_string().contains("3 failed") && e.to_string().contains("boom"),
            "{e}"
        );
    }

    #[test]
    fn bad_configurations_are_refused() {
        let ok = ClientsConfig {
            exe: "agentlog".into(),
            procs: 2,
            conns: 1,
            agents: 10,
            seconds: 1.0,
            durable: false,
            pipeline: 1,
            via: Via::Daemon,
            compare: false,
            echo: false,
            dir: None,
            http: None,
            clients: vec![ClientLang::Rust],
            clients_dir: "clients".into(),
        };
        assert!(ok.validate().is_ok());
        let cli = ClientsConfig {
            via: Via::Cli,
            pipeline: 4,
            ..ok.clone()
        };
        assert!(cli
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--via cli"));
        let none = ClientsConfig {
            clients: vec![],
            ..ok.clone()
        };
        assert!(none
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--client"));
        let cli_python = ClientsConfig {
            via: Via::Cli,
            clients: vec![ClientLang::Python],
            ..ok.clone()
        };
        assert!(cli_python
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--client"));
        let zero = ClientsConfig { procs: 0, ..ok };
        assert!(zero.validate().is_err());
    }
}
