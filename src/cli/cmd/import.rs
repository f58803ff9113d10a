//! `agentlog import`: import a `registry.json` of schema 1 to 16 (or a newer
//! one that only adds keys) as one batch.

use crate::cli::open::with_store;
use crate::cli::output::{self, Ui, W};
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Import {
    /// A registry.json of schema 1 to 16, or newer if only additive (imported as one batch, now)
    pub file: PathBuf,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Import) -> Result<ExitCode> {
    let rep = with_store(&dir, |s| Ok(s.import_registry(&a.file)?))?;
    let lsns = rep
        .lsns
        .as_ref()
        .map(|r| json!({"first": r.start(), "last": r.end()}));
    if ui.json {
        output::json(
            w,
            &json!({
                "file": rep.file,
                "schema_version": rep.schema_version,
                "imported": rep.imported,
                "replaced": rep.replaced,
                "lsns": lsns,
            }),
        )?;
    } else {
        let v = rep
            .schema_version
            .map_or("empty file".to_string(), |v| format!("schema {v}"));
        writeln!(
            w,
            "imported {} agents from {} ({v})",
            rep.imported,
            rep.file.display()
        )?;
        if !rep.replaced.is_empty() {
            let names = rep.replaced.join(", ");
            writeln!(w, "replaced finished agents: {}", output::escaped(&names))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
