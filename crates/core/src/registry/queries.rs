//! Read-only questions about a folded [`State`] (nothing here appends):
//! `list` filters, a page of unread mail under a byte budget or a count
//! limit, one agent's description, and transport presence.
//!
//! Page rule (the seed's `read_unread_page`): unread messages oldest first,
//! each measured by its one-line rendering ([`render_line`] plus a newline);
//! the page stops before the message that would take it past the budget, or
//! at the limit, but always holds at least one message when any is unread.
//! Presence rule (the seed's `transport_presence_is_live`): live means not
//! finished, a pid recorded, that pid running, and — when a start time was
//! recorded — the running process started then (pid reuse is not presence).

use super::error::RegistryError;
use super::messages::same_project;
use super::state::{Message, State};
use super::sweep::{is_transport_attached, ProcessProbe, ProcessState, MSG_TRANSPORT_CLOSED};
use crate::model::{Agent, Status};
use crate::time::Timestamp;
use std::fmt;

/// Which agents `list` shows. By default the agents that have not finished;
/// a `status` filter replaces that default (so `--status exited` works).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentFilter {
    pub include_finished: bool,
    pub status: Option<Status>,
    pub provider: Option<String>,
    /// Same project, trailing slashes ignored.
    pub project_root: Option<String>,
}

impl AgentFilter {
    pub fn matches(&self, a: &Agent) -> bool {
        let status = match self.status {
            Some(s) => a.status == s,
            None => self.include_finished || !a.is_finished(),
        };
        status
            && self.provider.as_ref().is_none_or(|p| *p == a.provider)
            && self
                .project_root
                .as_ref()
                .is_none_or(|p| same_project(&a.project_root, p))
    }
}

/// How much one read may show: bytes of rendered lines, and/or a count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageLimits {
    pub budget: Option<usize>,
    pub limit: Option<usize>,
}

impl PageLimits {
    pub fn is_unbounded(&self) -> bool {
        self.budget.is_none() && self.limit.is_none()
    }
}

/// How many items of the given sizes (oldest first) one page holds: at
/// least one when there is any, then as many as fit both limits.
pub fn page_len(sizes: impl IntoIterator<Item = usize>, limits: PageLimits) -> usize {
    let limit = limits.limit.unwrap_or(usize::MAX).max(1);
    let budget = limits.budget.unwrap_or(usize::MAX);
    let (mut n, mut used) = (0usize, 0usize);
    for size in sizes {
        if n == limit || (n > 0 && used.saturating_add(size) > budget) {
            break;
        }
        used = used.saturating_add(size);
        n += 1;
    }
    n
}

/// One message on one line, the form a page's budget measures: `#ID TIME
/// FROM → TO [CATEGORY] PRIORITY: BODY`. Control characters of the body are
/// escaped (`\n`), so the line stays one line.
pub fn render_line(m: &Message) -> String {
    let mut body = String::with_capacity(m.posted.body.len());
    for c in m.posted.body.chars() {
        if c.is_control() {
            body.extend(c.escape_default());
        } else {
            body.push(c);
        }
    }
    format!(
        "#{} {} {} → {} [{}] {}: {body}",
        m.id,
        m.posted_at,
        m.posted.from,
        m.posted.to.as_deref().unwrap_or("all"),
        m.posted.category,
        m.posted.priority
    )
}

/// A page of unread mail and how many unread messages it left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadPage {
    pub messages: Vec<Message>,
    pub left: usize,
}

/// One agent as `show` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSummary {
    /// The row, every field (its `life` and `last_event_lsn` included).
    pub agent: Agent,
    /// Messages unread by it at the time asked.
    pub unread: usize,
    /// Live messages it sent.
    pub sent: usize,
}

/// Whether an agent's transport is live, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    Live {
        pid: u32,
    },
    Finished(Status),
    NoPid,
    ProcessGone {
        pid: u32,
    },
    /// The pid runs, but another process started then (pid reuse).
    ProcessReplaced {
        pid: u32,
        recorded: u64,
        found: u64,
    },
    /// The probe cannot tell (no /proc, no permission).
    Unknown {
        pid: u32,
    },
    /// A transport-attached agent whose MCP session ended (status `idle`,
    /// [`MSG_TRANSPORT_CLOSED`]): its host process may still run, but no
    /// client is attached any more. A new registration attaches it again.
    TransportClosed,
}

impl Presence {
    pub fn is_live(&self) -> bool {
        matches!(self, Presence::Live { .. })
    }
}

impl fmt::Display for Presence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Presence::Live { pid } => write!(f, "live (pid {pid})"),
            Presence::Finished(s) => write!(f, "not live: {s} (finished)"),
            Presence::NoPid => f.write_str("not live: no process identity recorded"),
            Presence::ProcessGone { pid } => write!(f, "not live: pid {pid} is gone"),
            Presence::ProcessReplaced {
                pid,
                recorded,
                found,
            } => write!(
                f,
                "not live: pid {pid} now belongs to another process (start time {found}, registered {recorded})"
            ),
            Presence::Unknown { pid } => write!(f, "not live: cannot probe pid {pid}"),
            Presence::TransportClosed => f.write_str("not live: its MCP session ended (idle)"),
        }
    }
}

/// The presence of `a` as `probe` sees its process now.
pub fn presence(a: &Agent, probe: &dyn ProcessProbe) -> Presence {
    if a.is_finished() {
        return Presence::Finished(a.status);
    }
    if is_transport_attached(a)
        && a.status == Status::Idle
        && a.status_message.as_deref() == Some(MSG_TRANSPORT_CLOSED)
    {
        return Presence::TransportClosed;
    }
    let Some(pid) = a.pid else {
        return Presence::NoPid;
    };
    match (probe.probe(pid), a.pid_start_time) {
        (ProcessState::Gone, _) => Presence::ProcessGone { pid },
        (ProcessState::Unknown, _) => Presence::Unknown { pid },
        (ProcessState::Running(_), None) => Presence::Live { pid },
        (ProcessState::Running(Some(found)), Some(recorded)) if found != recorded => {
            Presence::ProcessReplaced {
                pid,
                recorded,
                found,
            }
        }
        (ProcessState::Running(Some(_)), Some(_)) => Presence::Live { pid },
        (ProcessState::Running(None), Some(_)) => Presence::Unknown { pid },
    }
}

impl State {
    /// The agents `filter` selects, in registration order.
    pub fn agents_matching<'a>(
        &'a self,
        filter: &'a AgentFilter,
    ) -> impl Iterator<Item = &'a Agent> + 'a {
        self.agents.iter().filter(move |a| filter.matches(a))
    }

    /// The first page of `reader`'s unread mail at `now` (appends nothing:
    /// the caller marks the page read once it was delivered).
    pub fn unread_page(
        &self,
        reader: &str,
        project_root: Option<&str>,
        now: Timestamp,
        limits: PageLimits,
    ) -> Result<UnreadPage, RegistryError> {
        let unread = self.unread(reader, project_root, now)?;
        let n = if limits.is_unbounded() {
            unread.len()
        } else {
            page_len(unread.iter().map(|m| render_line(m).len() + 1), limits)
        };
        Ok(UnreadPage {
            left: unread.len() - n,
            messages: unread.into_iter().take(n).cloned().collect(),
        })
    }

    /// `name`'s row with its unread (at `now`) and sent message counts.
    pub fn summary(&self, name: &str, now: Timestamp) -> Result<AgentSummary, RegistryError> {
        let agent = self.existing(name)?.clone();
        Ok(AgentSummary {
            unread: self.unread(name, None, now)?.len(),
            sent: self
                .messages
                .iter()
                .filter(|m| m.posted.from == name)
                .count(),
            agent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_holds_at_least_one_and_stops_before_the_budget() {
        let page = |sizes: &[usize], budget, limit| {
            page_len(sizes.iter().copied(), PageLimits { budget, limit })
        };
        assert_eq!(page(&[], Some(10), None), 0);
        assert_eq!(page(&[50, 1], Some(10), None), 1, "at least one");
        assert_eq!(
            page(&[4, 4, 4], Some(8), None),
            2,
            "exactly at the budget fits"
        );
        assert_eq!(
            page(&[4, 5, 1], Some(8), None),
            1,
            "stops at the first that would pass"
        );
        assert_eq!(page(&[1, 1, 1], None, Some(2)), 2);
        assert_eq!(
            page(&[1, 1, 1], Some(100), Some(0)),
            1,
            "a zero limit still shows one"
        );
        assert_eq!(page(&[1, 1, 1], None, None), 3);
    }
}
