//! `agentlog stats`: events, agents by status, messages, segments, bytes,
//! the LSN range and snapshots.

use crate::cli::output::{self, Bar, Ui, W};
use crate::ops::stats::Stats;
use anyhow::Result;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf) -> Result<ExitCode> {
    let st = crate::ops::stats::stats(&dir, &mut Bar::new(ui, "stats"))?;
    if ui.json {
        let by_status: serde_json::Map<String, serde_json::Value> = st
            .by_status
            .iter()
            .map(|(s, n)| (s.to_string(), json!(n)))
            .collect();
        let snaps: Vec<_> = st
            .snapshots
            .iter()
            .map(|(lsn, len)| json!({"lsn": lsn, "bytes": len}))
            .collect();
        output::json(
            w,
            &json!({
                "dir": dir,
                "events": st.events,
                "first_lsn": st.first_lsn,
                "last_lsn": st.last_lsn,
                "segments": st.segments,
                "used_bytes": st.used_bytes,
                "disk_bytes": st.disk_bytes,
                "generation": st.generation,
                "agents": st.agents,
                "by_status": by_status,
                "messages": st.messages,
                "messages_dropped": st.messages_dropped,
                "sessions": st.sessions,
                "anomalies": st.anomalies,
                "snapshots": snaps,
            }),
        )?;
    } else {
        print_stats(w, &dir, &st)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The text report (`agentlog stats`, and the demo's tour).
pub fn print_stats(w: &mut W, dir: &Path, st: &Stats) -> Result<()> {
    let range = match (st.first_lsn, st.last_lsn) {
        (Some(a), Some(b)) => format!("lsn {a}..={b}"),
        _ => "empty".to_string(),
    };
    let by_status: Vec<String> = st
        .by_status
        .iter()
        .map(|(s, n)| format!("{s} {n}"))
        .collect();
    writeln!(w, "store       {}", dir.display())?;
    writeln!(w, "events      {} ({range})", st.events)?;
    writeln!(
        w,
        "log         {} segment(s), {} used, {} on disk, generation {}",
        st.segments,
        output::human_bytes(st.used_bytes),
        output::human_bytes(st.disk_bytes),
        st.generation
    )?;
    if by_status.is_empty() {
        writeln!(w, "agents      {}", st.agents)?;
    } else {
        writeln!(w, "agents      {} ({})", st.agents, by_status.join(", "))?;
    }
    writeln!(
        w,
        "messages    {} live, {} dropped by the cap; sessions {} open",
        st.messages, st.messages_dropped, st.sessions
    )?;
    match st.snapshots.last() {
        Some((lsn, len)) => writeln!(
            w,
            "snapshots   {} kept, newest at lsn {lsn} ({})",
            st.snapshots.len(),
            output::human_bytes(*len)
        )?,
        None => writeln!(w, "snapshots   none")?,
    }
    if st.anomalies > 0 {
        writeln!(
            w,
            "anomalies   {} event(s) had no effect when folded",
            st.anomalies
        )?;
    }
    Ok(())
}
