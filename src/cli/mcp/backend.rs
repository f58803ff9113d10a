//! One store command for the MCP server, run exactly as the CLI runs it:
//! through the daemon when one serves the store (the protocol's method and
//! parameters, answered with the command's `--json` document), else
//! directly (the same parameters turned into the CLI's argument vector,
//! parsed with the same clap grammar, run with output to a buffer). Either
//! way a refused command comes back as the CLI's one-line message, never as
//! a failure of the server.
//!
//! Calls block (the daemon client and the store are synchronous): the
//! server runs them on tokio's blocking pool. A waiting read can be
//! cancelled from another thread ([`Cancel`]): through a daemon its
//! connection is shut down, which the daemon takes as the client gone and
//! records no receipt; directly it waits in short slices and stops between
//! two, so mail that arrives after the cancellation stays unread.

use crate::cli::args::Cli;
use crate::cli::cmd::run_command;
use crate::cli::output::{self, Ui};
use crate::cli::remote::argv_of;
use agentlog::daemon::client::{Client, ClientError};
use clap::{CommandFactory, FromArgMatches};
use serde_json::{json, Map, Value};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How one command ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Its `--json` document.
    Done(Value),
    /// Refused (or failed): the CLI's one-line message.
    Refused(String),
    /// A waiting read cancelled by the client before it delivered anything.
    Cancelled,
}

/// The longest slice of a direct waiting read: how soon a cancellation
/// takes effect without a daemon (mail still wakes a slice within the
/// direct wait's few milliseconds).
const DIRECT_WAIT_SLICE: Duration = Duration::from_millis(100);

/// The store the server serves, and the CLI grammar its direct calls parse
/// with (built once: building it costs more than a small command).
pub struct Backend {
    dir: PathBuf,
    grammar: Mutex<clap::Command>,
}

impl Backend {
    pub fn new(dir: &Path) -> Backend {
        let mut grammar = Cli::command();
        grammar.build(); // assigns positional indices, as argv_of needs
        Backend {
            dir: dir.to_path_buf(),
            grammar: Mutex::new(grammar),
        }
    }

    /// Runs `method` (a protocol method: `register`, `status`, …) with
    /// `params` (keyed by the CLI's argument ids).
    pub fn call(&self, method: &str, params: &Map<String, Value>) -> Outcome {
        match Client::connect(&self.dir) {
            Ok(client) => through_daemon(client, method, params, None),
            Err(ClientError::NoDaemon(_)) => self.direct(method, params),
            Err(e) => Outcome::Refused(crate::cli::one_line(&e.into())),
        }
    }

    /// `read` with `wait`: blocks until mail or `wait` passes, or until
    /// `cancel` is set (then [`Outcome::Cancelled`], nothing marked read).
    pub fn read_waiting(
        &self,
        params: &Map<String, Value>,
        wait: Duration,
        cancel: &Cancel,
    ) -> Outcome {
        let mut params = params.clone();
        match Client::connect(&self.dir) {
            Ok(client) => {
                params.insert("wait".into(), json!(wait.as_secs_f64()));
                through_daemon(client, "read", &params, Some(cancel))
            }
            Err(ClientError::NoDaemon(_)) => {
                let deadline = Instant::now() + wait;
                loop {
                    if cancel.is_cancelled() {
                        return Outcome::Cancelled;
                    }
                    let left = deadline.saturating_duration_since(Instant::now());
                    let slice = left.min(DIRECT_WAIT_SLICE);
                    params.insert("wait".into(), json!(slice.as_secs_f64()));
                    let last = slice == left;
                    match self.direct("read", &params) {
                        Outcome::Done(page) if !last && page["timed_out"] == json!(true) => {}
                        other => return other,
                    }
                }
            }
            Err(e) => Outcome::Refused(crate::cli::one_line(&e.into())),
        }
    }

    /// The command run in this process on the store of `dir`, as `agentlog
    /// --json` would run it.
    fn direct(&self, method: &str, params: &Map<String, Value>) -> Outcome {
        let parsed = {
            let mut grammar = self.grammar.lock().unwrap_or_else(|e| e.into_inner());
            match argv_of(&grammar, &self.dir, method, params) {
                Ok(argv) => grammar
                    .try_get_matches_from_mut(&argv)
                    .and_then(|m| Cli::from_arg_matches(&m))
                    .map_err(|e| crate::cli::clap_message(&e)),
                Err(e) => Err(e),
            }
        };
        let cli = match parsed {
            Ok(cli) => cli,
            Err(message) => return Outcome::Refused(message),
        };
        let ui = Ui {
            json: true,
            quiet: true,
        };
        let mut buf = Vec::new();
        let (ran, _stderr) =
            output::capturing_errors(|| run_command(&mut buf, &ui, self.dir.clone(), cli.command));
        match ran {
            Ok(_) => Outcome::Done(document(&buf)),
            Err(e) => Outcome::Refused(crate::cli::one_line(&e)),
        }
    }
}

/// A command's `--json` output as one value (an object for every command
/// the tools run; anything else is kept as text).
fn document(buf: &[u8]) -> Value {
    serde_json::from_slice(buf)
        .unwrap_or_else(|_| json!({"text": String::from_utf8_lossy(buf).trim_end()}))
}

/// `method` through a connected daemon, as the CLI would send it (with
/// this process's stand-in clock, README "Time"); `cancel` may shut the
/// connection down while the call waits.
fn through_daemon(
    mut client: Client,
    method: &str,
    params: &Map<String, Value>,
    cancel: Option<&Cancel>,
) -> Outcome {
    let mut params = params.clone();
    if let Ok(now) = std::env::var("AGENTLOG_NOW") {
        params.insert("clock".into(), json!(now));
    }
    if let Some(cancel) = cancel {
        match client.shutdown_handle() {
            Ok(socket) => {
                if !cancel.attach(socket) {
                    return Outcome::Cancelled;
                }
            }
            Err(e) => return Outcome::Refused(crate::cli::one_line(&e.into())),
        }
    }
    let reply = client.call(method, Value::Object(params));
    if cancel.is_some_and(Cancel::is_cancelled) {
        return Outcome::Cancelled;
    }
    match reply {
        Ok(reply) => Outcome::Done(reply.result),
        Err(ClientError::Server(e)) => Outcome::Refused(e.message),
        Err(e) => Outcome::Refused(crate::cli::one_line(&e.into())),
    }
}

/// The cancellation of one waiting read, set from the server's async side.
#[derive(Debug, Default)]
pub struct Cancel {
    cancelled: AtomicBool,
    /// The daemon connection the read waits on, once it has one.
    socket: Mutex<Option<UnixStream>>,
}

impl Cancel {
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Cancels: a read waiting on a daemon connection is woken at once (the
    /// connection is shut down); a direct one stops after its slice.
    pub fn cancel(&self) {
        let mut socket = self.socket.lock().unwrap_or_else(|e| e.into_inner());
        self.cancelled.store(true, Ordering::SeqCst);
        if let Some(s) = socket.take() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Keeps `socket` to shut down on [`Cancel::cancel`]; false (and the
    /// socket shut down) when the cancellation came first.
    fn attach(&self, socket: UnixStream) -> bool {
        let mut slot = self.socket.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_cancelled() {
            let _ = socket.shutdown(std::net::Shutdown::Both);
            return false;
        }
        *slot = Some(socket);
        true
    }
}
