//! The side load of `bench soak`, beside its client processes: socket
//! watchers that read (each reconnecting where it left off), watchers that
//! never read a byte, SSE clients of `/api/events`, a `/metrics` scraper and
//! a periodic compaction through the protocol. Each is a thread of the soak
//! process that outlives the daemon's kills: whatever it holds breaks when
//! the daemon dies, and it reconnects to the next one.
//!
//! Everything counts into [`LoadCounters`]; nothing here judges. A thread
//! ends when the run's stop flag is up and its connection ended (the
//! daemon's graceful stop at the end of the run ends every stream), or at
//! once when it holds none.
//!
//! The reading watchers take the four shapes a client would: the whole
//! event stream, `kinds: ["StatusChanged"]`, one agent's events, and a
//! `changes` + `latest` table (the live page's stream). They parse each
//! line themselves (the blocking client's iterator has no `present` item),
//! resume after a kill from the last LSN seen + 1, after `lagged` from its
//! `resume_from`, and after `compacted` from its `resume_from`. A watcher
//! that never reads sends its `watch` and then only polls its socket for
//! the daemon's hang-up (a lagged watcher is closed within the write
//! timeout), then opens another.

use super::baseline::agent_name;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the side load shares with the run.
pub(super) struct Shared {
    pub(super) dir: PathBuf,
    /// Up once the run's writes are done: threads end.
    pub(super) stop: AtomicBool,
    /// The current daemon's HTTP address (`None` while it is down).
    pub(super) http: Mutex<Option<String>>,
    /// The store's HTTP token (`serve --http` keeps it across restarts).
    pub(super) token: Mutex<String>,
    pub(super) counters: LoadCounters,
}

impl Shared {
    pub(super) fn new(dir: PathBuf) -> Arc<Shared> {
        Arc::new(Shared {
            dir,
            stop: AtomicBool::new(false),
            http: Mutex::new(None),
            token: Mutex::new(String::new()),
            counters: LoadCounters::default(),
        })
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// The base URL and token of the current daemon, if it is up.
    fn http(&self) -> Option<(String, String)> {
        let addr = self
            .http
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()?;
        let token = self.token.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Some((format!("http://{addr}"), token))
    }
}

/// The side load's tallies (see [`LoadReport`] for their meaning).
#[derive(Default)]
pub(super) struct LoadCounters {
    watch_items: AtomicU64,
    watch_lagged: AtomicU64,
    watch_reconnects: AtomicU64,
    watch_compacted: AtomicU64,
    idle_watches_opened: AtomicU64,
    idle_watches_closed: AtomicU64,
    sse_items: AtomicU64,
    sse_lagged: AtomicU64,
    sse_reconnects: AtomicU64,
    scrapes_ok: AtomicU64,
    scrapes_failed: AtomicU64,
    compactions: AtomicU64,
    compactions_failed: AtomicU64,
    compaction_ms_max: AtomicU64,
    heartbeats_collapsed: AtomicU64,
}

/// The side load's figures over the whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// Items (events, changes) the reading watchers received.
    pub watch_items: u64,
    /// `lagged` lines the reading watchers received (each ended a stream).
    pub watch_lagged: u64,
    /// Reading watchers' streams opened again (after a kill or a lag).
    pub watch_reconnects: u64,
    /// `compacted` items (a resume from inside a compacted range).
    pub watch_compacted: u64,
    /// Watches opened by the watchers that never read.
    pub idle_watches_opened: u64,
    /// Of those, closed by the daemon (lagged, or killed with it).
    pub idle_watches_closed: u64,
    /// SSE events the SSE clients received.
    pub sse_items: u64,
    pub sse_lagged: u64,
    pub sse_reconnects: u64,
    /// `/metrics` GETs answered 200, and the others (the daemon down).
    pub scrapes_ok: u64,
    pub scrapes_failed: u64,
    /// `compact` requests answered with a report, and refused or cut.
    pub compactions: u64,
    pub compactions_failed: u64,
    pub compaction_ms_max: u64,
    /// Heartbeats the compactions collapsed (middles of same-pid runs).
    pub heartbeats_collapsed: u64,
}

impl LoadCounters {
    pub(super) fn report(&self) -> LoadReport {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        LoadReport {
            watch_items: g(&self.watch_items),
            watch_lagged: g(&self.watch_lagged),
            watch_reconnects: g(&self.watch_reconnects),
            watch_compacted: g(&self.watch_compacted),
            idle_watches_opened: g(&self.idle_watches_opened),
            idle_watches_closed: g(&self.idle_watches_closed),
            sse_items: g(&self.sse_items),
            sse_lagged: g(&self.sse_lagged),
            sse_reconnects: g(&self.sse_reconnects),
            scrapes_ok: g(&self.scrapes_ok),
            scrapes_failed: g(&self.scrapes_failed),
            compactions: g(&self.compactions),
            compactions_failed: g(&self.compactions_failed),
            compaction_ms_max: g(&self.compaction_ms_max),
            heartbeats_collapsed: g(&self.heartbeats_collapsed),
        }
    }
}

fn bump(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

/// Sleeps `d` in steps, returning early (false) once the run stops.
fn pause(sh: &Shared, d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if sh.stopped() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20).min(end - Instant::now()));
    }
    !sh.stopped()
}

/// Opens a socket `watch` with `params`; `None` while no daemon listens.
fn open_watch(sh: &Shared, params: &Value) -> Option<UnixStream> {
    let mut s = UnixStream::connect(agentlog::daemon::socket_path(&sh.dir)).ok()?;
    let line = json!({"id": 1, "method": "watch", "params": params}).to_string() + "\n";
    s.write_all(line.as_bytes()).ok()?;
    Some(s)
}

/// The shape of reading watcher `i`.
fn watch_params(i: usize, agents: usize) -> Value {
    match i % 4 {
        0 => json!({}),
        1 => json!({"kinds": ["StatusChanged"]}),
        2 => json!({"agent": agent_name(i % agents)}),
        _ => json!({"changes": true, "latest": true}),
    }
}

/// A watcher that reads its stream until the run stops.
pub(super) fn reading_watcher(sh: &Shared, i: usize, agents: usize) {
    let c = &sh.counters;
    let mut from: Option<u64> = None;
    let mut opened = false;
    while !sh.stopped() {
        let mut params = watch_params(i, agents);
        if let Some(f) = from {
            params["from"] = json!(f);
        }
        let Some(s) = open_watch(sh, &params) else {
            pause(sh, Duration::from_millis(50));
            continue;
        };
        if opened {
            bump(&c.watch_reconnects);
        }
        opened = true;
        let mut lines = BufReader::new(s);
        let mut line = String::new();
        while matches!(lines.read_line(&mut line), Ok(n) if n > 0) {
            let doc: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            line.clear();
            if let Some(item) = doc.get("event").or_else(|| doc.get("change")) {
                bump(&c.watch_items);
                if let Some(l) = item["lsn"].as_u64() {
                    from = Some(l + 1);
                }
            } else if let Some(r) = doc["compacted"]["resume_from"].as_u64() {
                bump(&c.watch_compacted);
                from = Some(r);
            } else if let Some(r) = doc["lagged"]["resume_from"].as_u64() {
                bump(&c.watch_lagged);
                from = Some(r);
            }
        }
    }
}

/// A watcher that never reads: it opens a watch and waits for the daemon
/// to hang up, then opens another, until the run stops.
pub(super) fn idle_watcher(sh: &Shared) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let c = &sh.counters;
    while !sh.stopped() {
        let Some(s) = open_watch(sh, &json!({})) else {
            pause(sh, Duration::from_millis(50));
            continue;
        };
        bump(&c.idle_watches_opened);
        let step = Timespec {
            tv_sec: 0,
            tv_nsec: 200_000_000,
        };
        while !sh.stopped() {
            let mut fds = [PollFd::new(&s, PollFlags::RDHUP)];
            let hung_up = matches!(poll(&mut fds, Some(&step)), Ok(n) if n > 0)
                && fds[0]
                    .revents()
                    .intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR);
            if hung_up {
                bump(&c.idle_watches_closed);
                break;
            }
        }
    }
}

/// An HTTP agent: no overall deadline (an event stream lasts), a bounded
/// connect and a bounded wait for the response's headers.
fn http_agent() -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(2)))
        .timeout_recv_response(Some(Duration::from_secs(10)))
        .build();
    ureq::Agent::new_with_config(config)
}

/// SSE client `i` of `/api/events`: even ones the live page's stream
/// (`changes`, `latest`), odd ones the whole event stream, resumed from the
/// last `id` seen + 1.
pub(super) fn sse_client(sh: &Shared, i: usize) {
    let c = &sh.counters;
    let agent = http_agent();
    let mut from: Option<u64> = None;
    let mut opened = false;
    while !sh.stopped() {
        let Some((base, token)) = sh.http() else {
            pause(sh, Duration::from_millis(50));
            continue;
        };
        let mut url = format!("{base}/api/events?token={token}");
        if i.is_multiple_of(2) {
            url.push_str("&changes=true&latest=true");
        }
        if let Some(f) = from {
            url.push_str(&format!("&from={f}"));
        }
        let mut resp = match agent.get(&url).call() {
            Ok(r) if r.status() == 200 => r,
            _ => {
                pause(sh, Duration::from_millis(50));
                continue;
            }
        };
        if opened {
            bump(&c.sse_reconnects);
        }
        opened = true;
        let mut lines = BufReader::new(resp.body_mut().as_reader());
        let mut line = String::new();
        let mut ended = false;
        while matches!(lines.read_line(&mut line), Ok(n) if n > 0) {
            let l = line.trim_end();
            if let Some(name) = l.strip_prefix("event: ") {
                match name {
                    "lagged" => bump(&c.sse_lagged),
                    "end" => ended = true,
                    "watching" => {}
                    _ => bump(&c.sse_items),
                }
            } else if let Some(id) = l.strip_prefix("id: ") {
                from = id.parse::<u64>().ok().map(|l| l + 1).or(from);
            }
            line.clear();
        }
        if ended && sh.stopped() {
            return;
        }
    }
}

/// Scrapes `/metrics` every `period` until the run stops.
pub(super) fn scraper(sh: &Shared, period: Duration) {
    let c = &sh.counters;
    let agent = http_agent();
    let mut next = Instant::now();
    while !sh.stopped() {
        next += period;
        let ok =
            sh.http().is_some_and(
                |(base, _)| match agent.get(&format!("{base}/metrics")).call() {
                    Ok(mut r) if r.status() == 200 => r.body_mut().read_to_string().is_ok(),
                    _ => false,
                },
            );
        bump(if ok { &c.scrapes_ok } else { &c.scrapes_failed });
        let now = Instant::now();
        if next > now && !pause(sh, next - now) {
            return;
        }
        next = next.max(Instant::now());
    }
}

/// Asks the daemon for a compaction every `period` until the run stops;
/// while the daemon is down (or a compaction is cut by a kill), the round's
/// request is retried every 100 ms for half a period, and a round that got
/// no report by then counts as failed.
pub(super) fn compactor(sh: &Shared, period: Duration) {
    let c = &sh.counters;
    while pause(sh, period) {
        let round_end = Instant::now() + period / 2;
        loop {
            let started = Instant::now();
            let reply = agentlog::daemon::client::Client::connect(&sh.dir)
                .and_then(|mut cl| cl.call("compact", json!({})));
            match reply {
                Ok(r) => {
                    bump(&c.compactions);
                    let ms = started.elapsed().as_millis() as u64;
                    c.compaction_ms_max.fetch_max(ms, Ordering::Relaxed);
                    let collapsed = r.result["heartbeats_collapsed"].as_u64().unwrap_or(0);
                    c.heartbeats_collapsed
                        .fetch_add(collapsed, Ordering::Relaxed);
                    break;
                }
                Err(_) if Instant::now() >= round_end => {
                    bump(&c.compactions_failed);
                    break;
                }
                Err(_) => {
                    if !pause(sh, Duration::from_millis(100)) {
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_watchers_take_four_shapes() {
        assert_eq!(watch_params(0, 10), json!({}));
        assert_eq!(watch_params(5, 10)["kinds"][0], "StatusChanged");
        assert_eq!(watch_params(6, 4)["agent"], agent_name(2));
        assert_eq!(watch_params(7, 10)["latest"], true);
    }

    #[test]
    fn counters_report_what_was_counted() {
        let sh = Shared::new("/nonexistent".into());
        bump(&sh.counters.sse_items);
        bump(&sh.counters.sse_items);
        sh.counters
            .compaction_ms_max
            .fetch_max(7, Ordering::Relaxed);
        let r = sh.counters.report();
        assert_eq!((r.sse_items, r.compaction_ms_max), (2, 7));
        // No daemon: an idle watcher ends as soon as the run stops.
        sh.stop.store(true, Ordering::Release);
        idle_watcher(&sh);
        assert_eq!(sh.counters.report().idle_watches_opened, 0);
    }
}
