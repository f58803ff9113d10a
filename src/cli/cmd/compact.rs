//! `agentlog compact`: drop retired agents and expired messages from sealed
//! segments (`--dry-run`: report what would be dropped, read-only).

use crate::cli::args::{clock, time};
use crate::cli::open::with_store;
use crate::cli::output::{self, Ui, W};
use crate::cli::render;
use agentlog::compact::CompactionReport;
use agentlog::time::Timestamp;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Compact {
    /// Retention's "now" (RFC 3339 UTC) [default: $AGENTLOG_NOW, else the clock]
    #[arg(long, value_name = "TIME", value_parser = time, env = "AGENTLOG_NOW")]
    pub now: Option<Timestamp>,
    /// Report what would be dropped; change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Accept a --now later than both the clock and the log's last event
    #[arg(long)]
    pub force_now: bool,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Compact) -> Result<ExitCode> {
    let spinner = ui.spinner("compacting");
    let clock = (!a.force_now).then(clock);
    // A dry run plans from the read-only store (no writer lock); a real
    // compaction runs on the writer's store (the daemon's, when inside it),
    // as does a dry run inside a replica's daemon: it plans over the
    // stream's last sequence. (A replica without its daemon plans over its
    // local mirror, read-only, like any store.)
    let through_stream = crate::cli::open::served_store().is_some_and(|s| s.is_replica());
    let rep = if a.dry_run && !through_stream {
        crate::ops::compact(&dir, a.now, true, clock).map_err(anyhow::Error::from)
    } else {
        with_store(&dir, |s| {
            Ok(crate::ops::compact_store(s, a.now, a.dry_run, clock)?)
        })
    };
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let rep = rep?;
    if ui.json {
        let mut doc = serde_json::to_value(&rep)?;
        doc["now"] = render::time(rep.now);
        output::json(w, &doc)?;
    } else {
        print_compaction(w, &rep)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The text report (`agentlog compact`, and the demo's tour).
pub fn print_compaction(w: &mut W, rep: &CompactionReport) -> Result<()> {
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
        output::human_bytes(rep.bytes_before),
        output::human_bytes(rep.bytes_after),
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
