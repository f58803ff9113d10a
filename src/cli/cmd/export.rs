//! `agentlog export`: write the registry as schema-v4 `registry.json`.

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
    /// Refuse (instead of leaving out with a warning) agents a v4 reader cannot read
    #[arg(long)]
    pub strict: bool,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Export) -> Result<ExitCode> {
    let (path, rep) =
        crate::ops::export(&dir, a.out.as_deref(), a.strict, &mut Bar::new(ui, "fold"))?;
    if ui.json {
        let skipped: Vec<_> = rep
            .skipped
            .iter()
            .map(|s| json!({"name": s.name, "reason": s.reason}))
            .collect();
        output::json(
            w,
            &json!({"path": path, "rows": rep.rows, "skipped": skipped}),
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
