//! The vocabulary of the registry: statuses, hosting modes, message priority
//! and privacy, and the [`Agent`] row the fold maintains.
//!
//! These types are shared by the events (what is logged), the state (what the
//! fold keeps), snapshots and the schema-v4 export. Their text forms are the
//! schema-v4 ones (lowercase snake case) and are part of the on-disk contract:
//! never rename a variant's text form.

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

pub mod fields;

pub use fields::Agent;

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
