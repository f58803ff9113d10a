//! One file per subcommand: its clap arguments, the one library (or `ops`)
//! call, and its text and `--json` rendering. This module routes a parsed
//! command to its file: through the daemon when one serves the store
//! (`remote`), else directly, with stdout guarded for commands that commit
//! before printing. Shared pieces live beside it: `open` (which store, how
//! opened), `output` (tables, JSON, escaping, progress), `render` (an agent
//! as JSON and as a row).

pub mod attach;
pub mod audit;
pub mod check;
pub mod compact;
pub mod demo;
pub mod export;
pub mod heartbeat;
pub mod import;
pub mod init;
pub mod list;
pub mod log;
pub mod post;
pub mod presence;
pub mod read;
pub mod register;
pub mod remove;
pub mod repair;
pub mod replay;
pub mod serve;
pub mod sessions;
pub mod show;
pub mod snapshot;
pub mod stats;
pub mod status;
pub mod sweep;
pub mod update;
pub mod verify;
pub mod watch;

use super::args::{Cli, Command};
use super::open::{set_lock_timeout, set_no_daemon, store_dir, DaemonAppeared};
use super::output::{self, Ui, W};
use crate::ops::sharing::Sharing;
use anyhow::Result;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

pub fn run(cli: Cli) -> Result<ExitCode> {
    let ui = Ui {
        json: cli.json,
        quiet: false,
    };
    if cli.lock_timeout.is_finite() && cli.lock_timeout >= 0.0 {
        set_lock_timeout(Duration::from_secs_f64(cli.lock_timeout));
    }
    // The demo and the benchmarks write fresh stores: temporary ones unless
    // a directory is given explicitly; never the default ~/.agentlog.
    let command = match cli.command {
        Command::Demo(a) => return demo::run(&ui, cli.dir, a),
        Command::Bench(b) => return crate::cli::bench::run(&ui, cli.dir, b),
        Command::Check(a) => return check::run(&ui, a),
        c => c,
    };
    let dir = store_dir(cli.dir)?;
    // Files this command creates are no more open than the store allows.
    Sharing::of_dir(&dir).restrict_process_umask();
    if let Command::Mcp(a) = command {
        // Each tool call goes through the daemon or opens the store itself.
        return crate::cli::mcp::run(dir, a);
    }
    if let Some(code) = crate::cli::remote::try_daemon(&ui, &dir, &command, cli.no_daemon)? {
        return Ok(code);
    }
    set_no_daemon(cli.no_daemon);
    let commits = commits_before_printing(&command);
    let mut out = output::Out::new(std::io::stdout().lock(), commits);
    let code = match run_command(&mut out, &ui, dir.clone(), command) {
        // A daemon took over while this write waited for its lock: the
        // command, which wrote nothing, goes there (parsed again from this
        // process's arguments, as the daemon path always does).
        Err(e) if e.downcast_ref::<DaemonAppeared>().is_some() => {
            drop(out);
            let again = <Cli as clap::Parser>::try_parse_from(std::env::args_os())?;
            return match crate::cli::remote::try_daemon(&ui, &dir, &again.command, false)? {
                Some(code) => Ok(code),
                None => Err(e),
            };
        }
        r => r?,
    };
    out.flush()?;
    if let Some(e) = out.failure() {
        // The command committed before printing: exit 0 as it succeeded,
        // and say on stderr exactly what was committed.
        let text = String::from_utf8_lossy(out.transcript());
        eprintln!(
            "agentlog: warning: the command succeeded and was committed, but stdout failed ({e}); its output was:\n{}",
            text.trim_end()
        );
    }
    Ok(code)
}

/// Runs one store command, printing to `w` (stdout, or a daemon's reply
/// buffer).
pub(crate) fn run_command(w: &mut W, ui: &Ui, dir: PathBuf, command: Command) -> Result<ExitCode> {
    let ui = *ui;
    let code = match command {
        Command::Init(a) => init::run(w, &ui, dir, a)?,
        Command::Register(a) => register::run(w, &ui, dir, a)?,
        Command::Heartbeat(a) => heartbeat::run(w, &ui, dir, a)?,
        Command::Status(a) => status::run(w, &ui, dir, a)?,
        Command::Update(a) => update::run(w, &ui, dir, a)?,
        Command::Remove(a) => remove::run(w, &ui, dir, a)?,
        Command::Attach(a) => attach::attach(w, &ui, dir, a)?,
        Command::Detach(a) => attach::detach(w, &ui, dir, a)?,
        Command::Post(a) => post::run(w, &ui, dir, a)?,
        Command::Read(a) => read::run(w, &ui, dir, a)?,
        Command::Sessions(a) => sessions::run(w, &ui, dir, a)?,
        Command::Sweep(a) => sweep::run(w, &ui, dir, a)?,
        Command::Snapshot => snapshot::run(w, &ui, dir)?,
        Command::Export(a) => export::run(w, &ui, dir, a)?,
        Command::Import(a) => import::run(w, &ui, dir, a)?,
        Command::Stats => stats::run(w, &ui, dir)?,
        Command::Compact(a) => compact::run(w, &ui, dir, a)?,
        Command::Demo(_) | Command::Bench(_) | Command::Check(_) => unreachable!("handled above"),
        Command::List(a) => list::run(w, &ui, dir, a)?,
        Command::Show(a) => show::run(w, &ui, dir, a)?,
        Command::Presence(a) => presence::run(w, &ui, dir, a)?,
        Command::Replay(a) => replay::run(w, &ui, dir, a)?,
        Command::Audit(a) => audit::run(w, &ui, dir, a)?,
        Command::Log(a) => log::run(w, &ui, dir, a)?,
        Command::Verify => verify::run(w, &ui, dir)?,
        Command::Repair(a) => repair::run(w, &ui, dir, a)?,
        Command::Serve(_) | Command::Watch(_) => unreachable!("handled by remote"),
        Command::Mcp(_) => unreachable!("handled above"),
    };
    Ok(code)
}

/// Commands that commit their work and then print what they did: a failure
/// of stdout after the commit must not turn into a reported failure. (`read`
/// is not one: it prints first and appends its receipt only once the output
/// was delivered.)
fn commits_before_printing(command: &Command) -> bool {
    matches!(
        command,
        Command::Init(_)
            | Command::Register(_)
            | Command::Heartbeat(_)
            | Command::Status(_)
            | Command::Update(_)
            | Command::Remove(_)
            | Command::Attach(_)
            | Command::Detach(_)
            | Command::Post(_)
            | Command::Sessions(_)
            | Command::Sweep(_)
            | Command::Snapshot
            | Command::Export(_)
            | Command::Import(_)
            | Command::Compact(compact::Compact { dry_run: false, .. })
            | Command::Repair(_)
    )
}

/// Prints "`agent`: what (lsn N)" or `{"agent", "lsn"}`.
pub(crate) fn applied(w: &mut W, ui: &Ui, agent: &str, lsn: u64, what: &str) -> Result<ExitCode> {
    if ui.json {
        output::json(w, &json!({"agent": agent, "lsn": lsn}))?;
    } else {
        writeln!(w, "`{}`: {what} (lsn {lsn})", output::escaped(agent))?;
    }
    Ok(ExitCode::SUCCESS)
}
