//! The schema-16 row (UPSTREAM-SCHEMAS §4): every one of the 35 keys, in
//! upstream HEAD's Python writer order, as that writer writes them (`null`
//! when unset; `short_id` and `project_root` `""`).
//!
//! Invariants: the identity `Agent::provider` is written as `harness`; keys
//! the agent keeps in `extra` are written back as their verbatim JSON text
//! (so a schema-16 import re-exports key for key); rows imported from older
//! schemas are migrated as upstream's readers migrate them (the legacy
//! session key of the harness fills an empty `harness_session_id`, a
//! `claude_short_id` fills an empty `short_id`). An extra that schema 16
//! has no key for is not written: [`unwritten_extras`] names it.

use super::{push_str, push_time, push_u64};
use crate::model::fields::{field, FieldKind, FieldRef};
use crate::model::Agent;
use crate::schemas::{extra, legacy_session_key, never_exported, Schema, V16_KEYS};

/// Appends `a` as one schema-16 row (indented as an element of `agents`).
pub(super) fn write_row(buf: &mut Vec<u8>, a: &Agent, scratch: &mut String) {
    buf.extend_from_slice(b"    {");
    for (i, key) in V16_KEYS.iter().enumerate() {
        buf.extend_from_slice(if i == 0 {
            b"\n      \""
        } else {
            b",\n      \""
        });
        buf.extend_from_slice(key.as_bytes());
        buf.extend_from_slice(b"\": ");
        match *key {
            "harness" => push_str(buf, &a.provider),
            "created_at" => push_time(buf, a.created_at, scratch),
            "status" => push_str(buf, a.status.as_str()),
            "short_id" => {
                let legacy = a.claude_short_id.as_deref().unwrap_or("");
                push_str(
                    buf,
                    if a.short_id.is_empty() {
                        legacy
                    } else {
                        &a.short_id
                    },
                )
            }
            "harness_session_id" => match extra(a, key) {
                Some(text) => buf.extend_from_slice(text.as_bytes()),
                None => match legacy_session_key(&a.provider)
                    .and_then(field)
                    .and_then(|f| f.get(a))
                {
                    Some(FieldRef::Text(s)) => push_str(buf, s),
                    _ => buf.extend_from_slice(b"null"),
                },
            },
            // `attached` (schema 5 on) is kept verbatim; the others are typed.
            "host_mode" => match (extra(a, key), a.host_mode) {
                (Some(text), _) => buf.extend_from_slice(text.as_bytes()),
                (None, Some(mode)) => push_str(buf, mode.as_str()),
                (None, None) => buf.extend_from_slice(b"null"),
            },
            _ => match field(key).filter(|_| *key != "provider") {
                Some(f) => match f.get(a) {
                    // Never-null text (`cwd`, `project_root`): `""` when empty.
                    Some(FieldRef::Text(s)) if f.kind == FieldKind::Str => push_str(buf, s),
                    None | Some(FieldRef::Text("")) => buf.extend_from_slice(b"null"),
                    Some(FieldRef::Text(s)) => push_str(buf, s),
                    Some(FieldRef::U32(n)) => push_u64(buf, u64::from(n)),
                    Some(FieldRef::U64(n)) => push_u64(buf, n),
                    Some(FieldRef::HostMode(m)) => push_str(buf, m.as_str()),
                    Some(FieldRef::Time(t)) => push_time(buf, t, scratch),
                },
                None => match extra(a, key) {
                    Some(text) => buf.extend_from_slice(text.as_bytes()),
                    None => buf.extend_from_slice(b"null"),
                },
            },
        }
    }
    buf.extend_from_slice(b"\n    }");
}

/// The keys of `a.extra` an export to `schema` leaves out (they stay in the
/// log): every extra for schema 4, which has none of them; for 16 those it
/// has no key for. Keys no schema writes (`schemas::never_exported`) are not named.
pub(super) fn unwritten_extras(a: &Agent, schema: Schema) -> Vec<String> {
    a.extra
        .iter()
        .map(|(k, _)| k)
        .filter(|k| !never_exported(k))
        .filter(|k| schema == Schema::V4 || !V16_KEYS.contains(&k.as_str()))
        .cloned()
        .collect()
}
