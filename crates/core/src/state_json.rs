//! Upstream fno's per-agent `state.json` (schema 1, docs/upstream.md,
//! "state.json"): where it lives, how agentlog renders it from the fold,
//! how it reads one another writer changed, and which events that change
//! becomes. Pure: the locks and file writes are `crate::store`'s
//! (`Store::publish_registry`).
//!
//! Invariants:
//! - The file lives at `<dir of registry.json>/<short_id>/state.json`, for
//!   every agent with a short id that is one plain path component
//!   ([`path_for`]); two agents with one short id: the later registered.
//! - Its `status` is the row's; its `last_message_at` the row's (a
//!   projection of the registry's, never ingested). The worker facts
//!   (`ready`, `last_reply`, `restart_count`, `last_restart_at`, the `pty`
//!   object with its drive window, and unknown keys, verbatim) live in the
//!   row's `extra` under `state.json:KEY` (`pty` fields as `pty.KEY`), which
//!   no `registry.json` export writes; they change only through
//!   [`crate::registry::EventKind::WorkerStateChanged`].
//! - Facts are compared in a normal form ([`Facts`]): `null` ≡ absent,
//!   `ready: false` ≡ absent, `restart_count: 0` ≡ absent, drive fields
//!   without `drive_active` dropped (upstream's own read rule), so a
//!   rewrite in another writer's layout is not a change.
//! - A change is taken three ways, as for `registry.json`
//!   (`crate::coexist`): a key whose value differs between what agentlog
//!   last published (base) and the file (theirs), and still differs from
//!   the fold (ours). Without a base only facts the fold lacks are taken,
//!   never the status.

use crate::model::{Agent, Status};
use crate::registry::{Event, EventKind, ExternalChange, State};
use crate::time::Timestamp;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file's name, and the `source` of the changes found in it.
pub const SOURCE: &str = "state.json";
/// The schema agentlog writes (upstream's only one).
pub const SCHEMA: u32 = 1;
/// The prefix of the row's `extra` keys that hold the worker facts.
pub const EXTRA_PREFIX: &str = "state.json:";

/// Worker facts in normal form: key (`pty` fields as `pty.KEY`) → JSON text.
pub type Facts = BTreeMap<String, String>;

/// A `state.json` as read: what it says, in normal form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateFile {
    pub short_id: String,
    pub status: Status,
    pub facts: Facts,
}

/// A `state.json` agentlog cannot read: never overwritten.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {why}; left as it is (not ingested, not overwritten)", file.display())]
pub struct Malformed {
    pub file: PathBuf,
    pub why: String,
}

/// Keys the file has that are not worker facts: identity, the status, and
/// `last_message_at` (the registry's, written back, never ingested).
const NOT_FACTS: [&str; 5] = [
    "schema_version",
    "short_id",
    "status",
    "last_message_at",
    "pty",
];
const DRIVE_KEYS: [&str; 3] = [
    "drive_session_id",
    "drive_mode",
    "last_heartbeat_at_monotonic_ns",
];

/// Whether an `extra` key is a worker fact (never exported to `registry.json`).
pub fn is_fact_key(key: &str) -> bool {
    key.starts_with(EXTRA_PREFIX)
}

/// The agent's short id (upstream's read migration: `claude_short_id`
/// fills an empty `short_id`), if any.
pub fn short_id(a: &Agent) -> Option<&str> {
    let s = match a.short_id.as_str() {
        "" => a.claude_short_id.as_deref().unwrap_or(""),
        s => s,
    };
    (!s.is_empty()).then_some(s)
}

/// Where the agent's `state.json` lives beside `registry`; `None` without
/// a short id, or one that is not a plain path component (`/`, a leading
/// dot, NUL, over 255 bytes): nothing is written outside its folder.
pub fn path_for(registry: &Path, a: &Agent) -> Option<PathBuf> {
    let sid = short_id(a)?;
    let plain = sid.len() <= 255 && !sid.starts_with('.') && !sid.contains(['/', '\0']);
    plain.then(|| crate::files::parent_dir(registry).join(sid).join(SOURCE))
}

/// The agents that get a `state.json` beside `registry`, with its path, in
/// registration order; of two with one short id, the later registered.
pub fn targets(state: &State, registry: &Path) -> Vec<(String, PathBuf)> {
    let mut by_path: BTreeMap<PathBuf, (usize, String)> = BTreeMap::new();
    for (i, a) in state.agents().iter().enumerate() {
        if let Some(p) = path_for(registry, a) {
            by_path.insert(p, (i, a.name.clone()));
        }
    }
    let mut out: Vec<(usize, String, PathBuf)> = by_path
        .into_iter()
        .map(|(p, (i, name))| (i, name, p))
        .collect();
    out.sort_by_key(|t| t.0);
    out.into_iter().map(|(_, n, p)| (n, p)).collect()
}

/// The worker facts the fold holds for `a`.
pub fn facts_of(a: &Agent) -> Facts {
    a.extra
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(EXTRA_PREFIX)?.to_string(), v.clone())))
        .collect()
}

/// Folds a [`EventKind::WorkerStateChanged`]'s changes into the row.
pub fn apply(a: &mut Agent, changes: &[(String, Option<String>)]) {
    for (key, value) in changes {
        let full = format!("{EXTRA_PREFIX}{key}");
        a.extra.retain(|(k, _)| *k != full);
        if let Some(v) = value {
            a.extra.push((full, v.clone()));
        }
    }
}

/// Parses a `state.json` (upstream's `AgentState`): `short_id` and
/// `status` required, known keys of their type, `pty` null or an object
/// with a boolean `active`. Unknown keys are kept (verbatim JSON).
pub fn parse(bytes: &[u8], file: &Path) -> Result<StateFile, Malformed> {
    let bad = |why: String| Malformed {
        file: file.to_path_buf(),
        why,
    };
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
    let Value::Object(obj) = doc else {
        return Err(bad("not a JSON object".into()));
    };
    let short_id = match obj.get("short_id") {
        Some(Value::String(s)) => s.clone(),
        _ => return Err(bad("key `short_id`: missing or not a string".into())),
    };
    let status = match obj.get("status") {
        Some(Value::String(s)) => s
            .parse::<Status>()
            .map_err(|e| bad(format!("key `status`: {e}")))?,
        _ => return Err(bad("key `status`: missing or not a string".into())),
    };
    if !obj.get("schema_version").is_some_and(Value::is_u64) {
        return Err(bad("key `schema_version`: missing or not a number".into()));
    }
    if !obj
        .get("last_message_at")
        .is_none_or(|v| v.is_null() || v.is_string())
    {
        return Err(bad("key `last_message_at`: not a string or null".into()));
    }
    let mut facts = Facts::new();
    for (key, value) in &obj {
        if NOT_FACTS.contains(&key.as_str()) || value.is_null() {
            continue;
        }
        let ok = match key.as_str() {
            "ready" => value.is_boolean(),
            "restart_count" => value.as_u64().is_some_and(|n| n <= u64::from(u32::MAX)),
            "last_reply" | "last_restart_at" => value.is_string(),
            _ => true,
        };
        if !ok {
            return Err(bad(format!("key `{key}`: {value} is not of its type")));
        }
        let default = (key == "ready" && value == &Value::Bool(false))
            || (key == "restart_count" && value.as_u64() == Some(0));
        if !default {
            facts.insert(key.clone(), value.to_string());
        }
    }
    match obj.get("pty") {
        None | Some(Value::Null) => {}
        Some(Value::Object(pty)) => pty_facts(pty, &mut facts).map_err(bad)?,
        Some(other) => return Err(bad(format!("key `pty`: {other} is not an object or null"))),
    }
    Ok(StateFile {
        short_id,
        status,
        facts,
    })
}

fn pty_facts(pty: &serde_json::Map<String, Value>, facts: &mut Facts) -> Result<(), String> {
    let Some(Value::Bool(active)) = pty.get("active") else {
        return Err(
            "key `pty.active`: missing or not a boolean (upstream cannot decode the file)".into(),
        );
    };
    facts.insert("pty.active".into(), active.to_string());
    let drive = match pty.get("drive_active") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(format!("key `pty.drive_active`: {other} is not a boolean")),
    };
    for (key, value) in pty {
        if matches!(key.as_str(), "active" | "drive_active") || value.is_null() {
            continue;
        }
        let is_drive = DRIVE_KEYS.contains(&key.as_str());
        let ok = match key.as_str() {
            "drive_session_id" | "drive_mode" => value.is_string(),
            "last_heartbeat_at_monotonic_ns" => value.is_u64(),
            _ => true,
        };
        if !ok {
            return Err(format!("key `pty.{key}`: {value} is not of its type"));
        }
        // Upstream's read: without an open window the drive keys are dropped.
        if !is_drive || drive {
            facts.insert(format!("pty.{key}"), value.to_string());
        }
    }
    if drive {
        facts.insert("pty.drive_active".into(), "true".into());
    }
    Ok(())
}

/// Renders the agent's `state.json` as upstream's Rust writer lays it out
/// (2-space indent, its key order, no final newline; unknown keys after
/// the known ones, by name). Deterministic: equal rows render equal bytes.
pub fn render(a: &Agent) -> Vec<u8> {
    let facts = facts_of(a);
    let text = |key: &str, default: &str| -> String {
        facts
            .get(key)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    };
    let mut top: Vec<(String, String)> = vec![
        ("schema_version".into(), SCHEMA.to_string()),
        (
            "short_id".into(),
            Value::from(short_id(a).unwrap_or("")).to_string(),
        ),
        ("status".into(), Value::from(a.status.as_str()).to_string()),
        ("ready".into(), text("ready", "false")),
        (
            "last_message_at".into(),
            a.last_message_at.map_or("null".to_string(), |t| {
                let mut s = String::new();
                t.write_rfc3339_secs(&mut s);
                Value::from(s).to_string()
            }),
        ),
        ("last_reply".into(), text("last_reply", "null")),
        ("restart_count".into(), text("restart_count", "0")),
        ("last_restart_at".into(), text("last_restart_at", "null")),
    ];
    let pty = match facts.get("pty.active") {
        None => "null".to_string(),
        Some(active) => {
            let drive = facts.get("pty.drive_active").is_some_and(|v| v == "true");
            let mut fields = vec![
                ("active".to_string(), active.clone()),
                ("drive_active".to_string(), drive.to_string()),
            ];
            for key in DRIVE_KEYS.iter().filter(|_| drive) {
                if let Some(v) = facts.get(&format!("pty.{key}")) {
                    fields.push((key.to_string(), v.clone()));
                }
            }
            for (k, v) in &facts {
                let Some(key) = k.strip_prefix("pty.") else {
                    continue;
                };
                if !matches!(key, "active" | "drive_active") && !DRIVE_KEYS.contains(&key) {
                    fields.push((key.to_string(), v.clone()));
                }
            }
            object(&fields, 1)
        }
    };
    top.push(("pty".into(), pty));
    let known = ["ready", "last_reply", "restart_count", "last_restart_at"];
    for (k, v) in &facts {
        if !k.starts_with("pty.") && !known.contains(&k.as_str()) {
            top.push((k.clone(), v.clone()));
        }
    }
    object(&top, 0).into_bytes()
}

/// `{ "k": v, … }` at `depth` (values already rendered at `depth + 1`).
fn object(fields: &[(String, String)], depth: usize) -> String {
    let pad = "  ".repeat(depth + 1);
    let mut s = String::from("{\n");
    for (i, (k, v)) in fields.iter().enumerate() {
        s.push_str(&pad);
        s.push_str(&Value::from(k.as_str()).to_string());
        s.push_str(": ");
        s.push_str(&pretty(v, depth + 1));
        s.push_str(if i + 1 < fields.len() { ",\n" } else { "\n" });
    }
    s.push_str(&"  ".repeat(depth));
    s.push('}');
    s
}

/// JSON text pretty-printed for a place `depth` levels deep (a value that
/// is already laid out, or not JSON, is kept as it is).
fn pretty(text: &str, depth: usize) -> String {
    if text.contains('\n') || !text.starts_with(['{', '[']) {
        return text.to_string();
    }
    match serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
    {
        Some(p) => p.replace('\n', &format!("\n{}", "  ".repeat(depth))),
        None => text.to_string(),
    }
}

/// The events that bring what another writer changed in the agent's
/// `state.json` into the fold, all at `at` (see the module docs for the
/// rule): the status as an [`ExternalChange::Status`], then the worker
/// facts as one [`EventKind::WorkerStateChanged`]. Status last would lose
/// nothing either; this order is `audit`'s.
pub fn changes(
    state: &State,
    agent: &str,
    base: Option<&StateFile>,
    theirs: &StateFile,
    at: Timestamp,
) -> Vec<Event> {
    let Some(ours) = state.agent(agent) else {
        return Vec::new();
    };
    let mut events = Vec::new();
    if let Some(b) = base {
        if b.status != theirs.status && ours.status != theirs.status {
            events.push(Event {
                at,
                kind: EventKind::ExternalChange {
                    agent: agent.to_string(),
                    source: SOURCE.to_string(),
                    change: ExternalChange::Status {
                        status: theirs.status,
                    },
                },
            });
        }
    }
    let ours_facts = facts_of(ours);
    let mut keys: Vec<&String> = theirs.facts.keys().collect();
    if let Some(b) = base {
        keys.extend(b.facts.keys());
    }
    keys.sort();
    keys.dedup();
    let changed: Vec<(String, Option<String>)> = keys
        .into_iter()
        .filter(|k| match base {
            Some(b) => b.facts.get(*k) != theirs.facts.get(*k),
            None => !ours_facts.contains_key(*k),
        })
        .filter(|k| ours_facts.get(*k) != theirs.facts.get(*k))
        .map(|k| (k.clone(), theirs.facts.get(k).cloned()))
        .collect();
    if !changed.is_empty() {
        events.push(Event {
            at,
            kind: EventKind::WorkerStateChanged {
                agent: agent.to_string(),
                source: SOURCE.to_string(),
                changes: changed,
            },
        });
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registration;

    fn fixture(name: &str) -> Vec<u8> {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/state")
            .join(name);
        std::fs::read(p).unwrap()
    }

    fn state_with(name: &str, sid: &str) -> State {
        let mut s = State::default();
        let mut reg = Registration::new(name, "claude", "/w");
        reg.short_id = sid.to_string();
        s.apply(
            1,
            &Event {
                at: Timestamp(1_000),
                kind: EventKind::AgentRegistered {
                    reg: Box::new(reg),
                    kind: crate::registry::RegistrationKind::New,
                    host: None,
                },
            },
        );
        s
    }

    fn fold(s: &mut State, events: &[Event]) {
        for (i, e) in events.iter().enumerate() {
            s.apply(10 + i as u64, e);
        }
    }

    #[test]
    fn every_upstream_fixture_reads_and_renders_back_byte_for_byte() {
        for name in [
            "pty-live.json",
            "pty-drive-open.json",
            "pty-exited.json",
            "stream-live.json",
            "stream-orphaned.json",
        ] {
            let bytes = fixture(name);
            let f = parse(&bytes, Path::new(name)).unwrap();
            let mut s = state_with("w", &f.short_id);
            // Without a base, a file's facts the fold lacks are taken; the
            // status is not.
            let events = changes(&s, "w", None, &f, Timestamp(2_000));
            assert!(
                events
                    .iter()
                    .all(|e| matches!(e.kind, EventKind::WorkerStateChanged { .. })),
                "{name}: {events:?}"
            );
            fold(&mut s, &events);
            let mut row = s.agent("w").unwrap().clone();
            row.status = f.status;
            assert_eq!(
                String::from_utf8(render(&row)).unwrap(),
                String::from_utf8(bytes).unwrap(),
                "{name}"
            );
        }
    }

    #[test]
    fn a_closed_window_drops_the_drive_keys_and_defaults_are_no_facts() {
        let text = br#"{"schema_version":1,"short_id":"x","status":"live","ready":false,
            "restart_count":0,"pty":{"active":false,"drive_active":false,
            "drive_mode":"step","extra_pty":7},"note":{"a":[1,2]}}"#;
        let f = parse(text, Path::new("s")).unwrap();
        let keys: Vec<&str> = f.facts.keys().map(String::as_str).collect();
        assert_eq!(keys, ["note", "pty.active", "pty.extra_pty"]);
    }

    #[test]
    fn malformed_files_are_named_with_the_key() {
        for (text, key) in [
            (&b"{"[..], "not JSON"),
            (br#"{"schema_version":1,"status":"live"}"#, "short_id"),
            (
                br#"{"schema_version":1,"short_id":"x","status":"up"}"#,
                "status",
            ),
            (
                br#"{"schema_version":1,"short_id":"x","status":"live","ready":1}"#,
                "ready",
            ),
            (
                br#"{"schema_version":1,"short_id":"x","status":"live","pty":{}}"#,
                "pty.active",
            ),
            (
                br#"{"schema_version":1,"short_id":"x","status":"live","restart_count":-1}"#,
                "restart_count",
            ),
        ] {
            let e = parse(text, Path::new("/d/x/state.json")).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains("/d/x/state.json") && msg.contains(key),
                "{msg}"
            );
        }
    }

    #[test]
    fn only_what_the_other_writer_changed_is_taken() {
        let mut s = state_with("w", "reviewer");
        let base = parse(&fixture("pty-live.json"), Path::new("b")).unwrap();
        let taken = changes(&s, "w", None, &base, Timestamp(2_000));
        fold(&mut s, &taken);
        // Ours moved to busy (a command); theirs opened a drive window and
        // left the status: the window is taken, the status stays ours.
        s.apply(
            20,
            &Event {
                at: Timestamp(3_000),
                kind: EventKind::StatusChanged {
                    agent: "w".into(),
                    status: Status::Busy,
                    message: None,
                    cause: crate::model::StatusCause::Command,
                },
            },
        );
        let theirs = parse(&fixture("pty-drive-open.json"), Path::new("t")).unwrap();
        let events = changes(&s, "w", Some(&base), &theirs, Timestamp(4_000));
        assert_eq!(events.len(), 1, "{events:?}");
        let EventKind::WorkerStateChanged { changes: c, .. } = &events[0].kind else {
            panic!("{events:?}")
        };
        let keys: Vec<&str> = c.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "pty.drive_active",
                "pty.drive_mode",
                "pty.drive_session_id",
                "pty.last_heartbeat_at_monotonic_ns"
            ]
        );
        fold(&mut s, &events);
        assert_eq!(s.agent("w").unwrap().status, Status::Busy);
        // Theirs then exits: the status is theirs (state.json is canonical),
        // the window closes.
        let exited = parse(&fixture("pty-exited.json"), Path::new("e")).unwrap();
        let events = changes(&s, "w", Some(&theirs), &exited, Timestamp(5_000));
        fold(&mut s, &events);
        let row = s.agent("w").unwrap();
        assert_eq!(row.status, Status::Exited);
        assert_eq!(render(row), fixture("pty-exited.json"));
    }

    #[test]
    fn a_short_id_that_is_not_one_path_component_gets_no_file() {
        let reg = Path::new("/r/registry.json");
        for (sid, ok) in [
            ("abc", true),
            ("../x", false),
            (".hid", false),
            ("a/b", false),
        ] {
            let mut a = Agent::new("a", "claude", "/", Timestamp(0));
            a.short_id = sid.to_string();
            assert_eq!(path_for(reg, &a).is_some(), ok, "{sid}");
        }
        let mut a = Agent::new("a", "claude", "/", Timestamp(0));
        assert_eq!(path_for(reg, &a), None);
        a.claude_short_id = Some("cs".into());
        assert_eq!(path_for(reg, &a).unwrap(), Path::new("/r/cs/state.json"));
    }
}
