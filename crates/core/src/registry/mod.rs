//! The agent registry as events (docs/behaviour.md §2–§4): the event catalogue and its
//! byte encoding, the [`State`] and its deterministic fold, command
//! validation, sweep and retention. Everything here is pure (no I/O, no
//! clock): the `Store` appends the events these functions produce to the log
//! and folds them.

pub mod agents;
mod batch;
pub mod codec;
#[cfg(test)]
mod codec_limits;
pub mod commands;
pub mod error;
pub mod events;
pub mod history;
pub mod labels;
pub mod messages;
pub mod queries;
pub mod retention;
pub mod runtime;
pub mod sessions;
pub mod state;
pub mod sweep;

pub use agents::{validate_agent, AgentMap};
pub use codec::{decode, encode, encode_into, DecodeError, SubjectFilter};
pub use error::RegistryError;
pub use events::{
    tag, BatchedHeartbeat, DropReason, DroppedMessage, Event, EventKind, ExternalChange,
    FieldUpdates, Lsn, PostedMessage, Registration, RegistrationKind, SessionKey, TransportCause,
};
pub use messages::{PostMessage, PostOutcome};
pub use retention::{retention, Kept, Retention, RetentionPolicy};
pub use sessions::SessionOp;
pub use state::{FoldScratch, Message, Session, State};
pub use sweep::{
    sweep, sweep_agent, sweep_process_identity, FakeProbe, HostLocalProbe, NoProbe, ProcessProbe,
    ProcessState, SweepPolicy,
};
