//! The `agentlog` command line: parse (clap), call one library function per
//! subcommand (each in its file under `cmd/`), print (table or `--json`),
//! and map the outcome to an exit code:
//! 0 success, 1 a refused command or damage found, 2 usage. Every error is one
//! line on stderr, `agentlog: <what was wrong>`; bad input never panics.

pub mod args;
mod bench;
mod bench_clients;
mod bench_cluster;
mod bench_soak;
mod cmd;
mod fast;
mod field_flags;
mod mcp;
mod open;
pub mod output;
mod remote;
mod render;

use args::Cli;
use clap::error::ErrorKind;
use clap::Parser;
use std::process::ExitCode;

/// A usage error found after parsing (e.g. no store directory can be chosen):
/// exit 2 like a clap error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

pub fn main() -> ExitCode {
    // `agentlog heartbeat NAME` from a shell loop, answered by a daemon,
    // before any start-up work the request does not need (`fast`).
    if let Some(code) = fast::heartbeat() {
        return code;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_error(e),
    };
    init_tracing();
    match cmd::run(cli) {
        Ok(code) => code,
        Err(e) => report(&e),
    }
}

/// Library warnings (a torn tail truncated, an agent left out of an export)
/// go to stderr; `AGENTLOG_LOG` tunes the level.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENTLOG_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never into a file or pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .without_time()
        .try_init();
}

fn clap_error(e: clap::Error) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(e.exit_code().clamp(0, 255) as u8)
        }
        _ => {
            eprintln!("agentlog: {}", clap_message(&e));
            ExitCode::from(2)
        }
    }
}

/// clap's message, without its usage block and tip, on one line.
fn clap_message(e: &clap::Error) -> String {
    let text = e.to_string();
    let msg: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let msg = msg.join(" ");
    let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
    format!("{msg} (see --help)")
}

/// Prints `e` as one line and picks the exit code.
fn report(e: &anyhow::Error) -> ExitCode {
    if is_closed_stdout(e) {
        return ExitCode::SUCCESS;
    }
    let line = one_line(e);
    eprintln!("agentlog: {line}");
    if e.downcast_ref::<Usage>().is_some() {
        ExitCode::from(2)
    } else {
        ExitCode::from(1)
    }
}

/// A closed stdout pipe (`agentlog log | head`) is the reader's choice, not
/// an error. A broken pipe to the daemon is one: the daemon died before it
/// read the request, so nothing was done.
fn is_closed_stdout(e: &anyhow::Error) -> bool {
    let daemon = e.chain().any(|c| {
        c.downcast_ref::<agentlog::daemon::client::ClientError>()
            .is_some()
    });
    !daemon
        && e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        })
}

/// The error and its causes on one line ([`agentlog::daemon::one_line`], the
/// daemon's reply text too), escaped: errors quote input (names, values,
/// paths), so keep them one inert line.
fn one_line(e: &anyhow::Error) -> String {
    output::escaped(&agentlog::daemon::one_line(&**e)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentlog::daemon::client::ClientError;
    use std::io;

    #[test]
    fn a_broken_pipe_is_success_on_stdout_and_failure_to_the_daemon() {
        let pipe = || io::Error::from(io::ErrorKind::BrokenPipe);
        let stdout = anyhow::Error::from(pipe()).context("writing the table");
        assert!(is_closed_stdout(&stdout));
        let daemon = anyhow::Error::from(ClientError::Io {
            path: "/s/agentlog.sock".into(),
            source: pipe(),
        });
        assert!(!is_closed_stdout(&daemon));
        assert!(one_line(&daemon).contains("daemon socket /s/agentlog.sock"));
    }
}
