//! `agentlog show`: one agent, every field, its life, unread and sent
//! counts and the LSN of its last event; exit 1 "not found" for an unknown
//! name.

use crate::cli::args::At;
use crate::cli::output::{self, Ui, W};
use crate::cli::render;
use crate::ops::inbox;
use agentlog::time::Timestamp;
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Show {
    pub name: String,
    /// The time unread messages are judged at [default: $AGENTLOG_NOW, else the clock]
    #[command(flatten)]
    pub at: At,
}

/// `show NAME`: exit 1 "not found" for an unknown name.
pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Show) -> Result<ExitCode> {
    let now = a.at.at.unwrap_or_else(Timestamp::now);
    let (s, rt) = inbox::show(&dir, &a.name, now)?;
    let ag = &s.agent;
    let mut doc = render::agent_with_runtime(ag, rt.as_ref(), now, &render::viewer(&dir));
    render::overlay_live_outage(&mut doc, &dir, &ag.name);
    if ui.json {
        doc["unread"] = json!(s.unread);
        doc["sent"] = json!(s.sent);
        output::json(w, &doc)?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some(fields) = doc.as_object() else {
        unreachable!("render::agent builds an object")
    };
    let width = fields.keys().map(String::len).max().unwrap_or(0);
    for (k, v) in fields {
        let text = match v {
            serde_json::Value::Null => "-".to_string(),
            serde_json::Value::String(s) if s.is_empty() => "-".to_string(),
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        writeln!(w, "{k:<width$}  {text}")?;
    }
    writeln!(w, "{:<width$}  {}", "unread", s.unread)?;
    writeln!(w, "{:<width$}  {}", "sent", s.sent)?;
    Ok(ExitCode::SUCCESS)
}
