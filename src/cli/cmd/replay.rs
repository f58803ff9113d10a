//! `agentlog replay`: the registry as it was at a time or LSN (optionally
//! exported as `registry.json`).

use crate::cli::args::time;
use crate::cli::output::{self, Bar, Ui, W};
use crate::cli::{render, Usage};
use agentlog::log::Lsn;
use agentlog::store::Until;
use agentlog::time::Timestamp;
use anyhow::{Context, Result};
use clap::Args;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("point").required(true).args(["at", "lsn"])))]
pub struct Replay {
    /// The registry as of this time (events at or before it)
    #[arg(long, value_name = "TIME", value_parser = time)]
    pub at: Option<Timestamp>,
    /// The registry as of this LSN (inclusive)
    #[arg(long, value_name = "N")]
    pub lsn: Option<u64>,
    /// Also write that registry as schema-v4 registry.json
    #[arg(long, value_name = "FILE")]
    pub export: Option<PathBuf>,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Replay) -> Result<ExitCode> {
    let point = match (a.at, a.lsn) {
        (Some(t), _) => Until::Time(t),
        (None, Some(l)) => Until::Lsn(l),
        (None, None) => return Err(Usage("replay needs --at TIME or --lsn N".into()).into()),
    };
    let r = crate::ops::replay(&dir, point, &mut Bar::new(ui, "replay"))?;
    let exported = match &a.export {
        Some(file) => Some(
            agentlog::export::export_to(
                file,
                r.state.agents().iter(),
                &Default::default(),
                &Default::default(),
            )
            .with_context(|| format!("exporting the replayed registry to {}", file.display()))?,
        ),
        None => None,
    };
    if ui.json {
        let rows: Vec<_> = r.state.agents().iter().map(render::agent).collect();
        let mut doc = json!({
            "events": r.events,
            "last": lsn_at(r.last),
            "next": lsn_at(r.next),
            "agents": rows,
            "messages": r.state.messages().len(),
            "sessions": r.state.sessions().len(),
        });
        if let (Some(file), Some(rep)) = (&a.export, &exported) {
            doc["export"] = json!({
                "file": file,
                "rows": rep.rows,
                "skipped": rep.skipped.iter().map(|s| json!({"name": s.name, "reason": s.reason})).collect::<Vec<_>>(),
            });
        }
        output::json(w, &doc)?;
    } else {
        match r.last {
            Some((lsn, at)) => writeln!(
                w,
                "registry as of lsn {lsn} ({at}): {} events folded, {} agents, {} messages",
                r.events,
                r.state.agents().len(),
                r.state.messages().len()
            )?,
            None => writeln!(w, "registry before the first event: empty")?,
        }
        if let Some((lsn, at)) = r.next {
            writeln!(w, "next event: lsn {lsn} at {at}")?;
        }
        let rows: Vec<_> = r.state.agents().iter().map(render::agent_row).collect();
        output::table(w, &render::AGENT_HEADERS, &rows)?;
        if let (Some(file), Some(rep)) = (&a.export, &exported) {
            writeln!(
                w,
                "exported {} agents to {} ({} left out)",
                rep.rows,
                file.display(),
                rep.skipped.len()
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `{"lsn", "at"}` of a folded event, or `null`.
fn lsn_at(p: Option<(Lsn, Timestamp)>) -> Value {
    p.map_or(
        Value::Null,
        |(lsn, at)| json!({"lsn": lsn, "at": render::time(at)}),
    )
}
