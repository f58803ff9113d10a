//! `audit`: one agent's timeline, one line per event (time, LSN, what
//! happened, why), with each run of consecutive heartbeats (no other event of
//! the agent between them) collapsed into one line "heartbeats ×N from … to …".
//! Lines are handed on one at a time as they complete ([`Audit::for_each`]),
//! and every pass over one [`Audit`] yields the same lines.

use super::describe::describe;
use super::{read_only, Result};
use agentlog::log::{LogView, Lsn};
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

/// Collapses `(lsn, event)` pairs of one agent's history into audit lines:
/// the reference the streamed audit is tested against.
#[cfg(test)]
fn collapse(agent: &str, history: impl IntoIterator<Item = (Lsn, Event)>) -> Vec<AuditLine> {
    let mut out = Vec::new();
    let mut lines = Lines::default();
    for (lsn, ev) in history {
        lines.push(agent, lsn, ev, None, &mut |l| out.push(l.clone()));
    }
    lines.finish(&mut |l| out.push(l.clone()));
    out
}

/// Audit lines built one event at a time and handed on as each is complete:
/// only the last line is held, since a heartbeat of the agent extends the
/// run on it (its text is written once, when the run ends).
#[derive(Default)]
struct Lines {
    last: Option<AuditLine>,
}

impl Lines {
    fn push(
        &mut self,
        agent: &str,
        lsn: Lsn,
        ev: Event,
        origin: Option<agentlog::registry::codec::Origin>,
        done: &mut dyn FnMut(&AuditLine),
    ) {
        let is_own_heartbeat =
            matches!(&ev.kind, EventKind::Heartbeat { agent: a, .. } if a == agent);
        if is_own_heartbeat {
            if let Some(last) = self.last.as_mut().filter(|l| l.kind == "Heartbeat") {
                let run = last.run.get_or_insert(HeartbeatRun {
                    count: 1,
                    last_at: last.at,
                    last_lsn: last.lsn,
                });
                run.count += 1;
                run.last_at = ev.at;
                run.last_lsn = lsn;
                return;
            }
        }
        let d = describe(&ev.kind, lsn, Some(agent));
        let line = AuditLine {
            at: ev.at,
            lsn,
            kind: agentlog::registry::tag::name(ev.kind.tag()),
            what: d.what,
            why: d.why,
            run: None,
            origin,
        };
        if let Some(last) = self.last.replace(line) {
            done(&closed(last));
        }
    }

    fn finish(self, done: &mut dyn FnMut(&AuditLine)) {
        if let Some(last) = self.last {
            done(&closed(last));
        }
    }
}

/// `line` with its text written, if it is a heartbeat run.
fn closed(mut line: AuditLine) -> AuditLine {
    if let Some(run) = &line.run {
        line.what = format!(
            "heartbeats ×{} from {} to {}",
            run.count, line.at, run.last_at
        );
    }
    line
}

/// One agent's timeline between `since` and `until` (event times,
/// inclusive) over one view of the log: every pass ([`Audit::for_each`])
/// reads the same records and yields the same lines, so a caller can size a
/// table in one pass and print it in the next.
pub struct Audit {
    view: LogView,
    agent: String,
    since: Option<Timestamp>,
    until: Option<Timestamp>,
}

impl Audit {
    /// The audit of `agent` in the store at `dir`, read-only.
    pub fn open(
        dir: &Path,
        agent: &str,
        since: Option<Timestamp>,
        until: Option<Timestamp>,
    ) -> Result<Audit> {
        Ok(Audit {
            view: read_only(dir)?.view(),
            agent: agent.to_string(),
            since,
            until,
        })
    }

    /// Hands `each` the timeline's lines in order, in one pass over the log
    /// that holds one line at a time: memory follows neither the log's
    /// length nor the timeline's. An agent that never appears in the log is
    /// "not found".
    pub fn for_each(&self, mut each: impl FnMut(&AuditLine)) -> Result<()> {
        let (agent, since, until) = (self.agent.as_str(), self.since, self.until);
        let mut found = false;
        let mut lines = Lines::default();
        history::for_each_in_history(&self.view, agent, |lsn, payload, ev| {
            found = true;
            if since.is_none_or(|s| ev.at >= s) && until.is_none_or(|u| ev.at <= u) {
                let origin = agentlog::registry::codec::origin(payload);
                lines.push(agent, lsn, ev, origin, &mut each);
            }
        })
        .map_err(|e| e.into_log_error(&self.view))?;
        if !found {
            return Err(RegistryError::NotFound {
                agent: agent.to_string(),
            }
            .into());
        }
        lines.finish(&mut each);
        Ok(())
    }
}

/// The whole timeline of `agent` in the store at `dir` (see [`Audit`]),
/// collected: for a short one (the demo's).
pub fn audit(
    dir: &Path,
    agent: &str,
    since: Option<Timestamp>,
    until: Option<Timestamp>,
) -> Result<Vec<AuditLine>> {
    let mut out = Vec::new();
    Audit::open(dir, agent, since, until)?.for_each(|l| out.push(l.clone()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentlog::model::{Status, StatusCause};
    use agentlog::StoreError;

    fn hb(at: i64) -> Event {
        Event {
            at: Timestamp::from_secs(at),
            kind: EventKind::Heartbeat {
                agent: "a".into(),
                pid: None,
            },
        }
    }

    /// The streamed audit (one pass, lines built as the log is read) says
    /// what collapsing the whole collected history says, window included.
    #[test]
    fn streamed_audit_equals_the_collapse_of_the_collected_history() {
        use agentlog::registry::{PostMessage, Registration};
        use agentlog::store::{Store, StoreOptions};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreOptions::short_lived()).unwrap();
        let t = |s: i64| Some(Timestamp::from_secs(1_796_040_000 + s));
        for name in ["a", "b"] {
            let mut r = Registration::new(name, "codex", "/w");
            r.pid = Some(7);
            store.register(r, t(0)).unwrap();
        }
        for i in 1..40 {
            store.heartbeat("a", Some(7), t(i)).unwrap();
            store.heartbeat("b", Some(7), t(i)).unwrap();
            if i % 9 == 0 {
                let post = PostMessage::new("b", Some("a"), "c", "hello a");
                store.post_message(post, t(i)).unwrap();
            }
            if i % 13 == 0 {
                store.set_status("a", Status::Busy, None, t(i)).unwrap();
            }
        }
        let history = store.history("a").unwrap();
        store.close().unwrap();
        for (since, until) in [(None, None), (t(5), t(30)), (t(10), None), (None, t(9))] {
            let window = history
                .iter()
                .filter(|(_, e)| since.is_none_or(|s| e.at >= s) && until.is_none_or(|u| e.at <= u))
                .cloned();
            let expected = collapse("a", window);
            let streamed = audit(dir.path(), "a", since, until).unwrap();
            assert_eq!(streamed, expected, "window {since:?}..{until:?}");
        }
        let full = audit(dir.path(), "a", None, None).unwrap();
        assert!(full
            .iter()
            .any(|l| l.run.as_ref().is_some_and(|r| r.count == 9)));
        assert!(matches!(
            audit(dir.path(), "nobody", None, None),
            Err(crate::ops::OpsError::Store(StoreError::Registry(
                RegistryError::NotFound { .. }
            )))
        ));
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
