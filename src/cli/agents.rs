//! The seeds' remaining operations on the command line: paged and waiting
//! reads, `show`, and `presence`. A read delivers first and acknowledges
//! after: the page is printed and stdout flushed before its read receipt is
//! appended, so only what reached the caller counts as read. A wait follows
//! the log read-only (no writer lock, see `ops::inbox`) and opens the store
//! for writing only once there is mail to read; the poster that woke it may
//! still hold the writer lock then, so that open retries for a while.

use super::args;
use super::commands::W;
use super::output::{self, Ui};
use super::view;
use agentlog::ops::inbox::{self, Waited};
use agentlog::ops::{self, OpsError};
use agentlog::registry::queries::{render_line, PageLimits, UnreadPage};
use agentlog::registry::ProcProbe;
use agentlog::store::{Store, StoreError};
use agentlog::time::Timestamp;
use anyhow::{Context, Result};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How long a woken read waits for another writer (usually the poster that
/// woke it, closing) to release the writer lock.
const LOCK_PATIENCE: Duration = Duration::from_secs(10);

/// Opens the store for writing, retrying while another process holds the
/// writer lock (for at most [`LOCK_PATIENCE`]); runs `f` and closes it.
fn with_store_when_free<T>(dir: &Path, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
    // Inside the daemon the served store is the writer: use it.
    if let Some(store) = super::commands::served_store() {
        return f(&store);
    }
    let give_up = Instant::now() + LOCK_PATIENCE;
    let mut pause = Duration::from_millis(1);
    let store = loop {
        match ops::open_store(dir, false) {
            Err(OpsError::Store(StoreError::Log(agentlog::Error::Locked { .. })))
                if Instant::now() < give_up =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => break other?,
        }
    };
    let out = f(&store);
    let closed = store.close();
    let out = out?;
    closed?;
    Ok(out)
}

/// Whether `read` needs this module (a page limit or a wait).
pub fn is_paged_or_waiting(a: &args::Read) -> bool {
    a.budget.is_some() || a.limit.is_some() || a.wait.is_some()
}

/// `read NAME [--budget BYTES] [--limit N] [--wait SECONDS]`.
pub fn read(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Read) -> Result<ExitCode> {
    let limits = PageLimits {
        budget: a.budget,
        limit: a.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
    };
    let project = a.project_root.as_deref();
    let at = a.at.checked()?;
    let deadline = a.wait.map(|d| Instant::now() + d);
    loop {
        if let Some(deadline) = deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            let waited = inbox::wait_for_unread(&dir, &a.name, project, at, left, || {
                tracing::debug!(agent = %a.name, "waiting for unread messages");
            })?;
            if waited == Waited::TimedOut {
                let empty = UnreadPage {
                    messages: Vec::new(),
                    left: 0,
                };
                print_page(w, ui, &a.name, &empty, limits, true)?;
                return Ok(ExitCode::SUCCESS);
            }
        }
        let delivered = with_store_when_free(&dir, |s| {
            let at = at.unwrap_or_else(Timestamp::now);
            let page = s.unread_page(&a.name, project, limits, Some(at))?;
            // Another reader took the mail first: wait again while time is left.
            if page.messages.is_empty() && deadline.is_some_and(|d| Instant::now() < d) {
                return Ok(false);
            }
            print_page(w, ui, &a.name, &page, limits, false)
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

/// A page as `{"agent", "messages", "left", "timed_out"}`, or as one line a
/// message (the lines the budget measured) and a count of what is left.
fn print_page(
    w: &mut W,
    ui: &Ui,
    name: &str,
    page: &UnreadPage,
    limits: PageLimits,
    timed_out: bool,
) -> std::io::Result<()> {
    if ui.json {
        let m: Vec<_> = page.messages.iter().map(view::message).collect();
        return output::json(
            w,
            &json!({"agent": name, "messages": m, "left": page.left, "timed_out": timed_out}),
        );
    }
    if page.messages.is_empty() {
        let why = if timed_out {
            " (the wait timed out)"
        } else {
            ""
        };
        return writeln!(w, "no unread messages for `{name}`{why}");
    }
    if limits.is_unbounded() {
        return super::commands::print_messages(w, ui, name, &page.messages, &[]);
    }
    for m in &page.messages {
        writeln!(w, "{}", render_line(m))?;
    }
    if page.left > 0 {
        writeln!(w, "({} more unread)", page.left)?;
    }
    Ok(())
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
