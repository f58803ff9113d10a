//! Shared harness of the daemon tests: start `agentlog serve` on a fresh
//! store (always killed by `Drop`), raw protocol connections, and polling

//! with a bounded deadline instead of sleeps.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const NOW: &str = "2030-01-01T00:00:00Z";

/// The binary as [`super::cli::bin`] runs it, with the clock at [`NOW`].
pub fn bin() -> Command {
    let mut c = super::cli::bin();
    c.env("AGENTLOG_NOW", NOW);
    c
}

/// Polls `f` until it returns `Some`, failing after 20 s.
#[track_caller]
pub fn eventually<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    eventually_within(what, Duration::from_secs(20), f)
}

/// Polls `f` until it returns `Some`, failing after `within`.
#[track_caller]
pub fn eventually_within<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A store directory with an initialized store.
pub struct Store {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
}

impl Store {
    pub fn new() -> Store {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("store");
        let out = bin().arg("--dir").arg(&dir).arg("init").output().unwrap();
        assert!(out.status.success(), "{out:?}");
        Store { tmp, dir }
    }

    /// Runs `agentlog --dir <store> ARGS…`.
    pub fn run(&self, args: &[&str]) -> Output {
        bin()
            .arg("--dir")
            .arg(&self.dir)
            .args(args)
            .output()
            .unwrap()
    }

    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "agentlog {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("agentlog.sock")
    }
}

/// A running daemon; killed (SIGKILL) on drop unless stopped, and when the
/// thread that started it ends.
pub struct Daemon {
    pub child: Option<Child>,
    pub dir: PathBuf,
}

impl Daemon {
    /// Starts `agentlog serve` with `args` and waits until it answers
    /// (no periodic sweep unless `args` set `--sweep-every`). The daemon
    /// also dies with the calling thread, so a SIGKILLed test process
    /// leaves none behind: start it from the test's own thread.
    pub fn start(dir: &Path, args: &[&str]) -> Daemon {
        let quiet = (!args.contains(&"--sweep-every")).then_some(["--sweep-every", "0"]);
        let mut cmd = bin();
        // `AGENTLOG_DAEMON_LOG=FILTER`: the daemon logs at FILTER to a file
        // in the temporary directory (named on stderr), not to a pipe that
        // a chatty daemon would fill and block on.
        let stderr = match std::env::var("AGENTLOG_DAEMON_LOG") {
            Ok(filter) => {
                let path = std::env::temp_dir().join(format!(
                    "agentlog-daemon-{}-{}.log",
                    std::process::id(),
                    dir.display().to_string().replace('/', "_")
                ));
                eprintln!("daemon log: {}", path.display());
                cmd.env("AGENTLOG_LOG", filter);
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .expect("daemon log file");
                Stdio::from(f)
            }
            Err(_) => Stdio::piped(),
        };
        let child = agentlog::internals::die_with_spawning_thread(&mut cmd)
            .arg("--dir")
            .arg(dir)
            .arg("serve")
            .args(quiet.into_iter().flatten())
            .args(args)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn agentlog serve");
        let mut d = Daemon {
            child: Some(child),
            dir: dir.to_path_buf(),
        };
        eventually("the daemon to answer", || {
            if let Some(status) = d.child.as_mut().unwrap().try_wait().unwrap() {
                let mut err = String::new();
                if let Some(e) = d.child.as_mut().unwrap().stderr.as_mut() {
                    std::io::Read::read_to_string(e, &mut err).unwrap();
                }
                panic!("daemon exited early ({status}): {err}");
            }
            let mut c = Conn::try_connect(dir)?;
            let hello = c.call(json!({"id": 0, "method": "hello"}));
            (hello["result"]["pid"].as_u64() == Some(u64::from(d.pid()))).then_some(())
        });
        d
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn signal(&self, sig: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).unwrap();
        rustix::process::kill_process(pid, sig).unwrap();
    }

    /// SIGTERM and wait; returns the exit status and stderr.
    pub fn stop(mut self) -> (std::process::ExitStatus, String) {
        self.signal(rustix::process::Signal::TERM);
        let out = self.child.take().unwrap().wait_with_output().unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Waits for the daemon to exit (after a signal sent meanwhile); returns
    /// the exit status and stderr.
    pub fn wait(mut self) -> (std::process::ExitStatus, String) {
        let out = self.child.take().unwrap().wait_with_output().unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// SIGKILL and wait (leaves the socket file behind).
    pub fn kill(mut self) {
        let mut c = self.child.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A raw protocol connection.
pub struct Conn {
    pub reader: BufReader<UnixStream>,
    pub writer: UnixStream,
}

impl Conn {
    pub fn try_connect(dir: &Path) -> Option<Conn> {
        let s = UnixStream::connect(dir.join("agentlog.sock")).ok()?;
        Some(Conn {
            writer: s.try_clone().unwrap(),
            reader: BufReader::new(s),
        })
    }

    pub fn connect(dir: &Path) -> Conn {
        Conn::try_connect(dir).expect("connect to the daemon")
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    pub fn send(&mut self, doc: &Value) {
        let mut line = serde_json::to_vec(doc).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next response line, or `None` at end of stream.
    pub fn recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => Some(
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}")),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e) => panic!("read: {e}"),
        }
    }

    #[track_caller]
    pub fn call(&mut self, doc: Value) -> Value {
        self.send(&doc);
        self.recv().expect("a response")
    }
}

/// Registers `name` through the daemon.
pub fn register(c: &mut Conn, name: &str) -> Value {
    c.call(json!({"id": "reg", "method": "register", "params": {"name": name, "provider": "claude", "cwd": "/w", "at": NOW, "clock": NOW}}))
}
