//! `agentlog check [--schema 4|16] FILE`: the readers' contract
//! (`agentlog::check`) run on a file. Exit 0 when every existing reader accepts it, 1 with one
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
    /// Also require this schema_version (exports write 4 unless told 16)
    #[arg(long, value_name = "N")]
    pub expect_version: Option<u64>,
    /// Judge by the readers of schema 4 or 16 [default: the schema the file
    /// declares picks: 4 for 1 to 4, 16 above]
    #[arg(long, value_name = "N", value_parser = parse_schema)]
    pub schema: Option<agentlog::schemas::Schema>,
}

/// `4` or `16`, the schemas agentlog writes and judges.
pub fn parse_schema(s: &str) -> Result<agentlog::schemas::Schema, String> {
    let n: u64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a schema number"))?;
    agentlog::schemas::Schema::from_version(n)
}

pub fn run(ui: &Ui, a: CheckFile) -> Result<ExitCode> {
    let problems = agentlog::check::check_file_as(&a.file, a.schema, a.expect_version)
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
            let schema = match a.schema {
                Some(s) => s.version().to_string(),
                None => declared_contract(&a.file),
            };
            writeln!(
                out,
                "accepted: every schema-v{schema} reader reads {}",
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

/// The contract a file that passed was judged by: its declared version's.
fn declared_contract(file: &std::path::Path) -> String {
    let version = std::fs::read(file)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|d| d.get("schema_version").and_then(serde_json::Value::as_u64));
    match version {
        Some(5..) => "16".to_string(),
        _ => "4".to_string(),
    }
}
