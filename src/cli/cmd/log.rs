//! `agentlog log`: the raw events, like a dump tool (`--follow` keeps
//! printing; through a daemon it rides on a watch, see `remote`).

use crate::cli::output::{self, Ui, W};
use crate::cli::render;
use crate::ops::describe::describe;
use crate::ops::Flow;
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct LogCmd {
    /// First LSN to print
    #[arg(long, value_name = "LSN", default_value_t = 0)]
    pub from: u64,
    /// Keep printing new events as they are appended
    #[arg(long)]
    pub follow: bool,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: LogCmd) -> Result<ExitCode> {
    let follow = a.follow.then_some(Duration::from_millis(100));
    let mut failed: Option<std::io::Error> = None;
    crate::ops::dump(&dir, a.from, follow, |e| {
        let event = e
            .event
            .as_ref()
            .map_err(|err| err as &dyn std::fmt::Display);
        let r = log_entry(w, ui, e.lsn, event, e.origin);
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

/// One line of `log`: JSON (with `origin` when the event records who asked
/// for it) or `LSN  TIME  what  (why)  [uid U pid P]`.
pub fn log_entry(
    w: &mut W,
    ui: &Ui,
    lsn: u64,
    event: std::result::Result<&agentlog::registry::Event, &dyn std::fmt::Display>,
    origin: Option<agentlog::registry::codec::Origin>,
) -> std::io::Result<()> {
    if ui.json {
        let mut doc = match event {
            Ok(ev) => json!({
                "lsn": lsn,
                "at": render::time(ev.at),
                "kind": agentlog::registry::tag::name(ev.kind.tag()),
                "event": ev.kind,
            }),
            Err(err) => json!({"lsn": lsn, "error": err.to_string()}),
        };
        if let Some(o) = origin {
            doc["origin"] = json!(o);
        }
        if let Ok(agentlog::registry::Event {
            kind:
                agentlog::registry::EventKind::ExternalChange { source, .. }
                | agentlog::registry::EventKind::WorkerStateChanged { source, .. },
            ..
        }) = event
        {
            doc["actor"] = json!(agentlog::registry::ExternalChange::actor(source));
        }
        output::json_line(w, &doc)
    } else {
        match event {
            Ok(ev) => {
                let d = describe(&ev.kind, lsn, None);
                let why = d.why.map(|y| format!("  ({y})")).unwrap_or_default();
                let by = origin
                    .map(|o| format!("  [uid {} pid {}]", o.uid, o.pid))
                    .unwrap_or_default();
                let line = format!("{}{why}", d.what);
                writeln!(w, "{lsn:>8}  {}  {}{by}", ev.at, output::escaped(&line))
            }
            Err(err) => writeln!(w, "{lsn:>8}  undecodable: {err}"),
        }
    }
}
