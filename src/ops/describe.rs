//! One-line descriptions of events, for `audit` and `log`: what happened and
//! why (the status message and its cause), from the point of view of one
//! agent when given (a message it received reads "received", not "posted").

use agentlog::model::StatusCause;
use agentlog::registry::{EventKind, Lsn, RegistrationKind, TransportCause};

/// What happened, and why when the event records a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    pub what: String,
    pub why: Option<String>,
}

/// Describes `kind` (recorded at `lsn`); `viewer` is the agent whose timeline
/// this is, if any.
pub fn describe(kind: &EventKind, lsn: Lsn, viewer: Option<&str>) -> Description {
    let mut why = None;
    let what = match kind {
        EventKind::AgentRegistered { reg, kind, host } => {
            if viewer.is_some_and(|v| v != reg.name) {
                format!("child `{}` registered", reg.name)
            } else {
                let verb = match kind {
                    RegistrationKind::New => "registered",
                    RegistrationKind::Renewal => "renewed registration",
                    RegistrationKind::NewLife => "registered again (new life)",
                };
                let mut s = format!("{verb} `{}` provider={}", reg.name, reg.provider);
                if let Some(p) = reg.pid {
                    s.push_str(&format!(" pid={p}"));
                }
                if let Some(r) = &reg.role {
                    s.push_str(&format!(" role={r}"));
                }
                if let Some(p) = &reg.parent {
                    s.push_str(&format!(" parent={p}"));
                }
                s.push_str(&format!(" cwd={}", reg.cwd));
                if let Some(h) = host {
                    s.push_str(&format!(" host={h}"));
                }
                s
            }
        }
        EventKind::Heartbeat { agent, pid } => match (viewer, pid) {
            (Some(_), Some(p)) => format!("heartbeat pid={p}"),
            (Some(_), None) => "heartbeat".to_string(),
            (None, Some(p)) => format!("heartbeat `{agent}` pid={p}"),
            (None, None) => format!("heartbeat `{agent}`"),
        },
        EventKind::StatusChanged {
            agent,
            status,
            message,
            cause,
        } => {
            // An empty message says nothing: no "()" in the log.
            let message = message.as_ref().filter(|m| !m.is_empty());
            why = match (cause, message) {
                (StatusCause::Command, None) => None,
                (StatusCause::Command, Some(m)) => Some(m.clone()),
                (c, None) => Some(c.as_str().replace('_', " ")),
                (c, Some(m)) => Some(format!("{}: {m}", c.as_str().replace('_', " "))),
            };
            match viewer {
                Some(_) => format!("status → {status}"),
                None => format!("status `{agent}` → {status}"),
            }
        }
        EventKind::FieldsUpdated { agent, fields } => {
            let names = updated_field_names(fields);
            match viewer {
                Some(_) => format!("updated {names}"),
                None => format!("updated `{agent}`: {names}"),
            }
        }
        EventKind::AgentRemoved { agent } => format!("removed `{agent}`"),
        EventKind::MessagePosted(m) => {
            let to =
                m.to.as_deref()
                    .map_or("all".to_string(), |t| format!("`{t}`"));
            let body = clip(&m.body, 60);
            if viewer.is_some_and(|v| v != m.from) {
                format!(
                    "received message #{lsn} from `{}` [{}]: {body}",
                    m.from, m.category
                )
            } else {
                format!(
                    "posted message #{lsn} from `{}` to {to} [{}]: {body}",
                    m.from, m.category
                )
            }
        }
        EventKind::MessagesRead { reader, ids } => {
            // A long receipt names its first few ids (`log --json` has all).
            let mut list: Vec<String> = ids.iter().take(4).map(|i| format!("#{i}")).collect();
            if ids.len() > 4 {
                list.push("…".to_string());
            }
            format!(
                "`{reader}` read {} message(s) {}",
                ids.len(),
                list.join(" ")
            )
        }
        EventKind::MessagesDropped { dropped, reason } => {
            let mine: Vec<String> = dropped
                .iter()
                .filter(|d| viewer.is_none_or(|v| d.from == v || d.to.as_deref() == Some(v)))
                .take(4)
                .map(|d| {
                    let to =
                        d.to.as_deref()
                            .map_or("all".to_string(), |t| format!("`{t}`"));
                    format!("#{} (`{}` to {to})", d.id, d.from)
                })
                .collect();
            why = Some(reason.as_str().to_string());
            format!(
                "{} message(s) dropped: {}{}",
                dropped.len(),
                mine.join(", "),
                if dropped.len() > mine.len() {
                    ", …"
                } else {
                    ""
                }
            )
        }
        EventKind::SessionOpened { key, ttl_ms } => format!(
            "session opened {}/{}/{} ttl={}s",
            key.source,
            key.workspace,
            key.session_id,
            ttl_ms / 1000
        ),
        EventKind::SessionHeartbeat { key, .. } => format!(
            "session heartbeat {}/{}/{}",
            key.source, key.workspace, key.session_id
        ),
        EventKind::SessionClosed { key } => format!(
            "session closed {}/{}/{}",
            key.source, key.workspace, key.session_id
        ),
        EventKind::AgentImported(a) => {
            why = Some("imported from registry.json".to_string());
            format!(
                "imported `{}` provider={} status={}",
                a.name, a.provider, a.status
            )
        }
        EventKind::DisplayNameSet {
            agent,
            display_name,
        } => {
            why = Some("set by command; not exported".to_string());
            let change = match display_name {
                Some(d) => format!("display name → \"{}\"", clip(d, 60)),
                None => "display name cleared".to_string(),
            };
            match viewer {
                Some(_) => change,
                None => format!("`{agent}` {change}"),
            }
        }
        EventKind::TransportClientSet {
            agent,
            client,
            cause,
        } => {
            why = Some(
                match cause {
                    TransportCause::Registration => "attached at registration",
                    TransportCause::Reconnect => "client reconnected",
                }
                .to_string(),
            );
            let change = match client {
                Some(c) => format!("transport client → {}", clip(&c.to_string(), 60)),
                None => "transport detached".to_string(),
            };
            match viewer {
                Some(_) => change,
                None => format!("`{agent}` {change}"),
            }
        }
        EventKind::StreamCompacted {
            upto,
            agents,
            messages,
            sessions,
        } => {
            why = Some("compaction of the fleet's stream".to_string());
            format!(
                "stream compacted up to #{upto}: {} agent(s), {} message(s), {} session(s) removed",
                agents.len(),
                messages.len(),
                sessions.len()
            )
        }
        EventKind::Purged => "a record compaction deleted from the stream".to_string(),
        EventKind::ExternalChange {
            agent,
            source,
            change,
        } => {
            let subject;
            (why, subject) = external(source, agent, viewer);
            match change {
                agentlog::registry::ExternalChange::Registered(a) => format!(
                    "registered{subject} provider={} status={}",
                    a.provider, a.status
                ),
                agentlog::registry::ExternalChange::Updated { keys, .. } => {
                    format!("updated{subject}: {}", keys.join(", "))
                }
                agentlog::registry::ExternalChange::Status { status } => {
                    format!("status{subject} → {status}")
                }
                agentlog::registry::ExternalChange::Removed => format!("removed{subject}"),
            }
        }
        EventKind::WorkerStateChanged {
            agent,
            source,
            changes,
        } => {
            let subject;
            (why, subject) = external(source, agent, viewer);
            let shown: Vec<String> = changes
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("(unset)")))
                .collect();
            format!("{source}{subject}: {}", shown.join(", "))
        }
        EventKind::Runtime(r) => {
            let d = super::describe_runtime::describe(r, viewer.is_some());
            why = d.why;
            d.what
        }
        EventKind::HeartbeatBatch { beats } => {
            // `log` shows the batch on one line; a timeline shows the
            // viewer's own heartbeats (history expands a batch into them).
            let shown: Vec<String> = beats
                .iter()
                .filter(|b| viewer.is_none_or(|v| v == b.agent))
                .take(8)
                .map(|b| match b.pid {
                    Some(p) => format!("`{}` pid={p}", b.agent),
                    None => format!("`{}`", b.agent),
                })
                .collect();
            let more = beats.len().saturating_sub(shown.len());
            let more = if viewer.is_none() && more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!("{} heartbeats: {}{more}", beats.len(), shown.join(", "))
        }
    };
    Description { what, why }
}

/// The names of the fields an update sets or clears.
fn updated_field_names(f: &agentlog::registry::FieldUpdates) -> String {
    let names: Vec<&str> = agentlog::registry::FieldUpdates::FIELDS
        .iter()
        .filter(|spec| spec.is_set(f))
        .map(|spec| spec.name)
        .collect();
    if names.is_empty() {
        "nothing".to_string()
    } else {
        names.join(", ")
    }
}

fn clip(s: &str, max: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut t: String = one_line.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

/// The actor of another writer's change ("by external writer (…)") and the
/// agent named in its line (none in the agent's own audit).
fn external(source: &str, agent: &str, viewer: Option<&str>) -> (Option<String>, String) {
    let why = format!("by {}", agentlog::registry::ExternalChange::actor(source));
    let subject = match viewer {
        Some(_) => String::new(),
        None => format!(" `{agent}`"),
    };
    (Some(why), subject)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_changes_say_why() {
        let k = EventKind::StatusChanged {
            agent: "a".into(),
            status: agentlog::model::Status::Exited,
            message: Some("worker lease expired; register again before continuing".into()),
            cause: StatusCause::LeaseExpired,
        };
        let d = describe(&k, 7, Some("a"));
        assert_eq!(d.what, "status → exited");
        assert_eq!(
            d.why.as_deref(),
            Some("lease expired: worker lease expired; register again before continuing")
        );
        assert_eq!(describe(&k, 7, None).what, "status `a` → exited");
    }
}
