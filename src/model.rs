//! The vocabulary of the registry: statuses, hosting modes, message priority
//! and privacy, and the [`Agent`] row the fold maintains.
//!
//! These types are shared by the events (what is logged), the state (what the
//! fold keeps), snapshots and the schema-v4 export. Their text forms are the
//! schema-v4 ones (lowercase snake case) and are part of the on-disk contract:
//! never rename a variant's text form.

use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// An unknown word where a closed vocabulary was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{value}` (expected one of: {expected})")]
pub struct UnknownWord {
    pub what: &'static str,
    pub value: String,
    pub expected: &'static str,
}

macro_rules! word_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }
        impl FromStr for $name {
            type Err = UnknownWord;
            fn from_str(s: &str) -> Result<Self, UnknownWord> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownWord {
                        what: $what,
                        value: s.to_string(),
                        expected: concat!($($text, " "),+),
                    }),
                }
            }
        }
    };
}

word_enum!(
    /// The schema-v4 status vocabulary.
    Status, "status" {
        Spawning => "spawning",
        Ready => "ready",
        Idle => "idle",
        Busy => "busy",
        Live => "live",
        Restarting => "restarting",
        Orphaned => "orphaned",
        Failed => "failed",
        Exited => "exited",
        PermanentDead => "permanent_dead",
    }
);

impl Status {
    /// `failed`, `exited` and `permanent_dead` end a life: leaving them needs a
    /// new registration.
    pub const fn is_finished(self) -> bool {
        matches!(
            self,
            Status::Failed | Status::Exited | Status::PermanentDead
        )
    }
}

word_enum!(
    /// How an agent is hosted: absent means `exec` in schema v4.
    HostMode, "host_mode" {
        Exec => "exec",
        Interactive => "interactive",
    }
);

word_enum!(
    /// Message priority (default `normal`).
    Priority, "priority" {
        Low => "low",
        Normal => "normal",
        High => "high",
        Critical => "critical",
    }
);

word_enum!(
    /// Message privacy (default `team`).
    Privacy, "privacy" {
        Public => "public",
        Team => "team",
        Private => "private",
    }
);

word_enum!(
    /// Why a status changed: recorded in the event so the history explains it.
    StatusCause, "status cause" {
        Command => "command",
        LeaseExpired => "lease_expired",
        ProcessGone => "process_gone",
        Import => "import",
    }
);

// The enums come from a macro, so `#[default]` cannot be attached there.
#[allow(clippy::derivable_impls)]
impl Default for Priority {
    fn default() -> Self {
        Priority::Normal
    }
}
#[allow(clippy::derivable_impls)]
impl Default for Privacy {
    fn default() -> Self {
        Privacy::Team
    }
}

/// The providers an existing schema-v4 reader accepts. The store itself takes
/// any provider text; the export leaves out rows whose provider is not here.
pub const EXPORTABLE_PROVIDERS: [&str; 3] = ["claude", "codex", "gemini"];

/// One agent as the fold keeps it: every schema-v4 row field plus what the
/// registry itself needs. Optional text fields are `None` when empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agent {
    pub name: String,
    pub provider: String,
    pub cwd: String,
    pub role: Option<String>,
    pub agent_type: Option<String>,
    /// Parent agent's name, for child agents.
    pub parent: Option<String>,
    pub durable_identity: Option<String>,

    pub status: Status,
    pub status_message: Option<String>,
    pub status_cause: StatusCause,

    /// First registration of the current life (schema-v4 `created_at`).
    pub created_at: Timestamp,
    /// Latest registration or renewal (the broadcast floor is relative to it).
    pub registered_at: Timestamp,
    /// Latest registration, heartbeat or status change.
    pub last_active: Timestamp,
    /// 1 for the first life of this name, +1 for each re-registration after
    /// the name's holder finished.
    pub life: u32,

    pub pid: Option<u32>,
    pub pid_start_time: Option<u64>,
    pub host_mode: Option<HostMode>,
    pub log_path: Option<String>,
    pub claude_short_id: Option<String>,
    pub codex_session_id: Option<String>,
    pub gemini_session_id: Option<String>,
    pub claude_session_uuid: Option<String>,
    pub mcp_channel_id: Option<String>,
    pub last_message_at: Option<Timestamp>,
    /// Schema-v4 `short_id`: a string, empty when unset.
    pub short_id: String,
    /// Schema-v4 `project_root`: a string, empty when unset.
    pub project_root: String,
    pub messaging_socket_path: Option<String>,
    pub cc_session_id: Option<String>,
    pub last_reconciled_at: Option<Timestamp>,
    /// Keys newer v4 writers add (`spawned_by_session`, …) kept from an import
    /// as (key, JSON text) pairs; never exported.
    pub extra: Vec<(String, String)>,

    // Registry-only fields below: no schema-v4 row has them, so they are never
    // exported. They are left out of the row's own serde form on purpose (the
    // `AgentImported` event body is that form, and its layout is frozen so old
    // logs still read); `AgentMap` persists them beside the rows in snapshots.
    /// A name for people (`update --display-name`); `name` stays the key.
    #[serde(skip)]
    pub display_name: Option<String>,
    /// The client (editor, IDE) the agent is attached through, when it
    /// registered through a transport such as an MCP server.
    #[serde(skip)]
    pub transport_client: Option<TransportClient>,
    /// LSN of the last event that changed this row (registration, heartbeat,
    /// status, fields, display name, transport, import); 0 = none yet.
    #[serde(skip)]
    pub last_event_lsn: u64,
    /// The host id of the replica its latest registration was made on
    /// (`None` on a local store): only that host's process probe judges
    /// its pid (docs/scaling.md §7).
    #[serde(skip)]
    pub host: Option<String>,
}

/// The client an agent's transport serves, `NAME[/VERSION]` (e.g.
/// `cursor/1.2.3`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportClient {
    pub name: String,
    pub version: Option<String>,
}

impl TransportClient {
    /// Parses `NAME[/VERSION]`, splitting at the first `/`; the parts are
    /// validated by the command that records them.
    pub fn parse(s: &str) -> TransportClient {
        match s.split_once('/') {
            Some((name, version)) => TransportClient {
                name: name.to_string(),
                version: Some(version.to_string()),
            },
            None => TransportClient {
                name: s.to_string(),
                version: None,
            },
        }
    }
}

impl fmt::Display for TransportClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.version {
            Some(v) => write!(f, "{}/{v}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl Agent {
    /// A fresh agent row with every optional field empty.
    pub fn new(name: &str, provider: &str, cwd: &str, at: Timestamp) -> Self {
        Agent {
            name: name.to_string(),
            provider: provider.to_string(),
            cwd: cwd.to_string(),
            role: None,
            agent_type: None,
            parent: None,
            durable_identity: None,
            status: Status::Live,
            status_message: None,
            status_cause: StatusCause::Command,
            created_at: at,
            registered_at: at,
            last_active: at,
            life: 1,
            pid: None,
            pid_start_time: None,
            host_mode: None,
            log_path: None,
            claude_short_id: None,
            codex_session_id: None,
            gemini_session_id: None,
            claude_session_uuid: None,
            mcp_channel_id: None,
            last_message_at: None,
            short_id: String::new(),
            project_root: String::new(),
            messaging_socket_path: None,
            cc_session_id: None,
            last_reconciled_at: None,
            extra: Vec::new(),
            display_name: None,
            transport_client: None,
            last_event_lsn: 0,
            host: None,
        }
    }

    pub fn is_finished(&self) -> bool {
        self.status.is_finished()
    }

    /// `host_mode` with the schema-v4 rule applied: absent means `exec`.
    pub fn host_mode_or_default(&self) -> HostMode {
        self.host_mode.unwrap_or(HostMode::Exec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_unknown_words_are_named() {
        for s in Status::ALL {
            assert_eq!(s.as_str().parse::<Status>().unwrap(), *s);
            assert_eq!(serde_json::to_string(s).unwrap(), format!("\"{s}\""));
        }
        let e = "Active".parse::<Status>().unwrap_err();
        assert!(e.to_string().contains("unknown status `Active`"), "{e}");
        assert!(e.to_string().contains("permanent_dead"));
        assert_eq!(
            Status::ALL.iter().filter(|s| s.is_finished()).count(),
            3,
            "failed, exited, permanent_dead"
        );
        assert!("tty".parse::<HostMode>().is_err());
    }
}
