//! `agentlog audit`: one agent's timeline, heartbeat runs collapsed.

use crate::cli::args::time;
use crate::cli::output::{self, Ui, W};
use crate::cli::render;
use crate::ops::audit::AuditLine;
use agentlog::time::Timestamp;
use anyhow::Result;
use clap::Args;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Audit {
    pub name: String,
    #[arg(long, value_name = "TIME", value_parser = time)]
    pub since: Option<Timestamp>,
    #[arg(long, value_name = "TIME", value_parser = time)]
    pub until: Option<Timestamp>,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Audit) -> Result<ExitCode> {
    let lines = crate::ops::audit::audit(&dir, &a.name, a.since, a.until)?;
    if ui.json {
        let events: Vec<_> = lines.iter().map(audit_line).collect();
        output::json(w, &json!({"agent": a.name, "events": events}))?;
    } else {
        // A BY column (who asked) once the daemon recorded any origin.
        let by = lines.iter().any(|l| l.origin.is_some());
        let headers: &[&str] = if by {
            &["TIME", "LSN", "EVENT", "WHY", "BY"]
        } else {
            &["TIME", "LSN", "EVENT", "WHY"]
        };
        // Rows are rendered on demand: a long history is never held as text.
        output::table_by(w, headers, lines.len(), |i, row| {
            let l = &lines[i];
            row.push(l.at.to_string());
            row.push(l.lsn.to_string());
            row.push(output::clip(&l.what, 72));
            row.push(l.why.clone().unwrap_or_default());
            if by {
                row.push(output::or_dash(
                    l.origin.map(|o| format!("uid {} pid {}", o.uid, o.pid)),
                ));
            }
        })?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One audit line as JSON (a collapsed heartbeat run with its count and
/// last time and LSN); the demo prints the same.
pub fn audit_line(l: &AuditLine) -> Value {
    let mut v = json!({
        "at": render::time(l.at),
        "lsn": l.lsn,
        "kind": l.kind,
        "what": l.what,
        "why": l.why,
    });
    if let Some(run) = &l.run {
        v["count"] = json!(run.count);
        v["last_at"] = render::time(run.last_at);
        v["last_lsn"] = json!(run.last_lsn);
    }
    if let Some(o) = l.origin {
        v["origin"] = json!(o);
    }
    v
}
