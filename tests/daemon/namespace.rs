//! Readers in another pid namespace (issue 30, finding 3): the kernel hides
//! `/proc/locks` entries of processes outside the reader's pid namespace, so
//! the writer's presence is probed with an open-file-description lock
//! instead. A reader in a container beside a live writer must judge the
//! writer's unfinished tail as a tail in progress, never as damage. Needs
//! root (`unshare --pid --mount-proc`).

use crate::support::daemon::{register, Conn, Daemon, Store};
use serde_json::json;
use std::os::unix::fs::FileExt;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Runs the CLI with `args` on the store in a new pid namespace with its
/// own `/proc`, as a container would.
fn in_new_pid_namespace(s: &Store, args: &[&str]) -> Output {
    Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(env!("CARGO_BIN_EXE_agentlog"))
        .arg("--dir")
        .arg(&s.dir)
        .arg("--no-daemon")
        .args(args)
        .env("AGENTLOG_NOW", crate::support::daemon::NOW)
        .output()
        .expect("run unshare (util-linux)")
}

/// The newest segment file of the store's log.
fn newest_segment(s: &Store) -> std::path::PathBuf {
    let mut segs: Vec<_> = std::fs::read_dir(s.dir.join("log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    segs.sort();
    segs.pop().expect("a segment")
}

#[test]
fn a_reader_in_another_pid_namespace_sees_the_live_writer() {
    assert!(
        rustix::process::geteuid().is_root(),
        "unshare --pid needs root"
    );
    let s = Store::new();
    let d = Daemon::start(&s.dir, &[]);
    let mut c = Conn::connect(&s.dir);
    assert!(register(&mut c, "w1")["result"].is_object());
    // The namespace really hides the writer's lock from `/proc/locks`.
    let hidden = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "cat", "/proc/locks"])
        .output()
        .unwrap();
    let daemon_pid = format!(" {} ", d.pid());
    assert!(
        !String::from_utf8_lossy(&hidden.stdout).contains(&daemon_pid),
        "{hidden:?}"
    );
    // A record in flight, as a reader can catch it: bytes past the
    // end-of-data marker of the live writer's newest segment (far past, so
    // the writer does not reach them during the test).
    let seg = newest_segment(&s);
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    let len = f.metadata().unwrap().len();
    f.write_all_at(&[0xa5; 64], len - 4096).unwrap();
    for args in [["verify"].as_slice(), &["stats"]] {
        let out = in_new_pid_namespace(&s, args);
        assert!(
            out.status.success(),
            "{args:?} beside a live writer: {out:?}"
        );
        let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        assert!(!text.contains("salvage"), "{text}");
    }
    // And under load: heartbeats stream in while readers come and go.
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (dir, stop) = (s.dir.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut c = Conn::connect(&dir);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let r = c.call(json!({"id": n, "method": "heartbeat", "params": {"name": "w1"}}));
                assert!(r["result"].is_object(), "{r}");
                n += 1;
            }
            n
        })
    };
    let mut failures = Vec::new();
    for i in 0..20 {
        let args: &[&str] = if i % 2 == 0 { &["verify"] } else { &["stats"] };
        let out = in_new_pid_namespace(&s, args);
        if !out.status.success() {
            failures.push(String::from_utf8_lossy(&out.stderr).into_owned());
        }
    }
    stop.store(true, Ordering::Relaxed);
    let beats = load.join().unwrap();
    assert!(beats > 0);
    assert!(
        failures.is_empty(),
        "{} of 20 failed: {failures:?}",
        failures.len()
    );
    d.kill();
}
