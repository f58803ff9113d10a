//! `agentlog check FILE`: the schema-v4 readers' contract (`agentlog::check`)
//! run on a file. Exit 0 when every existing reader accepts it, 1 with one
//! line per problem (row, name, key) when one would not. Needs no store.

use crate::cli::output::{self, Ui};
use anyhow::{Context, Result};
use clap::Args;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct CheckFile {
    /// The registry.json to check (only read)
    pub file: PathBuf,
    /// Also require this schema_version (exports write 4)
    #[arg(long, value_name = "N")]
    pub expect_version: Option<u64>,
}

pub fn run(ui: &Ui, a: CheckFile) -> Result<ExitCode> {
    let problems = agentlog::check::check_file(&a.file, a.expect_version)
        .with_context(|| format!("cannot read {}", a.file.display()))?;
    let mut out = std::io::stdout().lock();
    if ui.json {
        let list: Vec<_> = problems
            .iter()
            .map(|p| json!({"row": p.row, "name": p.name, "key": p.key, "reason": p.reason}))
            .collect();
        output::json(
            &mut out,
            &json!({"file": a.file, "accepted": problems.is_empty(), "problems": list}),
        )?;
    } else {
        for p in &problems {
            writeln!(out, "{}", output::escaped(&p.to_string()))?;
        }
        if problems.is_empty() {
            writeln!(
                out,
                "accepted: every schema-v4 reader reads {}",
                output::escaped(&a.file.display().to_string())
            )?;
        } else {
            writeln!(out, "rejected: {} problem(s)", problems.len())?;
        }
    }
    out.flush()?;
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
