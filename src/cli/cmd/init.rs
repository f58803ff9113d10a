//! `agentlog init`: create an empty store (or report the existing one).

use crate::cli::output::{self, Ui, W};
use crate::ops::sharing::Sharing;
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Init {
    /// Live-message cap of the new store (oldest dropped first, recorded in
    /// the log); fixed once set [default: 200]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_messages: Option<u32>,
    /// Let the directory's group read the store (0750 / 0640 instead of 0700 /
    /// 0600) and observe through the daemon
    #[arg(long, alias = "group-shared")]
    pub group: bool,
    /// The registry.json schema `serve` publishes and `export` writes: 4 (the
    /// design card) or 16 (today's fno readers); may be changed later
    /// [default: 4]
    #[arg(long, value_name = "N", value_parser = super::check::parse_schema)]
    pub schema: Option<agentlog::schemas::Schema>,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Init) -> Result<ExitCode> {
    let sharing = if a.group {
        Sharing::Group
    } else {
        Sharing::Private
    };
    sharing.restrict_process_umask();
    let rep = crate::ops::init(&dir, a.max_messages.map(|n| n as usize), a.schema, sharing)?;
    if ui.json {
        output::json(
            w,
            &json!({"dir": dir, "created": rep.created, "events": rep.events}),
        )?;
    } else if rep.created {
        writeln!(w, "initialized an empty store at {}", dir.display())?;
    } else {
        writeln!(
            w,
            "store at {} already exists ({} events)",
            dir.display(),
            rep.events
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
