//! How library values print, shared by several commands and the daemon:
//! an agent as a JSON row and as a table row, times as RFC 3339 text (the
//! library keeps milliseconds), absent values as `null`. A value only one
//! command prints is rendered in that command's file.

use agentlog::model::fields::{FieldRef, AGENT_FIELDS};
use agentlog::model::Agent;
use agentlog::registry::runtime::json::{merge_into, Actions};
use agentlog::registry::runtime::AgentRuntime;
use agentlog::store::{current_access, current_origin};
use agentlog::time::Timestamp;
use serde_json::{json, Value};

pub fn time(t: Timestamp) -> Value {
    Value::String(t.to_string())
}

/// Every field of an agent row, for `list --json`, `replay --json`, `show`
/// and the daemon's `get`: the row's own fields, then every descriptive field
/// the field table shows (keys sort, so the order here does not show).
pub fn agent(a: &Agent) -> Value {
    let mut row = json!({
        "status": a.status.as_str(),
        "status_message": a.status_message,
        "status_cause": a.status_cause.as_str(),
        "life": a.life,
        "created_at": time(a.created_at),
        "registered_at": time(a.registered_at),
        "last_active": time(a.last_active),
        "display_name": a.display_name,
        "transport_client": a.transport_client.as_ref().map(|c| c.to_string()),
        "last_event_lsn": a.last_event_lsn,
    });
    if let Value::Object(map) = &mut row {
        for f in AGENT_FIELDS.iter().filter(|f| f.in_view) {
            let value = match f.get(a) {
                None => Value::Null,
                Some(FieldRef::Text(s)) => Value::from(s),
                Some(FieldRef::U32(n)) => Value::from(n),
                Some(FieldRef::U64(n)) => Value::from(n),
                Some(FieldRef::HostMode(h)) => Value::from(h.as_str()),
                Some(FieldRef::Time(t)) => time(t),
            };
            map.insert(f.name.to_string(), value);
        }
    }
    row
}

/// Who reads: what an entry's `actions` are judged for.
#[derive(Debug, Clone, Copy)]
pub struct Viewer {
    uid: u32,
    may_write: bool,
    admin: bool,
}

/// The reader of the store in `dir`: through the daemon, the peer (its uid
/// and what the daemon's policy grants it); directly, this process — it
/// may write when it may write the store's log folder, and administers the
/// store when it is root or owns the folder (as a daemon's owner uid does).
/// So the store's owner reads the same `actions` either way.
pub fn viewer(dir: &std::path::Path) -> Viewer {
    if let (Some(o), Some(access)) = (current_origin(), current_access()) {
        return Viewer {
            uid: o.uid,
            may_write: access.may_write,
            admin: access.admin,
        };
    }
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::process::geteuid().as_raw();
    let layout = agentlog::StoreLayout::new(dir);
    let may_write = rustix::fs::access(layout.log(), rustix::fs::Access::WRITE_OK).is_ok();
    let owner = std::fs::metadata(dir).map(|m| m.uid()).ok();
    Viewer {
        uid,
        may_write,
        admin: uid == 0 || owner == Some(uid),
    }
}

/// [`agent`] plus its runtime facts (endpoint fields, owner, observers,
/// outage) and the `actions` `viewer` may take at `now` (from its
/// credentials and the entry's leases).
pub fn agent_with_runtime(
    a: &Agent,
    rt: Option<&AgentRuntime>,
    now: Timestamp,
    viewer: &Viewer,
) -> Value {
    let mut row = agent(a);
    merge_into(&mut row, rt, a.pid);
    row["actions"] = Actions::of(rt, viewer.uid, viewer.may_write, viewer.admin, now).to_json();
    row
}

/// Inside the daemon: an open outage's running tally (last failure, failed
/// probes so far), which its prober keeps in memory until the outage ends.
pub fn overlay_live_outage(row: &mut Value, dir: &std::path::Path, name: &str) {
    if row["outage"]["open"] != Value::Bool(true) {
        return;
    }
    if let Some(t) = agentlog::daemon::reach::live_tally(dir, name) {
        row["outage"]["last_failure"] = time(t.last_failure);
        row["outage"]["failures"] = Value::from(t.failures);
    }
}

/// The registry table's columns.
pub const AGENT_HEADERS: [&str; 7] = [
    "NAME",
    "DISPLAY NAME",
    "PROVIDER",
    "STATUS",
    "LAST ACTIVE",
    "PID",
    "MESSAGE",
];

pub fn agent_row(a: &Agent) -> Vec<String> {
    vec![
        a.name.clone(),
        super::output::or_dash(
            a.display_name
                .as_deref()
                .map(|d| super::output::clip(d, 32)),
        ),
        a.provider.clone(),
        a.status.to_string(),
        a.last_active.to_string(),
        super::output::or_dash(a.pid),
        super::output::clip(a.status_message.as_deref().unwrap_or(""), 60),
    ]
}
