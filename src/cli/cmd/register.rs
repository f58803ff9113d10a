//! `agentlog register`: register an agent (new, renewal or a new life).

use crate::cli::args::{client, At};
use crate::cli::open::with_store;
use crate::cli::output::{self, Ui, W};
use agentlog::model::{HostMode, TransportClient};
use agentlog::registry::{Registration, RegistrationKind};
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Register {
    pub name: String,
    /// Provider (claude, codex, gemini, …)
    #[arg(long)]
    pub provider: String,
    /// Working directory of the agent
    #[arg(long)]
    pub cwd: String,
    #[arg(long)]
    pub pid: Option<u32>,
    /// Process start time (Linux /proc/<pid>/stat field 22)
    #[arg(long, value_name = "N")]
    pub pid_start_time: Option<u64>,
    #[arg(long)]
    pub role: Option<String>,
    /// Parent agent (makes this a child agent)
    #[arg(long, value_name = "NAME")]
    pub parent: Option<String>,
    #[arg(long, value_name = "P")]
    pub project_root: Option<String>,
    #[arg(long, value_name = "P")]
    pub log_path: Option<String>,
    /// exec or interactive
    #[arg(long, value_name = "MODE")]
    pub host_mode: Option<HostMode>,
    #[arg(long, value_name = "S")]
    pub short_id: Option<String>,
    /// The client (editor, IDE) the agent is attached through: NAME[/VERSION]
    #[arg(long, value_name = "CLIENT", value_parser = client)]
    pub transport_client: Option<TransportClient>,
    #[command(flatten)]
    pub at: At,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Register) -> Result<ExitCode> {
    let mut reg = Registration::new(&a.name, &a.provider, &a.cwd);
    reg.pid = a.pid;
    reg.pid_start_time = a.pid_start_time;
    reg.role = a.role;
    reg.parent = a.parent;
    reg.project_root = a.project_root.unwrap_or_default();
    reg.log_path = a.log_path;
    reg.host_mode = a.host_mode;
    reg.short_id = a.short_id.unwrap_or_default();
    let at = a.at.checked()?;
    let (lsn, kind) = with_store(&dir, |s| match a.transport_client {
        Some(c) => Ok(s.register_via_transport(reg, c, at)?),
        None => Ok(s.register(reg, at)?),
    })?;
    let kind = match kind {
        RegistrationKind::New => "new",
        RegistrationKind::Renewal => "renewal",
        RegistrationKind::NewLife => "new life",
    };
    if ui.json {
        output::json(
            w,
            &json!({"agent": a.name, "lsn": lsn, "registration": kind}),
        )?;
    } else {
        writeln!(
            w,
            "`{}`: registered ({kind}) (lsn {lsn})",
            output::escaped(&a.name)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
