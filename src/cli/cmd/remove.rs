//! `agentlog remove`: remove an agent from the registry (its history stays
//! until compaction).

use super::applied;
use crate::cli::args::At;
use crate::cli::open::with_store;
use crate::cli::output::{Ui, W};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Remove {
    pub name: String,
    #[command(flatten)]
    pub at: At,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Remove) -> Result<ExitCode> {
    let at = a.at.checked()?;
    let lsn = with_store(&dir, |s| Ok(s.remove(&a.name, at)?))?;
    applied(w, ui, &a.name, lsn, "removed")
}
