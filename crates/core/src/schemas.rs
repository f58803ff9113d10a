//! What agentlog knows about upstream fno's `registry.json` schemas 1–16
//! (docs/registry.md, "Upstream schemas"): the row keys of each, their
//! order in a schema-16 row, and which of them [`crate::model::Agent`] holds
//! as typed fields and which it keeps verbatim in `Agent::extra`.
//!
//! Invariants:
//! - The identity axis is one typed field: `Agent::provider` holds what
//!   upstream calls `harness` (the CLI hosting the agent: claude, codex,
//!   opencode, …). In files below schema 15 upstream's `provider` *is* that
//!   harness; from 15 on `provider` names the model vendor and is kept in
//!   `extra` under `provider`.
//! - Every key an import does not type is kept in `extra` as its JSON text,
//!   under its own key, so nothing a file holds is lost; an export to a
//!   schema that has the key writes that text back.
//! - `null` and absence mean the same to every upstream reader (each key's
//!   default is null), so a `null` extra is not stored.

/// The newest upstream schema agentlog reads and writes.
pub const LATEST: u32 = 16;

/// The schemas an export can write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Schema {
    /// The design card's schema 4 (docs/registry-v4.md): what every reader
    /// since `ae71d43` reads.
    #[default]
    V4,
    /// Upstream HEAD's schema 16, what today's fno readers read.
    V16,
}

impl Schema {
    pub const fn version(self) -> u32 {
        match self {
            Schema::V4 => 4,
            Schema::V16 => 16,
        }
    }

    /// The schema for a version number an operator gave.
    pub fn from_version(n: u64) -> Result<Schema, String> {
        match n {
            4 => Ok(Schema::V4),
            16 => Ok(Schema::V16),
            other => Err(format!(
                "schema {other} cannot be written (agentlog writes 4 or 16)"
            )),
        }
    }
}

/// A schema-16 row's keys in upstream HEAD's Python writer order
/// (UPSTREAM-SCHEMAS §4).
pub const V16_KEYS: [&str; 35] = [
    "name",
    "cwd",
    "log_path",
    "harness",
    "provider",
    "model",
    "effort",
    "created_at",
    "status",
    "last_message_at",
    "mcp_channel_id",
    "host_mode",
    "harness_session_id",
    "spawned_by_session",
    "spawned_by_harness",
    "spawned_by_cwd",
    "spawn_trigger",
    "origin",
    "short_id",
    "project_root",
    "messaging_socket_path",
    "cc_session_id",
    "pid",
    "pid_start_time",
    "last_reconciled_at",
    "inside_leg",
    "exited_at",
    "mux",
    "screen_state",
    "crown_level",
    "crown_scope",
    "crown_grantor",
    "route_settings_path",
    "fno_id",
    "delivery_policy",
];

/// Keys a schema-16 row has that the [`crate::model::Agent`] does not type:
/// kept verbatim in `extra` (`provider` there is the v15+ vendor).
pub const V16_EXTRA_KEYS: [&str; 21] = [
    "provider",
    "model",
    "effort",
    "harness_session_id",
    "spawned_by_session",
    "spawned_by_harness",
    "spawned_by_cwd",
    "spawn_trigger",
    "origin",
    "inside_leg",
    "exited_at",
    "mux",
    "screen_state",
    "crown_level",
    "crown_scope",
    "crown_grantor",
    "route_settings_path",
    "fno_id",
    "delivery_policy",
    // `host_mode` "attached" (schema 5 on) has no typed form: kept here.
    "host_mode",
    // Schemas 4–14 with `provider` and `harness` disagreeing: upstream keeps
    // `harness`; the other value is kept under this key, never exported.
    "legacy_provider",
];

/// Extras no export writes: `session_id` (a v4-era Rust key upstream's
/// Python reader drops and no schema lists) and [`V16_EXTRA_KEYS`]'
/// `legacy_provider`.
pub const NEVER_EXPORTED: [&str; 2] = ["session_id", "legacy_provider"];

/// Whether an `extra` key is never written to a `registry.json`: one of
/// [`NEVER_EXPORTED`], or a `state.json` worker fact
/// (`crate::state_json::EXTRA_PREFIX`), which only `state.json` holds.
pub fn never_exported(key: &str) -> bool {
    NEVER_EXPORTED.contains(&key) || crate::state_json::is_fact_key(key)
}

/// Keys that exist in some schema ≤ 16 beyond the 20 v4 keys, including
/// removed legacy keys: known, so a check of a file of schema ≤ 16 does not
/// call them unknown. The v4 keys are `check::ROW_KEYS`.
pub fn known_in_some_schema(key: &str) -> bool {
    V16_KEYS.contains(&key) || crate::check::ROW_KEYS.contains(&key) || key == "session_id"
}

/// The legacy session-id key of a harness (schemas ≤ 9), which schema 10
/// folded into `harness_session_id`.
pub fn legacy_session_key(harness: &str) -> Option<&'static str> {
    match harness {
        "claude" => Some("claude_session_uuid"),
        "codex" => Some("codex_session_id"),
        "gemini" => Some("gemini_session_id"),
        _ => None,
    }
}

/// Upstream's identity-token shape (from `1e79df797`): a harness or vendor
/// is a non-empty lowercase string without whitespace.
pub fn is_identity_token(s: &str) -> bool {
    !s.is_empty() && !s.chars().any(|c| c.is_whitespace() || c.is_uppercase())
}

/// The JSON text `agent.extra` holds for `key`, if any.
pub fn extra<'a>(agent: &'a crate::model::Agent, key: &str) -> Option<&'a str> {
    agent
        .extra
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The string an extra holds, when it is a JSON string.
pub fn extra_str(agent: &crate::model::Agent, key: &str) -> Option<String> {
    extra(agent, key)
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        .and_then(|v| v.as_str().map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extra_keys_are_the_v16_keys_the_agent_does_not_type() {
        for key in V16_KEYS {
            let typed =
                (crate::check::ROW_KEYS.contains(&key) && key != "provider") || key == "harness";
            let kept = V16_EXTRA_KEYS.contains(&key);
            assert!(
                typed ^ kept || key == "host_mode",
                "{key}: typed {typed}, extra {kept}"
            );
        }
        assert!(is_identity_token("opencode"));
        assert!(!is_identity_token("Open Code"));
        assert!(!is_identity_token(""));
    }
}
