//! `agentlog read`: an agent's unread mail (plain, paged by `--budget` or
//! `--limit`, waiting with `--wait`, one code path). A read delivers first
//! and acknowledges after: the page is printed and stdout flushed before its
//! read receipt is appended, so only what reached the caller counts as read.
//! A direct wait follows the log read-only (no writer lock, see
//! `ReadOnlyStore::wait_for_unread`) and opens the store for writing only
//! once there is mail or the time is up. Inside the daemon the connection
//! has already waited on the watch (`daemon::watch::read_when_mail`);
//! `--wait` then carries the time left, and an empty page with time left
//! means another reader took the mail first ([`MailTaken`]: the daemon
//! waits again).

use crate::cli::args::At;
use crate::cli::open::{served_store, with_store};
use crate::cli::output::{self, Ui, W};
use crate::cli::render;
use crate::ops::inbox;
use agentlog::registry::queries::{render_line, PageLimits, UnreadPage};
use agentlog::registry::Message;
use agentlog::time::Timestamp;
use anyhow::{Context, Result};
use clap::Args;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Parses a wait in seconds: finite, not negative.
fn wait_seconds(s: &str) -> Result<std::time::Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    std::time::Duration::try_from_secs_f64(v)
        .map_err(|_| format!("`{s}` must be a finite, non-negative number of seconds"))
}

#[derive(Debug, Args)]
pub struct Read {
    pub name: String,
    #[arg(long, value_name = "P")]
    pub project_root: Option<String>,
    /// Show unread messages oldest first up to this many bytes of one-line
    /// rendering (at least one); the rest stay unread
    #[arg(long, value_name = "BYTES")]
    pub budget: Option<usize>,
    /// Show at most N unread messages; the rest stay unread
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,
    /// Block until there is unread mail or SECONDS pass (then exit 0, empty)
    #[arg(long, value_name = "SECONDS", value_parser = wait_seconds)]
    pub wait: Option<std::time::Duration>,
    #[command(flatten)]
    pub at: At,
}

/// A daemon's waiting read found no mail although it was woken for some and
/// time is left: another reader took it first. Never shown to a user: the
/// daemon waits again (PROTOCOL.md, "Waiting reads").
#[derive(Debug, thiserror::Error)]
#[error("the unread mail was taken by another reader first")]
pub struct MailTaken;

/// `read NAME [--budget BYTES] [--limit N] [--wait SECONDS]`.
pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Read) -> Result<ExitCode> {
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
            let m: Vec<_> = self.page.messages.iter().map(message).collect();
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
                m.posted.from.clone(),
                m.posted.to.clone().unwrap_or_else(|| "(all)".into()),
                m.posted.category.clone(),
                m.posted.priority.to_string(),
                m.posted.body.clone(),
            ]
        })
        .collect();
    output::table(
        w,
        &["ID", "POSTED", "FROM", "TO", "CATEGORY", "PRIORITY", "BODY"],
        &rows,
    )
}

/// A message as `read --json` prints it.
fn message(m: &Message) -> Value {
    json!({
        "id": m.id,
        "posted_at": render::time(m.posted_at),
        "from": m.posted.from,
        "to": m.posted.to,
        "category": m.posted.category,
        "body": m.posted.body,
        "priority": m.posted.priority.as_str(),
        "privacy": m.posted.privacy.as_str(),
        "project_root": m.posted.project_root,
        "expires_at": render::time(m.posted.expires_at),
        "request_id": m.posted.request_id,
    })
}
