//! Compaction benchmarks (BENCHMARKS.md, "Fold, open, export,
//! compaction"), a plain `harness = false` binary:
//!
//! 1. compaction throughput: build a fleet log of `AGENTLOG_COMPACT_MB`
//!    (default 256) MB — 1,000 agents heartbeating, agents finishing and new
//!    ones registering — then time a dry run (plan only) and a full
//!    compaction; MB/s = log bytes before / wall time.
//! 2. the steady fleet: `simulate_steady_fleet` with 1,000 agents at 10,000
//!    heartbeats per simulated second for `AGENTLOG_FLEET_SECS` simulated
//!    seconds (default 3600; 86400 = one day; `AGENTLOG_FLEET_RATE` changes
//!    the rate, `AGENTLOG_FLEET_SAMPLE_SECS` the sampling), printing the disk curve and
//!    the bound (2 × live history + one segment).
//!
//! `cargo bench --bench compact` (set `AGENTLOG_BENCH_DIR` to choose the disk).

use std::time::Instant;

#[path = "../tests/support/fleet.rs"]
mod fleet;

use agentlog::compact::{compact, fold_view, CompactOptions};
use agentlog::log::{Durability, Log, LogOptions};
use agentlog::model::Status;
use agentlog::registry::codec::{encode_heartbeat_into, encode_into};
use agentlog::registry::state::DEFAULT_MAX_MESSAGES;
use agentlog::registry::{Registration, State};
use agentlog::time::Timestamp;
use fleet::{simulate_steady_fleet, FleetParams};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn build_fleet_log(log: &Log, target_bytes: u64) -> (State, Timestamp) {
    let t0 = Timestamp::from_secs(1_800_000_000);
    let mut s = State::default();
    let mut buf = Vec::with_capacity(256);
    let mut live: Vec<String> = Vec::new();
    let mut next = 0u64;
    let mut reg = |s: &mut State, buf: &mut Vec<u8>, at: Timestamp| -> String {
        next += 1;
        let name = format!("agent-{next:07}");
        let mut r = Registration::new(&name, "claude", "/work");
        r.pid = Some(4242);
        let e = s.check_register(r, at).unwrap();
        encode_into(&e, buf);
        let lsn = log.append(buf, Durability::Lazy).unwrap();
        s.apply(lsn, &e);
        name
    };
    for _ in 0..1000 {
        let n = reg(&mut s, &mut buf, t0);
        live.push(n);
    }
    let mut i = 0u64;
    let mut at = t0;
    while log.stats().bytes < target_bytes {
        for _ in 0..100_000 {
            at = t0.add_millis((i / 10) as i64);
            let slot = (i % 1000) as usize;
            if i % 3600 == 3599 {
                let e = s
                    .check_set_status(&live[slot], Status::Exited, None, at)
                    .unwrap();
                encode_into(&e, &mut buf);
                let lsn = log.append(&buf, Durability::Lazy).unwrap();
                s.apply(lsn, &e);
                live[slot] = reg(&mut s, &mut buf, at);
            }
            encode_heartbeat_into(&mut buf, at, &live[slot], Some(4242));
            let lsn = log.append(&buf, Durability::Lazy).unwrap();
            s.apply_payload(lsn, &buf).unwrap();
            i += 1;
        }
    }
    log.sync().unwrap();
    (s, at)
}

/// CPU seconds (user + system) of the calling thread, from /proc (100 Hz ticks).
fn thread_cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

/// Runs `f`, returning its result, wall seconds and thread CPU seconds.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let (c, t) = (thread_cpu_secs(), Instant::now());
    let out = f();
    (out, t.elapsed().as_secs_f64(), thread_cpu_secs() - c)
}

fn main() {
    let base = std::env::var("AGENTLOG_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .ok();
    let tmp = match &base {
        Some(b) => tempfile::tempdir_in(b).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let mb = env_u64("AGENTLOG_COMPACT_MB", 256);
    let dir = tmp.path().join("log");
    let (log, _) = Log::open(&dir, LogOptions::default()).unwrap();
    let t = Instant::now();
    let (state, end) = build_fleet_log(&log, mb << 20);
    log.seal_active().unwrap();
    let upto = log.last_lsn().unwrap_or(0);
    let stats = log.stats();
    let mbytes = stats.bytes as f64 / 1e6;
    println!(
        "built a {mbytes:.1} MB fleet log ({} records, {} agents live) in {:.2?}",
        upto,
        state.agents().len(),
        t.elapsed()
    );
    let (_, wall, cpu) = timed(|| fold_view(&log.view(), upto, DEFAULT_MAX_MESSAGES).unwrap());
    println!("(for reference) full fold: {wall:.2} s wall, {cpu:.2} s CPU, {:.0} MB/s wall, {:.0} MB/s CPU", mbytes / wall, mbytes / cpu.max(0.01));
    let now = end.add_millis(3600 * 1000);
    let dry = CompactOptions {
        dry_run: true,
        ..Default::default()
    };
    let (plan, wall, cpu) = timed(|| compact(&log, &state, upto, now, &dry).unwrap());
    println!(
        "plan only (dry run): {wall:.2} s wall, {cpu:.2} s CPU: {:.0} MB/s wall, {:.0} MB/s CPU; would drop {} of {} records",
        mbytes / wall,
        mbytes / cpu.max(0.01),
        plan.report.events_dropped,
        plan.report.records_scanned
    );
    let (c, wall, cpu) =
        timed(|| compact(&log, &state, upto, now, &CompactOptions::default()).unwrap());
    let r = &c.report;
    println!(
        "compaction (plan + rewrite + switch, as Store::compact): {wall:.2} s wall, {cpu:.2} s CPU: {:.0} MB/s wall, {:.0} MB/s CPU; {:.1} MB -> {:.3} MB, kept {} dropped {} (heartbeats collapsed {}, agents retired {})",
        mbytes / wall,
        mbytes / cpu.max(0.01),
        r.bytes_before as f64 / 1e6,
        r.bytes_after as f64 / 1e6,
        r.events_kept,
        r.events_dropped,
        r.heartbeats_collapsed,
        r.agents_retired.len()
    );
    let mut j = serde_json::to_value(r).unwrap();
    j["agents_retired"] = serde_json::json!(r.agents_retired.len());
    println!("report (agents_retired as a count): {j}");
    log.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();

    let p = FleetParams {
        rate: env_u64("AGENTLOG_FLEET_RATE", 10_000),
        simulated_secs: env_u64("AGENTLOG_FLEET_SECS", 3600),
        sample_secs: env_u64("AGENTLOG_FLEET_SAMPLE_SECS", 600),
        ..Default::default()
    };
    let t = Instant::now();
    let points = simulate_steady_fleet(&tmp.path().join("fleet"), &p).unwrap();
    println!(
        "steady fleet: {} agents, {} heartbeats/s, {} simulated s in {:.1?}",
        p.agents,
        p.rate,
        p.simulated_secs,
        t.elapsed()
    );
    println!("sim_s      events   disk_MB   live_MB  bound_MB  compactions");
    for pt in &points {
        println!(
            "{:>6} {:>10} {:>9.2} {:>9.3} {:>9.2} {:>12}{}",
            pt.sim_secs,
            pt.events,
            pt.disk_bytes as f64 / 1e6,
            pt.live_bytes as f64 / 1e6,
            pt.bound_bytes as f64 / 1e6,
            pt.compactions,
            if pt.disk_bytes <= pt.bound_bytes {
                ""
            } else {
                "  ABOVE BOUND"
            }
        );
    }
}
