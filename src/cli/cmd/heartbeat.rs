//! `agentlog heartbeat`: record that an agent is alive.

use super::applied;
use crate::cli::args::At;
use crate::cli::open::with_store;
use crate::cli::output::{Ui, W};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Heartbeat {
    pub name: String,
    /// The sender's pid (must match the registered one)
    #[arg(long)]
    pub pid: Option<u32>,
    #[command(flatten)]
    pub at: At,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Heartbeat) -> Result<ExitCode> {
    let at = a.at.checked()?;
    let lsn = with_store(&dir, |s| Ok(s.heartbeat(&a.name, a.pid, at)?))?;
    applied(w, ui, &a.name, lsn, "heartbeat")
}
