//! `agentlog snapshot`: write a snapshot of the folded state now.

use crate::cli::open::with_store;
use crate::cli::output::{self, Ui, W};
use anyhow::Result;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf) -> Result<ExitCode> {
    let info = with_store(&dir, |s| Ok(s.snapshot()?))?;
    if ui.json {
        output::json(
            w,
            &json!({"path": info.path, "lsn": info.lsn, "bytes": info.len}),
        )?;
    } else {
        writeln!(
            w,
            "snapshot of lsn {} written to {} ({} bytes)",
            info.lsn,
            info.path.display(),
            info.len
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
