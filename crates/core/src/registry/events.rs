//! The event catalogue: every fact the registry log records.
//!
//! An [`Event`] is an event time plus an [`EventKind`]. Events are facts:
//! commands are validated before their events are appended, and folding an
//! event never fails (see `state.rs`). Each kind has a fixed one-byte tag
//! ([`tag`]) that is part of the on-disk format: tags are never reused and
//! new kinds are only appended. Agent events put the subject agent's name as
//! the first body field so a history scan can filter records by comparing
//! bytes before decoding (see `codec.rs`).

use crate::model::{Agent, Priority, Privacy, Status, StatusCause, TransportClient};
pub use crate::registry::runtime::RuntimeEvent;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// A message's id is the LSN of its post (the log's one `Lsn`).
pub use crate::log::Lsn;

/// One-byte event tags (byte 0 of every payload). Never reuse or renumber.
pub mod tag {
    pub const AGENT_REGISTERED: u8 = 1;
    pub const HEARTBEAT: u8 = 2;
    pub const STATUS_CHANGED: u8 = 3;
    pub const FIELDS_UPDATED: u8 = 4;
    pub const AGENT_REMOVED: u8 = 5;
    pub const MESSAGE_POSTED: u8 = 6;
    pub const MESSAGES_READ: u8 = 7;
    pub const SESSION_OPENED: u8 = 8;
    pub const SESSION_HEARTBEAT: u8 = 9;
    pub const SESSION_CLOSED: u8 = 10;
    pub const AGENT_IMPORTED: u8 = 11;
    pub const MESSAGES_DROPPED: u8 = 12;
    pub const DISPLAY_NAME_SET: u8 = 13;
    pub const TRANSPORT_CLIENT_SET: u8 = 14;
    /// Lazy heartbeats one replica coalesced into one stream message
    /// (docs/scaling.md §5).
    pub const HEARTBEAT_BATCH: u8 = 15;
    pub const STREAM_COMPACTED: u8 = 16;
    pub const PURGED: u8 = 17;
    /// A registration that records the host it was made on (a replica's,
    /// docs/scaling.md §7): tag 1's body, then the host id. Tag 1 stays
    /// the encoding of a registration without a host.
    pub const AGENT_REGISTERED_ON_HOST: u8 = 18;
    /// Runtime facts (`registry::runtime`, issue 29): endpoint fields,
    /// leases, outages. Tags 19–28 are this family's.
    pub const ENDPOINT_SET: u8 = 19;
    pub const LEASE_ACQUIRED: u8 = 20;
    pub const LEASE_RENEWED: u8 = 21;
    pub const LEASE_RELEASED: u8 = 22;
    pub const OUTAGE_STARTED: u8 = 23;
    pub const OUTAGE_ENDED: u8 = 24;
    /// A per-agent `state.json`'s worker facts (`ready`, `restart_count`,
    /// the PTY and drive-window fields, …) another writer changed
    /// (docs/upstream.md, "state.json"). Tags 25–28 are the fno family's.
    pub const WORKER_STATE_CHANGED: u8 = 25;
    /// A difference between a file another writer shares with agentlog
    /// (`registry.json`, a `state.json`) and what agentlog last published
    /// there, ingested before republishing (docs/registry.md,
    /// "Coexistence").
    pub const EXTERNAL_CHANGE: u8 = 29;
    /// The highest tag this build knows.
    pub const MAX_KNOWN: u8 = 29;

    /// Whether this build can decode `tag` (tags 1..=25 and 29; 26–28 are
    /// reserved, never written by this build).
    pub const fn is_known(tag: u8) -> bool {
        matches!(
            tag,
            AGENT_REGISTERED..=AGENT_REGISTERED_ON_HOST | WORKER_STATE_CHANGED | EXTERNAL_CHANGE
        ) || is_runtime(tag)
    }

    /// Tags of [`crate::registry::runtime::RuntimeEvent`].
    pub const fn is_runtime(tag: u8) -> bool {
        matches!(tag, ENDPOINT_SET..=OUTAGE_ENDED)
    }

    /// The kind's name for a tag, for error messages.
    pub fn name(tag: u8) -> &'static str {
        match tag {
            AGENT_REGISTERED => "AgentRegistered",
            HEARTBEAT => "Heartbeat",
            STATUS_CHANGED => "StatusChanged",
            FIELDS_UPDATED => "FieldsUpdated",
            AGENT_REMOVED => "AgentRemoved",
            MESSAGE_POSTED => "MessagePosted",
            MESSAGES_READ => "MessagesRead",
            SESSION_OPENED => "SessionOpened",
            SESSION_HEARTBEAT => "SessionHeartbeat",
            SESSION_CLOSED => "SessionClosed",
            AGENT_IMPORTED => "AgentImported",
            MESSAGES_DROPPED => "MessagesDropped",
            DISPLAY_NAME_SET => "DisplayNameSet",
            TRANSPORT_CLIENT_SET => "TransportClientSet",
            HEARTBEAT_BATCH => "HeartbeatBatch",
            STREAM_COMPACTED => "StreamCompacted",
            PURGED => "Purged",
            AGENT_REGISTERED_ON_HOST => "AgentRegistered",
            EXTERNAL_CHANGE => "ExternalChange",
            WORKER_STATE_CHANGED => "WorkerStateChanged",
            ENDPOINT_SET => "EndpointSet",
            LEASE_ACQUIRED => "LeaseAcquired",
            LEASE_RENEWED => "LeaseRenewed",
            LEASE_RELEASED => "LeaseReleased",
            OUTAGE_STARTED => "OutageStarted",
            OUTAGE_ENDED => "OutageEnded",
            _ => "unknown",
        }
    }

    /// Tags whose body starts with the subject agent's name.
    pub const fn has_subject_agent(tag: u8) -> bool {
        matches!(
            tag,
            AGENT_REGISTERED
                | HEARTBEAT
                | STATUS_CHANGED
                | FIELDS_UPDATED
                | AGENT_REMOVED
                | MESSAGE_POSTED
                | MESSAGES_READ
                | AGENT_IMPORTED
                | DISPLAY_NAME_SET
                | TRANSPORT_CLIENT_SET
                | AGENT_REGISTERED_ON_HOST
                | EXTERNAL_CHANGE
                | WORKER_STATE_CHANGED
        ) || is_runtime(tag)
    }
}

/// One fact in the log: when it happened and what happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub at: Timestamp,
    pub kind: EventKind,
}

/// How a registration related to the name's previous holder, as decided by
/// the command at validation time (the fold re-derives it and counts a
/// disagreement as an anomaly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RegistrationKind {
    /// The name was not registered.
    New,
    /// Same holder (pid and start time) re-registered a live name.
    Renewal,
    /// The previous holder had finished: a new life of the name starts.
    NewLife,
}

pub use crate::model::fields::{FieldUpdates, Registration};

/// A posted message as logged. Its id is the LSN of the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostedMessage {
    /// Sender (first field: the history prefilter relies on it).
    pub from: String,
    /// `None` = broadcast.
    pub to: Option<String>,
    pub category: String,
    pub body: String,
    pub priority: Priority,
    pub privacy: Privacy,
    pub project_root: Option<String>,
    pub expires_at: Timestamp,
    pub request_id: Option<String>,
    /// FNV-1a 64 of the content (see `messages::content_digest`).
    pub digest: u64,
}

/// Identity of a logical session.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SessionKey {
    pub source: String,
    pub workspace: String,
    pub session_id: String,
}

/// Why a transport client was recorded: the registration that attached the
/// agent, or a later reconnect of the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TransportCause {
    Registration,
    Reconnect,
}

/// What happened. Variant order is irrelevant to the format (tags are
/// explicit); see [`EventKind::tag`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventKind {
    AgentRegistered {
        reg: Box<Registration>,
        kind: RegistrationKind,
        /// The host id of the replica the registration was made on
        /// (`None`: a local store's, or a log from before hosts were
        /// recorded). Encoded as tag 18 when set, tag 1 otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
    },
    Heartbeat {
        agent: String,
        pid: Option<u32>,
    },
    StatusChanged {
        agent: String,
        status: Status,
        message: Option<String>,
        cause: StatusCause,
    },
    FieldsUpdated {
        agent: String,
        fields: FieldUpdates,
    },
    AgentRemoved {
        agent: String,
    },
    MessagePosted(PostedMessage),
    MessagesRead {
        reader: String,
        ids: Vec<Lsn>,
    },
    /// Live messages removed before their time, and why: written in the
    /// same batch as (and just before) the post that overflowed the cap, so
    /// no drop is silent. Logs written before this event existed drop
    /// through the fold's implicit cap instead; both fold the same.
    MessagesDropped {
        dropped: Vec<DroppedMessage>,
        reason: DropReason,
    },
    SessionOpened {
        key: SessionKey,
        ttl_ms: i64,
    },
    SessionHeartbeat {
        key: SessionKey,
        ttl_ms: i64,
    },
    SessionClosed {
        key: SessionKey,
    },
    /// A whole row brought in from a schema-v4 `registry.json` (or another
    /// store): replaces any agent of that name.
    AgentImported(Box<Agent>),
    /// A name for people; `None` clears it. Not part of the v4 export.
    DisplayNameSet {
        agent: String,
        display_name: Option<String>,
    },
    /// The client the agent's transport serves; `None` detaches it.
    TransportClientSet {
        agent: String,
        client: Option<TransportClient>,
        cause: TransportCause,
    },
    /// The fleet's stream was compacted (docs/scaling.md §6): the records
    /// `<= upto` of these agents, messages and sessions were deleted from it
    /// (retired or removed agents, expired or dropped messages, ended
    /// sessions). Folding it removes them, as retention did on the host that
    /// compacted, so a host that folded only part of the deleted records
    /// (it was away, or it read the stream while the deletion ran) ends in
    /// the same state. Written only at stream sequence `upto + 1`.
    StreamCompacted {
        upto: Lsn,
        agents: Vec<String>,
        messages: Vec<Lsn>,
        sessions: Vec<SessionKey>,
    },
    /// A stream sequence that compaction deleted before this replica read
    /// it: the local log holds this in its place, so its LSNs stay the
    /// stream's sequences. Folds to nothing; compaction drops it.
    Purged,
    /// Lazy heartbeats of several agents that one replica accepted within a
    /// few milliseconds, stored as one stream message (one LSN). The fold
    /// applies them in order, each exactly as a [`EventKind::Heartbeat`]
    /// at this LSN with its own time; the event's own time is the latest.
    HeartbeatBatch {
        beats: Vec<BatchedHeartbeat>,
    },
    /// A change another writer made to a file agentlog publishes
    /// (`source`: `registry.json` or `state.json`), found by comparing the
    /// file with what agentlog last published there, and appended before
    /// agentlog republishes. `log` and `audit` name its actor
    /// "external writer (SOURCE)".
    ExternalChange {
        agent: String,
        source: String,
        change: ExternalChange,
    },
    /// An agent's runtime facts: endpoint fields, leases, outages (tags
    /// 19–24, `registry::runtime`). Never exported.
    Runtime(RuntimeEvent),
    /// Worker facts of the agent's `state.json` (`ready`, `last_reply`,
    /// `restart_count`, `last_restart_at`, `pty.*`, unknown keys) another
    /// writer changed (`source`: `state.json`): each change is a key (a
    /// `pty` field as `pty.KEY`) and its JSON text, `None` for unset.
    /// The fold keeps them (`crate::state_json`); the `state.json` publish
    /// writes them back. `log` and `audit` name the actor as for
    /// [`EventKind::ExternalChange`].
    WorkerStateChanged {
        agent: String,
        source: String,
        changes: Vec<(String, Option<String>)>,
    },
}

/// What an [`EventKind::ExternalChange`] did to the agent's row. Its serde
/// form (bincode, variant index first) is part of the log's format: new
/// variants are only appended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExternalChange {
    /// A row the other writer added: registered as it is in the file.
    Registered(Box<Agent>),
    /// A row the other writer changed: `row` is agentlog's row with the
    /// changed file keys (`keys`) taken from the file.
    Updated { row: Box<Agent>, keys: Vec<String> },
    /// Only the status changed.
    Status { status: Status },
    /// A row the other writer removed.
    Removed,
}

impl ExternalChange {
    /// The actor `log` and `audit` show for a change found in `source`.
    pub fn actor(source: &str) -> String {
        format!("external writer ({source})")
    }
}

/// One heartbeat of a [`EventKind::HeartbeatBatch`]: what a
/// [`EventKind::Heartbeat`] records, plus its own time and who asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchedHeartbeat {
    pub agent: String,
    pub pid: Option<u32>,
    pub at: Timestamp,
    pub origin: Option<crate::registry::codec::Origin>,
}

impl BatchedHeartbeat {
    /// The heartbeat as a standalone event (audit and history show each).
    pub fn event(&self) -> Event {
        Event {
            at: self.at,
            kind: EventKind::Heartbeat {
                agent: self.agent.clone(),
                pid: self.pid,
            },
        }
    }
}

/// One message a [`EventKind::MessagesDropped`] removed: enough for the
/// recipient (or every reader, for a broadcast) to learn what it lost and
/// from whom, after the message itself is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedMessage {
    pub id: Lsn,
    pub from: String,
    /// `None` = a broadcast.
    pub to: Option<String>,
}

/// Why live messages were dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DropReason {
    /// The store's live-message cap: the oldest live messages make room.
    Cap,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Cap => "message cap",
        }
    }
}

impl EventKind {
    /// The tag byte this event is encoded with: [`EventKind::tag`], but
    /// for a registration that records its host, tag 18.
    pub const fn wire_tag(&self) -> u8 {
        match self {
            EventKind::AgentRegistered { host: Some(_), .. } => tag::AGENT_REGISTERED_ON_HOST,
            other => other.tag(),
        }
    }

    /// The kind's tag (what `log`, `watch` filters and metrics name it by):
    /// a registration is tag 1 whether or not it records its host.
    pub const fn tag(&self) -> u8 {
        match self {
            EventKind::AgentRegistered { .. } => tag::AGENT_REGISTERED,
            EventKind::Heartbeat { .. } => tag::HEARTBEAT,
            EventKind::StatusChanged { .. } => tag::STATUS_CHANGED,
            EventKind::FieldsUpdated { .. } => tag::FIELDS_UPDATED,
            EventKind::AgentRemoved { .. } => tag::AGENT_REMOVED,
            EventKind::MessagePosted(_) => tag::MESSAGE_POSTED,
            EventKind::MessagesRead { .. } => tag::MESSAGES_READ,
            EventKind::SessionOpened { .. } => tag::SESSION_OPENED,
            EventKind::SessionHeartbeat { .. } => tag::SESSION_HEARTBEAT,
            EventKind::SessionClosed { .. } => tag::SESSION_CLOSED,
            EventKind::AgentImported(_) => tag::AGENT_IMPORTED,
            EventKind::MessagesDropped { .. } => tag::MESSAGES_DROPPED,
            EventKind::DisplayNameSet { .. } => tag::DISPLAY_NAME_SET,
            EventKind::TransportClientSet { .. } => tag::TRANSPORT_CLIENT_SET,
            EventKind::HeartbeatBatch { .. } => tag::HEARTBEAT_BATCH,
            EventKind::StreamCompacted { .. } => tag::STREAM_COMPACTED,
            EventKind::Purged => tag::PURGED,
            EventKind::ExternalChange { .. } => tag::EXTERNAL_CHANGE,
            EventKind::WorkerStateChanged { .. } => tag::WORKER_STATE_CHANGED,
            EventKind::Runtime(r) => r.tag(),
        }
    }

    /// The agent the event is about (the sender for a message, the reader
    /// for a read receipt); `None` for session events.
    pub fn subject_agent(&self) -> Option<&str> {
        match self {
            EventKind::AgentRegistered { reg, .. } => Some(&reg.name),
            EventKind::Heartbeat { agent, .. }
            | EventKind::StatusChanged { agent, .. }
            | EventKind::FieldsUpdated { agent, .. }
            | EventKind::AgentRemoved { agent }
            | EventKind::DisplayNameSet { agent, .. }
            | EventKind::TransportClientSet { agent, .. }
            | EventKind::ExternalChange { agent, .. }
            | EventKind::WorkerStateChanged { agent, .. } => Some(agent),
            EventKind::MessagePosted(m) => Some(&m.from),
            EventKind::MessagesRead { reader, .. } => Some(reader),
            EventKind::AgentImported(a) => Some(&a.name),
            EventKind::Runtime(r) => Some(r.agent()),
            EventKind::SessionOpened { .. }
            | EventKind::SessionHeartbeat { .. }
            | EventKind::SessionClosed { .. }
            | EventKind::MessagesDropped { .. }
            | EventKind::HeartbeatBatch { .. }
            | EventKind::StreamCompacted { .. }
            | EventKind::Purged => None,
        }
    }

    /// Whether the event belongs in `agent`'s history: its own events,
    /// messages it sent or that were addressed to it, and its read receipts.
    /// A broadcast it never read is not in its history.
    pub fn concerns_agent(&self, agent: &str) -> bool {
        if self.subject_agent() == Some(agent) {
            return true;
        }
        match self {
            EventKind::MessagePosted(m) => m.to.as_deref() == Some(agent),
            EventKind::AgentRegistered { reg, .. } => reg.parent.as_deref() == Some(agent),
            EventKind::MessagesDropped { dropped, .. } => dropped
                .iter()
                .any(|d| d.from == agent || d.to.as_deref() == Some(agent)),
            EventKind::HeartbeatBatch { beats } => beats.iter().any(|b| b.agent == agent),
            _ => false,
        }
    }

    /// The messages the event concerns: the post itself (its id is the
    /// record's `lsn`) or the messages a receipt marks read.
    pub fn message_ids(&self, lsn: Lsn) -> Vec<Lsn> {
        match self {
            EventKind::MessagePosted(_) => vec![lsn],
            EventKind::MessagesRead { ids, .. } => ids.clone(),
            EventKind::MessagesDropped { dropped, .. } => dropped.iter().map(|d| d.id).collect(),
            _ => Vec::new(),
        }
    }

    /// The session the event concerns, if any.
    pub fn session(&self) -> Option<&SessionKey> {
        match self {
            EventKind::SessionOpened { key, .. }
            | EventKind::SessionHeartbeat { key, .. }
            | EventKind::SessionClosed { key } => Some(key),
            _ => None,
        }
    }
}
