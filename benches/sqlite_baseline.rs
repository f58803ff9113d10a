//! Heartbeats side by side: SQLite in WAL mode (one prepared
//! `UPDATE agents SET last_active=? WHERE name=?` per heartbeat on a table of
//! 1,000 agents) against agentlog, in the same process run.
//!
//! Pairs (the ratio of each pair is printed at the end, from this run):
//! - `sqlite_wal_normal/1`  vs `store_lazy/1`     (lazy heartbeats)
//! - `sqlite_wal_full/1`    vs `store_durable/1`  (durable heartbeats)
//! - `sqlite_wal_full/64`   vs `store_durable/64` (a connection per thread,
//!   busy_timeout; group commit on the agentlog side)
//!
//! The agentlog side is `Store::heartbeat` (validated, logged, folded; via
//! `StoreTarget`), and the same three runs as raw log appends of a 40-byte
//! heartbeat record (`raw-log_*`, the log engine's share). Rates are
//! aggregated over every `iter_custom` call (warm-up included) as counted
//! heartbeats / measured time.
//!
//! cargo bench --bench sqlite_baseline

// The harness serves the binary (and its unit tests); this bench uses a part.
#[allow(dead_code, unused_imports)]
#[path = "../src/bench/mod.rs"]
mod bench;

use agentlog::time::Timestamp;
use bench::baseline::agent_name;
use bench::heartbeats::HeartbeatTarget;
use bench::raw_log::RawLogTarget;
use bench::sqlite::{self, UPDATE};
use bench::targets::StoreTarget;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use rusqlite::{params, Connection};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

const AGENTS: usize = 1_000;

/// (heartbeats, time) per benchmark, accumulated over all its runs.
static TALLY: Mutex<BTreeMap<String, (u64, Duration)>> = Mutex::new(BTreeMap::new());

fn tally(name: &str, ops: u64, took: Duration) {
    let mut t = TALLY.lock().unwrap();
    let e = t.entry(name.to_string()).or_insert((0, Duration::ZERO));
    e.0 += ops;
    e.1 += took;
}

/// A connection of the library's SQLite baseline (WAL, busy timeout).
fn sqlite_open(path: &Path, synchronous: &str) -> Connection {
    sqlite::open(path, synchronous == "FULL").expect("open sqlite")
}

fn sqlite_create(path: &Path) {
    sqlite::create(path, AGENTS).expect("create the sqlite table");
}

/// `per` heartbeats round-robin from `start` on one connection.
fn sqlite_heartbeats(c: &Connection, names: &[String], start: usize, per: u64) {
    let mut stmt = c.prepare_cached(UPDATE).expect("prepare update");
    let mut i = start;
    for _ in 0..per {
        let n = stmt
            .execute(params![Timestamp::now().as_millis(), names[i]])
            .expect("update");
        debug_assert_eq!(n, 1);
        i = (i + 1) % names.len();
    }
}

/// Runs one benchmark on `threads` long-lived workers (spawned once, so the
/// timed part is only the heartbeats: release all workers, wait for all).
/// `init` builds each worker's own state inside its thread (e.g. its SQLite
/// connection); `work(state, worker, n)` does `n` heartbeats.
fn pooled<S>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    id: BenchmarkId,
    name: &str,
    threads: usize,
    init: &(dyn Fn(usize) -> S + Sync),
    work: &(dyn Fn(&mut S, usize, u64) + Sync),
) {
    std::thread::scope(|s| {
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let mut txs = Vec::with_capacity(threads);
        for w in 0..threads {
            let (tx, rx) = mpsc::channel::<u64>();
            txs.push(tx);
            let done = done_tx.clone();
            s.spawn(move || {
                let mut st = init(w);
                while let Ok(n) = rx.recv() {
                    work(&mut st, w, n);
                    if done.send(()).is_err() {
                        break;
                    }
                }
            });
        }
        g.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let per = iters.div_ceil(threads as u64);
                let t0 = Instant::now();
                for tx in &txs {
                    tx.send(per).expect("worker alive");
                }
                for _ in 0..threads {
                    done_rx.recv().expect("worker finished");
                }
                let took = t0.elapsed();
                tally(name, per * threads as u64, took);
                took.mul_f64(iters as f64 / (per * threads as u64) as f64)
            })
        });
        drop(txs); // workers see the closed channel and exit
    });
}

fn bench_sqlite(c: &mut Criterion, dir: &Path, names: &[String]) {
    let mut g = c.benchmark_group("sqlite_wal");
    g.throughput(Throughput::Elements(1));
    for (sync, threads) in [("NORMAL", 1usize), ("FULL", 1), ("FULL", 64)] {
        let path = dir.join(format!("agents-{sync}-{threads}.db"));
        sqlite_create(&path);
        let name = format!("sqlite_wal_{}/{threads}", sync.to_lowercase());
        // Each worker has its own connection and its own slice of agents.
        let init = |w: usize| (sqlite_open(&path, sync), w * AGENTS / threads);
        let work = |st: &mut (Connection, usize), _w: usize, n: u64| {
            sqlite_heartbeats(&st.0, names, st.1, n);
            st.1 = (st.1 + n as usize) % AGENTS;
        };
        pooled(
            &mut g,
            BenchmarkId::new(sync.to_lowercase(), threads),
            &name,
            threads,
            &init,
            &work,
        );
    }
    g.finish();
}

fn bench_agentlog(c: &mut Criterion, dir: &Path, target: &str) {
    let mut g = c.benchmark_group(format!("agentlog_{target}"));
    g.throughput(Throughput::Elements(1));
    for (durable, threads) in [(false, 1usize), (true, 1), (true, 64)] {
        let kind = if durable { "durable" } else { "lazy" };
        let at = dir.join(format!("{target}-{kind}-{threads}"));
        let mut t: Box<dyn HeartbeatTarget> = match target {
            "store" => Box::new(StoreTarget::open(&at, durable).expect("open store")),
            _ => Box::new(RawLogTarget::open(&at, durable).expect("open log")),
        };
        t.register_all(AGENTS).expect("register");
        let t = &*t;
        let name = format!("{target}_{kind}/{threads}");
        let init = |w: usize| w * AGENTS / threads;
        let work = |i: &mut usize, w: usize, n: u64| {
            for _ in 0..n {
                t.heartbeat(*i, w).expect("heartbeat");
                *i = if *i + 1 == AGENTS { 0 } else { *i + 1 };
            }
        };
        pooled(
            &mut g,
            BenchmarkId::new(kind, threads),
            &name,
            threads,
            &init,
            &work,
        );
    }
    g.finish();
}

fn rate(t: &BTreeMap<String, (u64, Duration)>, k: &str) -> Option<f64> {
    t.get(k)
        .filter(|(n, d)| *n > 0 && !d.is_zero())
        .map(|(n, d)| *n as f64 / d.as_secs_f64())
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let dir = tempfile::tempdir().expect("tempdir");
    let names: Vec<String> = (0..AGENTS).map(agent_name).collect();
    bench_sqlite(&mut c, dir.path(), &names);
    bench_agentlog(&mut c, dir.path(), "store");
    bench_agentlog(&mut c, dir.path(), "raw-log");
    c.final_summary();

    let t = TALLY.lock().unwrap();
    println!("\nheartbeats/s over all runs of each bench (this process, {AGENTS} agents):");
    for (k, (n, d)) in t.iter() {
        println!(
            "  {k:<24} {:>14.0} /s   ({n} heartbeats in {:.3} s)",
            *n as f64 / d.as_secs_f64(),
            d.as_secs_f64()
        );
    }
    for (a, b) in [
        ("store_lazy/1", "sqlite_wal_normal/1"),
        ("store_durable/1", "sqlite_wal_full/1"),
        ("store_durable/64", "sqlite_wal_full/64"),
        ("raw-log_lazy/1", "sqlite_wal_normal/1"),
        ("raw-log_durable/1", "sqlite_wal_full/1"),
        ("raw-log_durable/64", "sqlite_wal_full/64"),
    ] {
        if let (Some(x), Some(y)) = (rate(&t, a), rate(&t, b)) {
            println!("  ratio {a} / {b} = {:.1}x", x / y);
        }
    }
}
