//! `agentlog sweep`: expire leases and detect dead processes, recording why.

use crate::cli::args::{not_in_future, time};
use crate::cli::open::with_store;
use crate::cli::output::{self, Ui, W};
use crate::ops::describe::describe;
use agentlog::probe::ProcProbe;
use agentlog::time::Timestamp;
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Sweep {
    /// The sweep's "now" (RFC 3339 UTC) [default: $AGENTLOG_NOW, else the clock]
    #[arg(long, value_name = "TIME", value_parser = time, env = "AGENTLOG_NOW")]
    pub now: Option<Timestamp>,
    /// Accept a --now more than 5 minutes after the clock
    #[arg(long)]
    pub force_time: bool,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Sweep) -> Result<ExitCode> {
    let now = not_in_future(a.now, a.force_time, "--now", "--force-time")?;
    let changes = with_store(&dir, |s| Ok(s.sweep(now, &ProcProbe)?))?;
    let lines: Vec<_> = changes
        .iter()
        .map(|(lsn, ev)| {
            let agent = ev.kind.subject_agent().unwrap_or("").to_string();
            let d = describe(&ev.kind, *lsn, Some(&agent));
            (*lsn, agent, d)
        })
        .collect();
    if ui.json {
        let v: Vec<_> = lines
            .iter()
            .map(
                |(lsn, agent, d)| json!({"lsn": lsn, "agent": agent, "what": d.what, "why": d.why}),
            )
            .collect();
        output::json(w, &json!({"changes": v}))?;
    } else if lines.is_empty() {
        writeln!(w, "sweep: nothing changed")?;
    } else {
        let rows: Vec<_> = lines
            .iter()
            .map(|(lsn, agent, d)| {
                vec![
                    lsn.to_string(),
                    agent.clone(),
                    d.what.clone(),
                    d.why.clone().unwrap_or_default(),
                ]
            })
            .collect();
        output::table(w, &["LSN", "AGENT", "CHANGE", "WHY"], &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}
