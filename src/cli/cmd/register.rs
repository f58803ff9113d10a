//! `agentlog register`: register an agent (new, renewal or a new life).

use crate::cli::args::{client, At};
use crate::cli::field_flags::{self, FieldFlags};
use crate::cli::open::with_store;
use crate::cli::output::{self, Ui, W};
use agentlog::model::TransportClient;
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
    #[command(flatten)]
    pub fields: FieldFlags<field_flags::Register>,
    /// The client (editor, IDE) the agent is attached through: NAME[/VERSION]
    #[arg(long, value_name = "CLIENT", value_parser = client)]
    pub transport_client: Option<TransportClient>,
    #[command(flatten)]
    pub endpoint: super::attach::EndpointFlags,
    #[command(flatten)]
    pub at: At,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Register) -> Result<ExitCode> {
    let mut reg = Registration::new(&a.name, &a.provider, &a.cwd);
    a.fields.apply_to(&mut reg);
    let at = a.at.checked()?;
    let endpoint = a.endpoint.into_updates();
    let client = a.transport_client;
    let (lsn, kind) = with_store(&dir, |s| {
        if !endpoint.is_empty() {
            return Ok(s.register_with(reg, client, endpoint, at)?);
        }
        match client {
            Some(c) => Ok(s.register_via_transport(reg, c, at)?),
            None => Ok(s.register(reg, at)?),
        }
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
