//! `agentlog audit`: one agent's timeline, heartbeat runs collapsed, as a
//! table or JSON. Memory stays flat in the log's and the timeline's length:
//! a first pass sizes the table and keeps a short timeline; a long one is
//! printed by a second pass over the same view. Nothing is printed until
//! the first pass has read the whole timeline.

use crate::cli::args::time;
use crate::cli::output::{self, Ui, W};
use crate::cli::render;
use crate::ops::audit::AuditLine;
use agentlog::time::Timestamp;
use anyhow::Result;
use clap::Args;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Audit {
    pub name: String,
    #[arg(long, value_name = "TIME", value_parser = time)]
    pub since: Option<Timestamp>,
    #[arg(long, value_name = "TIME", value_parser = time)]
    pub until: Option<Timestamp>,
}

/// Lines the first pass keeps; a longer timeline is read a second time to
/// be printed (its lines are never all held: a 10 M-event log's busiest
/// agent has ~30,000).
const KEPT_LINES: usize = 2048;

const HEADERS: [&str; 5] = ["TIME", "LSN", "EVENT", "WHY", "BY"];

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Audit) -> Result<ExitCode> {
    let audit = crate::ops::audit::Audit::open(&dir, &a.name, a.since, a.until)?;
    print(w, ui.json, &a.name, &audit, KEPT_LINES)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the audit: a first pass sizes the table's columns (and finds
/// whether any line has an origin, the BY column) keeping up to `kept`
/// lines; a timeline longer than that is printed by a second pass over the
/// same view. Nothing is printed before the first pass has read the whole
/// timeline, so damage found on the way leaves no partial output.
fn print(
    w: &mut W,
    json: bool,
    agent: &str,
    audit: &crate::ops::audit::Audit,
    kept: usize,
) -> Result<()> {
    let mut widths = output::Widths::of(&HEADERS);
    let mut cells = Vec::with_capacity(HEADERS.len());
    let (mut by, mut lines, mut count) = (false, Vec::new(), 0usize);
    audit.for_each(|l| {
        if !json {
            row(l, &mut cells);
            widths.measure(&cells);
            by |= l.origin.is_some();
        }
        if lines.len() < kept {
            lines.push(l.clone());
        }
        count += 1;
    })?;
    let mut printer = if json {
        Printer::Json(JsonEvents::new(agent))
    } else {
        let headers = &HEADERS[..if by { 5 } else { 4 }];
        widths.print(w, headers)?;
        Printer::Table { widths, cells, by }
    };
    if count <= kept {
        for l in &lines {
            printer.line(w, l)?;
        }
    } else {
        drop(lines);
        let mut failed = None;
        audit.for_each(|l| {
            if failed.is_none() {
                failed = printer.line(w, l).err();
            }
        })?;
        if let Some(e) = failed {
            return Err(e.into());
        }
    }
    printer.finish(w)?;
    Ok(())
}

/// The table's cells of `l` (all five; the BY cell is left out when no line
/// has an origin).
fn row(l: &AuditLine, cells: &mut Vec<String>) {
    cells.clear();
    cells.push(l.at.to_string());
    cells.push(l.lsn.to_string());
    cells.push(output::clip(&l.what, 72));
    cells.push(l.why.clone().unwrap_or_default());
    cells.push(output::or_dash(
        l.origin.map(|o| format!("uid {} pid {}", o.uid, o.pid)),
    ));
}

enum Printer {
    Table {
        widths: output::Widths,
        cells: Vec<String>,
        by: bool,
    },
    Json(JsonEvents),
}

impl Printer {
    fn line(&mut self, w: &mut W, l: &AuditLine) -> std::io::Result<()> {
        match self {
            Printer::Table { widths, cells, by } => {
                row(l, cells);
                let shown = if *by { 5 } else { 4 };
                widths.print(w, &cells[..shown])
            }
            Printer::Json(j) => j.event(w, &audit_line(l)),
        }
    }

    fn finish(self, w: &mut W) -> std::io::Result<()> {
        match self {
            Printer::Table { .. } => Ok(()),
            Printer::Json(j) => j.finish(w),
        }
    }
}

/// `{"agent": …, "events": […]}` written one event at a time, byte for byte
/// what [`output::json`] prints for the whole document.
struct JsonEvents {
    agent: String,
    any: bool,
}

impl JsonEvents {
    fn new(agent: &str) -> JsonEvents {
        JsonEvents {
            agent: agent.to_string(),
            any: false,
        }
    }

    fn event(&mut self, w: &mut W, event: &Value) -> std::io::Result<()> {
        if self.any {
            w.write_all(b",\n")?;
        } else {
            let agent = serde_json::to_string(&self.agent).map_err(std::io::Error::from)?;
            write!(w, "{{\n  \"agent\": {agent},\n  \"events\": [\n")?;
            self.any = true;
        }
        // The event as the document nests it: two levels in.
        let text = serde_json::to_string_pretty(event).map_err(std::io::Error::from)?;
        for (i, line) in text.lines().enumerate() {
            if i > 0 {
                w.write_all(b"\n")?;
            }
            write!(w, "    {line}")?;
        }
        Ok(())
    }

    fn finish(self, w: &mut W) -> std::io::Result<()> {
        if self.any {
            w.write_all(b"\n  ]\n}\n")
        } else {
            output::json(w, &json!({"agent": self.agent, "events": []}))
        }
    }
}

/// One audit line as JSON (a collapsed heartbeat run with its count and
/// last time and LSN); the demo prints the same.
pub fn audit_line(l: &AuditLine) -> Value {
    let mut v = json!({
        "at": render::time(l.at),
        "lsn": l.lsn,
        "kind": l.kind,
        "what": l.what,
        "why": l.why,
    });
    if let Some(run) = &l.run {
        v["count"] = json!(run.count);
        v["last_at"] = render::time(run.last_at);
        v["last_lsn"] = json!(run.last_lsn);
    }
    if let Some(o) = l.origin {
        v["origin"] = json!(o);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentlog::model::Status;
    use agentlog::registry::codec::Origin;
    use agentlog::registry::Registration;
    use agentlog::store::{with_origin, Store, StoreOptions};

    fn printed(json: bool, audit: &crate::ops::audit::Audit, kept: usize) -> String {
        let mut out = Vec::new();
        print(&mut out, json, "a", audit, kept).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// A timeline longer than the lines kept is printed by a second pass,
    /// byte for byte as from the kept lines; the streamed JSON is the
    /// document `output::json` prints; the table is `output::table`'s.
    #[test]
    fn a_long_timeline_prints_the_same_from_a_second_pass() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreOptions::short_lived()).unwrap();
        let t = |s: i64| Some(Timestamp::from_secs(1_796_040_000 + s));
        let mut r = Registration::new("a", "codex", "/w");
        r.pid = Some(7);
        store.register(r, t(0)).unwrap();
        for i in 1..40 {
            store.heartbeat("a", Some(7), t(i)).unwrap();
            if i % 3 == 0 {
                let status = if i % 2 == 0 {
                    Status::Busy
                } else {
                    Status::Idle
                };
                let note = "x".repeat(i as usize);
                let set = || store.set_status("a", status, Some(note.clone()), t(i));
                if i % 9 == 0 {
                    with_origin(Origin { uid: 1000, pid: 42 }, set).unwrap();
                } else {
                    set().unwrap();
                }
            }
        }
        store.close().unwrap();

        let whole = crate::ops::audit::Audit::open(dir.path(), "a", None, None).unwrap();
        let lines = crate::ops::audit::audit(dir.path(), "a", None, None).unwrap();
        assert!(lines.len() > 20, "{}", lines.len());
        let mut doc = Vec::new();
        let events: Vec<_> = lines.iter().map(audit_line).collect();
        output::json(&mut doc, &json!({"agent": "a", "events": events})).unwrap();
        assert_eq!(
            printed(true, &whole, usize::MAX),
            String::from_utf8(doc).unwrap()
        );
        let mut table = Vec::new();
        let rows: Vec<Vec<String>> = lines
            .iter()
            .map(|l| {
                let mut cells = Vec::new();
                row(l, &mut cells);
                cells
            })
            .collect();
        output::table(&mut table, &HEADERS, &rows).unwrap();
        let text = printed(false, &whole, usize::MAX);
        assert_eq!(text, String::from_utf8(table).unwrap());
        assert!(text.contains("uid 1000 pid 42"), "{text}");
        for json in [false, true] {
            assert_eq!(printed(json, &whole, 5), printed(json, &whole, usize::MAX));
        }

        // An empty window: the headers, or a document with no events.
        let none = crate::ops::audit::Audit::open(dir.path(), "a", t(1000), None).unwrap();
        assert_eq!(printed(false, &none, 5), "TIME  LSN  EVENT  WHY\n");
        assert_eq!(
            printed(true, &none, 5),
            "{\n  \"agent\": \"a\",\n  \"events\": []\n}\n"
        );
    }
}
