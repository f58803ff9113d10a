//! The read path after a crash and beside a writer, through the binary:
//! every read-only command on a torn tail, a bit-flipped LSN, readers
//! racing a writer and compaction, and `log --follow` across a seal.

use crate::support::cli::{bin, heartbeat, t, Env};
use crate::support::copy_dir;
use agentlog::internals::{record_size, CONT, LEN_MASK};
use agentlog::log::{Durability, Log, LogOptions};
use agentlog::registry::{encode, Event, EventKind, Registration, RegistrationKind};

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const SEGMENT_SIZE: u64 = 8192;

fn register(at: &str, name: &str) -> Event {
    Event {
        at: t(at),
        kind: EventKind::AgentRegistered {
            reg: Box::new(Registration::new(name, "claude", "/work/repo")),
            kind: RegistrationKind::New,
            host: None,
        },
    }
}

/// Appends `events` with small segments (so the log has sealed segments and
/// a newest one that copies cheaply).
fn write_log(dir: &Path, events: &[Event]) {
    write_log_in(dir, events, SEGMENT_SIZE)
}

fn write_log_in(dir: &Path, events: &[Event], segment_size: u64) {
    let opts = LogOptions {
        segment_size,
        max_record_size: 2048,
        flush_interval: None,
        ..Default::default()
    };
    let (log, _) = Log::open(&dir.join("log"), opts).expect("open log");
    for e in events {
        log.append(&encode(e), Durability::Lazy).expect("append");
    }
    log.close().expect("close");
}

fn newest_segment(dir: &Path) -> PathBuf {
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir.join("log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    segs.sort();
    segs.pop().expect("a segment")
}

/// (offset, lsn, end, last in batch) of every record of a segment's bytes.
fn records(bytes: &[u8]) -> Vec<(usize, u64, usize, bool)> {
    let mut out = Vec::new();
    let mut off = 64;
    while off + 16 <= bytes.len() {
        let lf = u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap());
        if lf == 0 {
            break;
        }
        let lsn = u64::from_le_bytes(bytes[off + 8..off + 16].try_into().unwrap());
        let end = off + record_size((lf & LEN_MASK) as usize);
        out.push((off, lsn, end, lf & CONT == 0));
        off = end;
    }
    out
}

/// alice's `last_active` as `list --json` shows it (alice is the only agent).
fn last_active(env: &Env, dir: &Path) -> String {
    let r = env.run_in(dir, &["--json", "list"]);
    let v = r.json();
    let agents = v["agents"].as_array().expect("agents");
    assert_eq!(agents.len(), 1, "{v}");
    agents[0]["last_active"]
        .as_str()
        .expect("last_active")
        .to_string()
}

fn last_logged_lsn(env: &Env, dir: &Path) -> u64 {
    let r = env.run_in(dir, &["--json", "log"]);
    let out = r.ok();
    out.lines()
        .last()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["lsn"]
                .as_u64()
                .unwrap()
        })
        .unwrap_or(0)
}

/// At every byte offset of the last three records, with the tail zeroed and
/// with the file truncated: `list`, `audit`, `replay`, `log`, `verify` and
/// `export` succeed on the valid prefix, and a writer then continues.
#[test]
fn torn_tail_sweep_through_every_read_only_command() {
    let env = Env::new();
    let base = env.path("base");
    let mut times = vec!["12:00:00".to_string()];
    for i in 0..400 {
        times.push(format!("12:{:02}:{:02}", 1 + i / 60, i % 60));
    }
    times.extend(["12:40:00", "12:41:00", "12:42:00"].map(String::from));
    let events: Vec<Event> = times
        .iter()
        .enumerate()
        .map(|(i, at)| {
            if i == 0 {
                register(at, "alice")
            } else {
                heartbeat(at, "alice")
            }
        })
        .collect();
    write_log(&base, &events);
    let seg = newest_segment(&base);
    assert_ne!(
        seg.file_name().unwrap(),
        "00000000000000000001.seg",
        "the log should have rotated at least once"
    );
    let orig = std::fs::read(&seg).unwrap();
    let recs = records(&orig);
    let last3 = &recs[recs.len() - 3..];
    let started = Instant::now();
    let mut cuts = 0;
    for cut in last3[0].0..last3[2].2 {
        for truncate in [false, true] {
            let dir = env.path(&format!("cut-{cut}-{truncate}"));
            copy_dir(&base, &dir);
            let seg_copy = dir.join("log").join(seg.file_name().unwrap());
            let mut bytes = orig.clone();
            if truncate {
                bytes.truncate(cut);
            } else {
                bytes[cut..].fill(0);
            }
            std::fs::write(&seg_copy, &bytes).unwrap();
            // A record survives the cut if its bytes are unchanged.
            let intact =
                |r: &(usize, u64, usize, bool)| bytes.get(r.0..r.2) == Some(&orig[r.0..r.2]);
            let whole = recs
                .iter()
                .filter(|r| intact(r) && r.3)
                .map(|r| r.1)
                .max()
                .unwrap();
            let torn = last3
                .iter()
                .any(|r| !intact(r) && bytes.get(r.0..).is_some_and(|b| b.iter().any(|&x| x != 0)));
            // A writer grows a truncated newest segment back with zeros, so it
            // also keeps a record of which only (already) zero bytes were cut.
            let mut grown = bytes.clone();
            grown.resize(orig.len(), 0);
            let writer_whole = recs
                .iter()
                .filter(|r| r.3 && grown[r.0..r.2] == orig[r.0..r.2])
                .map(|r| r.1)
                .max()
                .unwrap();
            let ctx = format!("cut at {cut} (truncated: {truncate})");

            let expected_active = format!("2026-11-30T{}Z", times[whole as usize - 1]);
            assert_eq!(last_active(&env, &dir), expected_active, "list, {ctx}");
            assert_eq!(last_logged_lsn(&env, &dir), whole, "log, {ctx}");
            env.run_in(&dir, &["audit", "alice"]).ok();
            env.run_in(&dir, &["replay", "--lsn", &whole.to_string()])
                .ok();
            let v = env.run_in(&dir, &["--json", "verify"]).json();
            assert_eq!(v["clean"], true, "verify, {ctx}: {v}");
            assert_eq!(v["last_lsn"], whole, "verify, {ctx}: {v}");
            assert_eq!(
                !v["torn_tail"].is_null(),
                torn,
                "verify torn tail, {ctx}: {v}"
            );
            // Read-only commands changed nothing.
            assert_eq!(std::fs::read(&seg_copy).unwrap(), bytes, "{ctx}");

            // A writer (export, then a heartbeat) continues on every few cuts.
            if cut % 4 == 0 || cut + 1 == last3[2].2 {
                let out = dir.join("out.json");
                let e = env.run_in(&dir, &["--json", "export", "--out", out.to_str().unwrap()]);
                assert_eq!(e.json()["rows"], 1, "export, {ctx}");
                env.run_in(
                    &dir,
                    &["heartbeat", "alice", "--at", "2026-11-30T13:00:00Z"],
                )
                .ok();
                assert_eq!(
                    last_logged_lsn(&env, &dir),
                    writer_whole + 1,
                    "writer continued, {ctx}"
                );
            }
            std::fs::remove_dir_all(&dir).unwrap();
            cuts += 1;
        }
    }
    assert!(cuts >= 2 * 3 * 16);
    eprintln!("{cuts} cuts in {:?}", started.elapsed());
}

/// A bit flipped in the LSN field of a middle record of the newest segment
/// is damage: `list` refuses it naming the expected LSN, instead of showing
/// the registry as of an early LSN with agents missing.
#[test]
fn flipped_lsn_bit_in_the_newest_segment_is_an_error_not_a_short_registry() {
    let env = Env::new();
    let mut events = vec![register("12:00:00", "alice")];
    for i in 0..300 {
        events.push(heartbeat(
            &format!("12:{:02}:{:02}", 1 + i / 60, i % 60),
            "alice",
        ));
    }
    events.push(register("12:20:00", "bob"));
    for i in 0..5 {
        events.push(heartbeat(&format!("12:21:{i:02}"), "bob"));
    }
    write_log(&env.dir, &events);
    assert_eq!(listed_names(&env), ["alice", "bob"]);
    let seg = newest_segment(&env.dir);
    let mut bytes = std::fs::read(&seg).unwrap();
    let recs = records(&bytes);
    assert!(recs.len() > 8, "bob's records are in the newest segment");
    let bob = recs[recs.len() - 6];
    bytes[bob.0 + 8] ^= 0x10; // the LSN field of bob's registration
    std::fs::write(&seg, &bytes).unwrap();

    let r = env.run(&["list"]);
    r.fails(1, &format!("lsn {}", bob.1));
    assert!(r.stderr.contains("corrupt"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "no registry shown: {}", r.stdout);
    let v = env.run(&["--json", "verify"]);
    assert_eq!(v.code, 1, "{}", v.stdout);
    let doc: serde_json::Value = serde_json::from_str(&v.stdout).unwrap();
    assert_eq!(
        doc["bad"][0]["lsn"], bob.1,
        "the expected lsn, not the flipped one: {doc}"
    );
}

fn listed_names(env: &Env) -> Vec<String> {
    let v = env.json(&["list"]);
    v["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect()
}

/// Polls `f` until it holds, at most `limit`.
fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// The time every CLI write of these tests is stamped with.
const AT: &str = "2026-11-30T12:00:00Z";

/// The reproduction from the report: `log --follow` while `heartbeat` and
/// `compact` seal the segment it maps. Sealing used to shrink the file under
/// the follower's map, which killed it with SIGBUS.
#[test]
fn log_follow_survives_seal_and_compaction() {
    use std::io::Read;
    let env = Env::with_agent("a", "/x", AT);
    env.ok(&["compact", "--now", "2026-11-30T12:00:00Z"]);
    let mut follower = bin()
        .arg("--dir")
        .arg(&env.dir)
        .args(["--json", "log", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn follower");
    let out_path = env.path("follow.out");
    let mut stdout = follower.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut chunk) {
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            std::fs::write(&out_path, &buf).unwrap();
        }
    });
    let lines = |env: &Env| {
        std::fs::read_to_string(env.path("follow.out"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    assert!(
        wait_for(Duration::from_secs(10), || lines(&env) >= 1),
        "follower printed the registration"
    );
    for round in 0..3 {
        env.ok(&["heartbeat", "a", "--at", AT]);
        env.ok(&["compact", "--now", "2026-11-30T12:00:00Z"]);
        let want = 2 + round;
        let seen = wait_for(Duration::from_secs(10), || lines(&env) >= want);
        if let Some(status) = follower.try_wait().unwrap() {
            let mut err = String::new();
            follower
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("the follower died ({status}) in round {round}: {err}");
        }
        assert!(seen, "the follower printed heartbeat {round}");
    }
    follower.kill().unwrap();
    follower.wait().unwrap();
    reader.join().unwrap();
}

/// Readers beside a writer: 200 `list` / `verify` / `log` runs while CLI
/// writers append and `compact` rotates, seals and swaps generations in a
/// loop. No false "corrupt", no signal, no wrong answer.
#[test]
fn readers_beside_a_writer_and_compaction() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let env = Env::with_agent("a", "/x", AT);
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for role in ["heartbeat", "compact"] {
        let stop = stop.clone();
        let dir = env.dir.clone();
        writers.push(std::thread::spawn(move || {
            let mut runs = 0u32;
            while !stop.load(Ordering::Acquire) {
                let mut c = bin();
                c.arg("--dir").arg(&dir);
                if role == "heartbeat" {
                    c.args(["heartbeat", "a", "--at", "2026-11-30T12:00:00Z"]);
                } else {
                    c.args(["compact", "--now", "2026-11-30T12:00:00Z"]);
                }
                let out = c.output().expect("run writer");
                // Writers may find the lock taken by the other one; nothing else.
                assert!(
                    out.status.code().is_some(),
                    "{role} killed by a signal: {:?}",
                    out.status
                );
                if !out.status.success() {
                    let err = String::from_utf8_lossy(&out.stderr);
                    assert!(err.contains("lock"), "{role} failed: {err}");
                }
                runs += 1;
            }
            runs
        }));
    }
    let mut last_seen = 0u64;
    for i in 0..200 {
        let (args, what): (&[&str], _) = match i % 3 {
            0 => (&["--json", "list"], "list"),
            1 => (&["--json", "verify"], "verify"),
            _ => (&["--json", "log"], "log"),
        };
        let r = env.run(args);
        assert!(r.code >= 0, "{what} killed by a signal: {}", r.stderr);
        assert_eq!(r.code, 0, "{what} failed: {}\n{}", r.stderr, r.stdout);
        match what {
            "list" => {
                let v = r.json();
                assert_eq!(v["agents"][0]["name"], "a", "{v}");
            }
            "verify" => {
                let v = r.json();
                assert_eq!(v["clean"], true, "{v}");
            }
            _ => {
                // Compaction keeps every event of the live agent: LSNs only grow.
                let last = r
                    .stdout
                    .lines()
                    .last()
                    .map(|l| {
                        serde_json::from_str::<serde_json::Value>(l).unwrap()["lsn"]
                            .as_u64()
                            .unwrap()
                    })
                    .unwrap_or(0);
                assert!(
                    last >= last_seen,
                    "log went back from {last_seen} to {last}"
                );
                last_seen = last;
            }
        }
    }
    stop.store(true, Ordering::Release);
    let runs: Vec<u32> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    assert!(runs.iter().all(|&n| n > 0), "both writers ran: {runs:?}");
}

/// Issue 30, finding 13: `verify` beside short-lived writers and `compact`
/// once reported a healthy log as damaged (`nonzero bytes after the
/// end-of-data marker`) about once in 500-1,500 runs: a writer that opened
/// during the scan, after the presence probe said none, was appending what
/// the scan judged. Here verify runs without pause, in-process, across
/// hundreds of writer opens and compactions; every scan must be clean.
#[test]
fn verify_beside_short_lived_writers_and_compact_finds_no_damage() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const WRITER_RUNS: u32 = 200;
    let env = Env::with_agent("a", "/x", AT);
    env.ok(&[
        "register",
        "b",
        "--provider",
        "codex",
        "--cwd",
        "/y",
        "--at",
        AT,
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let spawn = |args: Vec<&'static str>, bounded: bool| {
        let (stop, dir) = (stop.clone(), env.dir.clone());
        std::thread::spawn(move || {
            let mut runs = 0u32;
            while !(stop.load(Ordering::Acquire) || (bounded && runs == WRITER_RUNS)) {
                let out = bin().arg("--dir").arg(&dir).args(&args).output().unwrap();
                if !out.status.success() {
                    // Only the other writer's lock may stop one.
                    let err = String::from_utf8_lossy(&out.stderr);
                    assert!(err.contains("lock"), "{args:?} failed: {err}");
                }
                runs += 1;
            }
            runs
        })
    };
    let writers = [
        spawn(vec!["heartbeat", "a", "--at", "2026-11-30T12:00:00Z"], true),
        spawn(
            vec!["status", "b", "busy", "--at", "2026-11-30T12:00:00Z"],
            true,
        ),
    ];
    let compactor = spawn(vec!["compact", "--now", "2026-11-30T12:00:00Z"], false);
    let log_dir = env.dir.join("log");
    let mut scans = 0u64;
    while !writers.iter().all(|w| w.is_finished()) {
        let report = agentlog::log::verify(&log_dir).expect("verify beside writers");
        assert!(
            report.bad.is_empty() && report.torn_tail.is_none(),
            "scan {scans} judged a healthy log damaged: {report:?}"
        );
        scans += 1;
    }
    stop.store(true, Ordering::Release);
    for w in writers {
        assert_eq!(w.join().unwrap(), WRITER_RUNS);
    }
    assert!(compactor.join().unwrap() > 0, "compaction ran");
    println!(
        "{scans} scans beside {} writer runs: all clean",
        2 * WRITER_RUNS
    );
    assert_eq!(env.json(&["verify"])["clean"], true);
}

/// A power-loss hole (a zero page with valid records behind it) in the
/// newest segment: read-only commands refuse it as damage, and
/// `repair --cut-at-hole` cuts there, saying which LSNs it dropped.
#[test]
fn repair_cut_at_hole_after_a_power_loss() {
    let env = Env::new();
    let mut events = vec![register("12:00:00", "alice")];
    for i in 0..600 {
        events.push(heartbeat(
            &format!("12:{:02}:{:02}", 1 + i / 60, i % 60),
            "alice",
        ));
    }
    write_log_in(&env.dir, &events, 64 << 10);
    let seg = newest_segment(&env.dir);
    let mut bytes = std::fs::read(&seg).unwrap();
    let recs = records(&bytes);
    assert!(
        recs.last().unwrap().2 > 3 * 4096,
        "records span several pages"
    );
    let first_lost = recs.iter().find(|r| r.2 > 4096).unwrap().1;
    bytes[4096..8192].fill(0);
    std::fs::write(&seg, &bytes).unwrap();

    env.run(&["list"]).fails(1, &format!("lsn {first_lost}"));
    let v = env.run(&["verify"]);
    assert_eq!(v.code, 1, "{}", v.stdout);
    let out = env.ok(&["repair", "--cut-at-hole"]);
    assert!(
        out.contains("power-loss hole (zero page at offset 4096)"),
        "{out}"
    );
    assert!(out.contains("..=601)"), "names the dropped LSNs: {out}");
    assert!(
        out.contains(&format!("the log now ends at lsn {}", first_lost - 1)),
        "{out}"
    );
    assert_eq!(last_logged_lsn(&env, &env.dir), first_lost - 1);
    assert_eq!(env.json(&["verify"])["clean"], true);
}
