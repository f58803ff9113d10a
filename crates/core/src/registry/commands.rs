//! Validation of the agent commands (docs/behaviour.md §3): register, heartbeat, set
//! status, update fields, remove. Each `check_*` reads the state, refuses an
//! invalid command with a [`RegistryError`] naming the agent, pid or field,
//! and otherwise returns the event to append. Nothing here mutates the state:
//! the caller appends the event and then folds it with `State::apply`.

use super::error::{check_name, check_text, RegistryError};
use super::events::{Event, EventKind, FieldUpdates, Registration, RegistrationKind};
use super::state::State;
use crate::model::{Status, StatusCause};
use crate::time::Timestamp;

/// Longest agent name, in bytes. Names up to 250 bytes encode their length
/// in one byte, which keeps the history prefilter a fixed-offset comparison.
pub const NAME_MAX: usize = 250;
/// Longest provider, cwd, role, type and other short text fields.
pub const TEXT_MAX: usize = 4096;
/// Most heartbeats one batch record carries: the cluster's batcher seals a
/// batch at this many (its default `BatchLimits::max_beats`), and the
/// bounded decoder must take every batch it may seal.
pub const BATCH_BEATS_MAX: usize = 2048;
/// Most bytes of entries in one batch record (the batcher's default
/// `max_bytes`, below NATS's 1 MiB default payload limit).
pub const BATCH_BYTES_MAX: usize = 256 << 10;

impl State {
    /// Validates a registration: new name, renewal by the same holder, new
    /// life after a finished holder, or "name held by pid N".
    pub fn check_register(&self, reg: Registration, at: Timestamp) -> Result<Event, RegistryError> {
        check_name("agent name", &reg.name, NAME_MAX)?;
        check_text("provider", &reg.provider, TEXT_MAX)?;
        check_text("cwd", &reg.cwd, TEXT_MAX)?;
        if let Some(parent) = &reg.parent {
            match self.agent(parent) {
                None => {
                    return Err(RegistryError::ParentNotFound {
                        agent: reg.name.clone(),
                        parent: parent.clone(),
                    })
                }
                Some(p) if p.is_finished() => {
                    return Err(RegistryError::ParentFinished {
                        agent: reg.name.clone(),
                        parent: parent.clone(),
                        status: p.status,
                    })
                }
                Some(_) => {}
            }
        }
        let kind = self.registration_kind(&reg.name);
        if let (RegistrationKind::Renewal, Some(held)) = (kind, self.agent(&reg.name)) {
            let same_start = match (held.pid_start_time, reg.pid_start_time) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            };
            if held.pid != reg.pid || !same_start {
                return Err(RegistryError::NameHeld {
                    agent: reg.name.clone(),
                    holder: match held.pid {
                        Some(p) => format!("pid {p}"),
                        None => "an agent registered without a pid".to_string(),
                    },
                    pid: held.pid,
                    status: held.status,
                });
            }
        }
        Ok(Event {
            at,
            kind: EventKind::AgentRegistered {
                reg: Box::new(reg),
                kind,
                host: None,
            },
        })
    }

    /// Validates a heartbeat without allocating on success: not found,
    /// pid mismatch, finished (unless finished by lease expiry and sent by
    /// the same pid, which revives it). Returns the agent's slot for
    /// `State::apply_heartbeat_at` (valid until the state next changes).
    pub fn check_heartbeat(&self, agent: &str, pid: Option<u32>) -> Result<usize, RegistryError> {
        let Some(slot) = self.agents.position(agent) else {
            return Err(RegistryError::NotFound {
                agent: agent.to_string(),
            });
        };
        // Only the dense hot fields: no Agent row is read on this path.
        let Some(a) = self.agents.hot(slot) else {
            return Err(RegistryError::NotFound {
                agent: agent.to_string(),
            });
        };
        if let (Some(got), Some(registered)) = (pid, a.pid) {
            if got != registered {
                return Err(RegistryError::PidMismatch {
                    agent: agent.to_string(),
                    registered,
                    got,
                });
            }
        }
        if a.status.is_finished() {
            let same_pid = a.pid.is_none() || pid == a.pid;
            if a.cause != StatusCause::LeaseExpired || !same_pid {
                return Err(RegistryError::Finished {
                    agent: agent.to_string(),
                    status: a.status,
                });
            }
        }
        Ok(slot)
    }

    /// Any status may be set; leaving a finished one needs a registration.
    pub fn check_set_status(
        &self,
        agent: &str,
        status: Status,
        message: Option<String>,
        at: Timestamp,
    ) -> Result<Event, RegistryError> {
        let a = self.existing(agent)?;
        if a.is_finished() && !status.is_finished() {
            return Err(RegistryError::LeaveFinished {
                agent: agent.to_string(),
                status: a.status,
                requested: status,
            });
        }
        if let Some(m) = &message {
            if m.len() > TEXT_MAX {
                return Err(RegistryError::TooLong {
                    field: "status message",
                    len: m.len(),
                    max: TEXT_MAX,
                });
            }
        }
        Ok(Event {
            at,
            kind: EventKind::StatusChanged {
                agent: agent.to_string(),
                status,
                message,
                cause: StatusCause::Command,
            },
        })
    }

    /// Field updates of an existing agent (host mode is typed, so only
    /// `exec` and `interactive` can be expressed).
    pub fn check_update(
        &self,
        agent: &str,
        fields: FieldUpdates,
        at: Timestamp,
    ) -> Result<Event, RegistryError> {
        self.existing(agent)?;
        if fields.is_empty() {
            return Err(RegistryError::NothingToUpdate {
                agent: agent.to_string(),
            });
        }
        Ok(Event {
            at,
            kind: EventKind::FieldsUpdated {
                agent: agent.to_string(),
                fields,
            },
        })
    }

    pub fn check_remove(&self, agent: &str, at: Timestamp) -> Result<Event, RegistryError> {
        self.existing(agent)?;
        Ok(Event {
            at,
            kind: EventKind::AgentRemoved {
                agent: agent.to_string(),
            },
        })
    }

    pub(crate) fn existing(&self, agent: &str) -> Result<&crate::model::Agent, RegistryError> {
        self.agent(agent).ok_or_else(|| RegistryError::NotFound {
            agent: agent.to_string(),
        })
    }
}
