//! Registry hot paths: apply of one heartbeat, event encode/decode, lazy
//! heartbeats through the Store at 1,000 and 100,000 agents, the fold rate
//! of `Store::open` and of heartbeat batches, and an agent's history in a
//! 10-million-event log.
//!
//! Run: `cargo bench --bench fold` (heavy groups use few samples; the
//! 10 M-event history needs ~0.5 GB of temporary disk).

use agentlog::log::LogOptions;
use agentlog::registry::codec::{decode_heartbeat, encode_heartbeat_into};
use agentlog::registry::*;
use agentlog::store::{Store, StoreOptions};
use agentlog::time::Timestamp;
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::time::{Duration, Instant};

const T0: Timestamp = Timestamp(1_796_040_000_000);

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("agent-{i:06}")).collect()
}

fn state_with(n: usize) -> State {
    let mut s = State::default();
    for (i, name) in names(n).iter().enumerate() {
        let mut r = Registration::new(name, "claude", "/work/project");
        r.pid = Some(1000 + i as u32);
        let e = s.check_register(r, T0).unwrap();
        s.apply(i as u64 + 1, &e);
    }
    s
}

fn opts() -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_size: 256 << 20,
            ..Default::default()
        },
        // Setup registers up to 100,000 agents: no fsync per registration.
        command_durability: agentlog::log::Durability::Lazy,
        ..Default::default()
    }
}

fn store_with(dir: &std::path::Path, n: usize) -> (Store, Vec<String>) {
    let store = Store::open(dir, opts()).unwrap();
    let names = names(n);
    for (i, name) in names.iter().enumerate() {
        let mut r = Registration::new(name, "claude", "/work/project");
        r.pid = Some(1000 + i as u32);
        store.register(r, Some(T0)).unwrap();
    }
    (store, names)
}

fn codec_and_apply(c: &mut Criterion) {
    let mut g = c.benchmark_group("event");
    let mut s = state_with(1000);
    let mut t = T0;
    g.bench_function("apply_heartbeat_1k_agents", |b| {
        b.iter(|| {
            t = t.add_millis(1);
            s.apply_heartbeat(1, t, black_box("agent-000500"), Some(1500));
        })
    });
    for n in [1_000usize, 100_000] {
        let mut s = state_with(n);
        let names = names(n);
        let mut i = 0usize;
        g.bench_function(format!("lookup_round_robin_{n}_agents"), |b| {
            b.iter(|| {
                i = (i + 7919) % n;
                s.agents().position(black_box(&names[i]))
            })
        });
        g.bench_function(format!("name_only_round_robin_{n}_agents"), |b| {
            b.iter(|| {
                i = (i + 7919) % n;
                black_box(names[i].as_bytes()[3])
            })
        });
        g.bench_function(format!("apply_heartbeat_round_robin_{n}_agents"), |b| {
            b.iter(|| {
                i = (i + 7919) % n;
                t = t.add_millis(1);
                s.apply_heartbeat(1, t, &names[i], Some(1000 + i as u32));
            })
        });
    }
    let mut buf = Vec::with_capacity(64);
    g.bench_function("encode_heartbeat_reused_buffer", |b| {
        b.iter(|| {
            encode_heartbeat_into(
                &mut buf,
                black_box(T0),
                black_box("agent-000500"),
                Some(1500),
            )
        })
    });
    encode_heartbeat_into(&mut buf, T0, "agent-000500", Some(1500));
    g.bench_function("decode_heartbeat_borrowed", |b| {
        b.iter(|| decode_heartbeat(black_box(&buf)).unwrap())
    });
    g.bench_function("decode_heartbeat_owned_event", |b| {
        b.iter(|| decode(black_box(&buf)).unwrap())
    });
    let post = Event {
        at: T0,
        kind: EventKind::MessagePosted(PostedMessage {
            from: "agent-000001".into(),
            to: Some("agent-000002".into()),
            category: "status".into(),
            body: "x".repeat(200),
            priority: agentlog::model::Priority::Normal,
            privacy: agentlog::model::Privacy::Team,
            project_root: Some("/work/project".into()),
            expires_at: T0.add_secs(3600),
            request_id: Some("req-1".into()),
            digest: 1,
        }),
    };
    g.bench_function("encode_message_200b", |b| {
        b.iter(|| encode_into(black_box(&post), &mut buf))
    });
    let bytes = encode(&post);
    g.bench_function("decode_message_200b", |b| {
        b.iter(|| decode(black_box(&bytes)).unwrap())
    });
    g.finish();
}

fn store_heartbeats(c: &mut Criterion) {
    let mut g = c.benchmark_group("store_lazy_heartbeat");
    g.throughput(Throughput::Elements(1));
    for n in [1_000usize, 100_000] {
        let dir = tempfile::tempdir().unwrap();
        let (store, names) = store_with(dir.path(), n);
        let mut i = 0usize;
        let mut t = T0;
        g.bench_function(format!("{n}_agents"), |b| {
            b.iter(|| {
                // Round-robin over the fleet with explicit times (no clock read).
                i = (i + 7919) % n;
                t = t.add_millis(1);
                store
                    .heartbeat(&names[i], Some(1000 + i as u32), Some(t))
                    .unwrap()
            })
        });
        store.close().unwrap();
    }
    g.finish();
}

fn fold_on_open(c: &mut Criterion) {
    let mut g = c.benchmark_group("open");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    let dir = tempfile::tempdir().unwrap();
    let (store, names) = store_with(dir.path(), 1000);
    let events: u64 = 2_000_000;
    let mut t = T0;
    for k in 0..events - 1000 {
        let i = (k as usize * 7919) % names.len();
        t = t.add_millis(1);
        store
            .heartbeat(&names[i], Some(1000 + i as u32), Some(t))
            .unwrap();
    }
    g.throughput(Throughput::Elements(events));
    // The fold alone (records already mapped and recovered).
    g.bench_function("fold_view_only_2M_events_1k_agents", |b| {
        b.iter(|| {
            let mut s = State::default();
            let last = history::fold_view(&store.view(), &mut s, 0, history::Until::End).unwrap();
            assert_eq!(last, events);
            s
        })
    });
    store.close().unwrap();
    // Log recovery (which checks every record) plus the fold.
    g.bench_function("fold_2M_events_1k_agents", |b| {
        b.iter_batched(
            || (),
            |_| {
                let s = Store::open(dir.path(), opts()).unwrap();
                assert_eq!(s.applied_lsn(), events);
                s
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

/// The fold over heartbeat batches (tag 15, what a replica's log holds):
/// 20,000 batches of 64 beats each over 1,000 agents.
fn fold_batches(c: &mut Criterion) {
    const BATCHES: u64 = 20_000;
    const BEATS: u64 = 64;
    let mut g = c.benchmark_group("batch");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = agentlog::log::Log::open(dir.path(), opts().log).unwrap();
    let names = names(1000);
    let mut batch = codec::HeartbeatBatchBuilder::default();
    let mut t = T0;
    for k in 0..BATCHES * BEATS {
        let i = (k as usize * 7919) % names.len();
        t = t.add_millis(1);
        batch.push(t, &names[i], Some(1000 + i as u32), None);
        if batch.len() as u64 == BEATS {
            log.append(&batch.take_payload(), agentlog::log::Durability::Lazy)
                .unwrap();
        }
    }
    let registered = state_with(1000);
    g.throughput(Throughput::Elements(BATCHES * BEATS));
    g.bench_function("fold_20k_batches_of_64_beats_1k_agents", |b| {
        b.iter_batched(
            || registered.clone(),
            |mut s| {
                let last = history::fold_view(&log.view(), &mut s, 0, history::Until::End).unwrap();
                assert_eq!((last, s.anomalies()), (BATCHES, 0));
                s
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
    log.close().unwrap();
}

fn history_10m(c: &mut Criterion) {
    let mut g = c.benchmark_group("history");
    g.sample_size(10).measurement_time(Duration::from_secs(15));
    let dir = tempfile::tempdir().unwrap();
    let (store, names) = store_with(dir.path(), 1000);
    let events: u64 = 10_000_000;
    let build = Instant::now();
    let mut t = T0;
    for k in 0..events - 1000 {
        let i = (k as usize * 7919) % names.len();
        t = t.add_millis(1);
        store
            .heartbeat(&names[i], Some(1000 + i as u32), Some(t))
            .unwrap();
    }
    eprintln!("built a {events}-event log in {:?}", build.elapsed());
    g.throughput(Throughput::Elements(events));
    g.bench_function("one_agent_of_1k_in_10M_events", |b| {
        b.iter(|| {
            let h = store.history("agent-000500").unwrap();
            assert_eq!(h.len(), 10_000);
            h
        })
    });
    g.finish();
    store.close().unwrap();
}

criterion_group!(
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = codec_and_apply, store_heartbeats, fold_on_open, fold_batches, history_10m
);
criterion_main!(benches);
