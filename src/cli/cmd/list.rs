//! `agentlog list`: the current registry as a table (or `--json` rows), or
//! with `--view runtime` the runtime-registry seed's reconciled view: each
//! agent as `persisted`, `idle`, `busy` or `shutting_down`
//! (`registry::runtime::view`, docs/registry.md) with its endpoint,
//! controller, observer count and outage.

use crate::cli::args::clock;
use crate::cli::output::{self, Bar, Ui, W};
use crate::cli::render;
use agentlog::model::Status;
use agentlog::registry::queries::AgentFilter;
use agentlog::registry::runtime::json::attachments_text;
use agentlog::registry::runtime::view::RuntimeState;
use anyhow::Result;
use clap::{Args, ValueEnum};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

/// Which view of the registry `list` prints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum View {
    /// The registry's rows
    #[default]
    Registry,
    /// The reconciled runtime view: persisted, idle, busy, shutting_down
    Runtime,
}

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
    /// What to show: the registry's rows or the runtime view
    #[arg(long, value_enum, default_value_t = View::Registry)]
    pub view: View,
}

/// The runtime view's columns.
const RUNTIME_HEADERS: [&str; 7] = [
    "NAME",
    "STATE",
    "STATUS",
    "ENDPOINT",
    "CONTROLLER",
    "OBSERVERS",
    "OUTAGE",
];

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: List) -> Result<ExitCode> {
    let (state, _) = crate::ops::current(&dir, &mut Bar::new(ui, "fold"))?;
    let filter = AgentFilter {
        include_finished: a.all,
        status: a.status,
        provider: a.provider,
        project_root: a.project_root,
    };
    let agents: Vec<_> = state.agents_matching(&filter).collect();
    let now = clock();
    let viewer = render::viewer(&dir);
    if ui.json {
        let rows: Vec<_> = agents
            .iter()
            .map(|ag| {
                let mut row = render::agent_with_runtime(ag, state.runtime(&ag.name), now, &viewer);
                render::overlay_live_outage(&mut row, &dir, &ag.name);
                if a.view == View::Runtime {
                    row["runtime_state"] = json!(RuntimeState::of(ag.status).as_str());
                }
                row
            })
            .collect();
        output::json(w, &json!({"agents": rows}))?;
    } else if a.view == View::Runtime {
        let rows: Vec<_> = agents
            .iter()
            .map(|ag| {
                let rt = state.runtime(&ag.name);
                let (controller, observers) = attachments_text(rt);
                let outage = rt
                    .and_then(|r| r.outage.as_ref())
                    .filter(|o| o.is_open())
                    .map_or("-".to_string(), |o| format!("since {}", o.first_failure));
                vec![
                    ag.name.clone(),
                    RuntimeState::of(ag.status).as_str().to_string(),
                    ag.status.to_string(),
                    output::or_dash(
                        rt.and_then(|r| r.endpoint.as_deref())
                            .map(|e| output::clip(e, 48)),
                    ),
                    controller,
                    observers,
                    outage,
                ]
            })
            .collect();
        output::table(w, &RUNTIME_HEADERS, &rows)?;
    } else {
        let rows: Vec<_> = agents.iter().map(|ag| render::agent_row(ag)).collect();
        output::table(w, &render::AGENT_HEADERS, &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}
