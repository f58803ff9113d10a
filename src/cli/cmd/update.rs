//! `agentlog update`: update fields of a registered agent.

use super::applied;
use crate::cli::args::{client, At};
use crate::cli::field_flags::{self, FieldFlags};
use crate::cli::open::with_store;
use crate::cli::output::{Ui, W};
use agentlog::model::TransportClient;
use agentlog::registry::labels::AgentUpdate;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Update {
    pub name: String,
    #[command(flatten)]
    pub fields: FieldFlags<field_flags::Update>,
    /// A name for people (shown by list, show and audit; not exported)
    #[arg(long, value_name = "TEXT")]
    pub display_name: Option<String>,
    /// The transport's client reconnected: NAME[/VERSION]
    #[arg(long, value_name = "CLIENT", value_parser = client)]
    pub transport_client: Option<TransportClient>,
    #[command(flatten)]
    pub endpoint: super::attach::EndpointFlags,
    #[command(flatten)]
    pub at: At,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Update) -> Result<ExitCode> {
    let at = a.at.checked()?;
    let update = AgentUpdate {
        fields: a.fields.into_updates(),
        display_name: a.display_name,
        transport_client: a.transport_client,
        endpoint: a.endpoint.into_updates(),
    };
    let lsns = with_store(&dir, |s| Ok(s.update_agent(&a.name, update, at)?))?;
    let last = lsns.last().copied().unwrap_or_default();
    applied(w, ui, &a.name, last, "updated")
}
