//! Shared harness of the CLI integration tests: run the built `agentlog`
//! binary in a temporary store directory and capture exit code and output.

#![allow(dead_code)] // each test crate uses a different part of the harness

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentlog"));
    c.env_remove("AGENTLOG_DIR").env_remove("AGENTLOG_LOG");
    c
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
    use agentlog::log::{Durability, Log, LogOptions};
    let opts = LogOptions {
        segment_size: 4 << 20,
        max_record_size: 64 << 10,
        flush_interval: None,
        ..Default::default()
    };
    // As `init` makes it: private (an open store draws a warning).
    agentlog::files::create_store_dir(dir, agentlog::files::Sharing::Private).expect("store dir");
    let (log, _) = Log::open(&dir.join("log"), opts).expect("open log");
    for e in events {
        log.append(&agentlog::registry::encode(e), Durability::Lazy)
            .expect("append");
    }
    log.close().expect("close (syncs)");
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
