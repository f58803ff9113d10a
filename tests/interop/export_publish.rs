//! Publishing `registry.json`: atomic replacement under both writers' locks.
//! A reader hammering the file never sees a partial file; a writer holding
//! either lock delays the export (and a bounded wait names the lock); a
//! SIGKILLed exporter leaves the previous file intact.

use crate::support::conformance::checker_accepts;
use agentlog::export::{
    lock_paths, publish, publish_with, render_v4, ExportOptions, PublishOptions,
};
use agentlog::import::parse_registry;
use agentlog::internals::fslock::{FileLock, LockMode};
use agentlog::model::Agent;
use agentlog::time::Timestamp;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A registry of `n` agents whose rows all mention `tag`.
fn render(n: usize, tag: &str) -> Vec<u8> {
    let fleet: Vec<Agent> = (0..n)
        .map(|i| {
            let mut a = Agent::new(
                &format!("{tag}-{i}"),
                ["claude", "codex", "gemini"][i % 3],
                &format!("/home/dev/{tag}/{i}"),
                Timestamp::from_secs(1_790_000_000 + i as i64),
            );
            a.log_path = Some(format!("/home/dev/.fno/agents/{tag}-{i}.log"));
            a.codex_session_id = Some(format!("019e7157-{i:08x}"));
            a.pid = Some(1000 + i as u32);
            a
        })
        .collect();
    render_v4(
        &fleet,
        &ExportOptions {
            strict: true,
            ..Default::default()
        },
    )
    .unwrap()
    .0
}

#[test]
fn publish_replaces_the_file_and_creates_both_lock_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agents/registry.json");
    let bytes = render(3, "p");
    publish(&path, &bytes).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let (sidecar, python) = lock_paths(&path);
    assert_eq!(sidecar, dir.path().join("agents/registry.json.lock"));
    assert_eq!(python, dir.path().join("agents/locks/_registry.lock"));
    assert!(sidecar.exists() && python.exists());
    checker_accepts(&path);
    // No temp file left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path().join("agents"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
}

#[test]
fn a_reader_hammering_the_file_never_sees_a_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.json");
    let (a, b) = (render(300, "a"), render(700, "b"));
    publish(&path, &a).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (path, a, b, stop, reads) = (
            path.clone(),
            a.clone(),
            b.clone(),
            stop.clone(),
            reads.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let got = std::fs::read(&path).unwrap();
                assert!(
                    got == a || got == b,
                    "partial or foreign file: {} bytes",
                    got.len()
                );
                reads.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    for i in 0..60 {
        publish(&path, if i % 2 == 0 { &b } else { &a }).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().expect("reader saw a partial file");
    assert!(reads.load(Ordering::Relaxed) > 0);
    assert_eq!(std::fs::read(&path).unwrap(), a);
}

#[test]
fn a_writer_holding_either_lock_delays_the_export() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.json");
    let (old, new) = (render(2, "old"), render(2, "new"));
    let (sidecar, python) = lock_paths(&path);
    for held_lock in [sidecar, python] {
        publish(&path, &old).unwrap();
        let guard =
            FileLock::acquire(&held_lock, LockMode::Exclusive, Duration::from_secs(5)).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let exporter = {
            let (path, new, done) = (path.clone(), new.clone(), done.clone());
            std::thread::spawn(move || {
                publish(&path, &new).unwrap();
                done.store(true, Ordering::SeqCst);
            })
        };
        // While the lock is held the export cannot have happened, however
        // long we look (this only fails if the lock is ignored).
        std::thread::sleep(Duration::from_millis(150));
        assert!(
            !done.load(Ordering::SeqCst),
            "export ignored {}",
            held_lock.display()
        );
        assert_eq!(std::fs::read(&path).unwrap(), old);
        drop(guard);
        exporter.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
        assert_eq!(std::fs::read(&path).unwrap(), new);
    }
}

#[test]
fn a_lock_wait_is_bounded_and_names_the_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.json");
    let old = render(1, "old");
    publish(&path, &old).unwrap();
    let (_, python) = lock_paths(&path);
    // A Python-style reader/writer holding its lock (even shared) blocks us.
    let _held = FileLock::acquire(&python, LockMode::Shared, Duration::from_secs(5)).unwrap();
    let opts = PublishOptions {
        lock_timeout: Duration::from_millis(50),
    };
    let err = publish_with(&path, &render(1, "new"), &opts)
        .unwrap_err()
        .to_string();
    assert!(err.contains("timed out"), "{err}");
    assert!(err.contains("locks/_registry.lock"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), old, "nothing replaced");
}

const CHILD_ENV: &str = "AGENTLOG_EXPORT_CRASH_CHILD";

/// The crash child: publish two alternating big files until killed.
fn crash_child(path: &Path) -> ! {
    let (a, b) = (render(2000, "a"), render(2500, "b"));
    let mut i = 0u64;
    loop {
        publish(path, if i.is_multiple_of(2) { &b } else { &a }).unwrap();
        i += 1;
    }
}

#[test]
fn sigkill_during_exports_leaves_the_previous_file_intact() {
    if let Some(path) = std::env::var_os(CHILD_ENV) {
        crash_child(Path::new(&path));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.json");
    let (a, b) = (render(2000, "a"), render(2500, "b"));
    publish(&path, &a).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut torn_temps = 0;
    for i in 0..50u64 {
        let mut child = Command::new(&exe)
            .arg(crate::support::test_name(
                module_path!(),
                "sigkill_during_exports_leaves_the_previous_file_intact",
            ))
            .args(["--exact", "--test-threads=1"])
            .env(CHILD_ENV, &path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Kill at varied points of the publish loop (deterministic spread).
        std::thread::sleep(Duration::from_millis(5 + (i * 7) % 40));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        let got = std::fs::read(&path).unwrap();
        assert!(
            got == a || got == b,
            "iteration {i}: torn file ({} bytes)",
            got.len()
        );
        assert_eq!(
            parse_registry(&got, &path).unwrap().rows.len(),
            if got == a { 2000 } else { 2500 }
        );
        torn_temps += temp_files(dir.path()).len();
    }
    eprintln!("{torn_temps}/50 kills left a half-written temp file behind");
    checker_accepts(&path);
    // The locks died with the child: a normal publish still goes through.
    publish(&path, &a).unwrap();
    // A killed publisher's temp file may remain (randomly named, so nobody
    // can plant one); a finished publish leaves none of its own.
    let before = temp_files(dir.path());
    publish(&path, &b).unwrap();
    assert_eq!(temp_files(dir.path()), before);
}

/// The `.tmp` files in `dir`.
fn temp_files(dir: &std::path::Path) -> Vec<std::ffi::OsString> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    v.sort();
    v
}
