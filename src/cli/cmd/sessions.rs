//! `agentlog sessions open|heartbeat|close`: logical-session presence.

use crate::cli::args::At;
use crate::cli::open::with_store;
use crate::cli::output::{self, Ui, W};
use agentlog::registry::SessionOp;
use anyhow::Result;
use clap::{Args, Subcommand};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

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

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Sessions) -> Result<ExitCode> {
    let (op, k, verb) = match a {
        Sessions::Open(k) => (SessionOp::Open, k, "opened"),
        Sessions::Heartbeat(k) => (SessionOp::Heartbeat, k, "heartbeat"),
        Sessions::Close(k) => (SessionOp::Close, k, "closed"),
    };
    let key = agentlog::registry::SessionKey::new(&k.source, &k.workspace, &k.session_id);
    let at = k.at.checked()?;
    let lsn = with_store(&dir, |s| Ok(s.session(op, key, None, at)?))?;
    if ui.json {
        output::json(w, &json!({"session": verb, "lsn": lsn}))?;
    } else {
        match lsn {
            Some(lsn) => writeln!(
                w,
                "session {}/{}/{}: {verb} (lsn {lsn})",
                k.source, k.workspace, k.session_id
            )?,
            None => writeln!(
                w,
                "session {}/{}/{} is not open: nothing appended",
                k.source, k.workspace, k.session_id
            )?,
        }
    }
    Ok(ExitCode::SUCCESS)
}
