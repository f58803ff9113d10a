//! Log engine benchmarks (criterion):
//! - lazy append of 32 and 128 byte payloads beside the copy+crc bound;
//! - durable appends from 1, 16 and 64 threads (group commit), with p50/p99;
//! - scan + verify of a warm 256 MiB log.
//!
//! Run: `cargo bench --bench log_append -- --warm-up-time 1 --measurement-time 3`
//! Besides criterion's per-op times, each group prints a summary line
//! (records/s, GB/s, percentiles) measured directly.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentlog::internals::CopyBound;
use agentlog::log::{verify, Durability, Log, LogOptions};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

/// CPU seconds (user + system) this process has used, from /proc/self/stat.
/// Printed beside wall-clock rates: the machine is shared, so wall time
/// includes waiting for a core.
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(") ").map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|u| u.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

fn opts() -> LogOptions {
    LogOptions::default()
}

/// `AGENTLOG_BENCH_GROUPS=durable,scan` runs only those groups (default: all).
fn wanted(group: &str) -> bool {
    std::env::var("AGENTLOG_BENCH_GROUPS")
        .map(|g| g.split(',').any(|x| x == group))
        .unwrap_or(true)
}

fn bench_lazy(c: &mut Criterion) {
    if !wanted("lazy") {
        return;
    }
    let mut g = c.benchmark_group("lazy_append");
    for size in [32usize, 128] {
        let payload = vec![0xabu8; size];
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), opts()).unwrap();
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("log_{size}B"), |b| {
            b.iter(|| log.append(&payload, Durability::Lazy).unwrap())
        });
        let mut bound = CopyBound::new(&dir.path().join("bound"), 64 << 20).unwrap();
        g.bench_function(format!("bound_memcpy_crc_{size}B"), |b| {
            b.iter(|| bound.write(&payload))
        });
        // Direct summary: same work, timed in one go.
        let n = 2_000_000u64;
        let (t, c) = (Instant::now(), cpu_secs());
        for _ in 0..n {
            log.append(&payload, Durability::Lazy).unwrap();
        }
        let (log_s, log_cpu) = (t.elapsed().as_secs_f64(), cpu_secs() - c);
        let (t, c) = (Instant::now(), cpu_secs());
        for _ in 0..n {
            bound.write(&payload);
        }
        let (bound_s, bound_cpu) = (t.elapsed().as_secs_f64(), cpu_secs() - c);
        let rec = ((16 + size + 7) & !7) as f64;
        println!(
            "SUMMARY lazy {size}B: log {:.2} M rec/s ({:.2} GB/s payload, {:.2} GB/s on disk) | bound {:.2} M rec/s ({:.2} GB/s) | log/bound = {:.0}%",
            n as f64 / log_s / 1e6,
            n as f64 * size as f64 / log_s / 1e9,
            n as f64 * rec / log_s / 1e9,
            n as f64 / bound_s / 1e6,
            n as f64 * size as f64 / bound_s / 1e9,
            100.0 * bound_s / log_s
        );
        println!(
            "SUMMARY lazy {size}B (process CPU time): log {:.2} M rec/s | bound {:.2} M rec/s | log/bound = {:.0}%",
            n as f64 / log_cpu / 1e6,
            n as f64 / bound_cpu / 1e6,
            100.0 * bound_cpu / log_cpu
        );
        log.close().unwrap();
    }
    g.finish();
}

/// Run `total` durable appends split over `threads`; returns (elapsed, per-op latencies).
fn durable_run(log: &Arc<Log>, threads: usize, total: u64) -> (Duration, Vec<Duration>) {
    let per = (total as usize).div_ceil(threads);
    let t = Instant::now();
    let lat: Vec<Vec<Duration>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let log = log.clone();
                s.spawn(move || {
                    let p = [0x5au8; 64];
                    let mut v = Vec::with_capacity(per);
                    for _ in 0..per {
                        let t0 = Instant::now();
                        log.append(&p, Durability::Durable).unwrap();
                        v.push(t0.elapsed());
                    }
                    v
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    (t.elapsed(), lat.into_iter().flatten().collect())
}

fn bench_durable(c: &mut Criterion) {
    if !wanted("durable") {
        return;
    }
    let mut g = c.benchmark_group("durable_append");
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), opts()).unwrap();
    let log = Arc::new(log);
    for threads in [1usize, 16, 64] {
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("{threads}_threads"), |b| {
            b.iter_custom(|iters| durable_run(&log, threads, iters.max(threads as u64)).0)
        });
        let total = if threads == 1 { 20_000 } else { 100_000 };
        let (el, mut lat) = durable_run(&log, threads, total);
        lat.sort();
        let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
        println!(
            "SUMMARY durable {threads} threads: {:.0} commits/s, p50 {:?}, p99 {:?} ({} commits)",
            lat.len() as f64 / el.as_secs_f64(),
            pct(0.50),
            pct(0.99),
            lat.len()
        );
    }
    g.finish();
}

fn bench_scan(c: &mut Criterion) {
    if !wanted("scan") {
        return;
    }
    let mut g = c.benchmark_group("scan");
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), opts()).unwrap();
    let p = [0x33u8; 128];
    while log.stats().bytes < 256 << 20 {
        for _ in 0..100_000 {
            log.append(&p, Durability::Lazy).unwrap();
        }
    }
    log.sync().unwrap();
    let bytes = log.stats().bytes;
    g.throughput(Throughput::Bytes(bytes));
    g.sample_size(10);
    g.bench_function("verify_256MiB", |b| {
        b.iter(|| {
            let r = verify(dir.path()).unwrap();
            assert!(r.is_clean());
            r.records
        })
    });
    let view = log.view();
    g.bench_function("view_iter_256MiB", |b| {
        b.iter_batched(
            || (),
            |_| view.iter().map(|r| r.unwrap().payload.len()).sum::<usize>(),
            BatchSize::SmallInput,
        )
    });
    for (name, f) in [
        (
            "verify",
            Box::new(|| {
                verify(dir.path()).unwrap();
            }) as Box<dyn Fn()>,
        ),
        (
            "view iter",
            Box::new(|| {
                view.iter().map(|r| r.unwrap().payload.len()).sum::<usize>();
            }),
        ),
    ] {
        f();
        let (t, c) = (Instant::now(), cpu_secs());
        for _ in 0..3 {
            f();
        }
        println!(
            "SUMMARY scan {name}: {:.2} GB/s wall, {:.2} GB/s per CPU second, over {} MiB (warm)",
            3.0 * bytes as f64 / t.elapsed().as_secs_f64() / 1e9,
            3.0 * bytes as f64 / (cpu_secs() - c) / 1e9,
            bytes >> 20
        );
    }
    g.finish();
}

criterion_group!(benches, bench_lazy, bench_durable, bench_scan);
criterion_main!(benches);
