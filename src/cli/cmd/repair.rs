//! `agentlog repair`: `--salvage` copies every valid record into a new store;
//! `--cut-at-hole` cuts the newest segment at a zero hole after a power loss.

use crate::cli::output::{self, Ui, W};
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Repair {
    /// Copy every valid record, skipping damaged ones (the original is not changed)
    #[arg(long, required_unless_present = "cut_at_hole", requires = "out")]
    pub salvage: bool,
    /// After a power loss: cut the newest segment at a zero hole that valid
    /// records follow (everything from there is saved to `.broken`), and say
    /// which LSNs were dropped
    #[arg(long, conflicts_with = "salvage")]
    pub cut_at_hole: bool,
    /// The new store's directory for --salvage (must not exist or be empty)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Repair) -> Result<ExitCode> {
    let Some(out) = a.out.filter(|_| !a.cut_at_hole) else {
        return cut_at_hole(w, ui, dir);
    };
    let rep = crate::ops::salvage(&dir, &out)?;
    if ui.json {
        let bad: Vec<_> = rep
            .bad
            .iter()
            .map(|b| json!({"segment": b.segment, "offset": b.offset, "lsn": b.lsn, "reason": b.reason}))
            .collect();
        output::json(
            w,
            &json!({
                "out": out,
                "records_copied": rep.records_copied,
                "records_skipped": rep.records_skipped,
                "first_lsn": rep.first_lsn,
                "last_lsn": rep.last_lsn,
                "bad": bad,
            }),
        )?;
    } else {
        writeln!(
            w,
            "copied {} records into {} ({} skipped, {} damaged stretch(es))",
            rep.records_copied,
            out.display(),
            rep.records_skipped,
            rep.bad.len()
        )?;
        for b in &rep.bad {
            let lsn = output::lsn_or_unknown(b.lsn);
            writeln!(
                w,
                "skipped: segment {}, offset {}, {lsn}: {}",
                b.segment.display(),
                b.offset,
                b.reason
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn cut_at_hole(w: &mut W, ui: &Ui, dir: PathBuf) -> Result<ExitCode> {
    let rep = crate::ops::cut_at_hole(&dir)?;
    if ui.json {
        let cut: Vec<_> = rep
            .cut
            .iter()
            .map(|c| json!({"segment": c.segment, "offset": c.offset, "lsn": c.lsn, "bytes": c.bytes, "reason": c.reason, "broken_copy": c.broken_copy}))
            .collect();
        output::json(w, &json!({"last_lsn": rep.last_lsn, "cut": cut}))?;
    } else {
        if rep.cut.is_empty() {
            writeln!(w, "nothing to cut")?;
        }
        for c in &rep.cut {
            let lsn = output::lsn_or_unknown(c.lsn);
            writeln!(
                w,
                "cut: segment {}, offset {}, {lsn}, {} byte(s) saved to {}: {}",
                c.segment.display(),
                c.offset,
                c.bytes,
                c.broken_copy.display(),
                c.reason
            )?;
        }
        let last = rep
            .last_lsn
            .map_or("no records".to_string(), |l| format!("lsn {l}"));
        writeln!(w, "the log now ends at {last}")?;
    }
    Ok(ExitCode::SUCCESS)
}
