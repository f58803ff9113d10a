//! The command-line grammar (clap derive): every subcommand, its flags and
//! their help text. Parsing only: values are typed here (times, statuses,
//! host modes) so a bad value is a usage error (exit 2) that names the value,
//! before any store is opened.

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

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create an empty store in DIR
    Init,
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
        let e = Cli::try_parse_from(["agentlog", "replay", "--at", "yesterday"]).unwrap_err();
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
