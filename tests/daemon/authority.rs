//! Paths travel as authority, not as names (issue 30, findings 9 and 10): no
//! peer but the daemon's own uid makes the daemon open or create a file it
//! names (an observer's `replay --export`, a writer's `export --out` or
//! `import FILE`); the agentlog CLI opens such files itself; and what an
//! import reads is bounded: a device or a FIFO never holds the daemon.
//! The cross-uid cases run as uid 65534 (`nobody`); they need root.

use crate::support::daemon::{bin, Conn, Daemon, Store};
use serde_json::{json, Value};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;

fn needs_root() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test switches to uid {NOBODY} and needs root"
    );
}

/// Lets any uid reach the socket and read the store (as a group-shared
/// store lets its group): the daemon, not the file mode, decides writes.
fn open_up(s: &Store) {
    std::fs::set_permissions(s.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut todo = vec![s.dir.clone()];
    while let Some(p) = todo.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        let mode = if m.is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            0o755
        } else if m.file_type().is_socket() {
            0o666
        } else {
            0o644
        };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// Sends `requests` on one raw connection as uid `uid`; the replies.
fn talk_as(uid: u32, socket: &Path, requests: &[Value]) -> Vec<Value> {
    let talk = r#"
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rw")
for req in json.loads(sys.argv[2]):
    f.write(json.dumps(req) + "\n"); f.flush(); print(f.readline().strip())
"#;
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(talk)
        .arg(socket)
        .arg(serde_json::to_string(requests).unwrap())
        .uid(uid)
        .gid(uid)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs the CLI as `nobody` on the store.
fn cli_as_nobody(s: &Store, args: &[&str]) -> std::process::Output {
    bin()
        .arg("--dir")
        .arg(&s.dir)
        .args(args)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap()
}

/// A folder only root may enter, holding a root-only file.
fn root_only(s: &Store) -> (std::path::PathBuf, std::path::PathBuf) {
    let vault = s.tmp.path().join("vault");
    std::fs::create_dir(&vault).unwrap();
    std::fs::set_permissions(&vault, std::fs::Permissions::from_mode(0o700)).unwrap();
    let secret = vault.join("secret.json");
    std::fs::write(&secret, b"root-only").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    (vault, secret)
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn an_observer_cannot_make_the_daemon_write_a_file() {
    needs_root();
    let s = Store::new();
    s.ok(&["register", "w1", "--provider", "claude", "--cwd", "/w"]);
    let _d = Daemon::start(&s.dir, &[]);
    open_up(&s);
    let (vault, secret) = root_only(&s);
    let replies = talk_as(
        NOBODY,
        &s.socket(),
        &[json!({"id": 1, "method": "replay", "params": {"lsn": "1", "export": secret}})],
    );
    assert_eq!(replies[0]["error"]["code"], "forbidden", "{replies:?}");
    let msg = replies[0]["error"]["message"].as_str().unwrap();
    assert!(msg.contains("`export`") && msg.contains("65534"), "{msg}");
    assert_eq!(std::fs::read(&secret).unwrap(), b"root-only");
    assert_eq!(
        names_in(&vault),
        ["secret.json"],
        "nothing created beside it"
    );
    // The same replay without a path is an observer's right.
    let replies = talk_as(
        NOBODY,
        &s.socket(),
        &[json!({"id": 2, "method": "replay", "params": {"lsn": "1"}})],
    );
    assert!(replies[0]["result"].is_object(), "{replies:?}");
    // The CLI's `replay --export` as nobody writes the file itself, as
    // nobody, where nobody may write; in the vault it is refused by the
    // kernel, not carried out by the daemon.
    let drop_box = s.tmp.path().join("drop");
    std::fs::create_dir(&drop_box).unwrap();
    std::fs::set_permissions(&drop_box, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mine = drop_box.join("replayed.json");
    let out = cli_as_nobody(
        &s,
        &["replay", "--lsn", "1", "--export", mine.to_str().unwrap()],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::metadata(&mine).unwrap().uid(), NOBODY);
    let out = cli_as_nobody(
        &s,
        &["replay", "--lsn", "1", "--export", secret.to_str().unwrap()],
    );
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(std::fs::read(&secret).unwrap(), b"root-only");
    assert_eq!(names_in(&vault), ["secret.json"]);
}

#[test]
fn an_allowed_writer_names_no_path_the_daemon_opens() {
    needs_root();
    let s = Store::new();
    s.ok(&["register", "w1", "--provider", "claude", "--cwd", "/w"]);
    let _d = Daemon::start(&s.dir, &["--allow-uid", &NOBODY.to_string()]);
    open_up(&s);
    let (vault, secret) = root_only(&s);
    // A registry file only root may read, which the daemon (root) could.
    let registry = vault.join("registry.json");
    s.ok(&["export", "--out", registry.to_str().unwrap()]);
    let before = names_in(&vault);
    let replies = talk_as(
        NOBODY,
        &s.socket(),
        &[
            json!({"id": 1, "method": "export", "params": {"out": secret}}),
            json!({"id": 2, "method": "import", "params": {"file": registry}}),
        ],
    );
    for r in &replies {
        assert_eq!(r["error"]["code"], "forbidden", "{replies:?}");
    }
    assert_eq!(std::fs::read(&secret).unwrap(), b"root-only");
    assert_eq!(names_in(&vault), before);
    assert_eq!(
        s.ok(&["--json", "log"]).lines().count(),
        1,
        "nothing imported"
    );
    // Through the CLI an allowed writer's import sends the file's content:
    // it works for a file nobody may read, and names that file.
    let theirs = s.tmp.path().join("theirs.json");
    let other = Store::new();
    other.ok(&["register", "r9", "--provider", "codex", "--cwd", "/r"]);
    other.ok(&["export", "--out", theirs.to_str().unwrap()]);
    for f in [theirs.clone(), s.tmp.path().join("theirs.json.lock")] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let out = cli_as_nobody(&s, &["import", theirs.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("imported 1 agents from") && text.contains("theirs.json"),
        "{text}"
    );
    let log = s.ok(&["--json", "log"]);
    let last: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["origin"]["uid"], json!(NOBODY), "{last}");
    // A file the user cannot read is refused by the kernel, in the client.
    let out = cli_as_nobody(&s, &["import", registry.to_str().unwrap()]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{out:?}"
    );
    // `export --out` through the CLI writes as the user.
    let drop_box = s.tmp.path().join("drop");
    std::fs::create_dir(&drop_box).unwrap();
    std::fs::set_permissions(&drop_box, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mine = drop_box.join("registry.json");
    let out = cli_as_nobody(&s, &["export", "--out", mine.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::metadata(&mine).unwrap().uid(), NOBODY);
}

/// The reply to `req` on a fresh raw connection, failing after `within`.
fn reply_within(dir: &Path, req: Value, within: Duration) -> Value {
    let mut c = Conn::connect(dir);
    c.reader.get_ref().set_read_timeout(Some(within)).unwrap();
    c.send(&req);
    let mut line = String::new();
    let read = std::io::BufRead::read_line(&mut c.reader, &mut line);
    assert!(
        matches!(read, Ok(n) if n > 0),
        "no reply to {req} within {within:?}: {read:?}"
    );
    serde_json::from_str(&line).unwrap()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn an_import_through_the_daemon_reads_a_bounded_regular_file() {
    let s = Store::new();
    let d = Daemon::start(&s.dir, &[]);
    let fifo = s.tmp.path().join("fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    // The owner may name a path, but only a regular file is opened: a
    // device or a FIFO with no writer is refused at once.
    for input in [Path::new("/dev/zero"), fifo.as_path()] {
        let started = Instant::now();
        let req = json!({"id": 1, "method": "import", "params": {"file": input}});
        let reply = reply_within(&s.dir, req, Duration::from_secs(10));
        let msg = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains("not a regular file"), "{reply}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    // The CLI reads such an input itself, bounded: /dev/zero is refused at
    // the import limit, in the client, and the daemon never grows.
    let started = Instant::now();
    let out = s.run(&["import", "/dev/zero"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/dev/zero") && err.contains("256 MiB"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(
        rss_kib(d.pid()) < 200 << 10,
        "daemon RSS {} KiB",
        rss_kib(d.pid())
    );
    // A FIFO the CLI reads and sends: the import lands, naming the FIFO.
    let other = Store::new();
    other.ok(&["register", "r9", "--provider", "codex", "--cwd", "/r"]);
    let registry = other.tmp.path().join("r.json");
    other.ok(&["export", "--out", registry.to_str().unwrap()]);
    let feeder = {
        let (fifo, registry) = (fifo.clone(), registry.clone());
        std::thread::spawn(move || {
            let bytes = std::fs::read(registry).unwrap();
            std::fs::write(fifo, bytes).unwrap();
        })
    };
    let text = s.ok(&["import", fifo.to_str().unwrap()]);
    feeder.join().unwrap();
    assert!(
        text.contains("imported 1 agents from") && text.contains("fifo"),
        "{text}"
    );
    assert!(s.ok(&["list"]).contains("r9"));
}
