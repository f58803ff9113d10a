//! `agentlog presence`: whether an agent's transport is live (exit 0) or
//! not (exit 1), or of every transport-attached agent.

use crate::cli::output::{self, Ui, W};
use crate::ops::inbox;
use agentlog::probe::ProcProbe;
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["name", "any_transport"])))]
pub struct Presence {
    /// The agent to ask about
    pub name: Option<String>,
    /// Ask of every transport-attached agent: exit 0 if any is live
    #[arg(long)]
    pub any_transport: bool,
}

/// `presence NAME` / `presence --any-transport`: exit 0 live, 1 not.
pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Presence) -> Result<ExitCode> {
    let answers = match &a.name {
        Some(name) => vec![(name.clone(), inbox::agent_presence(&dir, name, &ProcProbe)?)],
        None => inbox::transport_presence(&dir, &ProcProbe)?,
    };
    let live = answers.iter().any(|(_, p)| p.is_live());
    if ui.json {
        let agents: Vec<_> = answers
            .iter()
            .map(|(n, p)| json!({"agent": n, "live": p.is_live(), "presence": p.to_string()}))
            .collect();
        output::json(w, &json!({"live": live, "agents": agents}))?;
    } else if answers.is_empty() {
        writeln!(w, "no transport-attached agents")?;
    } else {
        for (n, p) in &answers {
            writeln!(w, "`{n}`: {p}")?;
        }
    }
    Ok(if live {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
