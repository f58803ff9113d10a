//! Schema 16's readers' contract for one row (UPSTREAM-SCHEMAS §3–§4): what
//! upstream HEAD's Python reader and its Rust typed reader both accept in a
//! file of schema 5 to 16. Where they disagree the stricter decides: Rust
//! typed requires `created_at` and `status` and types `pid`, `crown_level`
//! and `inside_leg.state`; Python refuses unknown keys and identities that
//! are not tokens.
//!
//! Invariant (the fuzz contract, `tests/fuzz/bodies.rs`): a file this
//! passes, `crate::import` accepts.

use super::{is_iso_time, one_of, Problem, NEVER_NULL_TEXT, OPTIONAL_TEXT, STATUSES};
use crate::schemas::{is_identity_token, known_in_some_schema};
use serde_json::Value;
use std::collections::HashSet;

/// Optional text keys beyond schema 4's.
const NEWER_TEXT: [&str; 14] = [
    "harness_session_id",
    "spawned_by_session",
    "spawned_by_harness",
    "spawned_by_cwd",
    "spawn_trigger",
    "origin",
    "exited_at",
    "crown_scope",
    "crown_grantor",
    "route_settings_path",
    "fno_id",
    "delivery_policy",
    "model",
    "effort",
];
const HOST_MODES: [&str; 3] = ["exec", "interactive", "attached"];
const OBJECTS: [&str; 3] = ["inside_leg", "mux", "screen_state"];
const INSIDE_LEG_STATES: [&str; 3] = ["working", "blocked", "done"];

pub(super) fn check_row<'a>(
    i: usize,
    row: &'a Value,
    version: u64,
    names: &mut HashSet<&'a str>,
    problems: &mut Vec<Problem>,
) {
    let Value::Object(row) = row else {
        problems.push(Problem {
            row: Some(i),
            name: None,
            key: None,
            reason: "not an object".into(),
        });
        return;
    };
    let name = row.get("name").and_then(Value::as_str);
    let mut bad = |key: &str, reason: String| {
        problems.push(Problem {
            row: Some(i),
            name: name.map(str::to_string),
            key: Some(key.to_string()),
            reason,
        })
    };
    for key in row.keys().filter(|k| !known_in_some_schema(k)) {
        bad(key, "unknown key (the Python reader fails on it)".into());
    }
    for key in ["name", "cwd", "log_path", "created_at", "status"] {
        match row.get(key) {
            None => bad(key, "required key missing".into()),
            Some(v) if key != "log_path" && !v.is_string() => bad(key, "not a string".into()),
            _ => {}
        }
    }
    if let Some(n) = name {
        if n.is_empty() {
            bad("name", "empty".into());
        }
        if !names.insert(n) {
            bad("name", "duplicate (an earlier row has it)".into());
        }
    }
    // The identity: `harness` from 15 on (`provider` is then the vendor);
    // below, either (`provider` was the harness). Both are tokens when set.
    for key in ["harness", "provider"] {
        match row.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if is_identity_token(s) => {}
            Some(v) => bad(key, format!("{v} is not an identity token")),
        }
    }
    let set = |k: &str| row.get(k).is_some_and(|v| !v.is_null());
    if version >= 15 && !set("harness") {
        bad("harness", "required from schema 15 on".into());
    } else if !set("harness") && !set("provider") {
        bad(
            "harness",
            "missing (and no `provider` names the harness)".into(),
        );
    }
    one_of(row, "status", &STATUSES, false, &mut bad);
    one_of(row, "host_mode", &HOST_MODES, true, &mut bad);
    if let Some(t) = row.get("created_at").and_then(Value::as_str) {
        if !is_iso_time(t) {
            bad("created_at", format!("{t:?} is not an ISO-8601 time"));
        }
    }
    for key in NEVER_NULL_TEXT {
        if row.get(key).is_some_and(|v| !v.is_string()) {
            bad(key, "must be a string (never null)".into());
        }
    }
    for key in OPTIONAL_TEXT.iter().chain(&NEWER_TEXT) {
        if row
            .get(*key)
            .is_some_and(|v| !v.is_string() && !v.is_null())
        {
            bad(key, "must be a string or null".into());
        }
    }
    for (key, max) in [
        ("pid", u64::from(u32::MAX)),
        ("pid_start_time", u64::MAX),
        ("crown_level", 2),
    ] {
        if let Some(v) = row.get(key).filter(|v| !v.is_null()) {
            if v.as_u64().is_none_or(|n| n > max) {
                bad(key, format!("{v} is not an unsigned integer up to {max}"));
            }
        }
    }
    for key in OBJECTS {
        if row.get(key).is_some_and(|v| !v.is_object() && !v.is_null()) {
            bad(key, "must be an object or null".into());
        }
    }
    if let Some(leg) = row.get("inside_leg").and_then(Value::as_object) {
        match leg.get("state").and_then(Value::as_str) {
            Some(s) if INSIDE_LEG_STATES.contains(&s) => {}
            _ => bad(
                "inside_leg",
                "`state` is not one of working, blocked, done (the Rust reader fails)".into(),
            ),
        }
    }
}
