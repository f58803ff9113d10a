//! The faulted host of the history checker's fault run (issue 27): a real
//! `agentlog serve --nats` process on its own store directory, written
//! through its socket by client threads that record every operation and
//! its acknowledgement in the run's [`History`], exactly as the in-process
//! hosts' writers do. The run SIGKILLs the process and restarts it on its
//! directory, and SIGSTOPs it past the stale bound, then SIGCONTs it; at
//! the end the process must answer unstale, with nothing refused, and
//! write every agent, and its directory is judged with the other hosts'.

use super::{History, Op};
use crate::cluster::daemon::Host;
use crate::support::daemon::{eventually_within, Conn};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// One request and its reply line; `None` when the daemon went away.
fn call(c: &mut Conn, req: &Value) -> Option<Value> {
    let mut line = serde_json::to_vec(req).unwrap();
    line.push(b'\n');
    c.writer.write_all(&line).ok()?;
    let mut reply = String::new();
    match c.reader.read_line(&mut reply) {
        Ok(n) if n > 0 => Some(serde_json::from_str(&reply).unwrap()),
        _ => None,
    }
}

/// `agent`'s status through the daemon serving `dir`, tagged `tag` in its
/// message, at the history's next time (also the request's clock).
fn set_status(
    c: &mut Conn,
    history: &History,
    agent: &str,
    status: &str,
    tag: &str,
) -> Option<Value> {
    let at = history.at().to_rfc3339_millis();
    call(
        c,
        &json!({"id": tag, "method": "status", "params": {"name": agent, "status": status,
            "message": tag, "at": at, "clock": at}}),
    )
}

/// A client of the daemon serving `dir`: changes `agent`'s status, each
/// write tagged `<client>-<n>`, every `pace`, until `stop`. A write whose
/// connection broke is recorded as failed (it may still be stored once),
/// and the client reconnects, waiting while the daemon is down.
pub(super) fn spawn_writer(
    dir: &Path,
    client: String,
    agent: String,
    history: Arc<History>,
    stop: Arc<AtomicBool>,
    pace: Duration,
) -> JoinHandle<()> {
    let dir: PathBuf = dir.to_path_buf();
    std::thread::spawn(move || {
        let mut conn: Option<Conn> = None;
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let c = match conn.as_mut() {
                Some(c) => c,
                None => match Conn::try_connect(&dir) {
                    Some(c) => conn.insert(c),
                    None => {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                },
            };
            let tag = format!("{client}-{n}");
            n += 1;
            let status = if n.is_multiple_of(2) { "busy" } else { "idle" };
            let outcome = match set_status(c, &history, &agent, status, &tag) {
                None => {
                    conn = None;
                    Err("the daemon went away".to_string())
                }
                Some(reply) => match reply["result"]["lsn"].as_u64() {
                    Some(lsn) => Ok(lsn),
                    None => Err(reply["error"].to_string()),
                },
            };
            history.record(Op {
                tag,
                agent: agent.clone(),
                outcome,
            });
            std::thread::sleep(pace);
        }
    })
}

/// The daemon's `hello` replica section.
pub(super) fn replica(host: &Host) -> Value {
    host.hello()["replica"].clone()
}

/// The index of the NATS server the daemon's client is on (`n<i>`).
pub(super) fn nats_server(host: &Host) -> usize {
    let r = replica(host);
    let name = r["nats_server"].as_str().unwrap_or_else(|| panic!("{r}"));
    name.trim_start_matches('n').parse().unwrap()
}

/// Waits until the daemon folded `seq`.
pub(super) fn wait_applied(host: &Host, seq: u64, what: &str) {
    eventually_within(what, Duration::from_secs(30), || {
        (replica(host)["applied"].as_u64()? >= seq).then_some(())
    });
}

/// The end of the run for the daemon: it answers unstale (it caught up
/// after its pause and restart), its mirror refused nothing, and it writes
/// every agent.
pub(super) fn judge(host: &Host, history: &History, agents: &[String]) {
    eventually_within(
        "the daemon to be in contact and caught up",
        Duration::from_secs(30),
        || (replica(host)["stale"] == json!(false)).then_some(()),
    );
    let r = replica(host);
    assert_eq!(r["refused"], json!([]), "the daemon refused records: {r}");
    let mut c = Conn::connect(host.dir());
    for a in agents {
        let reply = set_status(&mut c, history, a, "busy", &format!("after-daemon-{a}"))
            .expect("the daemon answers");
        assert!(
            reply["result"]["lsn"].as_u64().is_some(),
            "the daemon cannot write {a} after the run: {reply}"
        );
    }
}
