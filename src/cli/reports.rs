//! Reports of whole-store operations: `stats` and `compact` (also printed
//! by the demo), in text or `--json`.

use super::args;
use super::commands::W;
use super::output::{self, Ui};
use super::view;
use crate::ops;
use agentlog::compact::CompactionReport;
use anyhow::Result;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub(super) fn stats(w: &mut W, ui: &Ui, dir: PathBuf) -> Result<ExitCode> {
    let st = ops::stats::stats(&dir, &mut super::commands::Bar::new(ui, "stats"))?;
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

pub(super) fn print_stats(w: &mut W, dir: &Path, st: &ops::stats::Stats) -> Result<()> {
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
        human_bytes(st.used_bytes),
        human_bytes(st.disk_bytes),
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
            human_bytes(*len)
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

pub(super) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

pub(super) fn compact(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Compact) -> Result<ExitCode> {
    let spinner = ui.spinner("compacting");
    let clock = (!a.force_now).then(args::clock);
    // A dry run plans from the read-only store (no writer lock); a real
    // compaction runs on the writer's store (the daemon's, when inside it).
    let rep = if a.dry_run {
        ops::compact(&dir, a.now, true, clock).map_err(anyhow::Error::from)
    } else {
        super::commands::with_store(&dir, |s| Ok(ops::compact_store(s, a.now, false, clock)?))
    };
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let rep = rep?;
    if ui.json {
        let mut doc = serde_json::to_value(&rep)?;
        doc["now"] = view::time(rep.now);
        output::json(w, &doc)?;
    } else {
        print_compaction(w, &rep)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn print_compaction(w: &mut W, rep: &CompactionReport) -> Result<()> {
    let verb = if rep.dry_run { "would drop" } else { "dropped" };
    writeln!(
        w,
        "compaction at {} over lsn ..={}{}",
        rep.now,
        rep.upto_lsn,
        if rep.dry_run {
            " (dry run: nothing changed)"
        } else {
            ""
        }
    )?;
    writeln!(
        w,
        "  events: {} scanned, {} kept, {verb} {} ({} heartbeats collapsed)",
        rep.records_scanned, rep.events_kept, rep.events_dropped, rep.heartbeats_collapsed
    )?;
    writeln!(
        w,
        "  bytes: {} before, {} after{}",
        human_bytes(rep.bytes_before),
        human_bytes(rep.bytes_after),
        if rep.dry_run { " (estimated)" } else { "" }
    )?;
    writeln!(
        w,
        "  agents retired: {}; messages {verb}: {}; sessions {verb}: {}",
        rep.agents_retired.len(),
        rep.messages_dropped,
        rep.sessions_dropped
    )?;
    if !rep.agents_retired.is_empty() {
        let mut names: Vec<&str> = rep.agents_retired.iter().map(String::as_str).collect();
        let more = names.len().saturating_sub(8);
        names.truncate(8);
        let tail = if more > 0 {
            format!(" … and {more} more")
        } else {
            String::new()
        };
        let names = names.join(", ");
        writeln!(w, "  retired: {}{tail}", output::escaped(&names))?;
    }
    writeln!(
        w,
        "  generation {} → {}, {} ms",
        rep.generation_before, rep.generation, rep.duration_ms
    )?;
    Ok(())
}
