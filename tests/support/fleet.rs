//! A steady-fleet simulation on a real log in simulated time: `agents` live
//! agents heartbeating round-robin at `rate` events per simulated second,
//! agents finishing and fresh ones registering, automatic compaction
//! (threshold policy, checked whenever the log seals a segment), and the disk
//! use sampled every simulated `sample_secs`. Test tooling (the compaction
//! tests' disk bound; `benches/compact.rs` includes it by path), not library
//! API: it uses only the library's public API.
//!
//! Why the bound holds: the policy compacts once droppable bytes reach
//! `threshold` (½) of the log, so the sealed segments never hold more than
//! 2 × their live bytes after a check, and checks happen at every seal; the
//! only other file is the active (preallocated) segment. Hence disk <=
//! 2 × live history + one segment (+ the MANIFEST/LOCK bytes).

use std::path::Path;

use serde::{Deserialize, Serialize};

use agentlog::compact::{compact, AutoPolicy, CompactOptions, DropEstimator};
use agentlog::log::{Durability, Log, LogOptions};
use agentlog::log::{LogError, Result};
use agentlog::model::Status;
use agentlog::registry::codec::{encode_heartbeat_into, encode_into};
use agentlog::registry::{Registration, State};
use agentlog::time::Timestamp;

/// Parameters of [`simulate_steady_fleet`].
#[derive(Debug, Clone, PartialEq)]
pub struct FleetParams {
    /// Live agents at any time (default 1,000).
    pub agents: usize,
    /// Heartbeats per simulated second over the fleet (default 10,000).
    pub rate: u64,
    pub simulated_secs: u64,
    /// Mean simulated lifetime of an agent; one agent finishes and a new
    /// one registers every `lifetime_secs / agents` (default 1 h).
    pub lifetime_secs: u64,
    /// Sample the disk use this often (default one simulated hour).
    pub sample_secs: u64,
    pub segment_size: u64,
    /// Let the log preallocate the next segment ahead (default false: with
    /// it, one more preallocated segment sits on disk beside the active one).
    pub prepare_ahead: bool,
    pub auto: AutoPolicy,
    pub compact: CompactOptions,
}

impl Default for FleetParams {
    fn default() -> Self {
        FleetParams {
            agents: 1000,
            rate: 10_000,
            simulated_secs: 24 * 3600,
            lifetime_secs: 3600,
            sample_secs: 3600,
            segment_size: 64 << 20,
            prepare_ahead: false,
            auto: AutoPolicy::default(),
            compact: CompactOptions::default(),
        }
    }
}

/// One sample of the simulation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskPoint {
    pub sim_secs: u64,
    pub events: u64,
    /// Sum of the apparent sizes of every file under the log directory.
    pub disk_bytes: u64,
    /// Used bytes of the log's segments.
    pub log_bytes: u64,
    /// Bytes a full compaction would keep (the estimator's live history).
    pub live_bytes: u64,
    /// 2 × live history + one segment.
    pub bound_bytes: u64,
    pub compactions: u64,
}

/// Apparent size of every file under `dir` (recursively).
pub fn disk_usage(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
        let e = e.map_err(|e| LogError::io(dir, e))?;
        let md = e.metadata().map_err(|err| LogError::io(e.path(), err))?;
        total += if md.is_dir() {
            disk_usage(&e.path())?
        } else {
            md.len()
        };
    }
    Ok(total)
}

/// Runs the simulation in `dir` (created; must not hold a log) and returns
/// the disk curve, one point per `sample_secs` plus the end.
pub fn simulate_steady_fleet(dir: &Path, p: &FleetParams) -> Result<Vec<DiskPoint>> {
    if p.agents == 0 || p.rate == 0 || p.lifetime_secs == 0 || p.sample_secs == 0 {
        return Err(LogError::InvalidArgument(format!(
            "fleet parameters must be positive: {p:?}"
        )));
    }
    let opts = LogOptions {
        segment_size: p.segment_size,
        max_record_size: (p.segment_size / 4).min(1 << 20) as u32,
        flush_interval: None,
        prepare_ahead: p.prepare_ahead,
        ..Default::default()
    };
    let (log, _) = Log::open(dir, opts)?;
    let mut state = State::default();
    let mut est = DropEstimator::default();
    let start = Timestamp::from_secs(1_800_000_000);
    let mut buf = Vec::with_capacity(256);
    // Ring of live agents: (name, pid); `next_id` names new ones.
    let mut live: Vec<(String, u32)> = Vec::with_capacity(p.agents);
    let mut next_id = 0u64;
    let mut events = 0u64;
    let mut compactions = 0u64;
    let mut points = Vec::new();
    let total_events = p.rate * p.simulated_secs;
    // Events between two churns (one finish + one registration).
    let churn_every = (p.rate * p.lifetime_secs / p.agents as u64).max(1);
    let sample_every = p.rate * p.sample_secs;
    let mut sealed = log.sealed_end_lsn();
    let append = |buf: &[u8], state: &mut State, est: &mut DropEstimator| -> Result<()> {
        let lsn = log.append(buf, Durability::Lazy)?;
        state
            .apply_payload(lsn, buf)
            .and_then(|_| est.observe(lsn, buf))
            .map_err(|e| LogError::InvalidArgument(format!("simulated event {lsn}: {e}")))
    };
    let at_of = |i: u64| start.add_millis((i * 1000 / p.rate) as i64);
    let mut register = |state: &mut State,
                        est: &mut DropEstimator,
                        at: Timestamp,
                        buf: &mut Vec<u8>|
     -> Result<(String, u32)> {
        next_id += 1;
        let name = format!("agent-{next_id:07}");
        let pid = 1000 + (next_id % 4_000_000) as u32;
        let mut reg = Registration::new(&name, "claude", "/work");
        reg.pid = Some(pid);
        let ev = state
            .check_register(reg, at)
            .map_err(|e| LogError::InvalidArgument(format!("register {name}: {e}")))?;
        encode_into(&ev, buf);
        append(buf, state, est)?;
        Ok((name, pid))
    };
    for _ in 0..p.agents {
        let a = register(&mut state, &mut est, start, &mut buf)?;
        live.push(a);
    }
    let mut last_compaction = start;
    let mut rr = 0usize;
    while events < total_events {
        let at = at_of(events);
        events += 1;
        if events.is_multiple_of(churn_every) {
            // The agent at the ring position finishes; a new one takes its slot.
            let (name, _) = &live[rr];
            let ev = state
                .check_set_status(name, Status::Exited, None, at)
                .map_err(|e| LogError::InvalidArgument(format!("finish {name}: {e}")))?;
            encode_into(&ev, &mut buf);
            append(&buf, &mut state, &mut est)?;
            live[rr] = register(&mut state, &mut est, at, &mut buf)?;
        }
        let (name, pid) = &live[rr];
        encode_heartbeat_into(&mut buf, at, name, Some(*pid));
        append(&buf, &mut state, &mut est)?;
        rr = (rr + 1) % live.len();
        if log.sealed_end_lsn() != sealed {
            sealed = log.sealed_end_lsn();
            let e = est.estimate(&state, at, &p.compact);
            if p.auto.due(&e, at.millis_since(last_compaction)).is_some() {
                log.seal_active()?;
                let l = log.last_lsn().unwrap_or(0);
                let c = compact(&log, &state, l, at, &p.compact)?;
                // Single writer: nothing was appended meanwhile.
                state = c.retained;
                est = DropEstimator::from_view(&log.view())?;
                sealed = log.sealed_end_lsn();
                last_compaction = at;
                compactions += 1;
            }
        }
        if events.is_multiple_of(sample_every) || events == total_events {
            let e = est.estimate(&state, at, &p.compact);
            points.push(DiskPoint {
                sim_secs: events / p.rate,
                events,
                disk_bytes: disk_usage(dir)?,
                log_bytes: log.stats().bytes,
                live_bytes: e.live_bytes(),
                bound_bytes: 2 * e.live_bytes() + p.segment_size,
                compactions,
            });
        }
    }
    log.close()?;
    Ok(points)
}
