//! `agentlog export`: write the registry as `registry.json` of schema 4 or 16.

use crate::cli::output::{self, Bar, Ui, W};
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Export {
    /// Where to write [default: DIR/registry.json]
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Refuse (instead of leaving out with a warning) agents a reader of the schema cannot read
    #[arg(long)]
    pub strict: bool,
    /// Write schema 4 (the design card) or 16 (today's fno readers)
    /// [default: the store's, set by `init --schema`, else 4]
    #[arg(long, value_name = "N", value_parser = super::check::parse_schema)]
    pub schema: Option<agentlog::schemas::Schema>,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Export) -> Result<ExitCode> {
    let (path, rep) = crate::ops::export(
        &dir,
        a.out.as_deref(),
        a.strict,
        a.schema,
        &mut Bar::new(ui, "fold"),
    )?;
    for lossy in &rep.lossy {
        // The keys stay in the log; the chosen schema has no place for them.
        eprintln!(
            "warning: agent `{}` written without {} (no such key in schema {}; kept in the log)",
            output::escaped(&lossy.name),
            output::escaped(&lossy.keys.join(", ")),
            rep.schema
        );
    }
    if ui.json {
        let skipped: Vec<_> = rep
            .skipped
            .iter()
            .map(|s| json!({"name": s.name, "reason": s.reason}))
            .collect();
        output::json(
            w,
            &json!({"path": path, "schema_version": rep.schema, "rows": rep.rows,
                    "skipped": skipped, "lossy": rep.lossy.iter()
                        .map(|l| json!({"name": l.name, "keys": l.keys})).collect::<Vec<_>>()}),
        )?;
    } else {
        let path = output::escaped(&path.to_string_lossy()).into_owned();
        // Each left-out agent was already named, with its reason, in a
        // warning on stderr: say it once.
        match rep.skipped.len() {
            0 => writeln!(w, "exported {} agents to {path}", rep.rows)?,
            n => writeln!(
                w,
                "exported {} agents to {path}; left out {n} (see the warnings)",
                rep.rows
            )?,
        }
    }
    Ok(ExitCode::SUCCESS)
}
