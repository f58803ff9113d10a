//! `agentlog update`: update fields of a registered agent.

use super::applied;
use crate::cli::args::{client, time, At};
use crate::cli::open::with_store;
use crate::cli::output::{Ui, W};
use agentlog::model::{HostMode, TransportClient};
use agentlog::registry::labels::AgentUpdate;
use agentlog::registry::FieldUpdates;
use agentlog::time::Timestamp;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Update {
    pub name: String,
    #[arg(long, value_name = "ID")]
    pub codex_session_id: Option<String>,
    #[arg(long, value_name = "UUID")]
    pub claude_session_uuid: Option<String>,
    #[arg(long, value_name = "ID")]
    pub claude_short_id: Option<String>,
    #[arg(long, value_name = "ID")]
    pub gemini_session_id: Option<String>,
    #[arg(long, value_name = "ID")]
    pub mcp_channel_id: Option<String>,
    /// exec or interactive
    #[arg(long, value_name = "MODE")]
    pub host_mode: Option<HostMode>,
    #[arg(long, value_name = "TIME", value_parser = time)]
    pub last_message_at: Option<Timestamp>,
    #[arg(long, value_name = "P")]
    pub log_path: Option<String>,
    #[arg(long)]
    pub pid: Option<u32>,
    #[arg(long, value_name = "N")]
    pub pid_start_time: Option<u64>,
    #[arg(long, value_name = "TIME", value_parser = time)]
    pub last_reconciled_at: Option<Timestamp>,
    /// A name for people (shown by list, show and audit; not exported)
    #[arg(long, value_name = "TEXT")]
    pub display_name: Option<String>,
    /// The transport's client reconnected: NAME[/VERSION]
    #[arg(long, value_name = "CLIENT", value_parser = client)]
    pub transport_client: Option<TransportClient>,
    #[command(flatten)]
    pub at: At,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Update) -> Result<ExitCode> {
    let fields = FieldUpdates {
        claude_short_id: a.claude_short_id.map(Some),
        codex_session_id: a.codex_session_id.map(Some),
        gemini_session_id: a.gemini_session_id.map(Some),
        claude_session_uuid: a.claude_session_uuid.map(Some),
        mcp_channel_id: a.mcp_channel_id.map(Some),
        host_mode: a.host_mode.map(Some),
        last_message_at: a.last_message_at.map(Some),
        log_path: a.log_path.map(Some),
        pid: a.pid.map(Some),
        pid_start_time: a.pid_start_time.map(Some),
        last_reconciled_at: a.last_reconciled_at.map(Some),
        ..FieldUpdates::default()
    };
    let at = a.at.checked()?;
    let update = AgentUpdate {
        fields,
        display_name: a.display_name,
        transport_client: a.transport_client,
    };
    let lsns = with_store(&dir, |s| Ok(s.update_agent(&a.name, update, at)?))?;
    let last = lsns.last().copied().unwrap_or_default();
    applied(w, ui, &a.name, last, "updated")
}
