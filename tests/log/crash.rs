//! Crash tests with real processes: the test binary re-executes itself in a
//! child mode (selected by an environment variable), the parent SIGKILLs the
//! child at random moments and reopens the log.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::copy_dir;
use crate::support::log::*;
use agentlog::log::{verify, Durability, Log, LogOptions};

const APPEND_CHILD: &str = "AGENTLOG_TEST_APPEND_CHILD";
const COMPACT_CHILD: &str = "AGENTLOG_TEST_COMPACT_CHILD";
/// Records in the compaction base log.
const N: u64 = 12_000;

fn child_opts() -> LogOptions {
    LogOptions {
        segment_size: 64 * 1024,
        max_record_size: 4096,
        flush_interval: Some(Duration::from_millis(5)),
        ..Default::default()
    }
}

/// Child mode: append durable records (singles and batches) forever,
/// printing each acknowledged LSN.
#[test]
fn append_child() {
    let Ok(dir) = std::env::var(APPEND_CHILD) else {
        return;
    };
    let (log, _) = Log::open(Path::new(&dir), child_opts()).unwrap();
    let out = std::io::stdout();
    loop {
        let next = log.next_lsn();
        if next % 5 == 0 {
            let (a, b, c) = (payload(next), payload(next + 1), payload(next + 2));
            let r = log
                .append_batch(&[&a, &b, &c], Durability::Durable)
                .unwrap();
            writeln!(out.lock(), "ACK {} {}", r.start(), r.end()).unwrap();
        } else {
            let lsn = log.append(&payload(next), Durability::Durable).unwrap();
            writeln!(out.lock(), "ACK {lsn} {lsn}").unwrap();
        }
        out.lock().flush().unwrap();
    }
}

/// Child mode: compact everything sealed, keeping LSNs not divisible by 3.
#[test]
fn compact_child() {
    let Ok(dir) = std::env::var(COMPACT_CHILD) else {
        return;
    };
    let (log, _) = Log::open(Path::new(&dir), child_opts()).unwrap();
    println!("OPEN");
    let t = std::time::Instant::now();
    let out = log
        .compact_sealed(u64::MAX, &mut |lsn, _| lsn % 3 != 0)
        .unwrap();
    println!("DONE {} {:?}", out.generation, t.elapsed());
}

fn spawn_child(test: &str, var: &str, dir: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .arg(crate::support::test_name(module_path!(), test))
        .args(["--exact", "--nocapture", "--test-threads=1"])
        .env(var, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Collect the child's stdout lines in the background.
fn collect(
    child: &mut std::process::Child,
) -> (Arc<Mutex<Vec<String>>>, std::thread::JoinHandle<()>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l2 = lines.clone();
    let stdout = child.stdout.take().unwrap();
    let h = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            l2.lock().unwrap().push(line);
        }
    });
    (lines, h)
}

#[test]
fn sigkill_during_durable_appends_loses_nothing_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut rng = Rng(0xC0FFEE);
    let mut acked_max = 0u64;
    let mut cuts = 0;
    for iter in 0..50 {
        let mut child = spawn_child("append_child", APPEND_CHILD, &dir);
        let (lines, h) = collect(&mut child);
        std::thread::sleep(Duration::from_millis(5 + rng.below(40)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        h.join().unwrap();
        for l in lines.lock().unwrap().iter() {
            if let Some(rest) = l.strip_prefix("ACK ") {
                let end: u64 = rest.split(' ').nth(1).unwrap().parse().unwrap();
                acked_max = acked_max.max(end);
            }
        }
        let (log, rep) =
            Log::open(&dir, child_opts()).unwrap_or_else(|e| panic!("iteration {iter}: {e}"));
        cuts += rep.cut.len();
        let recs = read_all(&log);
        let last = recs.last().map(|r| r.0).unwrap_or(0);
        assert!(
            last >= acked_max,
            "iteration {iter}: acknowledged {acked_max} but log ends at {last}"
        );
        for (i, (lsn, p)) in recs.iter().enumerate() {
            assert_eq!(*lsn, i as u64 + 1);
            assert_eq!(p, &payload(*lsn), "iteration {iter}: lsn {lsn}");
        }
        drop(log);
        let v = verify(&dir).unwrap();
        assert!(v.is_clean(), "iteration {iter}: {:?}", v.bad);
        assert_eq!(v.last_lsn, Some(last).filter(|&l| l > 0));
        acked_max = last;
    }
    // Appends continue after the last crash.
    let (log, _) = Log::open(&dir, child_opts()).unwrap();
    let lsn = log
        .append(&payload(log.next_lsn()), Durability::Durable)
        .unwrap();
    assert_eq!(lsn, acked_max + 1);
    eprintln!("50 SIGKILLs: {acked_max} records acknowledged, {cuts} torn tails cut");
    assert!(acked_max > 50, "children made progress");
}

#[test]
fn sigkill_during_compaction_gives_old_or_new_never_a_mix() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let (log, _) = Log::open(&base, child_opts()).unwrap();
    for lsn in 1..=N {
        log.append(&payload(lsn), Durability::Lazy).unwrap();
    }
    log.seal_active().unwrap();
    let sealed_end = log.sealed_end_lsn();
    assert_eq!(sealed_end, N + 1);
    log.close().unwrap();
    let mut rng = Rng(0xBADC0DE);
    let (mut old, mut new) = (0, 0);
    for iter in 0..30 {
        let dir = tmp.path().join(format!("c{iter}"));
        copy_dir(&base, &dir);
        let mut child = spawn_child("compact_child", COMPACT_CHILD, &dir);
        let (lines, h) = collect(&mut child);
        // Wait for the child to open the log, then kill it a little later.
        while !lines.lock().unwrap().iter().any(|l| l.ends_with("OPEN")) {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        std::thread::sleep(Duration::from_micros(rng.below(150_000)));
        child.kill().unwrap();
        child.wait().unwrap();
        h.join().unwrap();
        let (log, _) =
            Log::open(&dir, child_opts()).unwrap_or_else(|e| panic!("iteration {iter}: {e}"));
        let recs: BTreeMap<u64, Vec<u8>> = read_all(&log).into_iter().collect();
        let full = recs.len() as u64 == N;
        let compacted = recs.len() as u64 == N - N / 3;
        assert!(
            full || compacted,
            "iteration {iter}: a mix: {} records",
            recs.len()
        );
        for (lsn, p) in &recs {
            assert_eq!(p, &payload(*lsn));
            assert!(
                full || lsn % 3 != 0,
                "iteration {iter}: lsn {lsn} should be compacted away"
            );
        }
        let st = log.stats();
        assert_eq!(st.generation, u64::from(compacted));
        // Only the current generation's directory remains.
        let gens = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_str()
                    .unwrap()
                    .starts_with("gen-")
            })
            .count();
        assert_eq!(gens, usize::from(compacted), "iteration {iter}");
        assert_eq!(log.append(b"more", Durability::Durable).unwrap(), N + 1);
        drop(log);
        assert!(verify(&dir).unwrap().is_clean());
        if compacted {
            new += 1
        } else {
            old += 1
        }
    }
    eprintln!("compaction kills: {old} old, {new} new");
}
