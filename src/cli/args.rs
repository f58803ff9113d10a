//! The command-line grammar's root (clap derive): the global flags, the
//! list of subcommands with their help text, the parsers values share
//! (times, transport clients), the event time `--at` every write takes, and
//! the benchmarks' arguments. Each subcommand's own arguments live in its
//! file under `cmd/`. Parsing only: values are typed at parse time, so a bad
//! value is a usage error (exit 2) that names the value, before any store is
//! opened.

use super::cmd;
use agentlog::model::TransportClient;
use agentlog::time::{Timestamp, MAX_FUTURE_SKEW_MS};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Parses a TIME argument (RFC 3339 UTC, e.g. `2026-11-30T12:00:00Z`).
pub fn time(s: &str) -> Result<Timestamp, String> {
    Timestamp::parse_rfc3339(s).map_err(|e| e.to_string())
}

/// Parses `NAME[/VERSION]` (the parts are validated by the command).
pub fn client(s: &str) -> Result<TransportClient, String> {
    Ok(TransportClient::parse(s))
}

/// Largest fleet the benchmarks and the demo accept (bounds memory).
const MAX_AGENTS: u64 = 1_000_000;
/// Longest log a benchmark builds (bounds disk: about 3 GB of heartbeats).
const MAX_EVENTS: u64 = 100_000_000;
/// Most writer threads a benchmark starts.
const MAX_WRITERS: u64 = 1024;
/// Longest a benchmark point runs, in seconds.
const MAX_SECONDS: f64 = 3600.0;

/// A count in `1..=max` (clap reports anything else as a usage error, exit 2).
fn count(max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=max)
}

/// Parses a duration in seconds: a positive number up to [`MAX_SECONDS`].
fn seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if v.is_finite() && v > 0.0 && v <= MAX_SECONDS {
        Ok(v)
    } else {
        Err(format!(
            "must be more than 0 and at most {MAX_SECONDS} seconds"
        ))
    }
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
    /// The store directory [default: $AGENTLOG_DIR if set and not empty, else
    /// ~/.agentlog; `demo` and `bench` use a fresh temporary one instead]
    #[arg(long, global = true, value_name = "DIR")]
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
    /// Create an empty store in DIR (mode 0700: private messages stay private;
    /// 0750 with --group)
    Init(cmd::init::Init),
    /// Register an agent (a renewal if the same live process registers again)
    Register(cmd::register::Register),
    /// Record that an agent is alive
    Heartbeat(cmd::heartbeat::Heartbeat),
    /// Set an agent's status
    Status(cmd::status::SetStatus),
    /// Update fields of a registered agent
    Update(cmd::update::Update),
    /// Remove an agent from the registry (its history stays until compaction)
    Remove(cmd::remove::Remove),
    /// Attach to an agent as its controller (one) or an observer (any number); again to renew
    Attach(cmd::attach::AttachArgs),
    /// End a client's lease on an agent
    Detach(cmd::attach::DetachArgs),
    /// Post a message from an agent to one agent or to all; prints its id
    Post(cmd::post::Post),
    /// Print an agent's unread messages and mark them read
    Read(cmd::read::Read),
    /// Logical-session presence: open, heartbeat, close
    #[command(subcommand)]
    Sessions(cmd::sessions::Sessions),
    /// Expire leases and detect dead processes, recording why
    Sweep(cmd::sweep::Sweep),
    /// The current registry as a table
    List(cmd::list::List),
    /// One agent: every field, life, unread and sent counts, last event LSN
    Show(cmd::show::Show),
    /// Exit 0 if an agent's transport is live (not finished, same process), else 1
    Presence(cmd::presence::Presence),
    /// The registry as it was at a time or LSN
    Replay(cmd::replay::Replay),
    /// One agent's timeline, heartbeat runs collapsed
    Audit(cmd::audit::Audit),
    /// The raw events, like a dump tool
    Log(cmd::log::LogCmd),
    /// Check every record's checksum; exit 1 if any is damaged
    Verify,
    /// Copy every valid record into a new store
    Repair(cmd::repair::Repair),
    /// Write a snapshot of the folded state now
    Snapshot,
    /// Write the registry as schema-v4 registry.json
    Export(cmd::export::Export),
    /// Import a registry.json (schema 1 to 16; every key kept)
    Import(cmd::import::Import),
    /// Check a registry.json against the readers' contract of schema 4 or 16; exit 1 if a reader would reject it
    Check(cmd::check::CheckFile),
    /// Drop retired agents and expired messages from sealed segments
    Compact(cmd::compact::Compact),
    /// Events, agents by status, messages, segments, bytes, LSN range
    Stats,
    /// Run a simulated fleet end to end and show the result
    Demo(cmd::demo::Demo),
    /// Serve the store to other processes over <DIR>/agentlog.sock (PROTOCOL.md)
    Serve(cmd::serve::Serve),
    /// Stream events (or registry changes) from a running daemon
    Watch(cmd::watch::Watch),
    /// Serve the registry to an MCP client (Claude Code, Codex, Cursor, …) over stdio
    Mcp(super::mcp::McpArgs),
    /// Benchmarks (in a temporary directory unless --dir is given)
    #[command(subcommand)]
    Bench(Bench),
}

#[derive(Debug, Args)]
pub struct At {
    /// Event time (RFC 3339 UTC) [default: $AGENTLOG_NOW, else the clock]
    #[arg(long, value_name = "TIME", value_parser = time, env = "AGENTLOG_NOW")]
    pub at: Option<Timestamp>,
    /// Accept an event time more than 5 minutes after the clock
    #[arg(long)]
    pub force_time: bool,
}

impl At {
    /// The event time, refused (a usage error) when it lies more than
    /// [`MAX_FUTURE_SKEW_MS`] after the clock, unless `--force-time`.
    pub fn checked(&self) -> Result<Option<Timestamp>, super::Usage> {
        not_in_future(self.at, self.force_time, "--at", "--force-time")
    }
}

thread_local! {
    /// Inside the daemon: the requesting client's `$AGENTLOG_NOW` (the
    /// protocol's `clock` parameter), which stands in for the clock as it
    /// would for that client's own invocation.
    static CLIENT_CLOCK: std::cell::Cell<Option<Timestamp>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with [`clock`] answering `t` (when given) on this thread.
pub fn with_client_clock<R>(t: Option<Timestamp>, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Timestamp>);
    impl Drop for Reset {
        fn drop(&mut self) {
            CLIENT_CLOCK.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(CLIENT_CLOCK.with(|c| c.replace(t)));
    f()
}

/// The clock of this invocation: `$AGENTLOG_NOW` when set (it stands in for
/// the clock, README), else the system clock.
pub fn clock() -> Timestamp {
    if let Some(t) = CLIENT_CLOCK.with(std::cell::Cell::get) {
        return t;
    }
    std::env::var("AGENTLOG_NOW")
        .ok()
        .and_then(|v| Timestamp::parse_rfc3339(&v).ok())
        .unwrap_or_else(Timestamp::now)
}

/// Refuses `t` when it lies more than [`MAX_FUTURE_SKEW_MS`] after
/// [`clock`] and `force` is off; `flag` and `force_flag` name the options.
pub fn not_in_future(
    t: Option<Timestamp>,
    force: bool,
    flag: &str,
    force_flag: &str,
) -> Result<Option<Timestamp>, super::Usage> {
    let clock = clock();
    match t {
        Some(t) if !force && t.is_beyond(clock, MAX_FUTURE_SKEW_MS) => Err(super::Usage(format!(
            "{flag} {t} is more than {} minutes after the clock ({clock}); \
             pass {force_flag} if that future time is really meant",
            MAX_FUTURE_SKEW_MS / 60_000
        ))),
        t => Ok(t),
    }
}

fn mix(s: &str) -> Result<crate::bench::heartbeats::Mix, String> {
    crate::bench::heartbeats::Mix::parse(s).map_err(|e| e.to_string())
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
    /// Heartbeats from P client processes through a daemon this run starts
    Clients(BenchClients),
    /// One client process of `bench clients` (spec on stdin)
    #[command(hide = true)]
    ClientsWorker,
    /// The protocol's bound for `bench clients --echo`: answers without a store
    #[command(hide = true)]
    EchoServer(BenchEchoServer),
    /// The replicated registry across H host processes on a real NATS
    /// cluster, against a real etcd cluster doing the same work
    Cluster(BenchCluster),
    /// One host process of `bench cluster` (commands on stdin)
    #[command(hide = true)]
    ClusterHost,
    /// Time whole one-shot CLI invocations (heartbeat, status, list, audit,
    /// export) on stores of each log length, each with a recent snapshot
    Cli(BenchCli),
    /// A long run of the daemon under client processes, watchers, SSE
    /// clients, a metrics scraper, compactions and kill -9 with restarts;
    /// every acknowledged write is checked afterwards (exit 1 if one is lost)
    Soak(BenchSoak),
    /// One client process of `bench soak` (spec on stdin)
    #[command(hide = true)]
    SoakWorker,
}

/// A rate per second: positive, at most a million.
fn rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1e6 => Ok(v),
        _ => Err("must be more than 0 and at most 1000000 per second".into()),
    }
}

/// A period in seconds: 0 (never) or positive, up to [`MAX_SECONDS`].
fn period(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(0.0) => Ok(0.0),
        _ => seconds(s),
    }
}

#[derive(Debug, Args)]
pub struct BenchSoak {
    /// Length of the run in seconds
    #[arg(long, value_name = "S", default_value_t = 600.0, value_parser = seconds)]
    pub seconds: f64,
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = count(MAX_AGENTS))]
    pub agents: usize,
    /// Client processes writing
    #[arg(long, value_name = "P", default_value_t = 8, value_parser = count(MAX_WRITERS))]
    pub clients: usize,
    /// Writes per second of all client processes together
    #[arg(long, value_name = "R", default_value_t = 2000.0, value_parser = rate)]
    pub rate: f64,
    /// Every Nth write of a process is a durable status carrying a token (0: none)
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub status_every: u64,
    /// Socket watchers (`watch`), of which --idle-watchers never read
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub watchers: u64,
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub idle_watchers: u64,
    /// SSE clients of /api/events
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=64))]
    pub sse: u64,
    /// Seconds between /metrics scrapes (0: none)
    #[arg(long, value_name = "S", default_value_t = 1.0, value_parser = period)]
    pub scrape_every: f64,
    /// Seconds between compactions (0: none)
    #[arg(long, value_name = "S", default_value_t = 30.0, value_parser = period)]
    pub compact_every: f64,
    /// Seconds between kill -9 of the daemon, each followed by a restart (0: none)
    #[arg(long, value_name = "S", default_value_t = 60.0, value_parser = period)]
    pub kill_every: f64,
    /// The bound the daemon's peak RSS must stay under, in MiB
    #[arg(long, value_name = "MIB", default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub rss_bound_mib: u64,
    /// The bound the daemon's open descriptors must stay under
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..))]
    pub fd_bound: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Via {
    /// Requests on connections kept open
    Daemon,
    /// One `agentlog heartbeat` process per heartbeat
    Cli,
}

#[derive(Debug, Args)]
pub struct BenchClients {
    /// Client processes
    #[arg(long, value_name = "P", default_value_t = 8, value_parser = count(MAX_WRITERS))]
    pub procs: usize,
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = count(MAX_AGENTS))]
    pub agents: usize,
    #[arg(long, value_name = "S", default_value_t = 5.0, value_parser = seconds)]
    pub seconds: f64,
    /// Each heartbeat answered only after an fsync covers it
    #[arg(long)]
    pub durable: bool,
    /// Requests in flight per connection
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = count(4096))]
    pub pipeline: usize,
    /// Connections per client process
    #[arg(long, value_name = "C", default_value_t = 1, value_parser = count(MAX_WRITERS))]
    pub conns: usize,
    #[arg(long, value_enum, default_value_t = Via::Daemon)]
    pub via: Via,
    /// Also run the same processes against SQLite (WAL) and the whole-file JSON rewrite
    #[arg(long)]
    pub compare: bool,
    /// Also run them against a bare server of the same protocol (the bound)
    #[arg(long)]
    pub echo: bool,
    /// The daemon also serves `serve --http` on this address, e.g. to
    /// measure the cost of an open live page and a metrics scraper
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// The client library the processes use, comma-separated for several
    /// in one run (each on a fresh daemon): `rust` (this binary), `python`
    /// (clients/python, with `--compare` also Python's sqlite3), `node`
    /// (clients/node)
    #[arg(
        long,
        value_enum,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "rust"
    )]
    pub client: Vec<ClientLang>,
    /// Where the Python and Node clients are [default: this source tree's clients/]
    #[arg(long, value_name = "DIR")]
    pub clients_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientLang {
    Rust,
    Python,
    Node,
}

#[derive(Debug, Args)]
pub struct BenchCluster {
    /// Host processes (each with its own store, NATS server and etcd member)
    #[arg(long, value_name = "H", default_value_t = 3, value_parser = count(5))]
    pub hosts: usize,
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = count(MAX_AGENTS))]
    pub agents: usize,
    /// Seconds per phase (heartbeats, durable, visibility), per system
    #[arg(long, value_name = "S", default_value_t = 5.0, value_parser = seconds)]
    pub seconds: f64,
    /// Workers per host in the heartbeat and durable phases (etcd gets as many)
    #[arg(long, value_name = "K", default_value_t = 16, value_parser = count(MAX_WRITERS))]
    pub concurrency: usize,
}

#[derive(Debug, Args)]
pub struct BenchEchoServer {
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
}

#[derive(Debug, Args)]
pub struct BenchCli {
    /// Log lengths in events, comma-separated
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "10000,1000000,10000000",
        value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=MAX_EVENTS)
    )]
    pub events: Vec<u64>,
    #[arg(long, value_name = "A", default_value_t = 1000, value_parser = count(MAX_AGENTS))]
    pub agents: usize,
    /// Timed invocations per command and log length (after one untimed)
    #[arg(long, value_name = "R", default_value_t = 11, value_parser = count(1000))]
    pub runs: usize,
    /// Only build the stores under --dir (the benchmark's own child process)
    #[arg(long, hide = true)]
    pub build_only: bool,
}

#[derive(Debug, Args)]
pub struct BenchReplay {
    /// Log length in events (registrations included)
    #[arg(long, value_name = "N", default_value_t = 1_000_000, value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=MAX_EVENTS))]
    pub events: u64,
    #[arg(long, value_name = "A", default_value_t = 1000, value_parser = count(MAX_AGENTS))]
    pub agents: usize,
}

#[derive(Debug, Args)]
pub struct BenchOpen {
    /// Log lengths in events, comma-separated
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "10000,100000,1000000",
        value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=MAX_EVENTS)
    )]
    pub events: Vec<u64>,
    #[arg(long, value_name = "A", default_value_t = 1000, value_parser = count(MAX_AGENTS))]
    pub agents: usize,
}

#[derive(Debug, Args)]
pub struct BenchExport {
    #[arg(long, value_name = "A", default_value_t = 10_000, value_parser = count(MAX_AGENTS))]
    pub agents: usize,
}

#[derive(Debug, Args)]
pub struct BenchCompact {
    /// Log length in events before the exits
    #[arg(long, value_name = "N", default_value_t = 500_000, value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=MAX_EVENTS))]
    pub events: u64,
    #[arg(long, value_name = "A", default_value_t = 1000, value_parser = count(MAX_AGENTS))]
    pub agents: usize,
}

#[derive(Debug, Args)]
pub struct BenchHeartbeats {
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = count(MAX_AGENTS))]
    pub agents: usize,
    #[arg(long, value_name = "S", default_value_t = 5.0, value_parser = seconds)]
    pub seconds: f64,
    #[arg(long, value_name = "W", default_value_t = 1, value_parser = count(MAX_WRITERS))]
    pub writers: usize,
    /// Acknowledge each event only after an fsync covers it
    #[arg(long)]
    pub durable: bool,
    /// Status changes and message posts per heartbeat: STATUS,POSTS [default: 0.01,0.001]
    #[arg(long, value_name = "R", value_parser = mix)]
    pub mix: Option<crate::bench::heartbeats::Mix>,
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
        default_value = "100,1000,10000,100000",
        value_parser = count(MAX_AGENTS)
    )]
    pub agents: Vec<usize>,
    /// Writer thread counts, comma-separated
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "1,4,16,64",
        value_parser = count(MAX_WRITERS)
    )]
    pub writers: Vec<usize>,
    /// Seconds per point
    #[arg(long, value_name = "S", default_value_t = 1.0, value_parser = seconds)]
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
    fn sizes_are_bounded_up_front() {
        for args in [
            &[
                "agentlog",
                "bench",
                "heartbeats",
                "--agents",
                "18446744073709551615",
            ][..],
            &[
                "agentlog",
                "bench",
                "scaling",
                "--agents",
                "18446744073709551615",
            ],
            &["agentlog", "bench", "scaling", "--writers", "0"],
            &["agentlog", "demo", "--agents", "4294967295"],
            &["agentlog", "demo", "--hours", "4294967295"],
            &[
                "agentlog",
                "bench",
                "replay",
                "--events",
                "18446744073709551615",
            ],
            &["agentlog", "bench", "open", "--events", "10,99999999999"],
            &["agentlog", "bench", "compact", "--events", "0"],
            &["agentlog", "bench", "heartbeats", "--seconds", "1e300"],
            &[
                "agentlog",
                "post",
                "--from",
                "a",
                "--ttl-hours",
                "1e-12",
                "hi",
            ],
            &[
                "agentlog",
                "post",
                "--from",
                "a",
                "--ttl-hours",
                "1e12",
                "hi",
            ],
            &["agentlog", "post", "--from", "a", "--ttl-hours", "0", "hi"],
            &[
                "agentlog",
                "post",
                "--from",
                "a",
                "--ttl-hours",
                "NaN",
                "hi",
            ],
        ] {
            let e = Cli::try_parse_from(args).expect_err(&args.join(" "));
            assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
        }
        assert!(Cli::try_parse_from([
            "agentlog",
            "post",
            "--from",
            "a",
            "--ttl-hours",
            "0.5",
            "hi"
        ])
        .is_ok());
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
            Command::Replay(cmd::replay::Replay { lsn: Some(3), .. })
        ));
    }
}
