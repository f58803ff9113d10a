//! Reachability probes (`serve --probe-every`): the daemon checks the
//! endpoints it can check and records outages (`registry::runtime`).
//!
//! Which endpoints: those of agents that are not finished, when the text is
//! `http://HOST[:PORT][/PATH]` (a `HEAD` request; any answer below 500 is
//! reachable) or `unix:PATH` (a connect). Anything else (`https://`, `acp:`,
//! free text) is shown, never probed. Each probe has its own timeout
//! (`serve --probe-timeout`).
//!
//! Off the writer's path: probes are async network I/O on the runtime, run
//! concurrently, and touch the store only at a transition — the first
//! failure appends `OutageStarted`, the first success after failures
//! `OutageEnded` — on the blocking pool, like any command. Failures between
//! the two are counted here in memory (`Tallies`) and written once, in
//! the end event (last failure, count); `show` through the daemon reads the
//! running count from here. A successful attach ends an outage too (the
//! command reads the running count from here). Probe events carry the
//! daemon's clock, like its sweeps.

use super::server::Shared;
use crate::cluster::own_origin;
use crate::store::with_origin;
use crate::time::Timestamp;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Failed probes counted against an open outage: what the end event will
/// record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub last_failure: Timestamp,
    pub failures: u64,
}

/// The running tallies of every daemon in this process, by (store
/// directory, agent): the attach and show commands run in the daemon's
/// process but do not see its shared state.
type Tallies = Mutex<HashMap<(PathBuf, String), Tally>>;

fn tallies() -> &'static Tallies {
    static TALLIES: OnceLock<Tallies> = OnceLock::new();
    TALLIES.get_or_init(Default::default)
}

/// The running tally of `agent`'s open outage in the store at `dir`, when
/// a daemon of this process probes it.
pub fn live_tally(dir: &Path, agent: &str) -> Option<Tally> {
    let t = tallies().lock().unwrap_or_else(|e| e.into_inner());
    t.get(&(dir.to_path_buf(), agent.to_string())).copied()
}

/// Counts probe failures (`agentlog_probe_failures_total`).
pub(crate) const PROBE_FAILURES: &str = "agentlog_probe_failures_total";

/// What a probe of one endpoint found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    Reachable,
    Unreachable(String),
    /// Not an endpoint the daemon can check.
    NotProbed,
}

/// Probes `endpoint` with `timeout`.
pub async fn probe(endpoint: &str, timeout: Duration) -> Probe {
    let attempt = async {
        if let Some(rest) = endpoint.strip_prefix("http://") {
            Some(http_head(rest).await)
        } else if let Some(path) = endpoint.strip_prefix("unix:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            Some(
                tokio::net::UnixStream::connect(path)
                    .await
                    .map(drop)
                    .map_err(|e| format!("connecting to {path}: {e}")),
            )
        } else {
            None
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(None) => Probe::NotProbed,
        Ok(Some(Ok(()))) => Probe::Reachable,
        Ok(Some(Err(e))) => Probe::Unreachable(e),
        Err(_) => Probe::Unreachable(format!("no answer within {} ms", timeout.as_millis())),
    }
}

/// `HEAD` of `authority[/path]`: Ok when the server answers below 500.
async fn http_head(rest: &str) -> Result<(), String> {
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let addr = if authority.rsplit(':').next().is_some_and(|p| {
        !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && !authority.ends_with(']')
    }) {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    let request = format!(
        "HEAD {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: agentlog-probe\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("sending to {addr}: {e}"))?;
    let mut head = Vec::with_capacity(64);
    let mut buf = [0u8; 256];
    while !head.contains(&b'\n') && head.len() < 1024 {
        let n = stream
            .read(&mut buf)
            .await
            .map_err(|e| format!("reading from {addr}: {e}"))?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let status = line
        .strip_prefix("HTTP/")
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| format!("{addr} did not answer HTTP"))?;
    if status < 500 {
        Ok(())
    } else {
        Err(format!("{addr} answered {status}"))
    }
}

/// The probe duty: every `every`, one round.
pub(crate) fn start(shared: &Arc<Shared>, every: Duration) -> tokio::task::JoinHandle<()> {
    let shared = shared.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            round(&shared).await;
        }
    })
}

/// One round: probe every checkable endpoint, then record transitions.
async fn round(shared: &Arc<Shared>) {
    let dir = shared.store.dir().to_path_buf();
    // (agent, endpoint, whether an outage is open), read under the read lock.
    let targets: Vec<(String, String, bool)> = shared.store.with_state(|s, _| {
        s.runtimes()
            .iter()
            .filter(|(name, _)| s.agent(name).is_some_and(|a| !a.is_finished()))
            .filter_map(|(name, rt)| {
                let open = rt.outage.as_ref().is_some_and(|o| o.is_open());
                rt.endpoint.clone().map(|e| (name.clone(), e, open))
            })
            .collect()
    });
    let timeout = shared.opts.probe_timeout;
    let probes = targets.iter().map(|(_, e, _)| probe(e, timeout));
    let results = futures_util::future::join_all(probes).await;
    let now = Timestamp::now();
    for ((agent, endpoint, open), result) in targets.into_iter().zip(results) {
        let key = (dir.clone(), agent.clone());
        match result {
            Probe::NotProbed => {}
            Probe::Unreachable(error) => {
                metrics::counter!(PROBE_FAILURES).increment(1);
                if open {
                    let mut t = tallies().lock().unwrap_or_else(|e| e.into_inner());
                    let tally = t.entry(key).or_insert(Tally {
                        last_failure: now,
                        failures: 1,
                    });
                    tally.last_failure = now;
                    tally.failures += 1;
                } else {
                    let store = shared.store.clone();
                    let started = tokio::task::spawn_blocking(move || {
                        with_origin(own_origin(), || {
                            store.outage_started(&agent, &endpoint, &error, Some(now))
                        })
                    })
                    .await;
                    match started {
                        Ok(Ok(Some(_))) => {
                            tallies().lock().unwrap_or_else(|e| e.into_inner()).insert(
                                key,
                                Tally {
                                    last_failure: now,
                                    failures: 1,
                                },
                            );
                            shared.committed.notify_waiters();
                        }
                        Ok(Ok(None)) => {}
                        Ok(Err(e)) => tracing::warn!("recording an outage failed: {e}"),
                        Err(e) => tracing::warn!("recording an outage failed: {e}"),
                    }
                }
            }
            Probe::Reachable => {
                let tally = tallies()
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&key);
                if !open {
                    continue;
                }
                let (last, failures) = tally.map_or((now, 1), |t| (t.last_failure, t.failures));
                let store = shared.store.clone();
                let ended = tokio::task::spawn_blocking(move || {
                    with_origin(own_origin(), || {
                        store.outage_ended(&agent, last, failures, Some(now))
                    })
                })
                .await;
                match ended {
                    Ok(Ok(Some(_))) => shared.committed.notify_waiters(),
                    Ok(Ok(None)) => {}
                    Ok(Err(e)) => tracing::warn!("recording an outage's end failed: {e}"),
                    Err(e) => tracing::warn!("recording an outage's end failed: {e}"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn http_and_unix_probes_tell_answers_from_silence() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf).await;
            s.write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
                .await
                .unwrap();
        });
        let t = Duration::from_secs(2);
        assert_eq!(
            probe(&format!("http://{addr}/health"), t).await,
            Probe::Reachable
        );
        server.await.unwrap();
        // Nothing listens there any more.
        assert!(matches!(
            probe(&format!("http://{addr}/"), t).await,
            Probe::Unreachable(_)
        ));
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let _l = tokio::net::UnixListener::bind(&sock).unwrap();
        assert_eq!(
            probe(&format!("unix:{}", sock.display()), t).await,
            Probe::Reachable
        );
        assert!(matches!(
            probe(&format!("unix:{}", dir.path().join("none").display()), t).await,
            Probe::Unreachable(_)
        ));
        assert_eq!(probe("acp:whatever", t).await, Probe::NotProbed);
    }
}
