//! Dispatch: each subcommand calls one library function and prints the
//! result (text or `--json`). Returns the exit code for outcomes that are not
//! errors (`verify` finding damage prints its report and exits 1).

use super::args::{self, Cli, Command};
use super::output::{self, Ui};
use super::{view, Usage};
use agentlog::ops::{self, Flow, Point};
use anyhow::{Context, Result};
use indicatif::ProgressBar;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The store directory: `--dir`, else `$AGENTLOG_DIR` (both via clap), else
/// `~/.agentlog`.
fn store_dir(dir: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(d) = dir {
        return Ok(d);
    }
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Ok(PathBuf::from(home).join(".agentlog")),
        _ => Err(Usage(
            "no store directory: pass --dir DIR or set AGENTLOG_DIR (HOME is not set)".into(),
        )
        .into()),
    }
}

/// Draws library progress on an indicatif bar (when the UI allows one).
struct Bar(Option<ProgressBar>);

impl Bar {
    fn new(ui: &Ui, what: &str) -> Bar {
        Bar(ui.progress(0, what))
    }
}

impl ops::Progress for Bar {
    fn start(&mut self, total: u64) {
        if let Some(b) = &self.0 {
            b.set_length(total);
        }
    }
    fn advance(&mut self, pos: u64) {
        if let Some(b) = &self.0 {
            b.set_position(pos);
        }
    }
    fn finish(&mut self) {
        if let Some(b) = self.0.take() {
            b.finish_and_clear();
        }
    }
}

pub fn run(cli: Cli) -> Result<ExitCode> {
    let ui = Ui { json: cli.json };
    let dir = store_dir(cli.dir)?;
    let mut out = std::io::stdout().lock();
    let w = &mut out;
    let code = match cli.command {
        Command::Init => init(w, &ui, dir)?,
        Command::List(a) => list(w, &ui, dir, a)?,
        Command::Replay(a) => replay(w, &ui, dir, a)?,
        Command::Audit(a) => audit(w, &ui, dir, a)?,
        Command::Log(a) => dump(w, &ui, dir, a)?,
        Command::Verify => verify(w, &ui, dir)?,
        Command::Repair(a) => repair(w, &ui, dir, a)?,
    };
    out.flush()?;
    Ok(code)
}

type W<'a> = std::io::StdoutLock<'a>;

fn init(w: &mut W, ui: &Ui, dir: PathBuf) -> Result<ExitCode> {
    let rep = ops::init(&dir)?;
    if ui.json {
        output::json(
            w,
            &json!({"dir": dir, "created": rep.created, "events": rep.events}),
        )?;
    } else if rep.created {
        writeln!(w, "initialized an empty store at {}", dir.display())?;
    } else {
        writeln!(
            w,
            "store at {} already exists ({} events)",
            dir.display(),
            rep.events
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn list(w: &mut W, ui: &Ui, dir: PathBuf, a: args::List) -> Result<ExitCode> {
    let r = ops::replay(&dir, Point::Lsn(u64::MAX), &mut Bar::new(ui, "fold"))?;
    let agents: Vec<_> = r
        .state
        .agents()
        .iter()
        .filter(|ag| a.all || !ag.is_finished())
        .collect();
    if ui.json {
        let rows: Vec<_> = agents.iter().map(|ag| view::agent(ag)).collect();
        output::json(w, &json!({"agents": rows}))?;
    } else {
        let rows: Vec<_> = agents.iter().map(|ag| view::agent_row(ag)).collect();
        output::table(w, &view::AGENT_HEADERS, &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn replay(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Replay) -> Result<ExitCode> {
    let point = match (a.at, a.lsn) {
        (Some(t), _) => Point::Time(t),
        (None, Some(l)) => Point::Lsn(l),
        (None, None) => return Err(Usage("replay needs --at TIME or --lsn N".into()).into()),
    };
    let r = ops::replay(&dir, point, &mut Bar::new(ui, "replay"))?;
    let exported = match &a.export {
        Some(file) => Some(
            agentlog::export::export_to(
                file,
                r.state.agents().iter(),
                &Default::default(),
                &Default::default(),
            )
            .with_context(|| format!("exporting the replayed registry to {}", file.display()))?,
        ),
        None => None,
    };
    if ui.json {
        let rows: Vec<_> = r.state.agents().iter().map(view::agent).collect();
        let mut doc = json!({
            "events": r.events,
            "last": view::lsn_at(r.last),
            "next": view::lsn_at(r.next),
            "agents": rows,
            "messages": r.state.messages().len(),
            "sessions": r.state.sessions().len(),
        });
        if let (Some(file), Some(rep)) = (&a.export, &exported) {
            doc["export"] = json!({
                "file": file,
                "rows": rep.rows,
                "skipped": rep.skipped.iter().map(|s| json!({"name": s.name, "reason": s.reason})).collect::<Vec<_>>(),
            });
        }
        output::json(w, &doc)?;
    } else {
        match r.last {
            Some((lsn, at)) => writeln!(
                w,
                "registry as of lsn {lsn} ({at}): {} events folded, {} agents, {} messages",
                r.events,
                r.state.agents().len(),
                r.state.messages().len()
            )?,
            None => writeln!(w, "registry before the first event: empty")?,
        }
        if let Some((lsn, at)) = r.next {
            writeln!(w, "next event: lsn {lsn} at {at}")?;
        }
        let rows: Vec<_> = r.state.agents().iter().map(view::agent_row).collect();
        output::table(w, &view::AGENT_HEADERS, &rows)?;
        if let (Some(file), Some(rep)) = (&a.export, &exported) {
            writeln!(
                w,
                "exported {} agents to {} ({} left out)",
                rep.rows,
                file.display(),
                rep.skipped.len()
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn audit(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Audit) -> Result<ExitCode> {
    let lines = ops::audit::audit(&dir, &a.name, a.since, a.until, &mut Bar::new(ui, "audit"))?;
    if ui.json {
        let events: Vec<_> = lines.iter().map(view::audit_line).collect();
        output::json(w, &json!({"agent": a.name, "events": events}))?;
    } else {
        let rows: Vec<_> = lines
            .iter()
            .map(|l| {
                vec![
                    l.at.to_string(),
                    l.lsn.to_string(),
                    l.what.clone(),
                    l.why.clone().unwrap_or_default(),
                ]
            })
            .collect();
        output::table(w, &["TIME", "LSN", "EVENT", "WHY"], &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn dump(w: &mut W, ui: &Ui, dir: PathBuf, a: args::LogCmd) -> Result<ExitCode> {
    let follow = a.follow.then_some(Duration::from_millis(100));
    let mut failed: Option<std::io::Error> = None;
    ops::dump(&dir, a.from, follow, |e| {
        let r = if ui.json {
            let doc = match &e.event {
                Ok(ev) => json!({
                    "lsn": e.lsn,
                    "at": view::time(ev.at),
                    "kind": agentlog::registry::tag::name(ev.kind.tag()),
                    "event": ev.kind,
                }),
                Err(err) => json!({"lsn": e.lsn, "error": err.to_string()}),
            };
            output::json_line(w, &doc)
        } else {
            match &e.event {
                Ok(ev) => {
                    let d = ops::describe::describe(&ev.kind, e.lsn, None);
                    let why = d.why.map(|y| format!("  ({y})")).unwrap_or_default();
                    writeln!(w, "{:>8}  {}  {}{why}", e.lsn, ev.at, d.what)
                }
                Err(err) => writeln!(w, "{:>8}  undecodable: {err}", e.lsn),
            }
        };
        // Follow mode prints as events arrive.
        let r = r.and_then(|()| if follow.is_some() { w.flush() } else { Ok(()) });
        match r {
            Ok(()) => Flow::Continue,
            Err(err) => {
                failed = Some(err);
                Flow::Stop
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    Ok(ExitCode::SUCCESS)
}

fn verify(w: &mut W, ui: &Ui, dir: PathBuf) -> Result<ExitCode> {
    let v = ops::verify(&dir, &mut Bar::new(ui, "verify"))?;
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
            "{} records in {} segments, {} bytes, {range}",
            log.records, log.segments, log.bytes
        )?;
        for b in &log.bad {
            let lsn = b
                .lsn
                .map_or("lsn unknown".to_string(), |l| format!("lsn {l}"));
            writeln!(
                w,
                "damaged: segment {}, offset {}, {lsn}: {}",
                b.segment.display(),
                b.offset,
                b.reason
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
        eprintln!(
            "agentlog: log damaged: {n} bad record(s) in {}",
            dir.display()
        );
        Ok(ExitCode::from(1))
    }
}

fn repair(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Repair) -> Result<ExitCode> {
    ops::require_store(&dir)?;
    let rep = agentlog::log::salvage(&dir, &a.out)?;
    if ui.json {
        let bad: Vec<_> = rep
            .bad
            .iter()
            .map(|b| json!({"segment": b.segment, "offset": b.offset, "lsn": b.lsn, "reason": b.reason}))
            .collect();
        output::json(
            w,
            &json!({
                "out": a.out,
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
            a.out.display(),
            rep.records_skipped,
            rep.bad.len()
        )?;
        for b in &rep.bad {
            let lsn = b
                .lsn
                .map_or("lsn unknown".to_string(), |l| format!("lsn {l}"));
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
