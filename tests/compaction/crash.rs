//! Crash safety of compaction: a child process (this test binary re-executed
//! with `AGENTLOG_COMPACT_CHILD` set) compacts a copy of a log while a
//! thread appends durable events and reports each acknowledged LSN; the
//! parent SIGKILLs it at a random moment, 32 times. After every kill: the
//! log opens, verify is clean, the records up to the pre-compaction end are
//! exactly the pre- or the post-compaction ones, and every acknowledged
//! append is there.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::support::copy_dir;
use agentlog::compact::{compact_log, CompactOptions};
use agentlog::log::{verify, Durability, Log, LogOptions};
use agentlog::registry::state::DEFAULT_MAX_MESSAGES;
use agentlog::registry::*;
use agentlog::time::Timestamp;

const ENV_DIR: &str = "AGENTLOG_COMPACT_CHILD";
const KILLS: usize = 32;

fn opts() -> LogOptions {
    LogOptions {
        segment_size: 64 * 1024,
        max_record_size: 4096,
        flush_interval: None,
        ..Default::default()
    }
}

fn now() -> Timestamp {
    Timestamp::from_secs(1_800_000_000).add_millis(30 * 3600 * 1000)
}

/// The k-th event the child's writer appends (agent `w` is never retired).
fn tail_event(k: u64) -> Vec<u8> {
    encode(&Event {
        at: now().add_millis(k as i64),
        kind: EventKind::FieldsUpdated {
            agent: "w".into(),
            fields: FieldUpdates {
                log_path: Some(Some(format!("/log/{k}"))),
                ..Default::default()
            },
        },
    })
}

/// ~1 MB of history: 120 agents with heartbeat runs, 80 of them finished
/// long ago (retired), plus the writer agent `w`.
fn build_template(dir: &Path) -> u64 {
    let (log, _) = Log::open(dir, opts()).unwrap();
    let t0 = Timestamp::from_secs(1_800_000_000);
    let mut s = State::default();
    let push = |s: &mut State, e: Event| {
        let p = encode(&e);
        let lsn = log.append(&p, Durability::Lazy).unwrap();
        s.apply(lsn, &e);
    };
    let mut names: Vec<String> = (0..120).map(|i| format!("agent-{i:03}")).collect();
    names.push("w".into());
    for n in &names {
        let e = s
            .check_register(Registration::new(n, "codex", "/w"), t0)
            .unwrap();
        push(&mut s, e);
    }
    for round in 0..150i64 {
        for n in &names {
            let e = Event {
                at: t0.add_millis(1000 + round * 1000),
                kind: EventKind::Heartbeat {
                    agent: n.clone(),
                    pid: None,
                },
            };
            push(&mut s, e);
        }
    }
    for n in &names[..80] {
        let e = s
            .check_set_status(
                n,
                agentlog::model::Status::Exited,
                None,
                t0.add_millis(200_000),
            )
            .unwrap();
        push(&mut s, e);
    }
    let last = log.last_lsn().unwrap();
    log.close().unwrap();
    last
}

fn records(dir: &Path) -> Vec<(u64, Vec<u8>)> {
    let (log, _) = Log::open(dir, opts()).unwrap();
    let v = log
        .view()
        .iter()
        .map(|r| {
            let r = r.unwrap();
            (r.lsn, r.payload.to_vec())
        })
        .collect();
    log.close().unwrap();
    v
}

/// The child: compact while appending; print `ack N` per durable append.
#[test]
fn child_process_entry() {
    let Ok(dir) = std::env::var(ENV_DIR) else {
        return; // Only meaningful when re-executed by the crash test.
    };
    let (log, _) = Log::open(Path::new(&dir), opts()).unwrap();
    let first = log.next_lsn();
    let done = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let (log, done) = (&log, &done);
        sc.spawn(move || {
            let mut k = 0;
            while !done.load(Ordering::Acquire) || k < 20 {
                let lsn = log.append(&tail_event(k), Durability::Durable).unwrap();
                assert_eq!(lsn, first + k);
                // Lock per line: the main thread prints too.
                let mut out = std::io::stdout().lock();
                writeln!(out, "ack {lsn}").unwrap();
                out.flush().unwrap();
                k += 1;
            }
        });
        compact_log(log, DEFAULT_MAX_MESSAGES, now(), &CompactOptions::default()).unwrap();
        println!("compacted");
        done.store(true, Ordering::Release);
    });
}

fn spawn_child(dir: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .arg(crate::support::test_name(
            module_path!(),
            "child_process_entry",
        ))
        .args(["--exact", "--nocapture", "--test-threads", "1"])
        .env(ENV_DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn sigkill_during_compaction_leaves_old_or_new_generation() {
    let tmp = tempfile::tempdir().unwrap();
    let template = tmp.path().join("template");
    let end = build_template(&template);
    let pre: Vec<(u64, Vec<u8>)> = records(&template);
    // The post-compaction records, from an uninterrupted in-process run.
    let reference = tmp.path().join("reference");
    copy_dir(&template, &reference);
    {
        let (log, _) = Log::open(&reference, opts()).unwrap();
        let (c, _) = compact_log(
            &log,
            DEFAULT_MAX_MESSAGES,
            now(),
            &CompactOptions::default(),
        )
        .unwrap();
        assert!(c.report.events_dropped > 0);
        log.close().unwrap();
    }
    let post = records(&reference);
    assert!(post.len() < pre.len());

    // Calibrate: how long an uninterrupted child takes to compact.
    let calib = tmp.path().join("calib");
    copy_dir(&template, &calib);
    let started = Instant::now();
    let mut child = spawn_child(&calib);
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut window = None;
    for l in out.lines().map_while(Result::ok) {
        if l == "compacted" {
            window = Some(started.elapsed());
        }
    }
    let compacted = window.is_some();
    let window = window.unwrap_or_default();
    assert!(
        child.wait().unwrap().success() && compacted,
        "calibration child failed"
    );

    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("crash loop: seed {seed}, window {window:?}");
    let (mut saw_pre, mut saw_post) = (0, 0);
    for i in 0..KILLS {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = window.mul_f64((seed % 1000) as f64 / 1000.0 * 1.1);
        let dir = tmp.path().join(format!("run-{i}"));
        copy_dir(&template, &dir);
        let mut child = spawn_child(&dir);
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .filter_map(|l| l.strip_prefix("ack ").and_then(|n| n.parse::<u64>().ok()))
                .collect::<Vec<u64>>()
        });
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL on Unix; it may have exited already
        child.wait().unwrap();
        let acked = reader.join().unwrap();

        let (log, _) =
            Log::open(&dir, opts()).unwrap_or_else(|e| panic!("run {i}: open failed: {e}"));
        drop(log);
        let rep = verify(&dir).unwrap();
        assert!(rep.bad.is_empty(), "run {i}: verify found {:?}", rep.bad);
        let got = records(&dir);
        let (old, tail): (Vec<_>, Vec<_>) = got.into_iter().partition(|(l, _)| *l <= end);
        if old == pre {
            saw_pre += 1;
        } else if old == post {
            saw_post += 1;
        } else {
            panic!(
                "run {i} (delay {delay:?}): {} records up to lsn {end}, neither the {} before nor the {} after compaction",
                old.len(),
                pre.len(),
                post.len()
            );
        }
        for (k, (lsn, p)) in tail.iter().enumerate() {
            assert_eq!(
                *lsn,
                end + 1 + k as u64,
                "run {i}: gap in the appended tail"
            );
            assert_eq!(p, &tail_event(k as u64), "run {i}: lsn {lsn} changed");
        }
        let have = end + tail.len() as u64;
        for a in &acked {
            assert!(
                *a <= have,
                "run {i}: acknowledged lsn {a} lost (log ends at {have})"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    eprintln!("crash loop: {saw_pre} kills left the old generation, {saw_post} the new one");
    assert_eq!(saw_pre + saw_post, KILLS);
}
