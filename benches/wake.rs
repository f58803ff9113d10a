//! Wake latency of `read --wait` without a daemon: how long after
//! a post is appended a waiter following the log's tail sees the mail.
//!
//! Each iteration starts a waiter thread (`ReadOnlyStore::wait_for_unread`,
//! read-only, as the CLI uses it), waits until it reports that it is
//! blocked, posts from the store, and measures from the post's return to the
//! waiter's return; the message is then marked read for the next round. The
//! figure is bounded by the idle poll interval (1 ms doubling to 8 ms), so
//! it is measured both at once and after the waiter idled for 50 ms.
//!
//! Through a daemon (`agentlog serve`), a `read` with `wait` rides on the
//! daemon's commit signal instead; that wake is measured too.
//!
//! Run: `cargo bench --bench wake`.

use agentlog::daemon::client::Client;
use agentlog::log::Durability;
use agentlog::registry::{PostMessage, Registration};
use agentlog::store::{ReadOnlyStore, Store, StoreOptions, Waited};
use agentlog::time::Timestamp;
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const T0: Timestamp = Timestamp(1_796_040_000_000);

/// Opens (creating) the store in `dir` with agents `a` and `b` registered
/// at [`T0`], through the library's own `register`.
fn store_of_two(dir: &Path) -> Store {
    let store = Store::open(
        dir,
        StoreOptions {
            command_durability: Durability::Lazy,
            snapshot_every_events: 0,
            snapshot_every_secs: 0,
            ..Default::default()
        },
    )
    .unwrap();
    for name in ["a", "b"] {
        store
            .register(Registration::new(name, "claude", "/w"), Some(T0))
            .unwrap();
    }
    store
}

fn wake(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let store = store_of_two(&dir);
    let now = T0.add_secs(60);
    let mut g = c.benchmark_group("read_wait");
    g.sample_size(30);
    g.measurement_time(Duration::from_secs(10));
    // Posting at once meets the waiter at its 1 ms polls; after 50 ms idle it
    // has backed off to its 8 ms polls (the steady state of a long wait).
    for idle_ms in [0u64, 50] {
        g.bench_function(format!("wake_after_post_idle_{idle_ms}ms"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (blocked_tx, blocked_rx) = mpsc::channel();
                    let waiter_dir = dir.clone();
                    let waiter = std::thread::spawn(move || {
                        let got = ReadOnlyStore::open(&waiter_dir, &StoreOptions::default())
                            .unwrap()
                            .wait_for_unread("b", None, Some(now), Duration::from_secs(30), || {
                                blocked_tx.send(()).unwrap()
                            })
                            .unwrap();
                        (got, Instant::now())
                    });
                    blocked_rx.recv().unwrap();
                    std::thread::sleep(Duration::from_millis(idle_ms));
                    let id = store
                        .post_message(PostMessage::new("a", Some("b"), "note", "wake"), Some(now))
                        .unwrap();
                    let posted = Instant::now();
                    let (got, woke) = waiter.join().unwrap();
                    assert!(matches!(got, Waited::Mail { .. }));
                    total += woke.saturating_duration_since(posted);
                    store.mark_read("b", &[id], Some(now)).unwrap();
                }
                total
            })
        });
    }
    g.finish();
    drop(store);
}

/// `agentlog serve` on a store of its own, killed when dropped.
struct Served {
    _tmp: tempfile::TempDir,
    dir: std::path::PathBuf,
    daemon: std::process::Child,
}

impl Served {
    /// A store made by [`store_of_two`] (closed before the daemon opens it).
    fn start() -> Served {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        store_of_two(&dir).close().unwrap();
        let daemon = Command::new(env!("CARGO_BIN_EXE_agentlog"))
            .arg("--dir")
            .arg(&dir)
            .args(["serve", "--sweep-every", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let served = Served {
            _tmp: tmp,
            dir,
            daemon,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Client::connect(&served.dir).is_err() {
            assert!(Instant::now() < deadline, "the daemon did not answer");
            std::thread::sleep(Duration::from_millis(5));
        }
        served
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

/// Through a daemon the waiter is a protocol client whose `read` with
/// `wait` the daemon holds on its commit signal (no polling, so no idle
/// variant): from the post's answer to the waiter's answer, which includes
/// the read itself (the page and its durable read receipt).
fn wake_through_daemon(c: &mut Criterion) {
    let at = T0.add_secs(60).to_string();
    let served = Served::start();
    let mut control = Client::connect(&served.dir).unwrap();
    let mut g = c.benchmark_group("read_wait");
    g.sample_size(30);
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("wake_after_post_through_daemon", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (dir, at_w) = (served.dir.clone(), at.clone());
                let waiter = std::thread::spawn(move || {
                    let mut c = Client::connect(&dir).unwrap();
                    let page = c
                        .call("read", json!({"name": "b", "wait": 30, "at": at_w}))
                        .unwrap();
                    (page.result, Instant::now())
                });
                // Post once the daemon holds the read waiting.
                while control.call("hello", json!({})).unwrap().result["reads_waiting"] != 1 {
                    std::thread::sleep(Duration::from_micros(200));
                }
                let post = json!({"from": "a", "to": "b", "text": "wake", "at": at});
                control.call("post", post).unwrap();
                let posted = Instant::now();
                let (page, woke) = waiter.join().unwrap();
                assert_eq!(page["messages"].as_array().map(Vec::len), Some(1), "{page}");
                total += woke.saturating_duration_since(posted);
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, wake, wake_through_daemon);
criterion_main!(benches);
