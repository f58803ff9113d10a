//! The command-line grammar (clap derive): every subcommand, its flags and
//! their help text. Parsing only: values are typed here (times, statuses,
//! host modes) so a bad value is a usage error (exit 2) that names the value,
//! before any store is opened.

use agentlog::model::{HostMode, Priority, Privacy, Status};
use agentlog::time::Timestamp;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Parses a TIME argument (RFC 3339 UTC, e.g. `2026-11-30T12:00:00Z`).
fn time(s: &str) -> Result<Timestamp, String> {
    Timestamp::parse_rfc3339(s).map_err(|e| e.to_string())
}

#[derive(Debug, Parser)]
#[command(
    name = "agentlog",
    version,
    about = "An event-sourced, memory-mapped store for agent registries",
    long_about = "An event-sourced, memory-mapped store for agent registries.\n\n\
        Every registration, heartbeat, status change and message is an appended, \
        checksummed event; the registry is their fold. TIME values are RFC 3339 UTC \
        (2026-11-30T12:00:00Z).\n\nExit codes: 0 success, 1 a refused command or damage \
        found, 2 usage."
)]
pub struct Cli {
    /// The store directory [default: $AGENTLOG_DIR, else ~/.agentlog]
    #[arg(long, global = true, value_name = "DIR", env = "AGENTLOG_DIR")]
    pub dir: Option<PathBuf>,

    /// Print data as one JSON document (JSON lines for streams); no progress bars
    #[arg(long, global = true)]
    pub json: bool,

    /// Open the store directly even when a daemon serves it (a write then
    /// waits for the daemon's lock, up to --lock-timeout)
    #[arg(long, global = true)]
    pub no_daemon: bool,

    /// Seconds a direct writer waits for another writer's lock
    #[arg(long, global = true, value_name = "SECS", default_value_t = 5.0)]
    pub lock_timeout: f64,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create an empty store in DIR (mode 0700; 0750 with --group-shared)
    Init(Init),
    /// Register an agent (a renewal if the same live process registers again)
    Register(Register),
    /// Record that an agent is alive
    Heartbeat(Heartbeat),
    /// Set an agent's status
    Status(SetStatus),
    /// Update fields of a registered agent
    Update(Update),
    /// Remove an agent from the registry (its history stays until compaction)
    Remove(Remove),
    /// Post a message from an agent to one agent or to all; prints its id
    Post(Post),
    /// Print an agent's unread messages and mark them read
    Read(Read),
    /// Logical-session presence: open, heartbeat, close
    #[command(subcommand)]
    Sessions(Sessions),
    /// Expire leases and detect dead processes, recording why
    Sweep(Sweep),
    /// The current registry as a table
    List(List),
    /// The registry as it was at a time or LSN
    Replay(Replay),
    /// One agent's timeline, heartbeat runs collapsed
    Audit(Audit),
    /// The raw events, like a dump tool
    Log(LogCmd),
    /// Check every record's checksum; exit 1 if any is damaged
    Verify,
    /// Copy every valid record into a new store
    Repair(Repair),
    /// Write a snapshot of the folded state now
    Snapshot,
    /// Write the registry as schema-v4 registry.json
    Export(Export),
    /// Import a registry.json (schema 1 to 4)
    Import(Import),
    /// Drop retired agents and expired messages from sealed segments
    Compact(Compact),
    /// Events, agents by status, messages, segments, bytes, LSN range
    Stats,
    /// Run a simulated fleet end to end and show the result
    Demo(Demo),
    /// Serve the store to other processes over <DIR>/agentlog.sock (PROTOCOL.md)
    Serve(Serve),
    /// Stream events (or registry changes) from a running daemon
    Watch(Watch),
    /// Benchmarks (in a temporary directory unless --dir is given)
    #[command(subcommand)]
    Bench(Bench),
}

#[derive(Debug, Args)]
pub struct Init {
    /// Let the directory's group read the store and observe through the daemon
    #[arg(long)]
    pub group_shared: bool,
}

#[derive(Debug, Args)]
pub struct Serve {
    /// Also let this uid write (repeatable); others only observe
    #[arg(long, value_name = "UID")]
    pub allow_uid: Vec<u32>,
    /// Also let members of this gid write (repeatable)
    #[arg(long, value_name = "GID")]
    pub allow_gid: Vec<u32>,
    /// Longest request line, bytes
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub max_line: usize,
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub max_connections: usize,
    /// Close connections idle this long
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub idle_timeout: u64,
    /// Items a watcher may have unsent before it gets `lagged`
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub watch_buffer: usize,
    /// Seconds between sweeps (0: never)
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub sweep_every: u64,
    /// Republish registry.json after a change at most this often, ms (0: never)
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub publish_every_ms: u64,
}

#[derive(Debug, Args)]
pub struct Watch {
    /// First LSN to stream [default: only new events]
    #[arg(long, value_name = "LSN")]
    pub from: Option<u64>,
    /// Only events concerning this agent
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Only these event kinds (the `kind` of `log --json`; repeatable)
    #[arg(long, value_name = "KIND")]
    pub kind: Vec<String>,
    /// Registry changes (added/updated/removed) instead of events
    #[arg(long)]
    pub changes: bool,
}

#[derive(Debug, Args)]
pub struct At {
    /// Event time (RFC 3339 UTC) [default: $AGENTLOG_NOW, else the clock]
    #[arg(long, value_name = "TIME", value_parser = time, env = "AGENTLOG_NOW")]
    pub at: Option<Timestamp>,
}

#[derive(Debug, Args)]
pub struct Register {
    pub name: String,
    /// Provider (claude, codex, gemini, …)
    #[arg(long)]
    pub provider: String,
    /// Working directory of the agent
    #[arg(long)]
    pub cwd: String,
    #[arg(long)]
    pub pid: Option<u32>,
    /// Process start time (Linux /proc/<pid>/stat field 22)
    #[arg(long, value_name = "N")]
    pub pid_start_time: Option<u64>,
    #[arg(long)]
    pub role: Option<String>,
    /// Parent agent (makes this a child agent)
    #[arg(long, value_name = "NAME")]
    pub parent: Option<String>,
    #[arg(long, value_name = "P")]
    pub project_root: Option<String>,
    #[arg(long, value_name = "P")]
    pub log_path: Option<String>,
    /// exec or interactive
    #[arg(long, value_name = "MODE")]
    pub host_mode: Option<HostMode>,
    #[arg(long, value_name = "S")]
    pub short_id: Option<String>,
    #[command(flatten)]
    pub at: At,
}

#[derive(Debug, Args)]
pub struct Heartbeat {
    pub name: String,
    /// The sender's pid (must match the registered one)
    #[arg(long)]
    pub pid: Option<u32>,
    #[command(flatten)]
    pub at: At,
}

#[derive(Debug, Args)]
pub struct SetStatus {
    pub name: String,
    /// One of: spawning ready idle busy live restarting orphaned failed exited permanent_dead
    pub status: Status,
    /// Why (kept as the status message)
    #[arg(long, value_name = "TEXT")]
    pub message: Option<String>,
    #[command(flatten)]
    pub at: At,
}

#[derive(Debug, Args)]
pub struct Update {
    pub name: String,
    #[arg(long, value_name = "ID")]
    pub codex_session_id: Option<String>,
    #[arg(long, value_name = "UUID")]
    pub claude_session_uuid: Option<String>,
    #[arg(long, value_name = "ID")]
    pub claude_short_id: Option<String>,
    #[arg(long, value_name = "ID")]
    pub gemini_session_id: Option<String>,
    #[arg(long, value_name = "ID")]
    pub mcp_channel_id: Option<String>,
    /// exec or interactive
    #[arg(long, value_name = "MODE")]
    pub host_mode: Option<HostMode>,
    #[arg(long, value_name = "TIME", value_parser = time)]
    pub last_message_at: Option<Timestamp>,
    #[arg(long, value_name = "P")]
    pub log_path: Option<String>,
    #[arg(long)]
    pub pid: Option<u32>,
    #[arg(long, value_name = "N")]
    pub pid_start_time: Option<u64>,
    #[arg(long, value_name = "TIME", value_parser = time)]
    pub last_reconciled_at: Option<Timestamp>,
    #[command(flatten)]
    pub at: At,
}

#[derive(Debug, Args)]
pub struct Remove {
    pub name: String,
    #[command(flatten)]
    pub at: At,
}

#[derive(Debug, Args)]
pub struct Post {
    /// Sender
    #[arg(long, value_name = "NAME")]
    pub from: String,
    /// Recipient [default: broadcast to all]
    #[arg(long, value_name = "NAME")]
    pub to: Option<String>,
    #[arg(long, value_name = "C", default_value = "note")]
    pub category: String,
    /// Time to live in hours [default: 12]
    #[arg(long, value_name = "H")]
    pub ttl_hours: Option<f64>,
    /// Idempotency key: the same request again returns the first message's id
    #[arg(long, value_name = "K")]
    pub request_id: Option<String>,
    #[arg(long, value_name = "P")]
    pub project_root: Option<String>,
    /// low, normal, high or critical
    #[arg(long, default_value = "normal")]
    pub priority: Priority,
    /// public, team or private
    #[arg(long, default_value = "team")]
    pub privacy: Privacy,
    /// The message body
    pub text: String,
    #[command(flatten)]
    pub at: At,
}

#[derive(Debug, Args)]
pub struct Read {
    pub name: String,
    #[arg(long, value_name = "P")]
    pub project_root: Option<String>,
    #[command(flatten)]
    pub at: At,
}

#[derive(Debug, Args)]
pub struct SessionKey {
    #[arg(long, value_name = "S")]
    pub source: String,
    #[arg(long, value_name = "W")]
    pub workspace: String,
    #[arg(long, value_name = "ID")]
    pub session_id: String,
    #[command(flatten)]
    pub at: At,
}

#[derive(Debug, Subcommand)]
pub enum Sessions {
    /// Open a logical session
    Open(SessionKey),
    /// Keep a logical session present
    Heartbeat(SessionKey),
    /// Close a logical session
    Close(SessionKey),
}

#[derive(Debug, Args)]
pub struct Sweep {
    /// The sweep's "now" (RFC 3339 UTC) [default: $AGENTLOG_NOW, else the clock]
    #[arg(long, value_name = "TIME", value_parser = time, env = "AGENTLOG_NOW")]
    pub now: Option<Timestamp>,
}

#[derive(Debug, Args)]
pub struct List {
    /// Include finished agents
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("point").required(true).args(["at", "lsn"])))]
pub struct Replay {
    /// The registry as of this time (events at or before it)
    #[arg(long, value_name = "TIME", value_parser = time)]
    pub at: Option<Timestamp>,
    /// The registry as of this LSN (inclusive)
    #[arg(long, value_name = "N")]
    pub lsn: Option<u64>,
    /// Also write that registry as schema-v4 registry.json
    #[arg(long, value_name = "FILE")]
    pub export: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct Audit {
    pub name: String,
    #[arg(long, value_name = "TIME", value_parser = time)]
    pub since: Option<Timestamp>,
    #[arg(long, value_name = "TIME", value_parser = time)]
    pub until: Option<Timestamp>,
}

#[derive(Debug, Args)]
pub struct LogCmd {
    /// First LSN to print
    #[arg(long, value_name = "LSN", default_value_t = 0)]
    pub from: u64,
    /// Keep printing new events as they are appended
    #[arg(long)]
    pub follow: bool,
}

#[derive(Debug, Args)]
pub struct Repair {
    /// Copy every valid record, skipping damaged ones (the original is not changed)
    #[arg(long, required = true)]
    pub salvage: bool,
    /// The new store's directory (must not exist or be empty)
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct Export {
    /// Where to write [default: DIR/registry.json]
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Refuse (instead of leaving out with a warning) agents a v4 reader cannot read
    #[arg(long)]
    pub strict: bool,
}

#[derive(Debug, Args)]
pub struct Import {
    /// A registry.json of schema 1 to 4 (imported as one batch, now)
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct Compact {
    /// Retention's "now" (RFC 3339 UTC) [default: $AGENTLOG_NOW, else the clock]
    #[arg(long, value_name = "TIME", value_parser = time, env = "AGENTLOG_NOW")]
    pub now: Option<Timestamp>,
    /// Report what would be dropped; change nothing
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct Demo {
    /// Agent names in the simulated fleet (each may live several lives)
    #[arg(long, default_value_t = 300)]
    pub agents: u32,
    /// Simulated hours of fleet activity
    #[arg(long, default_value_t = 6)]
    pub hours: u32,
    /// Seed of the simulation (same seed, same history)
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

fn mix(s: &str) -> Result<agentlog::bench::heartbeats::Mix, String> {
    agentlog::bench::heartbeats::Mix::parse(s).map_err(|e| e.to_string())
}

#[derive(Debug, Subcommand)]
pub enum Bench {
    /// Heartbeats from W writers on N registered agents for S seconds
    Heartbeats(BenchHeartbeats),
    /// Sweep agents × writers; write scaling.csv and scaling.svg
    Scaling(BenchScaling),
    /// Time a full fold of a log of N events over A agents (or of the store in --dir)
    Replay(BenchReplay),
    /// Time opening stores of each log length, with and without a snapshot
    Open(BenchOpen),
    /// Time exporting A agents as schema-v4 registry.json
    Export(BenchExport),
    /// Time compacting a log where most agents finished long ago
    Compact(BenchCompact),
}

#[derive(Debug, Args)]
pub struct BenchReplay {
    /// Log length in events (registrations included)
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub events: u64,
    #[arg(long, value_name = "A", default_value_t = 1000)]
    pub agents: usize,
}

#[derive(Debug, Args)]
pub struct BenchOpen {
    /// Log lengths in events, comma-separated
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "10000,100000,1000000"
    )]
    pub events: Vec<u64>,
    #[arg(long, value_name = "A", default_value_t = 1000)]
    pub agents: usize,
}

#[derive(Debug, Args)]
pub struct BenchExport {
    #[arg(long, value_name = "A", default_value_t = 10_000)]
    pub agents: usize,
}

#[derive(Debug, Args)]
pub struct BenchCompact {
    /// Log length in events before the exits
    #[arg(long, value_name = "N", default_value_t = 500_000)]
    pub events: u64,
    #[arg(long, value_name = "A", default_value_t = 1000)]
    pub agents: usize,
}

#[derive(Debug, Args)]
pub struct BenchHeartbeats {
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub agents: usize,
    #[arg(long, value_name = "S", default_value_t = 5.0)]
    pub seconds: f64,
    #[arg(long, value_name = "W", default_value_t = 1)]
    pub writers: usize,
    /// Acknowledge each event only after an fsync covers it
    #[arg(long)]
    pub durable: bool,
    /// Status changes and message posts per heartbeat: STATUS,POSTS [default: 0.01,0.001]
    #[arg(long, value_name = "R", value_parser = mix)]
    pub mix: Option<agentlog::bench::heartbeats::Mix>,
    /// Also run the whole-file JSON rewrite for the same time and print the ratio
    #[arg(long)]
    pub compare: bool,
}

#[derive(Debug, Args)]
pub struct BenchScaling {
    /// Fleet sizes, comma-separated
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "100,1000,10000,100000"
    )]
    pub agents: Vec<usize>,
    /// Writer thread counts, comma-separated
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "1,4,16,64"
    )]
    pub writers: Vec<usize>,
    /// Seconds per point
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub seconds: f64,
    #[arg(long)]
    pub durable: bool,
    /// Where scaling.csv and scaling.svg go
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_tree_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bad_time_is_a_usage_error_naming_the_value() {
        let e =
            Cli::try_parse_from(["agentlog", "heartbeat", "a", "--at", "yesterday"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("yesterday"), "{e}");
    }

    #[test]
    fn replay_needs_exactly_one_of_at_and_lsn() {
        assert!(Cli::try_parse_from(["agentlog", "replay"]).is_err());
        assert!(Cli::try_parse_from([
            "agentlog",
            "replay",
            "--lsn",
            "3",
            "--at",
            "2026-11-30T12:00:00Z"
        ])
        .is_err());
        let c = Cli::try_parse_from(["agentlog", "replay", "--lsn", "3"]).unwrap();
        assert!(matches!(
            c.command,
            Command::Replay(Replay { lsn: Some(3), .. })
        ));
    }
}
