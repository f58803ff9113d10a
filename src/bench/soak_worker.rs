//! One client process of `bench soak` (the hidden `bench soak-worker`
//! subcommand): reads its [`SoakWorkerSpec`] as one JSON line on stdin,
//! writes to the daemon at a steady rate until the spec's end time, records
//! every acknowledged write in its acknowledgement file and prints one
//! [`SoakWorkerResult`] line.
//!
//! Writes go one at a time on one connection, paced to the spec's rate (a
//! write that falls behind its slot never bursts to catch up: the schedule
//! restarts from now). Most are lazy heartbeats; every `status_every`-th is
//! a durable `status` whose message is a token naming this process and the
//! write ([`token`]), so the checker can tell that very write in the log.
//!
//! Each acknowledged write is one line of the acknowledgement file
//! ([`AckLine`]): when its reply arrived on CLOCK_MONOTONIC (one clock for
//! every process of the run), its latency (send to reply), its kind, agent,
//! the LSN the daemon answered and the write's sequence number. A write
//! whose connection broke before its reply (the daemon was killed) is
//! counted as unacknowledged: it may or may not be in the log, and the
//! checker asks nothing of it. While no daemon listens the process retries
//! its connection every 20 ms.

use super::baseline::agent_name;
use super::clients_worker::agents_of;
use super::cluster_host::mono_ns;
use super::{BenchError, Result};
use agentlog::daemon::client::{Client, ClientError};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;
use std::time::Duration;

/// A soak client process's instructions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SoakWorkerSpec {
    /// The store the daemon serves.
    pub dir: PathBuf,
    /// This process's number (0-based) among `procs`.
    pub worker: usize,
    pub procs: usize,
    pub agents: usize,
    /// Writes per second of this process.
    pub rate: f64,
    /// When to stop (CLOCK_MONOTONIC, ns).
    pub until_mono_ns: u64,
    /// Every `status_every`-th write is a durable `status` (0: none).
    pub status_every: u64,
    /// The acknowledgement file this process writes.
    pub acks: PathBuf,
}

/// What a soak client process counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakWorkerResult {
    /// Writes sent on a connection.
    pub sent: u64,
    /// Writes answered with a result and an LSN (each one line of the file).
    pub acked: u64,
    /// Writes whose connection broke before their reply.
    pub unacked: u64,
    /// Writes answered with an error.
    pub errors: u64,
    /// Connections opened after the first.
    pub reconnects: u64,
    pub first_error: Option<String>,
}

/// The kind of an acknowledged write.
pub const HEARTBEAT: char = 'h';
/// A durable `status` carrying [`token`].
pub const STATUS: char = 's';

/// The message of process `worker`'s `seq`-th write when it is a status.
pub fn token(worker: usize, seq: u64) -> String {
    format!("soak w{worker} #{seq}")
}

/// One line of an acknowledgement file:
/// `T_NS LATENCY_NS KIND AGENT LSN SEQ`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckLine {
    /// CLOCK_MONOTONIC when the reply arrived.
    pub t_ns: u64,
    pub latency_ns: u64,
    pub kind: char,
    pub agent: u32,
    pub lsn: u64,
    pub seq: u64,
}

impl AckLine {
    pub fn write(&self, w: &mut impl Write) -> std::io::Result<()> {
        writeln!(
            w,
            "{} {} {} {} {} {}",
            self.t_ns, self.latency_ns, self.kind, self.agent, self.lsn, self.seq
        )
    }

    /// Parses one line; `None` when it is not six well-formed fields.
    pub fn parse(line: &str) -> Option<AckLine> {
        let mut f = line.split_ascii_whitespace();
        let a = AckLine {
            t_ns: f.next()?.parse().ok()?,
            latency_ns: f.next()?.parse().ok()?,
            kind: f.next()?.parse().ok()?,
            agent: f.next()?.parse().ok()?,
            lsn: f.next()?.parse().ok()?,
            seq: f.next()?.parse().ok()?,
        };
        (f.next().is_none() && matches!(a.kind, HEARTBEAT | STATUS)).then_some(a)
    }
}

/// Encodes write `seq` of agent `agent` as a request line.
fn request(buf: &mut Vec<u8>, spec: &SoakWorkerSpec, seq: u64, agent: usize) -> char {
    buf.clear();
    let name = agent_name(agent);
    // Agent names and tokens hold nothing to escape.
    if spec.status_every > 0 && seq.is_multiple_of(spec.status_every) {
        let status = if (seq / spec.status_every).is_multiple_of(2) {
            "busy"
        } else {
            "idle"
        };
        let _ = writeln!(
            buf,
            "{{\"id\":{seq},\"method\":\"status\",\"params\":{{\"name\":\"{name}\",\"status\":\"{status}\",\"message\":\"{}\"}}}}",
            token(spec.worker, seq)
        );
        STATUS
    } else {
        let _ = writeln!(
            buf,
            "{{\"id\":{seq},\"method\":\"heartbeat\",\"params\":{{\"name\":\"{name}\"}}}}"
        );
        HEARTBEAT
    }
}

/// The LSN of a reply line, or its error.
fn lsn_of(line: &str) -> std::result::Result<u64, String> {
    let doc: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("bad reply {line:?}: {e}"))?;
    if let Some(lsn) = doc["result"]["lsn"].as_u64() {
        return Ok(lsn);
    }
    Err(match doc.get("error") {
        Some(e) => format!("{}: {}", e["code"], e["message"]),
        None => format!("a reply with no lsn: {line:?}"),
    })
}

/// Runs one soak client process: `input` carries the spec line, `output`
/// gets the result line.
pub fn run_soak_worker(mut input: impl BufRead, mut output: impl Write) -> Result<()> {
    let io = |e| BenchError::io("worker pipe", "stdin/stdout", e);
    let mut line = String::new();
    input.read_line(&mut line).map_err(io)?;
    let spec: SoakWorkerSpec = serde_json::from_str(&line)
        .map_err(|e| BenchError::Run(format!("bad soak worker spec {line:?}: {e}")))?;
    if spec.procs == 0 || spec.agents == 0 || !(spec.rate.is_finite() && spec.rate > 0.0) {
        return Err(BenchError::Run(format!(
            "soak worker spec needs procs, agents ≥ 1 and a positive rate: {line}"
        )));
    }
    let file = std::fs::File::create(&spec.acks)
        .map_err(|e| BenchError::io("cannot create", &spec.acks, e))?;
    let mut acks = BufWriter::with_capacity(1 << 16, file);
    let mine = agents_of(spec.worker, spec.procs, spec.agents);
    let period = (1e9 / spec.rate) as u64;
    let mut r = SoakWorkerResult::default();
    let mut conn: Option<Client> = None;
    let mut connected_once = false;
    let (mut buf, mut seq, mut next) = (Vec::with_capacity(256), 0u64, mono_ns());
    loop {
        let now = mono_ns();
        if now >= spec.until_mono_ns {
            break;
        }
        if next > now {
            std::thread::sleep(Duration::from_nanos(next - now));
        }
        next = next.max(mono_ns().saturating_sub(period)) + period;
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match Client::connect(&spec.dir) {
                Ok(c) => {
                    r.reconnects += u64::from(connected_once);
                    connected_once = true;
                    conn.insert(c)
                }
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            },
        };
        seq += 1;
        let agent = mine[seq as usize % mine.len()];
        let kind = request(&mut buf, &spec, seq, agent);
        r.sent += 1;
        let t0 = mono_ns();
        let reply = c
            .send_encoded(&buf)
            .and_then(|_| c.recv_line().map(str::to_string));
        let t1 = mono_ns();
        let reply = match reply {
            Ok(l) => l,
            Err(e) => {
                r.unacked += 1;
                if !matches!(e, ClientError::Protocol { .. } | ClientError::Io { .. }) {
                    r.first_error.get_or_insert_with(|| e.to_string());
                }
                conn = None;
                continue;
            }
        };
        match lsn_of(&reply) {
            Ok(lsn) => {
                r.acked += 1;
                let ack = AckLine {
                    t_ns: t1,
                    latency_ns: t1 - t0,
                    kind,
                    agent: agent as u32,
                    lsn,
                    seq,
                };
                ack.write(&mut acks)
                    .map_err(|e| BenchError::io("cannot write", &spec.acks, e))?;
            }
            Err(e) => {
                r.errors += 1;
                if e.contains("shutting_down") {
                    conn = None;
                }
                r.first_error.get_or_insert(e);
            }
        }
    }
    acks.flush()
        .map_err(|e| BenchError::io("cannot write", &spec.acks, e))?;
    let text = serde_json::to_string(&r).expect("a worker result serializes");
    writeln!(output, "{text}")
        .and_then(|_| output.flush())
        .map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_lines_round_trip_and_refuse_garbage() {
        let a = AckLine {
            t_ns: 12,
            latency_ns: 3,
            kind: STATUS,
            agent: 7,
            lsn: 99,
            seq: 4,
        };
        let mut out = Vec::new();
        a.write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(AckLine::parse(&text), Some(a));
        assert_eq!(AckLine::parse("1 2 x 3 4 5"), None);
        assert_eq!(AckLine::parse("1 2 h 3 4"), None);
        assert_eq!(AckLine::parse("1 2 h 3 4 5 6"), None);
    }

    #[test]
    fn every_nth_write_is_a_status_with_its_token() {
        let spec = SoakWorkerSpec {
            dir: "/x".into(),
            worker: 3,
            procs: 4,
            agents: 10,
            rate: 1.0,
            until_mono_ns: 0,
            status_every: 5,
            acks: "/x/acks".into(),
        };
        let mut buf = Vec::new();
        assert_eq!(request(&mut buf, &spec, 4, 1), HEARTBEAT);
        assert_eq!(request(&mut buf, &spec, 10, 1), STATUS);
        let doc: serde_json::Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(doc["params"]["message"], token(3, 10));
        assert_eq!(doc["params"]["name"], agent_name(1));
        assert_eq!(
            lsn_of(r#"{"id":1,"result":{"agent":"a","lsn":42}}"#),
            Ok(42)
        );
        let e = lsn_of(r#"{"id":1,"error":{"code":"refused","message":"no"}}"#).unwrap_err();
        assert!(e.contains("refused"), "{e}");
    }
}
