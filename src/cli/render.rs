//! How library values print, shared by several commands and the daemon:
//! an agent as a JSON row and as a table row, times as RFC 3339 text (the
//! library keeps milliseconds), absent values as `null`. A value only one
//! command prints is rendered in that command's file.

use agentlog::model::Agent;
use agentlog::time::Timestamp;
use serde_json::{json, Value};

pub fn time(t: Timestamp) -> Value {
    Value::String(t.to_string())
}

pub fn opt_time(t: Option<Timestamp>) -> Value {
    t.map_or(Value::Null, time)
}

/// Every field of an agent row, for `list --json`, `replay --json`, `show`
/// and the daemon's `get`.
pub fn agent(a: &Agent) -> Value {
    json!({
        "name": a.name,
        "provider": a.provider,
        "cwd": a.cwd,
        "status": a.status.as_str(),
        "status_message": a.status_message,
        "status_cause": a.status_cause.as_str(),
        "role": a.role,
        "agent_type": a.agent_type,
        "parent": a.parent,
        "life": a.life,
        "created_at": time(a.created_at),
        "registered_at": time(a.registered_at),
        "last_active": time(a.last_active),
        "pid": a.pid,
        "pid_start_time": a.pid_start_time,
        "host_mode": a.host_mode.map(|h| h.as_str()),
        "log_path": a.log_path,
        "project_root": a.project_root,
        "short_id": a.short_id,
        "claude_short_id": a.claude_short_id,
        "codex_session_id": a.codex_session_id,
        "gemini_session_id": a.gemini_session_id,
        "claude_session_uuid": a.claude_session_uuid,
        "mcp_channel_id": a.mcp_channel_id,
        "last_message_at": opt_time(a.last_message_at),
        "last_reconciled_at": opt_time(a.last_reconciled_at),
        "display_name": a.display_name,
        "transport_client": a.transport_client.as_ref().map(|c| c.to_string()),
        "last_event_lsn": a.last_event_lsn,
    })
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
