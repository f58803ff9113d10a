//! Store checkpoints (FORMAT.md, "Snapshots"): open time of a big store
//! with a recent snapshot vs a full refold vs a small store, and the costs
//! that choose the snapshot defaults (state clone vs encode of 10,000
//! agents, fold rate).
//!
//! Run: `cargo bench --bench store_open`. `AGENTLOG_BENCH_EVENTS` sets the
//! big store's event count (default 10,000,000: ~0.5 GB of temporary disk
//! and a few minutes to build on a loaded 2-core box).

use agentlog::log::{Durability, LogOptions};
use agentlog::registry::*;
use agentlog::store::{Store, StoreOptions, DEFAULT_SNAPSHOT_EVERY_EVENTS};
use agentlog::time::Timestamp;
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use std::path::Path;
use std::time::{Duration, Instant};

const T0: Timestamp = Timestamp(1_796_040_000_000);
const AGENTS: usize = 10_000;

fn opts() -> StoreOptions {
    StoreOptions {
        // Default 64 MiB segments: recovery and the seek to a snapshot's LSN
        // both walk at most one segment.
        log: LogOptions::default(),
        command_durability: Durability::Lazy,
        // The bench places its snapshots itself.
        snapshot_every_events: 0,
        snapshot_every_secs: 0,
        ..Default::default()
    }
}

fn names() -> Vec<String> {
    (0..AGENTS).map(|i| format!("agent-{i:06}")).collect()
}

/// 10,000 registrations, then heartbeats up to `events` records; a snapshot
/// is taken `tail` records before the end (none if `tail` is `None`).
fn build(dir: &Path, events: u64, tail: Option<u64>) {
    let store = Store::open(dir, opts()).unwrap();
    let names = names();
    for (i, name) in names.iter().enumerate() {
        let mut r = Registration::new(name, "claude", "/work/project");
        r.pid = Some(1000 + i as u32);
        r.log_path = Some(format!("/work/project/logs/{name}.log"));
        store.register(r, Some(T0)).unwrap();
    }
    let snap_at = tail.map(|t| events.saturating_sub(t).max(AGENTS as u64));
    let mut t = T0;
    let mut k = 0usize;
    while store.applied_lsn() < events {
        if Some(store.applied_lsn()) == snap_at {
            store.snapshot().unwrap();
        }
        let i = (k * 7919) % AGENTS;
        k += 1;
        t = t.add_millis(1);
        store
            .heartbeat(&names[i], Some(1000 + i as u32), Some(t))
            .unwrap();
    }
    if Some(store.applied_lsn()) == snap_at {
        store.snapshot().unwrap();
    }
    store.sync().unwrap();
    // Dropped, not closed: a clean close would snapshot the tail.
    drop(store);
}

fn open_once(dir: &Path, events: u64) -> Store {
    let s = Store::open(dir, opts()).unwrap();
    assert_eq!(s.applied_lsn(), events);
    s
}

fn open_times(c: &mut Criterion) {
    let events: u64 = std::env::var("AGENTLOG_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let mut g = c.benchmark_group("store_open");
    g.sample_size(10).measurement_time(Duration::from_secs(5));

    // Small store: 10,000 events (the registrations), no snapshot.
    let small = tempfile::tempdir().unwrap();
    build(small.path(), AGENTS as u64, None);
    eprintln!(
        "10k events phases: {:?}",
        open_once(small.path(), AGENTS as u64).open_report().timings
    );
    g.bench_function("10k_events_no_snapshot", |b| {
        b.iter_batched(
            || (),
            |_| open_once(small.path(), AGENTS as u64),
            BatchSize::PerIteration,
        )
    });

    // Big store with a snapshot at its very end, and with one the default
    // snapshot interval before the end (the worst tail a default store folds).
    for (label, tail) in [
        ("snapshot_at_end", 0),
        (
            "snapshot_default_interval_back",
            DEFAULT_SNAPSHOT_EVERY_EVENTS,
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        build(dir.path(), events, Some(tail));
        eprintln!("built {events} events ({label}) in {:?}", started.elapsed());
        let report = open_once(dir.path(), events).open_report().clone();
        eprintln!(
            "{label}: snapshot lsn {:?}, events folded {}, {:?}",
            report.snapshot_lsn, report.events_folded, report.timings
        );
        assert_eq!(report.events_folded, tail);
        g.bench_function(format!("{events}_events_{label}"), |b| {
            b.iter_batched(
                || (),
                |_| open_once(dir.path(), events),
                BatchSize::PerIteration,
            )
        });
        if tail == 0 {
            // The same store without its snapshot: a full refold, timed once
            // (it is the slow case the snapshot exists to avoid).
            let snaps = dir.path().join("snapshots");
            let aside = dir.path().join("snapshots.off");
            std::fs::rename(&snaps, &aside).unwrap();
            let t = Instant::now();
            let s = open_once(dir.path(), events);
            let took = t.elapsed();
            assert_eq!(s.open_report().events_folded, events);
            eprintln!("full refold phases: {:?}", s.open_report().timings);
            drop(s);
            eprintln!(
                "{events}_events_full_refold: {took:?} ({:.2} M events/s)",
                events as f64 / took.as_secs_f64() / 1e6
            );
            std::fs::rename(&aside, &snaps).unwrap();
        }
    }
    g.finish();
}

/// What a snapshot costs the appenders (they wait while the state is copied
/// under the read lock) vs serialising under the lock instead.
fn snapshot_costs(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), AGENTS as u64, None);
    let store = open_once(dir.path(), AGENTS as u64);
    let state = store.state();
    let mut g = c.benchmark_group("snapshot_10k_agents");
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    g.bench_function("state_clone", |b| b.iter(|| black_box(state.clone())));
    g.bench_function("bincode_encode", |b| {
        b.iter(|| {
            bincode::serde::encode_to_vec(black_box(&state), bincode::config::standard()).unwrap()
        })
    });
    g.bench_function("store_snapshot_total", |b| {
        b.iter(|| store.snapshot().unwrap())
    });
    g.finish();
}

criterion_group!(
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1));
    targets = snapshot_costs, open_times
);
criterion_main!(benches);
