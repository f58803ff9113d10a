//! One client process of `bench clients` (the hidden `bench clients-worker`
//! subcommand): reads its [`WorkerSpec`] as one JSON line on stdin, opens
//! its connections (one thread each), prints `ready`, waits for `go`, runs
//! heartbeats for the given seconds and prints one [`WorkerResult`] line.
//!
//! Every acknowledged operation is counted and its latency recorded (for a
//! pipelined batch, from the batch's write to that reply's arrival); every
//! error is counted as refused (turned away for contention or load: a writer
//! lock held elsewhere, too many connections, SQLite busy) or failed
//! (anything else), and the first one is kept to report. Requests are
//! encoded with `write!` into a reused buffer and replies are classified
//! without a JSON parse unless they are errors, so the client's own CPU
//! stays small next to the server's on a box where both share the cores.

use super::baseline::{agent_name, JsonRewriteRegistry};
use super::heartbeats::HeartbeatTarget;
use super::latency::{Histogram, HistogramParts};
use super::{BenchError, Result};
use agentlog::daemon::client::{Client, ClientError};
use agentlog::daemon::code;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// What the client processes talk to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    /// The daemon serving the store in `dir` (protocol `heartbeat` requests).
    Daemon { dir: PathBuf },
    /// The echo server whose socket is in `dir` (the same requests).
    Echo { dir: PathBuf },
    /// The SQLite database at `path`.
    Sqlite { path: PathBuf },
    /// The whole-file `registry.json` rewrite in `dir`.
    JsonRewrite { dir: PathBuf },
    /// One `agentlog --dir DIR heartbeat NAME` process per heartbeat.
    Cli { exe: PathBuf, dir: PathBuf },
}

/// A worker's instructions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    pub target: Target,
    /// This worker's number (0-based) among `procs`.
    pub worker: usize,
    pub procs: usize,
    /// Connections (threads) of this worker.
    pub conns: usize,
    /// Requests in flight per connection (protocol targets only).
    pub pipeline: usize,
    pub agents: usize,
    pub seconds: f64,
    pub durable: bool,
}

/// A worker's measurement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerResult {
    pub ops: u64,
    pub refused: u64,
    pub failed: u64,
    /// From `go` to the last connection's last reply.
    pub seconds: f64,
    pub first_error: Option<String>,
    pub latency: HistogramParts,
}

/// One connection's (or worker's) counts.
pub(super) struct Tally {
    pub(super) hist: Histogram,
    pub(super) ops: u64,
    pub(super) refused: u64,
    pub(super) failed: u64,
    pub(super) first_error: Option<String>,
}

impl Tally {
    pub(super) fn new() -> Tally {
        Tally {
            hist: Histogram::new(),
            ops: 0,
            refused: 0,
            failed: 0,
            first_error: None,
        }
    }

    pub(super) fn ok(&mut self, took: Duration) {
        self.ops += 1;
        self.hist.record(took.as_nanos() as u64);
    }

    pub(super) fn error(&mut self, refused: bool, what: impl FnOnce() -> String) {
        if refused {
            self.refused += 1;
        } else {
            self.failed += 1;
        }
        if self.first_error.is_none() {
            self.first_error = Some(what());
        }
    }

    /// Adds another connection's counts (the first error stays the first).
    pub(super) fn merge(&mut self, other: Tally) {
        self.hist.merge(&other.hist);
        self.ops += other.ops;
        self.refused += other.refused;
        self.failed += other.failed;
        self.first_error = self.first_error.take().or(other.first_error);
    }
}

/// A connection to the target.
trait Session {
    /// Heartbeats agents `batch` (indices), recording each outcome; an error
    /// ends the connection (after it was tallied).
    fn batch(&mut self, batch: &[usize], names: &[String], t: &mut Tally) -> Result<(), String>;
}

/// Protocol `heartbeat` requests over a daemon (or echo) connection.
struct Wire {
    client: Client,
    buf: Vec<u8>,
    next_id: u64,
    durable: bool,
}

impl Session for Wire {
    fn batch(&mut self, batch: &[usize], names: &[String], t: &mut Tally) -> Result<(), String> {
        self.buf.clear();
        for &a in batch {
            self.next_id += 1;
            let durable = if self.durable {
                ",\"durable\":true"
            } else {
                ""
            };
            // Agent names are `agent-NNNNNN`: nothing to escape.
            let _ = writeln!(
                self.buf,
                "{{\"id\":{},\"method\":\"heartbeat\",\"params\":{{\"name\":\"{}\"{durable}}}}}",
                self.next_id, names[a]
            );
        }
        let start = Instant::now();
        let io = |e: ClientError| e.to_string();
        self.client.send_encoded(&self.buf).map_err(io)?;
        for _ in batch {
            let line = match self.client.recv_line() {
                Ok(l) => l,
                Err(e) => {
                    let msg = e.to_string();
                    t.error(false, || msg.clone());
                    return Err(msg);
                }
            };
            let took = start.elapsed();
            // A heartbeat's result holds only `agent` and `lsn`.
            if !line.contains("\"error\":") {
                t.ok(took);
                continue;
            }
            let line = line.to_string();
            match self.client.reply_of_line(&line) {
                Err(ClientError::Server(e)) => {
                    let refused = matches!(
                        e.code.as_str(),
                        code::TOO_MANY_CONNECTIONS | code::SHUTTING_DOWN
                    ) || e.message.contains("locked by another writer");
                    t.error(refused, || format!("{}: {}", e.code, e.message));
                }
                other => t.error(false, || format!("unexpected reply {line:?}: {other:?}")),
            }
        }
        Ok(())
    }
}

#[cfg(feature = "sqlite-baseline")]
struct Sqlite(rusqlite::Connection);

#[cfg(feature = "sqlite-baseline")]
impl Session for Sqlite {
    fn batch(&mut self, batch: &[usize], names: &[String], t: &mut Tally) -> Result<(), String> {
        for &a in batch {
            let start = Instant::now();
            match super::sqlite::heartbeat(&self.0, &names[a]) {
                Ok(()) => t.ok(start.elapsed()),
                Err(e) => {
                    let busy = e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy);
                    t.error(busy, || format!("sqlite: {e}"));
                }
            }
        }
        Ok(())
    }
}

struct Json(JsonRewriteRegistry);

impl Session for Json {
    fn batch(&mut self, batch: &[usize], _: &[String], t: &mut Tally) -> Result<(), String> {
        for &a in batch {
            let start = Instant::now();
            match self.0.heartbeat(a, 0) {
                Ok(()) => t.ok(start.elapsed()),
                Err(e) => t.error(false, || e.to_string()),
            }
        }
        Ok(())
    }
}

/// `agentlog heartbeat` processes, as a shell loop would run them.
struct Cli {
    exe: PathBuf,
    dir: PathBuf,
}

impl Session for Cli {
    fn batch(&mut self, batch: &[usize], names: &[String], t: &mut Tally) -> Result<(), String> {
        for &a in batch {
            let start = Instant::now();
            let out = std::process::Command::new(&self.exe)
                .arg("--dir")
                .arg(&self.dir)
                .args(["heartbeat", &names[a]])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .output();
            match out {
                Ok(o) if o.status.success() => t.ok(start.elapsed()),
                Ok(o) => {
                    let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
                    let refused = err.contains("locked by another writer");
                    t.error(refused, || {
                        format!("agentlog heartbeat ({}): {err}", o.status)
                    });
                }
                Err(e) => {
                    let msg = format!("cannot run {}: {e}", self.exe.display());
                    t.error(false, || msg.clone());
                    return Err(msg);
                }
            }
        }
        Ok(())
    }
}

fn open_session(spec: &WorkerSpec) -> Result<Box<dyn Session + Send>> {
    let setup = |e: String| BenchError::Run(format!("worker {}: {e}", spec.worker));
    Ok(match &spec.target {
        Target::Daemon { dir } | Target::Echo { dir } => Box::new(Wire {
            client: Client::connect(dir).map_err(|e| setup(e.to_string()))?,
            buf: Vec::with_capacity(128 * spec.pipeline),
            next_id: 0,
            durable: spec.durable,
        }),
        #[cfg(feature = "sqlite-baseline")]
        Target::Sqlite { path } => Box::new(Sqlite(super::sqlite::open(path, spec.durable)?)),
        #[cfg(not(feature = "sqlite-baseline"))]
        Target::Sqlite { .. } => return Err(setup(super::clients::NO_SQLITE.into())),
        Target::JsonRewrite { dir } => {
            Box::new(Json(JsonRewriteRegistry::attach(dir, spec.agents)?))
        }
        Target::Cli { exe, dir } => Box::new(Cli {
            exe: exe.clone(),
            dir: dir.clone(),
        }),
    })
}

/// The agents connection `g` of `total` heartbeats, round robin: its share
/// of the fleet (every agent is some connection's), or one agent when
/// there are more connections than agents.
pub(super) fn agents_of(g: usize, total: usize, agents: usize) -> Vec<usize> {
    let mine: Vec<usize> = (g..agents).step_by(total).collect();
    if mine.is_empty() {
        vec![g % agents]
    } else {
        mine
    }
}

/// Runs one worker: `input` carries the spec line then `go`; `output` gets
/// `ready` then the result line.
pub fn run_worker(mut input: impl BufRead, mut output: impl Write) -> Result<()> {
    let io = |e| BenchError::io("worker pipe", "stdin/stdout", e);
    let mut line = String::new();
    input.read_line(&mut line).map_err(io)?;
    let spec: WorkerSpec = serde_json::from_str(&line)
        .map_err(|e| BenchError::Run(format!("bad worker spec {line:?}: {e}")))?;
    if spec.conns == 0 || spec.pipeline == 0 || spec.agents == 0 || spec.procs == 0 {
        return Err(BenchError::Run(format!(
            "worker spec needs conns, pipeline, agents and procs ≥ 1: {line}"
        )));
    }
    let names: Arc<Vec<String>> = Arc::new((0..spec.agents).map(agent_name).collect());
    let sessions = (0..spec.conns)
        .map(|_| open_session(&spec))
        .collect::<Result<Vec<_>>>()?;
    let go = Arc::new(Barrier::new(spec.conns + 1));
    let seconds = Duration::from_secs_f64(spec.seconds);
    let threads: Vec<_> = sessions
        .into_iter()
        .enumerate()
        .map(|(c, mut session)| {
            let (go, names) = (go.clone(), names.clone());
            let total = spec.procs * spec.conns;
            let mine = agents_of(spec.worker * spec.conns + c, total, spec.agents);
            let k = spec.pipeline;
            std::thread::spawn(move || {
                let mut t = Tally::new();
                let mut batch = Vec::with_capacity(k);
                let mut next = 0;
                go.wait();
                let start = Instant::now();
                while start.elapsed() < seconds {
                    batch.clear();
                    for _ in 0..k {
                        batch.push(mine[next]);
                        next = (next + 1) % mine.len();
                    }
                    if session.batch(&batch, &names, &mut t).is_err() {
                        break;
                    }
                }
                (t, start.elapsed())
            })
        })
        .collect();
    writeln!(output, "ready")
        .and_then(|_| output.flush())
        .map_err(io)?;
    line.clear();
    input.read_line(&mut line).map_err(io)?;
    if line.trim() != "go" {
        return Err(BenchError::Run(format!(
            "worker {}: expected `go`, got {line:?}",
            spec.worker
        )));
    }
    go.wait();
    let mut all = Tally::new();
    let mut elapsed = Duration::ZERO;
    for th in threads {
        let (t, took) = th
            .join()
            .map_err(|p| BenchError::WriterPanicked(format!("{p:?}")))?;
        all.merge(t);
        elapsed = elapsed.max(took);
    }
    let result = WorkerResult {
        ops: all.ops,
        refused: all.refused,
        failed: all.failed,
        seconds: elapsed.as_secs_f64(),
        first_error: all.first_error,
        latency: all.hist.to_parts(),
    };
    let text = serde_json::to_string(&result).expect("a worker result serializes");
    writeln!(output, "{text}")
        .and_then(|_| output.flush())
        .map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_agent_belongs_to_some_connection() {
        let mut seen = vec![0; 10];
        for g in 0..3 {
            for a in agents_of(g, 3, 10) {
                seen[a] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{seen:?}");
        assert_eq!(agents_of(5, 8, 2), vec![1]);
    }

    #[test]
    fn a_worker_measures_the_json_rewrite_and_reports_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut reg = JsonRewriteRegistry::new(dir.path()).unwrap();
        reg.register_all(4).unwrap();
        let spec = WorkerSpec {
            target: Target::JsonRewrite {
                dir: dir.path().to_path_buf(),
            },
            worker: 0,
            procs: 1,
            conns: 2,
            pipeline: 1,
            agents: 4,
            seconds: 0.05,
            durable: false,
        };
        let input = format!("{}\ngo\n", serde_json::to_string(&spec).unwrap());
        let mut out = Vec::new();
        run_worker(input.as_bytes(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("ready"));
        let r: WorkerResult = serde_json::from_str(lines.next().unwrap()).unwrap();
        assert!(r.ops > 0 && r.failed == 0 && r.refused == 0, "{r:?}");
        let h = Histogram::from_parts(&r.latency).unwrap();
        assert_eq!(h.count(), r.ops);
        let bad = run_worker("{\"nope\":1}\n".as_bytes(), Vec::new()).unwrap_err();
        assert!(bad.to_string().contains("bad worker spec"), "{bad}");
    }
}
