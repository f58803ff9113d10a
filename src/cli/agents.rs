//! Reading mail and the seeds' other agent questions on the command line:
//! `read` (plain, paged by `--budget`/`--limit`, waiting with `--wait`, one
//! code path), `show`, and `presence`. A read delivers first and
//! acknowledges after: the page is printed and stdout flushed before its
//! read receipt is appended, so only what reached the caller counts as read.
//! A direct wait follows the log read-only (no writer lock, see `ops::inbox`)
//! and opens the store for writing only once there is mail or the time is
//! up. Inside the daemon the connection has already waited on the watch
//! (`daemon::watch::read_when_mail`); `--wait` then carries the time left,
//! and an empty page with time left means another reader took the mail
//! first ([`MailTaken`]: the daemon waits again).

use super::args;
use super::commands::{served_store, with_store, W};
use super::output::{self, Ui};
use super::view;
use agentlog::ops::inbox;
use agentlog::probe::ProcProbe;
use agentlog::registry::queries::{render_line, PageLimits, UnreadPage};
use agentlog::registry::Message;
use agentlog::time::Timestamp;
use anyhow::{Context, Result};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// A daemon's waiting read found no mail although it was woken for some and
/// time is left: another reader took it first. Never shown to a user: the
/// daemon waits again (PROTOCOL.md, "Waiting reads").
#[derive(Debug, thiserror::Error)]
#[error("the unread mail was taken by another reader first")]
pub struct MailTaken;

/// `read NAME [--budget BYTES] [--limit N] [--wait SECONDS]`.
pub fn read(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Read) -> Result<ExitCode> {
    let limits = PageLimits {
        budget: a.budget,
        limit: a.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
    };
    let project = a.project_root.as_deref();
    let at = a.at.checked()?;
    let served = served_store().is_some();
    let deadline = a.wait.map(|d| Instant::now() + d);
    loop {
        if let (Some(deadline), false) = (deadline, served) {
            // Returns on mail or at the deadline; the read below tells which.
            let left = deadline.saturating_duration_since(Instant::now());
            inbox::wait_for_unread(&dir, &a.name, project, at, left, || {
                tracing::debug!(agent = %a.name, "waiting for unread messages");
            })?;
        }
        let delivered = with_store(&dir, |s| {
            let at = at.unwrap_or_else(Timestamp::now);
            let page = s.unread_page(&a.name, project, limits, Some(at))?;
            let time_left = deadline.is_some_and(|d| Instant::now() < d);
            if page.messages.is_empty() && time_left {
                // Another reader took the mail first: wait again.
                return if served {
                    Err(MailTaken.into())
                } else {
                    Ok(false)
                };
            }
            let dropped = s.with_state(|st, _| {
                st.drops_for(&a.name)
                    .into_iter()
                    .map(|(from, n)| (from.to_string(), n))
                    .collect::<Vec<_>>()
            });
            let shown = Shown {
                name: &a.name,
                page: &page,
                dropped: &dropped,
                limits,
                timed_out: deadline.is_some() && page.messages.is_empty(),
            };
            shown
                .print(w, ui)
                .and_then(|()| w.flush())
                .with_context(|| {
                    format!(
                        "could not deliver {} message(s) to stdout; nothing was marked read",
                        page.messages.len()
                    )
                })?;
            let ids: Vec<u64> = page.messages.iter().map(|m| m.id).collect();
            s.mark_read(&a.name, &ids, Some(at)).with_context(|| {
                format!("the messages were printed but their read receipt was not recorded; they will show again (ids {ids:?})")
            })?;
            Ok(true)
        })?;
        if delivered {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// What one read shows: a page of unread mail, the messages the cap dropped
/// (by sender), and whether a wait timed out.
struct Shown<'a> {
    name: &'a str,
    page: &'a UnreadPage,
    dropped: &'a [(String, u64)],
    limits: PageLimits,
    timed_out: bool,
}

impl Shown<'_> {
    /// `{"agent", "messages", "dropped", "left", "timed_out"}`; or a note on
    /// dropped messages, then a table (no page limit) or one measured line a
    /// message and a count of what is left.
    fn print(&self, w: &mut W, ui: &Ui) -> std::io::Result<()> {
        let name = output::escaped(self.name);
        if ui.json {
            let m: Vec<_> = self.page.messages.iter().map(view::message).collect();
            let d: Vec<_> = self
                .dropped
                .iter()
                .map(|(from, n)| json!({"from": from, "count": n}))
                .collect();
            return output::json(
                w,
                &json!({"agent": self.name, "messages": m, "dropped": d, "left": self.page.left, "timed_out": self.timed_out}),
            );
        }
        if !self.dropped.is_empty() {
            let total: u64 = self.dropped.iter().map(|(_, n)| n).sum();
            let by: Vec<String> = self
                .dropped
                .iter()
                .map(|(from, n)| format!("{n} from `{}`", output::escaped(from)))
                .collect();
            writeln!(
                w,
                "note: {total} message(s) to `{name}` or to all were dropped by the message cap: {}",
                by.join(", ")
            )?;
        }
        let msgs = &self.page.messages;
        if msgs.is_empty() {
            let why = if self.timed_out {
                " (the wait timed out)"
            } else {
                ""
            };
            return writeln!(w, "no unread messages for `{name}`{why}");
        }
        if self.limits.is_unbounded() {
            return table(w, msgs);
        }
        for m in msgs {
            writeln!(w, "{}", render_line(m))?;
        }
        if self.page.left > 0 {
            writeln!(w, "({} more unread)", self.page.left)?;
        }
        Ok(())
    }
}

fn table(w: &mut W, msgs: &[Message]) -> std::io::Result<()> {
    let rows: Vec<_> = msgs
        .iter()
        .map(|m| {
            vec![
                m.id.to_string(),
                m.posted_at.to_string(),
                m.from.clone(),
                m.to.clone().unwrap_or_else(|| "(all)".into()),
                m.category.clone(),
                m.priority.to_string(),
                m.body.clone(),
            ]
        })
        .collect();
    output::table(
        w,
        &["ID", "POSTED", "FROM", "TO", "CATEGORY", "PRIORITY", "BODY"],
        &rows,
    )
}

/// `show NAME`: exit 1 "not found" for an unknown name.
pub fn show(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Show) -> Result<ExitCode> {
    let now = a.at.at.unwrap_or_else(Timestamp::now);
    let s = inbox::show(&dir, &a.name, now)?;
    let ag = &s.agent;
    if ui.json {
        let mut doc = view::agent(ag);
        doc["unread"] = json!(s.unread);
        doc["sent"] = json!(s.sent);
        output::json(w, &doc)?;
        return Ok(ExitCode::SUCCESS);
    }
    let doc = view::agent(ag);
    let Some(fields) = doc.as_object() else {
        unreachable!("view::agent builds an object")
    };
    let width = fields.keys().map(String::len).max().unwrap_or(0);
    for (k, v) in fields {
        let text = match v {
            serde_json::Value::Null => "-".to_string(),
            serde_json::Value::String(s) if s.is_empty() => "-".to_string(),
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        writeln!(w, "{k:<width$}  {text}")?;
    }
    writeln!(w, "{:<width$}  {}", "unread", s.unread)?;
    writeln!(w, "{:<width$}  {}", "sent", s.sent)?;
    Ok(ExitCode::SUCCESS)
}

/// `presence NAME` / `presence --any-transport`: exit 0 live, 1 not.
pub fn presence(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Presence) -> Result<ExitCode> {
    let answers = match &a.name {
        Some(name) => vec![(name.clone(), inbox::agent_presence(&dir, name, &ProcProbe)?)],
        None => inbox::transport_presence(&dir, &ProcProbe)?,
    };
    let live = answers.iter().any(|(_, p)| p.is_live());
    if ui.json {
        let agents: Vec<_> = answers
            .iter()
            .map(|(n, p)| json!({"agent": n, "live": p.is_live(), "presence": p.to_string()}))
            .collect();
        output::json(w, &json!({"live": live, "agents": agents}))?;
    } else if answers.is_empty() {
        writeln!(w, "no transport-attached agents")?;
    } else {
        for (n, p) in &answers {
            writeln!(w, "`{n}`: {p}")?;
        }
    }
    Ok(if live {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
