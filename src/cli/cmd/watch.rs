//! `agentlog watch`: stream events (or registry changes) from a running
//! daemon.

use crate::cli::output::Ui;
use crate::cli::remote::{need_daemon, stream};
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;

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

/// `agentlog watch`: prints the stream; after `lagged`, resumes where it
/// left off on a new connection, so nothing is missed or repeated.
pub fn run(ui: &Ui, dir: &Path, a: &Watch) -> Result<ExitCode> {
    let mut from = a.from;
    loop {
        let client = need_daemon(dir, "watch")?;
        let mut params = json!({"changes": a.changes});
        if let Some(f) = from {
            params["from"] = json!(f);
        }
        if let Some(ag) = &a.agent {
            params["agent"] = json!(ag);
        }
        if !a.kind.is_empty() {
            params["kinds"] = json!(a.kind);
        }
        match stream(ui, client, params, false)? {
            Some(resume) => from = Some(resume),
            None => return Ok(ExitCode::SUCCESS),
        }
    }
}
