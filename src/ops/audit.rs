//! `audit`: one agent's timeline, one line per event (time, LSN, what
//! happened, why), with each run of consecutive heartbeats (no other event of
//! the agent between them) collapsed into one line "heartbeats ×N from … to …".

use super::describe::describe;
use super::{read_only, Result};
use agentlog::log::Lsn;
use agentlog::registry::history;
use agentlog::registry::{Event, EventKind, RegistryError};
use agentlog::time::Timestamp;
use std::path::Path;

/// A run of heartbeats shown as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRun {
    pub count: u64,
    pub last_at: Timestamp,
    pub last_lsn: Lsn,
}

/// One line of an agent's timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditLine {
    pub at: Timestamp,
    pub lsn: Lsn,
    /// The event kind's name (`Heartbeat`, `StatusChanged`, …).
    pub kind: &'static str,
    pub what: String,
    pub why: Option<String>,
    /// Set on a collapsed heartbeat run (then `at`/`lsn` are its first).
    pub run: Option<HeartbeatRun>,
    /// Who asked for the event (its first, for a run), when the daemon
    /// recorded it.
    pub origin: Option<agentlog::registry::codec::Origin>,
}

/// Collapses `(lsn, event)` pairs of one agent's history into audit lines.
pub fn collapse(agent: &str, history: impl IntoIterator<Item = (Lsn, Event)>) -> Vec<AuditLine> {
    let mut lines: Vec<AuditLine> = Vec::new();
    for (lsn, ev) in history {
        let is_own_heartbeat =
            matches!(&ev.kind, EventKind::Heartbeat { agent: a, .. } if a == agent);
        if is_own_heartbeat {
            if let Some(last) = lines.last_mut() {
                if last.kind == "Heartbeat" {
                    let run = last.run.get_or_insert(HeartbeatRun {
                        count: 1,
                        last_at: last.at,
                        last_lsn: last.lsn,
                    });
                    run.count += 1;
                    run.last_at = ev.at;
                    run.last_lsn = lsn;
                    last.what = format!(
                        "heartbeats ×{} from {} to {}",
                        run.count, last.at, run.last_at
                    );
                    continue;
                }
            }
        }
        let d = describe(&ev.kind, lsn, Some(agent));
        lines.push(AuditLine {
            at: ev.at,
            lsn,
            kind: agentlog::registry::tag::name(ev.kind.tag()),
            what: d.what,
            why: d.why,
            run: None,
            origin: None,
        });
    }
    lines
}

/// The timeline of `agent` in the store at `dir` between `since` and `until`
/// (event times, inclusive), read-only. An agent that never appears in the
/// log is "not found".
pub fn audit(
    dir: &Path,
    agent: &str,
    since: Option<Timestamp>,
    until: Option<Timestamp>,
) -> Result<Vec<AuditLine>> {
    let r = read_only(dir)?;
    let mut origins = std::collections::HashMap::new();
    let history = history::scan_history_with(&r.view(), agent, |lsn, payload| {
        if let Some(o) = agentlog::registry::codec::origin(payload) {
            origins.insert(lsn, o);
        }
    })?;
    if history.is_empty() {
        return Err(RegistryError::NotFound {
            agent: agent.to_string(),
        }
        .into());
    }
    let window = history
        .into_iter()
        .filter(|(_, ev)| since.is_none_or(|s| ev.at >= s) && until.is_none_or(|u| ev.at <= u));
    let mut lines = collapse(agent, window);
    for l in &mut lines {
        l.origin = origins.get(&l.lsn).copied();
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentlog::model::{Status, StatusCause};

    fn hb(at: i64) -> Event {
        Event {
            at: Timestamp::from_secs(at),
            kind: EventKind::Heartbeat {
                agent: "a".into(),
                pid: None,
            },
        }
    }

    #[test]
    fn heartbeat_runs_collapse_between_other_events() {
        let status = Event {
            at: Timestamp::from_secs(100),
            kind: EventKind::StatusChanged {
                agent: "a".into(),
                status: Status::Idle,
                message: Some("no heartbeat within the lease".into()),
                cause: StatusCause::LeaseExpired,
            },
        };
        let history = vec![
            (1, hb(1)),
            (2, hb(2)),
            (3, hb(3)),
            (4, status),
            (5, hb(200)),
        ];
        let lines = collapse("a", history);
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0].what,
            "heartbeats ×3 from 1970-01-01T00:00:01Z to 1970-01-01T00:00:03Z"
        );
        assert_eq!(lines[0].run.as_ref().unwrap().last_lsn, 3);
        assert_eq!(lines[1].kind, "StatusChanged");
        assert!(lines[1].why.as_deref().unwrap().contains("lease expired"));
        assert_eq!(lines[2].what, "heartbeat");
        assert!(lines[2].run.is_none());
    }
}
