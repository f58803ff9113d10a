//! The JSON form of an agent's runtime facts, added to its row wherever a
//! row is shown (`show --json`, `list --json`, the daemon's `get`, `watch`
//! changes, the live page): `endpoint`, `capabilities`, `model`, `title`,
//! `persistence_location`, `supervisor`, `owner` (`pid` and `controller`),
//! `observers` (by client id) and `outage`. Times are RFC 3339 text, absent
//! values `null`, as in the rest of the row. And the `actions` a caller may
//! take on an entry, which only a read through the daemon knows (it has the
//! caller's credentials).

use super::{AgentRuntime, Lease, Outage};
use crate::time::Timestamp;
use serde_json::{json, Value};

fn time(t: Timestamp) -> Value {
    Value::String(t.to_string())
}

pub fn lease(l: &Lease) -> Value {
    json!({
        "client": l.client,
        "role": l.role.as_str(),
        "uid": l.uid,
        "pid": l.pid,
        "acquired_at": time(l.acquired_at),
        "expires_at": time(l.expires_at),
    })
}

pub fn outage(o: &Outage) -> Value {
    json!({
        "endpoint": o.endpoint,
        "error": o.error,
        "first_failure": time(o.first_failure),
        "last_failure": time(o.last_failure),
        "failures": o.failures,
        "open": o.is_open(),
        "ended_at": o.ended_at.map(time),
        "ended_by": o.ended_by,
    })
}

/// Adds the runtime keys of an agent whose process is `pid` to `row`.
pub fn merge_into(row: &mut Value, rt: Option<&AgentRuntime>, pid: Option<u32>) {
    let Value::Object(map) = row else { return };
    let empty = AgentRuntime::default();
    let rt = rt.unwrap_or(&empty);
    map.insert("endpoint".into(), json!(rt.endpoint));
    map.insert("capabilities".into(), json!(rt.capabilities));
    map.insert("model".into(), json!(rt.model));
    map.insert("title".into(), json!(rt.title));
    map.insert(
        "persistence_location".into(),
        json!(rt.persistence_location),
    );
    map.insert("supervisor".into(), json!(rt.supervisor));
    map.insert(
        "owner".into(),
        json!({"pid": pid, "controller": rt.controller.as_ref().map(lease)}),
    );
    map.insert(
        "observers".into(),
        Value::Array(rt.observers.values().map(lease).collect()),
    );
    map.insert(
        "outage".into(),
        rt.outage.as_ref().map_or(Value::Null, outage),
    );
}

/// What a caller may do with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actions {
    /// Read it: every peer that reached the daemon.
    pub observe: bool,
    /// Drive the agent: the caller's uid holds its unexpired controller lease.
    pub control: bool,
    /// Append to the store (the daemon's write policy).
    pub write: bool,
    /// Manage any lease (the daemon's owner uid, root).
    pub administer: bool,
}

impl Actions {
    /// The actions of the peer with `uid` on the entry with runtime `rt`,
    /// at `now`, given what the daemon's policy grants it.
    pub fn of(
        rt: Option<&AgentRuntime>,
        uid: u32,
        may_write: bool,
        admin: bool,
        now: Timestamp,
    ) -> Actions {
        let control = rt
            .and_then(|r| r.controller.as_ref())
            .is_some_and(|l| l.uid == Some(uid) && !l.is_expired(now));
        Actions {
            observe: true,
            control,
            write: may_write,
            administer: admin,
        }
    }

    /// As a JSON list of their names, in a fixed order.
    pub fn to_json(self) -> Value {
        let names = [
            (self.observe, "observe"),
            (self.control, "control"),
            (self.write, "write"),
            (self.administer, "administer"),
        ];
        Value::Array(
            names
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, n)| Value::from(*n))
                .collect(),
        )
    }
}

/// The one-line summary of an entry's attachments for tables: the
/// controller's client (or `-`) and the observer count.
pub fn attachments_text(rt: Option<&AgentRuntime>) -> (String, String) {
    let controller = rt
        .and_then(|r| r.controller.as_ref())
        .map_or("-".to_string(), |l| l.client.clone());
    let observers = rt.map_or(0, |r| r.observers.len());
    (controller, observers.to_string())
}
