//! `agentlog status`: set an agent's status (and why).

use super::applied;
use crate::cli::args::At;
use crate::cli::open::with_store;
use crate::cli::output::{Ui, W};
use agentlog::model::Status;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

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

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: SetStatus) -> Result<ExitCode> {
    let at = a.at.checked()?;
    let lsn = with_store(&dir, |s| {
        Ok(s.set_status(&a.name, a.status, a.message.clone(), at)?)
    })?;
    applied(w, ui, &a.name, lsn, &format!("status {}", a.status))
}
