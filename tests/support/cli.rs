//! Shared harness of the CLI integration tests: run the built `agentlog`

//! binary in a temporary store directory and capture exit code and output.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;

/// `AGENTLOG_TEST_VIA_DAEMON=1` runs the CLI suites through a daemon: each
/// test store gets `agentlog serve` once it exists, so every command goes
/// through the socket; output and exit codes must not change.
fn via_daemon() -> bool {
    std::env::var_os("AGENTLOG_TEST_VIA_DAEMON").is_some_and(|v| v == "1")
}

/// The daemons this test process started, by store directory.
static DAEMONS: Mutex<Option<HashMap<PathBuf, Child>>> = Mutex::new(None);

/// Stores whose test needs the direct path (it holds the writer lock
/// itself, or checks the snapshot each direct write's close takes).
static DIRECT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Runs the rest of this test's commands on `dir` directly, even under
/// `AGENTLOG_TEST_VIA_DAEMON`.
pub fn direct_only(dir: &Path) {
    stop_daemon(dir);
    DIRECT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(dir.to_path_buf());
}

/// Starts a daemon for `dir` if the suites run through one, the store
/// exists and none runs yet; waits until it answers.
fn ensure_daemon(dir: &Path) {
    if !via_daemon() || !dir.join("log").is_dir() {
        return;
    }
    if DIRECT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|d| d == dir)
    {
        return;
    }
    let mut g = DAEMONS.lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    if map.contains_key(dir) {
        return;
    }
    let mut child = bin()
        .arg("--dir")
        .arg(dir)
        .args(["serve", "--sweep-every", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn agentlog serve");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(dir.join("agentlog.sock")).is_err() {
        // A store the daemon cannot open (damaged on purpose): the CLI
        // then runs directly, as it would for a user.
        if child.try_wait().expect("try_wait").is_some() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "daemon for {} did not start",
            dir.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    map.insert(dir.to_path_buf(), child);
}

/// Stops the daemon of `dir` (SIGTERM: a clean shutdown), if one runs.
pub fn stop_daemon(dir: &Path) {
    let child = DAEMONS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
        .and_then(|m| m.remove(dir));
    if let Some(mut c) = child {
        let pid = rustix::process::Pid::from_raw(c.id() as i32).expect("pid");
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let _ = c.wait();
    }
}

/// A temporary store directory and a way to run `agentlog --dir <it> …`.
pub struct Env {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
}

/// The captured result of one run.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The result of a finished command.
    pub fn from_output(out: Output) -> Run {
        Run::from(out)
    }

    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Asserts exit 0 and returns stdout.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert_eq!(
            self.code, 0,
            "expected success\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        &self.stdout
    }

    /// Asserts exit `code`, a single-line `agentlog: …` error containing
    /// `needle`, and no panic; returns stderr.
    #[track_caller]
    pub fn fails(&self, code: i32, needle: &str) -> &str {
        assert_eq!(
            self.code, code,
            "expected exit {code}\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        assert!(
            self.stderr.contains(needle),
            "stderr lacks `{needle}`:\n{}",
            self.stderr
        );
        assert!(!self.stderr.contains("panicked"), "panic: {}", self.stderr);
        assert!(
            !self.stderr.contains("RUST_BACKTRACE"),
            "backtrace hint: {}",
            self.stderr
        );
        let errors: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.starts_with("agentlog: "))
            .collect();
        assert_eq!(errors.len(), 1, "expected one error line:\n{}", self.stderr);
        &self.stderr
    }

    /// Parses stdout as one JSON document.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.ok())
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", self.stdout))
    }
}

/// The command line `register NAME --provider PROVIDER --cwd CWD --at AT`
/// followed by `extra` (`--pid`, `--project-root`, …): how the tests
/// register an agent through the CLI, whatever runs it ([`Env`],
/// [`super::daemon::Store`]).
pub fn register_args<'a>(
    name: &'a str,
    provider: &'a str,
    cwd: &'a str,
    at: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "register",
        name,
        "--provider",
        provider,
        "--cwd",
        cwd,
        "--at",
        at,
    ];
    args.extend_from_slice(extra);
    args
}

/// The built binary, with no store directory or log filter inherited
/// from the environment.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentlog"));
    c.env_remove("AGENTLOG_DIR").env_remove("AGENTLOG_LOG");
    c
}

impl Drop for Env {
    fn drop(&mut self) {
        stop_daemon(&self.dir);
    }
}

impl Env {
    /// A fresh temporary directory; the store lives in `<tmp>/store`.
    pub fn new() -> Env {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("store");
        Env { tmp, dir }
    }

    /// Runs `agentlog --dir <store> ARGS…`.
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_in(&self.dir, args)
    }

    /// Runs `agentlog --dir DIR ARGS…`.
    pub fn run_in(&self, dir: &Path, args: &[&str]) -> Run {
        if args.iter().any(|a| matches!(*a, "init" | "repair")) {
            stop_daemon(dir); // direct-only commands
        } else {
            ensure_daemon(dir);
        }
        let out = bin()
            .arg("--dir")
            .arg(dir)
            .args(args)
            .output()
            .expect("run agentlog");
        Run::from(out)
    }

    /// Runs `agentlog ARGS…` with no `--dir`.
    pub fn run_bare(&self, args: &[&str]) -> Run {
        Run::from(bin().args(args).output().expect("run agentlog"))
    }

    /// Runs and asserts success; returns stdout.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> String {
        self.run(args).ok().to_string()
    }

    /// Runs with `--json` and parses the document.
    #[track_caller]
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        self.run(&a).json()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// A fresh initialized store holding one agent: `NAME` (claude, working
    /// in `cwd`) registered at `at`.
    pub fn with_agent(name: &str, cwd: &str, at: &str) -> Env {
        let env = Env::new();
        env.ok(&["init"]);
        env.ok(&register_args(name, "claude", cwd, at, &[]));
        env
    }
}

/// Asserts that every existing schema-v4 reader accepts `file`, by the
/// project's own check run through the binary (`agentlog check`), which also
/// covers the command itself. Never skipped.
#[track_caller]
pub fn assert_accepted(file: &Path) {
    let out = bin()
        .arg("check")
        .arg(file)
        .args(["--expect-version", "4"])
        .output()
        .expect("run agentlog check");
    assert!(
        out.status.success(),
        "agentlog check rejected {}:\n{}{}",
        file.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Appends `events` (with their explicit times) to the log of the store at
/// `dir`, the way the store does, for tests of the read-only commands.
pub fn append_events(dir: &Path, events: &[agentlog::registry::Event]) {
    stop_daemon(dir);
    use agentlog::log::{Durability, Log, LogOptions};
    let opts = LogOptions {
        segment_size: 4 << 20,
        max_record_size: 64 << 10,
        flush_interval: None,
        ..Default::default()
    };
    // As `init` makes it: private (an open store draws a warning); an
    // existing directory keeps its mode.
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .expect("store dir");
    let (log, _) = Log::open(&dir.join("log"), opts).expect("open log");
    for e in events {
        log.append(&agentlog::registry::encode(e), Durability::Lazy)
            .expect("append");
    }
    log.close().expect("close (syncs)");
}

/// A heartbeat of `name` (no pid) at `2026-11-30T<at>Z`.
pub fn heartbeat(at: &str, name: &str) -> agentlog::registry::Event {
    agentlog::registry::Event {
        at: t(at),
        kind: agentlog::registry::EventKind::Heartbeat {
            agent: name.into(),
            pid: None,
        },
    }
}

/// `2026-11-30T<hh:mm:ss>Z`.
pub fn t(hms: &str) -> agentlog::time::Timestamp {
    agentlog::time::Timestamp::parse_rfc3339(&format!("2026-11-30T{hms}Z")).unwrap()
}

/// Runs `program args…` as the neighbour: uid/gid 65534 when the tests run as
/// root (they can then be told apart), else as this user.
pub fn as_neighbour(program: &str, args: &[&std::ffi::OsStr]) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut c = std::process::Command::new(program);
    c.args(args);
    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    if root {
        // std drops the supplementary groups when it changes the uid.
        c.uid(65534).gid(65534);
    }
    c.output().expect("run as the neighbour")
}
