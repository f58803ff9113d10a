//! [`RegistryError`]: why a command was refused. Every variant names the
//! agent, pid or field at fault; a refused command appends nothing.

use crate::model::Status;
use crate::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("agent `{agent}` not found")]
    NotFound { agent: String },
    #[error("agent name `{agent}` is held by {holder} (status {status}); it must finish or be removed first")]
    NameHeld {
        agent: String,
        /// "pid N", or "an agent registered without a pid".
        holder: String,
        pid: Option<u32>,
        status: Status,
    },
    #[error("parent agent `{parent}` of `{agent}` not found")]
    ParentNotFound { agent: String, parent: String },
    #[error("parent agent `{parent}` of `{agent}` is {status}; a child needs a live parent")]
    ParentFinished {
        agent: String,
        parent: String,
        status: Status,
    },
    #[error("agent `{agent}` is {status}: finished; register again")]
    Finished { agent: String, status: Status },
    #[error("agent `{agent}` is registered by pid {registered}; the request came from pid {got}")]
    PidMismatch {
        agent: String,
        registered: u32,
        got: u32,
    },
    #[error("agent `{agent}` is {status}: finished; leaving a finished status to {requested} needs a new registration")]
    LeaveFinished {
        agent: String,
        status: Status,
        requested: Status,
    },
    #[error("update of agent `{agent}` names no field")]
    NothingToUpdate { agent: String },
    #[error("{field} must not be empty")]
    Empty { field: &'static str },
    #[error("{field} is {len} bytes; the limit is {max}")]
    TooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
    #[error("{field} contains control characters")]
    ControlChars { field: &'static str },
    #[error("{field} {why}")]
    BadName {
        field: &'static str,
        why: &'static str,
    },
    #[error("{field} must be positive (got {value} ms)")]
    NotPositive { field: &'static str, value: i64 },
    #[error("request id `{request_id}` of agent `{agent}` reused with different content")]
    RequestIdConflict { agent: String, request_id: String },
    // The lease variants stay smaller than `NameHeld` (times as
    // `Timestamp`s, uids boxed): every `Result` of the store carries this
    // enum, and the daemon's errors carry that.
    #[error("agent `{agent}` is controlled by client `{holder}` until {}",
        .expires_at.to_rfc3339_millis())]
    ControllerHeld {
        agent: String,
        holder: String,
        expires_at: Timestamp,
    },
    #[error("agent `{agent}` is controlled by client `{holder}` until {}; --take-over works only after that",
        .expires_at.to_rfc3339_millis())]
    TakeOverTooEarly {
        agent: String,
        holder: String,
        expires_at: Timestamp,
    },
    #[error("the controller lease of client `{holder}` on agent `{agent}` expired at {}; attach with --take-over to replace it",
        .expired_at.to_rfc3339_millis())]
    ControllerExpired {
        agent: String,
        holder: String,
        expired_at: Timestamp,
    },
    #[error("client `{client}` holds no lease on agent `{agent}`")]
    NoLease { agent: String, client: String },
    #[error("the lease of client `{client}` on agent `{agent}` is bound to {}; {} may not renew or release it (only that uid, the daemon's owner or root)",
        uid_text(uids.bound, "no uid"), uid_text(uids.caller, "this caller"))]
    LeaseNotYours {
        agent: String,
        client: String,
        uids: Box<LeaseUids>,
    },
}

/// The uids of a refused lease change: the lease's and the caller's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseUids {
    pub bound: Option<u32>,
    pub caller: Option<u32>,
}

fn uid_text(uid: Option<u32>, none: &str) -> String {
    uid.map_or_else(|| none.to_string(), |u| format!("uid {u}"))
}

/// Checks a text field: non-empty, at most `max` bytes, no control
/// characters.
pub(crate) fn check_text(field: &'static str, v: &str, max: usize) -> Result<(), RegistryError> {
    if v.is_empty() {
        return Err(RegistryError::Empty { field });
    }
    if v.len() > max {
        return Err(RegistryError::TooLong {
            field,
            len: v.len(),
            max,
        });
    }
    if v.chars().any(char::is_control) {
        return Err(RegistryError::ControlChars { field });
    }
    Ok(())
}

/// Checks a name (of an agent, a parent): [`check_text`], and nothing that
/// makes two names look alike or one look like another: no leading or
/// trailing whitespace (so never only whitespace), no invisible (zero-width)
/// or bidirectional formatting characters such as U+202E.
pub(crate) fn check_name(field: &'static str, v: &str, max: usize) -> Result<(), RegistryError> {
    check_text(field, v, max)?;
    let bad = |why| Err(RegistryError::BadName { field, why });
    if v.trim() != v {
        return bad(if v.trim().is_empty() {
            "is only whitespace"
        } else {
            "has leading or trailing whitespace"
        });
    }
    if v.chars().any(is_invisible_format) {
        return bad("contains an invisible or bidirectional formatting character");
    }
    Ok(())
}

/// Zero-width and bidirectional formatting characters (Unicode `Cf` ones a
/// terminal shows as nothing or uses to reorder text).
fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{00ad}' | '\u{061c}' | '\u{180e}' | '\u{200b}'..='\u{200f}'
        | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}'
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

/// Checks an optional text field: at most `max` bytes, no control
/// characters (empty is allowed: it means "not set").
pub(crate) fn check_optional_text(
    field: &'static str,
    v: Option<&str>,
    max: usize,
) -> Result<(), RegistryError> {
    match v {
        Some(v) if !v.is_empty() => check_text(field, v, max),
        _ => Ok(()),
    }
}
