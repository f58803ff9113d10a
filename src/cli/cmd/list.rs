//! `agentlog list`: the current registry as a table (or `--json` rows).

use crate::cli::output::{self, Bar, Ui, W};
use crate::cli::render;
use agentlog::model::Status;
use agentlog::registry::queries::AgentFilter;
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct List {
    /// Include finished agents
    #[arg(long)]
    pub all: bool,
    /// Only agents of this project (trailing slashes ignored)
    #[arg(long, value_name = "P")]
    pub project_root: Option<String>,
    /// Only agents in this status (finished ones included when asked for)
    #[arg(long, value_name = "S")]
    pub status: Option<Status>,
    /// Only agents of this provider
    #[arg(long, value_name = "X")]
    pub provider: Option<String>,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: List) -> Result<ExitCode> {
    let (state, _) = crate::ops::current(&dir, &mut Bar::new(ui, "fold"))?;
    let filter = AgentFilter {
        include_finished: a.all,
        status: a.status,
        provider: a.provider,
        project_root: a.project_root,
    };
    let agents: Vec<_> = state.agents_matching(&filter).collect();
    if ui.json {
        let rows: Vec<_> = agents.iter().map(|ag| render::agent(ag)).collect();
        output::json(w, &json!({"agents": rows}))?;
    } else {
        let rows: Vec<_> = agents.iter().map(|ag| render::agent_row(ag)).collect();
        output::table(w, &render::AGENT_HEADERS, &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}
