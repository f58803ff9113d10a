//! `agentlog demo`: runs `ops::demo::demo` in a fresh directory and prints
//! the tour: what the fleet did, stats, the registry, one agent's audit,
//! where the files are, and the schema-v4 readers' contract's verdict
//! (`agentlog check`) on the exported `registry.json`.

use super::audit::audit_line;
use super::compact::print_compaction;
use super::stats::print_stats;
use crate::cli::output::{self, Ui, W};
use crate::cli::render;
use crate::ops::demo::{demo, DemoOptions, DemoReport};
use anyhow::{Context, Result};
use clap::Args;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Registry rows and audit lines printed in the text tour (the rest are
/// counted, with the command that shows them).
const SHOWN_ROWS: usize = 15;
const SHOWN_AUDIT: usize = 30;

#[derive(Debug, Args)]
pub struct Demo {
    /// Agent names in the simulated fleet (each may live several lives)
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::ops::demo::MAX_AGENTS)))]
    pub agents: u32,
    /// Simulated hours of fleet activity (at most 30 days)
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::ops::demo::MAX_HOURS)))]
    pub hours: u32,
    /// Seed of the simulation (same seed, same history)
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

pub fn run(ui: &Ui, dir: Option<PathBuf>, a: Demo) -> Result<ExitCode> {
    let dir = match dir {
        Some(d) => d,
        // Private like every store `init` makes (0700), so opening it warns of nothing.
        None => tempfile::Builder::new()
            .prefix("agentlog-demo-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()
            .context("creating a temporary directory for the demo")?
            .keep(),
    };
    let opts = DemoOptions {
        agents: a.agents,
        hours: a.hours,
        seed: a.seed,
        ..DemoOptions::default()
    };
    let spinner = ui.spinner("running the simulated fleet");
    let rep = demo(&dir, &opts);
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let rep = rep?;
    let check = conformance(&rep.export_path)?;
    let mut out = output::Out::new(std::io::stdout().lock(), false);
    if ui.json {
        print_json(&mut out, &rep, &check)?;
    } else {
        print_text(&mut out, &rep, &check)?;
    }
    out.flush()?;
    Ok(match check {
        Check::Rejected(_) => {
            eprintln!(
                "agentlog: the exported {} was rejected by the schema-v4 readers' contract (agentlog check)",
                rep.export_path.display()
            );
            ExitCode::from(1)
        }
        Check::Accepted => ExitCode::SUCCESS,
    })
}

/// The schema-v4 readers' contract's verdict on the export.
enum Check {
    Accepted,
    Rejected(String),
}

/// Runs the project's own check (`agentlog::check`, as `agentlog check`
/// does) on the exported file.
fn conformance(file: &Path) -> Result<Check> {
    let problems = agentlog::check::check_file(file, Some(4))
        .with_context(|| format!("cannot read {}", file.display()))?;
    Ok(if problems.is_empty() {
        Check::Accepted
    } else {
        let lines: Vec<String> = problems
            .iter()
            .map(|p| format!("   {}", output::escaped(&p.to_string())))
            .collect();
        Check::Rejected(lines.join("\n"))
    })
}

fn print_json(w: &mut W, rep: &DemoReport, check: &Check) -> Result<()> {
    let c = &rep.counts;
    let (verdict, detail) = match check {
        Check::Accepted => ("accepted", String::new()),
        Check::Rejected(d) => ("rejected", d.clone()),
    };
    let mut compaction = serde_json::to_value(&rep.compaction)?;
    compaction["now"] = render::time(rep.compaction.now);
    output::json(
        w,
        &json!({
            "dir": rep.dir,
            "simulated": {"from": render::time(rep.start), "to": render::time(rep.end)},
            "fleet": {
                "registrations": c.registrations, "heartbeats": c.heartbeats,
                "status_changes": c.status_changes, "posts": c.posts, "reads": c.reads,
                "session_events": c.sessions, "completed": c.completed, "failed": c.failed,
                "hung": c.hung, "died": c.died, "swept": c.swept,
            },
            "snapshot": {"path": rep.snapshot.path, "lsn": rep.snapshot.lsn, "bytes": rep.snapshot.len},
            "export": {"path": rep.export_path, "rows": rep.export.rows, "skipped": rep.export.skipped.len(),
                       "conformance": verdict, "conformance_detail": detail},
            "compaction": compaction,
            "stats": {"events": rep.stats.events, "agents": rep.stats.agents,
                      "messages": rep.stats.messages, "segments": rep.stats.segments,
                      "used_bytes": rep.stats.used_bytes},
            "registry": rep.registry.iter().map(render::agent).collect::<Vec<_>>(),
            "featured": rep.featured,
            "audit": rep.audit.iter().map(audit_line).collect::<Vec<_>>(),
            "elapsed_ms": rep.elapsed_ms,
        }),
    )?;
    Ok(())
}

fn print_text(w: &mut W, rep: &DemoReport, check: &Check) -> Result<()> {
    let c = &rep.counts;
    writeln!(
        w,
        "== agentlog demo: a simulated fleet from {} to {} ({} ms of real time)",
        rep.start, rep.end, rep.elapsed_ms
    )?;
    writeln!(
        w,
        "{} registrations, {} heartbeats, {} status changes, {} messages posted, {} inboxes read, {} session events",
        c.registrations, c.heartbeats, c.status_changes, c.posts, c.reads, c.sessions
    )?;
    writeln!(
        w,
        "lives ended: {} completed, {} failed, {} hung (lease expired), {} died (process gone); sweeps recorded {} status changes",
        c.completed, c.failed, c.hung, c.died, c.swept
    )?;
    writeln!(w)?;
    writeln!(
        w,
        "== snapshot: lsn {} ({})",
        rep.snapshot.lsn,
        output::human_bytes(rep.snapshot.len)
    )?;
    writeln!(
        w,
        "== export: {} agents to {}",
        rep.export.rows,
        rep.export_path.display()
    )?;
    match check {
        Check::Accepted => writeln!(
            w,
            "   schema-v4 readers' contract (agentlog check): ACCEPTED (every existing reader reads it)"
        )?,
        Check::Rejected(d) => writeln!(w, "   schema-v4 readers' contract (agentlog check): REJECTED\n{d}")?,
    }
    writeln!(w)?;
    writeln!(w, "== compaction")?;
    print_compaction(w, &rep.compaction)?;
    writeln!(w)?;
    writeln!(w, "== stats")?;
    print_stats(w, &rep.dir, &rep.stats)?;
    writeln!(w)?;
    writeln!(w, "== registry ({} agents)", rep.registry.len())?;
    let rows: Vec<_> = rep
        .registry
        .iter()
        .take(SHOWN_ROWS)
        .map(render::agent_row)
        .collect();
    output::table(w, &render::AGENT_HEADERS, &rows)?;
    if rep.registry.len() > SHOWN_ROWS {
        writeln!(
            w,
            "… {} more: agentlog --dir {} list --all",
            rep.registry.len() - SHOWN_ROWS,
            rep.dir.display()
        )?;
    }
    writeln!(w)?;
    writeln!(w, "== audit of `{}`", rep.featured)?;
    let rows: Vec<_> = rep
        .audit
        .iter()
        .take(SHOWN_AUDIT)
        .map(|l| {
            vec![
                l.at.to_string(),
                l.lsn.to_string(),
                output::clip(&l.what, 72),
                l.why.clone().unwrap_or_default(),
            ]
        })
        .collect();
    output::table(w, &["TIME", "LSN", "EVENT", "WHY"], &rows)?;
    if rep.audit.len() > SHOWN_AUDIT {
        writeln!(
            w,
            "… {} more: agentlog --dir {} audit {}",
            rep.audit.len() - SHOWN_AUDIT,
            rep.dir.display(),
            rep.featured
        )?;
    }
    writeln!(w)?;
    writeln!(w, "== files")?;
    writeln!(w, "store     {}", rep.dir.display())?;
    writeln!(
        w,
        "log       {}",
        agentlog::StoreLayout::new(&rep.dir).log().display()
    )?;
    writeln!(
        w,
        "snapshots {}",
        agentlog::StoreLayout::new(&rep.dir).snapshots().display()
    )?;
    writeln!(w, "export    {}", rep.export_path.display())?;
    writeln!(
        w,
        "try: agentlog --dir {} audit {}   |   replay --at {}   |   verify",
        rep.dir.display(),
        rep.featured,
        rep.start.add_secs(3600)
    )?;
    Ok(())
}
