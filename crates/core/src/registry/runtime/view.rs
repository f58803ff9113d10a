//! The runtime-registry seed's reconciled lifecycle view (`list --view
//! runtime`): each agent as `persisted`, `idle`, `busy` or `shutting_down`,
//! mapped from agentlog's schema-v4 status alone (docs/registry.md, "Attach
//! and the runtime view"). The mapping is total and fixed: every status has
//! exactly one state, so the view never guesses from other fields. An
//! outage does not change the state: it is reported beside it, never used to
//! hide or delete an entry.

use crate::model::Status;
use serde::{Deserialize, Serialize};

/// The seed's `RuntimeRegistryState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeState {
    /// The record survives, no live runtime holds it.
    Persisted,
    /// Live and able to take work.
    Idle,
    /// Live and doing work.
    Busy,
    /// Live, but its runtime is going away.
    ShuttingDown,
}

impl RuntimeState {
    /// The seed's wire token.
    pub const fn as_str(self) -> &'static str {
        match self {
            RuntimeState::Persisted => "persisted",
            RuntimeState::Idle => "idle",
            RuntimeState::Busy => "busy",
            RuntimeState::ShuttingDown => "shutting_down",
        }
    }

    /// The one mapping from a status (docs/registry.md).
    pub const fn of(status: Status) -> RuntimeState {
        match status {
            Status::Busy => RuntimeState::Busy,
            Status::Spawning | Status::Ready | Status::Idle | Status::Live => RuntimeState::Idle,
            Status::Restarting => RuntimeState::ShuttingDown,
            Status::Orphaned | Status::Failed | Status::Exited | Status::PermanentDead => {
                RuntimeState::Persisted
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_maps_and_finished_ones_are_persisted() {
        for &s in Status::ALL {
            let state = RuntimeState::of(s);
            if s.is_finished() {
                assert_eq!(state, RuntimeState::Persisted, "{s}");
            }
        }
        assert_eq!(RuntimeState::of(Status::Busy).as_str(), "busy");
        assert_eq!(
            RuntimeState::of(Status::Restarting).as_str(),
            "shutting_down"
        );
        assert_eq!(RuntimeState::of(Status::Live).as_str(), "idle");
        assert_eq!(RuntimeState::of(Status::Orphaned).as_str(), "persisted");
    }
}
