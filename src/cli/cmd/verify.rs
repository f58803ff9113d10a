//! `agentlog verify`: check every record's checksum and that every event
//! decodes; exit 1 (its report printed) when anything is damaged.

use crate::cli::output::{self, error_line, Bar, Ui, W};
use anyhow::Result;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf) -> Result<ExitCode> {
    let v = crate::ops::verify(&dir, &mut Bar::new(ui, "verify"))?;
    let log = &v.log;
    if ui.json {
        let bad: Vec<_> = log
            .bad
            .iter()
            .map(|b| json!({"segment": b.segment, "offset": b.offset, "lsn": b.lsn, "reason": b.reason}))
            .collect();
        let undecodable: Vec<_> = v
            .undecodable
            .iter()
            .map(|(lsn, reason)| json!({"lsn": lsn, "reason": reason}))
            .collect();
        output::json(
            w,
            &json!({
                "clean": v.is_clean(),
                "segments": log.segments,
                "records": log.records,
                "bytes": log.bytes,
                "first_lsn": log.first_lsn,
                "last_lsn": log.last_lsn,
                "generation": log.generation,
                "bad": bad,
                "torn_tail": log.torn_tail.as_ref().map(|t| json!({
                    "segment": t.segment,
                    "offset": t.offset,
                    "lsn": t.lsn,
                    "bytes": t.bytes,
                    "reason": t.reason,
                })),
                "undecodable": undecodable,
            }),
        )?;
    } else {
        let range = match (log.first_lsn, log.last_lsn) {
            (Some(a), Some(b)) => format!("lsn {a}..={b}"),
            _ => "no records".to_string(),
        };
        writeln!(
            w,
            "{} records in {} segment(s), {} bytes, {range}",
            log.records, log.segments, log.bytes
        )?;
        for b in &log.bad {
            let lsn = output::lsn_or_unknown(b.lsn);
            writeln!(
                w,
                "damaged: segment {}, offset {}, {lsn}: {}",
                b.segment.display(),
                b.offset,
                b.reason
            )?;
        }
        if let Some(t) = &log.torn_tail {
            let lsn = output::lsn_or_unknown(t.lsn);
            writeln!(
                w,
                "torn tail: segment {}, offset {}, {lsn}, {} byte(s): {} (not damage: a crash mid-write; the next writer open cuts it)",
                t.segment.display(),
                t.offset,
                t.bytes,
                t.reason
            )?;
        }
        for (lsn, reason) in &v.undecodable {
            writeln!(w, "undecodable: lsn {lsn}: {reason}")?;
        }
        if v.is_clean() {
            writeln!(w, "clean")?;
        }
    }
    if v.is_clean() {
        Ok(ExitCode::SUCCESS)
    } else {
        let n = log.bad.len() + v.undecodable.len();
        error_line(&format!(
            "log damaged: {n} bad record(s) in {}",
            dir.display()
        ));
        Ok(ExitCode::from(1))
    }
}
