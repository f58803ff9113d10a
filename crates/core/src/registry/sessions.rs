//! Logical-session presence commands: open / heartbeat / close a
//! (source, workspace, session id) triple. Fields are non-empty, free of
//! control characters and at most 64 / 4,096 / 256 bytes; a session silent
//! longer than its TTL (default 180 s) drops out of the state.

use super::error::{check_text, RegistryError};
use super::events::{Event, EventKind, SessionKey};
use super::state::State;
use crate::time::Timestamp;

pub const SOURCE_MAX: usize = 64;
pub const WORKSPACE_MAX: usize = 4096;
pub const SESSION_ID_MAX: usize = 256;
pub const DEFAULT_SESSION_TTL_MS: i64 = 180_000;

/// What a session command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionOp {
    Open,
    Heartbeat,
    Close,
}

impl SessionKey {
    pub fn new(source: &str, workspace: &str, session_id: &str) -> Self {
        SessionKey {
            source: source.to_string(),
            workspace: workspace.to_string(),
            session_id: session_id.to_string(),
        }
    }

    /// Checks the field limits.
    pub fn validate(&self) -> Result<(), RegistryError> {
        check_text("session source", &self.source, SOURCE_MAX)?;
        check_text("session workspace", &self.workspace, WORKSPACE_MAX)?;
        check_text("session id", &self.session_id, SESSION_ID_MAX)
    }
}

impl State {
    /// Validates a session command. A heartbeat of an unknown session opens
    /// it; closing a session that is absent (or already timed out) appends
    /// nothing (`Ok(None)`).
    pub fn check_session(
        &self,
        op: SessionOp,
        key: SessionKey,
        ttl_ms: Option<i64>,
        at: Timestamp,
    ) -> Result<Option<Event>, RegistryError> {
        key.validate()?;
        let ttl_ms = ttl_ms.unwrap_or(DEFAULT_SESSION_TTL_MS);
        if ttl_ms <= 0 {
            return Err(RegistryError::NotPositive {
                field: "session ttl",
                value: ttl_ms,
            });
        }
        let kind = match op {
            SessionOp::Open => EventKind::SessionOpened { key, ttl_ms },
            SessionOp::Heartbeat => EventKind::SessionHeartbeat { key, ttl_ms },
            SessionOp::Close => {
                let live = self.sessions.get(&key).is_some_and(|s| !s.is_timed_out(at));
                if !live {
                    return Ok(None);
                }
                EventKind::SessionClosed { key }
            }
        };
        Ok(Some(Event { at, kind }))
    }

    /// Sessions not timed out at `now`.
    pub fn live_sessions(&self, now: Timestamp) -> impl Iterator<Item = &SessionKey> {
        self.sessions
            .iter()
            .filter(move |(_, s)| !s.is_timed_out(now))
            .map(|(k, _)| k)
    }
}
