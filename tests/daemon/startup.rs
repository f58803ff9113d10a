//! No lost start-up window (issue 30, finding 4): a daemon takes the writer
//! lock before its socket answers, so a CLI write in between finds no
//! daemon and waits for the lock; it keeps trying the socket meanwhile and
//! goes through the daemon once it answers, instead of failing with
//! `locked by another writer` while the daemon serves.

use crate::support::cli::{append_events, heartbeat};
use crate::support::daemon::{bin, Store};
use std::time::{Duration, Instant};

/// Whether the daemon with `pid` holds the lock of `dir` (it wrote its pid
/// into `LOCK` once it took it) while its socket does not answer yet.
fn in_the_window(dir: &std::path::Path, pid: u32) -> Option<bool> {
    let lock = std::fs::read_to_string(dir.join("log").join("LOCK")).unwrap_or_default();
    if lock.trim() != pid.to_string() {
        return None;
    }
    Some(std::os::unix::net::UnixStream::connect(dir.join("agentlog.sock")).is_err())
}

#[test]
fn a_write_during_daemon_start_up_reaches_the_daemon() {
    let s = Store::new();
    let at = ["--at", "2026-11-30T11:00:00Z"];
    s.ok(&[
        &["register", "w1", "--provider", "claude", "--cwd", "/w"],
        &at[..],
    ]
    .concat());
    // A long log without a snapshot: the daemon folds it holding the lock,
    // before it binds its socket.
    let beats: Vec<_> = (0..400_000)
        .map(|i| heartbeat(&format!("12:{:02}:{:02}", i / 60 % 60, i % 60), "w1"))
        .collect();
    append_events(&s.dir, &beats);
    let mut caught = false;
    for _attempt in 0..5 {
        let mut child = agentlog::internals::die_with_spawning_thread(&mut bin())
            .arg("--dir")
            .arg(&s.dir)
            .args(["serve", "--sweep-every", "0"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(20);
        let window = loop {
            if let Some(w) = in_the_window(&s.dir, pid) {
                break w;
            }
            assert!(Instant::now() < deadline, "the daemon never took the lock");
            std::thread::sleep(Duration::from_millis(1));
        };
        if window {
            caught = true;
            let started = Instant::now();
            let out = s.run(&["--json", "heartbeat", "w1"]);
            assert!(out.status.success(), "{out:?}");
            assert!(started.elapsed() < Duration::from_secs(5));
            // It went through the daemon: the event records who asked.
            let log = s.ok(&["--json", "log", "--from", "400002"]);
            assert!(log.contains("\"origin\""), "{log}");
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let _ = std::fs::remove_file(s.dir.join("agentlog.sock"));
        if caught {
            break;
        }
    }
    assert!(
        caught,
        "never caught the daemon between its lock and its socket"
    );
}
