//! The writer daemon (`agentlog serve`) and its protocol (PROTOCOL.md).
//!
//! One process owns the [`Store`] (and its writer lock) and serves
//! newline-delimited JSON over a Unix socket in the store directory:
//! [`server`] binds the socket and runs the periodic duties and the graceful
//! shutdown, `conn` runs one connection's requests in order, `frame`
//! splits lines under a length limit, [`access`] decides who may write,
//! [`watch`] streams the log, `durable` shares fsyncs among the hot path's
//! durable writes, and [`client`] is the blocking client. The
//! operation methods themselves are supplied by a [`Dispatch`] (the CLI's
//! commands, so a reply is what the CLI would print).
//!
//! Invariants: responses on a connection come in request order; a durable
//! write is answered only after the fsync that covers it (blocking calls run
//! on tokio's blocking pool, so concurrent connections share fsyncs through
//! the log's group commit); nothing a client does blocks the writer.

mod accept;
pub mod access;
pub(crate) mod blocking;
pub mod client;
pub(crate) mod conn;
mod deadline;
mod durable;
mod error;
pub(crate) mod frame;
pub(crate) mod heartbeat;
mod http;
pub mod reach;
mod replica;
pub mod server;
pub mod watch;

pub use error::{ServeError, ServeResult};
pub use http::auth::token_path as http_token_path;
pub use replica::ReplicaOptions;

use crate::model::Agent;
use crate::registry::codec::Origin;
use crate::registry::{Event, Lsn};
use crate::store::Store;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The protocol version `hello` reports.
pub const PROTOCOL_VERSION: u32 = 1;
/// The socket's file name in the store directory.
pub const SOCKET_NAME: &str = "agentlog.sock";

/// The socket of the store in `dir`.
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_NAME)
}

/// Stable error codes (PROTOCOL.md, "Errors").
pub mod code {
    pub const PARSE_ERROR: &str = "parse_error";
    pub const BAD_REQUEST: &str = "bad_request";
    pub const UNKNOWN_METHOD: &str = "unknown_method";
    pub const USAGE: &str = "usage";
    pub const FORBIDDEN: &str = "forbidden";
    pub const REFUSED: &str = "refused";
    pub const NOT_FOUND: &str = "not_found";
    pub const FAILED: &str = "failed";
    pub const LINE_TOO_LONG: &str = "line_too_long";
    pub const TOO_MANY_CONNECTIONS: &str = "too_many_connections";
    pub const IDLE_TIMEOUT: &str = "idle_timeout";
    pub const SHUTTING_DOWN: &str = "shutting_down";
    /// HTTP only: a path that shows registry data, without the token (401).
    pub const UNAUTHORIZED: &str = "unauthorized";
    /// HTTP only: a `Host` that does not name this server (421).
    pub const MISDIRECTED: &str = "misdirected";
    /// Internal, never sent: a waiting `read` woken for mail that another
    /// reader took first; the daemon waits again ([`super::watch`]).
    pub const MAIL_TAKEN: &str = "mail_taken";
}

/// An error reply: stable code, the CLI's message, the CLI's exit status.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ErrorReply {
    pub code: String,
    pub message: String,
    pub exit: u8,
}

impl ErrorReply {
    pub fn new(code: &str, message: impl Into<String>, exit: u8) -> Self {
        ErrorReply {
            code: code.to_string(),
            message: message.into(),
            exit,
        }
    }

    /// The reply for a failed operation: `usage` (exit 2) when `usage` says
    /// so, `refused` when the registry refused it, else `failed`; the message
    /// is [`one_line`].
    pub fn from_error(e: &(dyn std::error::Error + 'static), usage: bool) -> Self {
        let refused = causes(e).any(|c| {
            c.downcast_ref::<crate::registry::RegistryError>().is_some()
                || matches!(
                    c.downcast_ref::<crate::store::StoreError>(),
                    Some(crate::store::StoreError::Registry(_))
                )
        });
        let (code, exit) = match (usage, refused) {
            (true, _) => (code::USAGE, 2),
            (false, true) => (code::REFUSED, 1),
            (false, false) => (code::FAILED, 1),
        };
        ErrorReply::new(code, one_line(e), exit)
    }
}

/// The outcome of an operation method: a result and the CLI's exit status
/// for it (non-zero only for a report of damage), or an error.
pub type Outcome = Result<(Value, u8), ErrorReply>;

/// The error and its causes on one line, `outer: inner`, leaving out a cause
/// whose text the line already carries (many errors embed their source). The
/// CLI prints exactly this after `agentlog: `.
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = String::new();
    for cause in causes(e) {
        let msg = cause.to_string();
        if line.contains(&msg) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&msg);
    }
    line.replace('\n', "; ")
}

/// `e` and its sources, outermost first.
fn causes<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |c| c.source())
}

/// The peer of a connection (SO_PEERCRED).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Peer {
    pub uid: u32,
    pub gid: u32,
    pub pid: Option<u32>,
}

impl Peer {
    /// The origin recorded on the events this peer asks for.
    pub fn origin(&self) -> Origin {
        Origin {
            uid: self.uid,
            pid: self.pid.unwrap_or(0),
        }
    }
}

/// The operation methods and the JSON forms of events and rows, supplied by
/// the application (the CLI), so replies match its `--json` output.
pub trait Dispatch: Send + Sync + 'static {
    /// Whether `method` is an operation method.
    fn knows(&self, method: &str) -> bool;
    /// Whether `method` only reads (an observer may call it).
    fn read_only(&self, method: &str) -> bool;
    /// Whether an observer may call `method`, which writes, with `params`
    /// because the command authorizes its caller itself (an observer lease,
    /// a detach bound to the caller's uid). Default: never.
    fn open_to_observers(&self, _method: &str, _params: &Map<String, Value>) -> bool {
        false
    }
    /// Runs `method` against the store (blocking; called on a blocking
    /// thread, inside [`crate::store::with_origin`] for writes).
    fn call(&self, store: &Arc<Store>, method: &str, params: &Map<String, Value>) -> Outcome;
    /// An event as `watch` sends it (`log --json`'s object).
    fn event_json(&self, lsn: Lsn, event: &Event, origin: Option<Origin>) -> Value;
    /// An agent row as `watch` changes carry it (`list --json`'s row).
    fn agent_json(&self, agent: &Agent) -> Value;
    /// The parameter of `method` that names a file the daemon would open
    /// or create, if `params` has one: allowed only for the daemon's own uid
    /// ([`access::Access::may_name_paths`]).
    fn path_param(&self, _method: &str, _params: &Map<String, Value>) -> Option<String> {
        None
    }
    /// The usage error the CLI grammar gives `params` of `method`, if it
    /// refuses them; nothing runs. The daemon answers a heartbeat itself
    /// (`heartbeat.rs`) and asks this only for one it cannot decode, so the
    /// refusal stays in the CLI's words. Default: none.
    fn refusal(&self, _method: &str, _params: &Map<String, Value>) -> Option<ErrorReply> {
        None
    }
    /// What the CLI prints for a write `what` of `agent` applied at `lsn`
    /// (with `json`, what `--json` prints): the text of a heartbeat's
    /// `render: "text"` reply.
    fn applied_text(&self, agent: &str, lsn: Lsn, what: &str, json: bool) -> String;
}

/// Settings of `agentlog serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Longest request line accepted (bytes).
    pub max_line: usize,
    /// Socket connections of peers that may write (the owner, root, the
    /// allowed uids and gids). `serve` sizes it to the descriptors available.
    pub max_connections: usize,
    /// Socket connections of observers (peers that may not write), apart:
    /// observers never take a writer's place.
    pub max_observers: usize,
    /// Open watches (socket `watch` and HTTP `/api/events`).
    pub max_watchers: usize,
    /// Open HTTP connections (`serve --http`).
    pub http_max_connections: usize,
    /// Open HTTP event streams (`/api/events`, `/api/heartbeats`).
    pub max_sse: usize,
    /// Close a connection with no request for this long (not while watching).
    pub idle_timeout: Duration,
    /// Close a connection whose peer reads nothing for this long while a
    /// reply waits to be written (every connection, socket and HTTP).
    pub write_timeout: Duration,
    /// An HTTP request's headers must arrive within this; a kept-alive
    /// HTTP connection with no next request closes after it.
    pub http_idle_timeout: Duration,
    /// Names besides IP literals and `localhost` that HTTP's `Host` may use.
    pub http_hosts: Vec<String>,
    /// How long shutdown waits for connections to finish the request in
    /// hand before it closes them (the final sync and export follow).
    pub drain: Duration,
    /// Items a watcher may have unsent before it gets `lagged`.
    pub watch_buffer: usize,
    pub sweep_every: Option<Duration>,
    /// Republish `registry.json` after a change (agentlog's or another
    /// writer's) at most this often.
    pub publish_every: Option<Duration>,
    /// Longest wait at shutdown for the registry locks another writer holds
    /// (the log is durable by then: a late publish is a warning, not a
    /// failure).
    pub publish_lock_wait: Duration,
    pub compact_every: Option<Duration>,
    /// Uids and gids allowed to write besides the daemon's uid and root.
    pub allow_uids: Vec<u32>,
    pub allow_gids: Vec<u32>,
    /// Socket mode (0o600; 0o660 for a group-shared store).
    pub socket_mode: u32,
    /// Also serve metrics, health, the live page and `/api` over HTTP here
    /// (`serve --http`; off by default).
    pub http: Option<std::net::SocketAddr>,
    /// Replicated mode (`serve --nats`): the store mirrors the fleet's
    /// stream and every write goes through it (docs/scaling.md §4).
    pub replica: Option<ReplicaOptions>,
    /// Probe agents' endpoints this often (`serve --probe-every`; `None`:
    /// never), each with this timeout (src/daemon/reach.rs).
    pub probe_every: Option<Duration>,
    pub probe_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            max_line: 1 << 20,
            max_connections: 4096,
            max_observers: 256,
            max_watchers: 1024,
            http_max_connections: 256,
            max_sse: 64,
            idle_timeout: Duration::from_secs(300),
            write_timeout: Duration::from_secs(5),
            http_idle_timeout: Duration::from_secs(10),
            http_hosts: Vec::new(),
            drain: Duration::from_secs(5),
            watch_buffer: 4096,
            sweep_every: Some(Duration::from_secs(5)),
            publish_every: Some(Duration::from_secs(1)),
            publish_lock_wait: Duration::from_secs(30),
            compact_every: Some(Duration::from_secs(10)),
            allow_uids: Vec::new(),
            allow_gids: Vec::new(),
            socket_mode: 0o600,
            http: None,
            replica: None,
            probe_every: Some(Duration::from_secs(30)),
            probe_timeout: Duration::from_secs(2),
        }
    }
}
