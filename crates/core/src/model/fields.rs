//! The agent's fields, declared once: [`Registration`], the [`Agent`] row,
//! [`FieldUpdates`] and the field table [`AGENT_FIELDS`] all come from the
//! two lists at the bottom of this file. Everything that goes through the
//! fields one by one reads the table: the fold copying a registration into
//! a row, row validation, the JSON view, the schema-v4 export and import,
//! and the CLI flags of `register` and `update`. A new field is one line in
//! the first list (plus one in the second if `update` may change it).
//!
//! Invariants (the on-disk contract, FORMAT.md "Events"):
//! - The lists' order is the bincode order of `Registration`, `Agent` (the
//!   `AgentImported` body and snapshot rows) and `FieldUpdates`: bincode
//!   writes struct fields in declaration order, so reordering a list changes
//!   the log's bytes. A field is only ever appended through a new, versioned
//!   event (a new tag) that still reads the old one.
//! - `Registration`'s fields are, in order, a subsequence of `Agent`'s: the
//!   first list is in row order, and its groups mark where the row keeps
//!   fields a registration does not set (status, times, life).
//! - A field's Rust name is its schema-v4 key, its JSON view key, and (with
//!   `-` for `_`) its CLI flag.

use crate::model::{HostMode, Status, StatusCause, TransportClient};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// What a field holds, which decides how it is parsed, checked and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// Optional text (`None` when unset).
    Text,
    /// Text that is empty when unset, never null (`short_id`, `project_root`,
    /// and the required `name`, `provider`, `cwd`).
    Str,
    /// An optional unsigned 32-bit number.
    U32,
    /// An optional unsigned 64-bit number.
    U64,
    /// An optional `exec` / `interactive`.
    HostMode,
    /// An optional time.
    Time,
}

/// A field's value, borrowed from a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldRef<'a> {
    Text(&'a str),
    U32(u32),
    U64(u64),
    HostMode(HostMode),
    Time(Timestamp),
}

/// A field's value, owned (parsed from a flag or an imported row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldValue {
    Text(String),
    U32(u32),
    U64(u64),
    HostMode(HostMode),
    Time(Timestamp),
}

/// The Rust types a field may have, and how each maps onto [`FieldKind`].
/// A value of the wrong kind never reaches a field: the table pairs each
/// setter with its own kind.
pub trait FieldType: Sized {
    const KIND: FieldKind;
    fn to_ref(&self) -> Option<FieldRef<'_>>;
    /// `None` is the unset value (empty text for [`FieldKind::Str`]).
    fn from_value(v: Option<FieldValue>) -> Self;
}

impl FieldType for Option<String> {
    const KIND: FieldKind = FieldKind::Text;
    fn to_ref(&self) -> Option<FieldRef<'_>> {
        self.as_deref().map(FieldRef::Text)
    }
    fn from_value(v: Option<FieldValue>) -> Self {
        match v {
            Some(FieldValue::Text(s)) => Some(s),
            _ => None,
        }
    }
}

impl FieldType for String {
    const KIND: FieldKind = FieldKind::Str;
    fn to_ref(&self) -> Option<FieldRef<'_>> {
        Some(FieldRef::Text(self))
    }
    fn from_value(v: Option<FieldValue>) -> Self {
        match v {
            Some(FieldValue::Text(s)) => s,
            _ => String::new(),
        }
    }
}

macro_rules! optional_field_type {
    ($t:ty, $kind:ident) => {
        impl FieldType for Option<$t> {
            const KIND: FieldKind = FieldKind::$kind;
            fn to_ref(&self) -> Option<FieldRef<'_>> {
                self.map(FieldRef::$kind)
            }
            fn from_value(v: Option<FieldValue>) -> Self {
                match v {
                    Some(FieldValue::$kind(x)) => Some(x),
                    _ => None,
                }
            }
        }
    };
}
optional_field_type!(u32, U32);
optional_field_type!(u64, U64);
optional_field_type!(HostMode, HostMode);
optional_field_type!(Timestamp, Time);

/// How the schema-v4 export writes a field (the existing writers' nulls and
/// omissions, docs/registry-v4.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V4Key {
    /// Not a schema-v4 key: never exported.
    None,
    /// Always written; must be present on import.
    Required,
    /// Always written, `null` when unset or empty.
    NullWhenEmpty,
    /// Left out when unset or empty.
    OmitWhenEmpty,
}

/// A CLI flag for a field. `order` is the flag's place in `--help` (clap's
/// display order, counted among the command's own flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag {
    pub order: usize,
    pub value_name: &'static str,
    pub help: Option<&'static str>,
}

/// A flag with no help text.
const fn flag(order: usize, value_name: &'static str) -> Flag {
    Flag {
        order,
        value_name,
        help: None,
    }
}

/// A flag with help text.
const fn flag_help(order: usize, value_name: &'static str, help: &'static str) -> Flag {
    Flag {
        order,
        value_name,
        help: Some(help),
    }
}

/// One descriptive field of the agent row.
#[derive(Debug, Clone, Copy)]
pub struct FieldSpec {
    /// Rust field, schema-v4 key, JSON view key.
    pub name: &'static str,
    pub kind: FieldKind,
    pub v4: V4Key,
    /// Shown by the JSON view (`list --json`, `show`, the daemon's `get`).
    pub in_view: bool,
    /// How validation errors name it.
    pub label: &'static str,
    /// Its `register` flag, if it has one.
    pub register: Option<Flag>,
    get: fn(&Agent) -> Option<FieldRef<'_>>,
    set: fn(&mut Agent, Option<FieldValue>),
    set_registration: Option<fn(&mut Registration, Option<FieldValue>)>,
}

impl FieldSpec {
    const fn new(
        name: &'static str,
        kind: FieldKind,
        get: fn(&Agent) -> Option<FieldRef<'_>>,
        set: fn(&mut Agent, Option<FieldValue>),
        set_registration: Option<fn(&mut Registration, Option<FieldValue>)>,
    ) -> Self {
        FieldSpec {
            name,
            kind,
            v4: V4Key::None,
            in_view: true,
            label: name,
            register: None,
            get,
            set,
            set_registration,
        }
    }
    const fn v4(mut self, v4: V4Key) -> Self {
        self.v4 = v4;
        self
    }
    const fn hidden(mut self) -> Self {
        self.in_view = false;
        self
    }
    const fn label(mut self, label: &'static str) -> Self {
        self.label = label;
        self
    }
    const fn register(mut self, flag: Flag) -> Self {
        self.register = Some(flag);
        self
    }
    /// The field's value in `a` (`None` when unset).
    pub fn get<'a>(&self, a: &'a Agent) -> Option<FieldRef<'a>> {
        (self.get)(a)
    }
    /// Sets the field in `a`; `v` must be of the field's kind.
    pub fn set(&self, a: &mut Agent, v: Option<FieldValue>) {
        (self.set)(a, v)
    }
    /// Sets the field in a registration; false if a registration has no
    /// such field.
    pub fn set_in_registration(&self, r: &mut Registration, v: Option<FieldValue>) -> bool {
        match self.set_registration {
            Some(set) => {
                set(r, v);
                true
            }
            None => false,
        }
    }
}

/// One field of [`FieldUpdates`].
#[derive(Debug, Clone, Copy)]
pub struct UpdatableSpec {
    pub name: &'static str,
    pub kind: FieldKind,
    /// Its `update` flag, if it has one.
    pub flag: Option<Flag>,
    is_set: fn(&FieldUpdates) -> bool,
    set: fn(&mut FieldUpdates, Option<FieldValue>),
}

impl UpdatableSpec {
    /// Whether `u` sets or clears this field.
    pub fn is_set(&self, u: &FieldUpdates) -> bool {
        (self.is_set)(u)
    }
    /// Makes `u` set this field to `v` (`None` clears it).
    pub fn set(&self, u: &mut FieldUpdates, v: Option<FieldValue>) {
        (self.set)(u, v)
    }
}

/// Generates `Registration`, `Agent`, their constructors and
/// [`AGENT_FIELDS`] from the field list. The row-only fields (status,
/// times, life, imported extras, registry-only fields) are written here at
/// their fixed places between the list's groups.
macro_rules! agent_fields {
    (
        $(
            $group:ident {
                $( $(#[$m:meta])* $f:ident: $t:ty $(=> $(.$method:ident($($arg:expr),*))*)?, )*
            }
        )*
    ) => {
        agent_fields!(@structs $( $group { $( $(#[$m])* $f: $t, )* } )*);

        /// Every descriptive field of the row (name, provider and cwd
        /// first), in row order.
        pub const AGENT_FIELDS: &[FieldSpec] = &[
            $( $(
                FieldSpec::new(
                    stringify!($f),
                    <$t as FieldType>::KIND,
                    |a| a.$f.to_ref(),
                    |a, v| a.$f = <$t as FieldType>::from_value(v),
                    Some(|r, v| r.$f = <$t as FieldType>::from_value(v)),
                )
                $($(.$method($($arg),*))*)?,
            )* )*
            // Descriptive fields only a row has (set by `update` and import).
            agent_fields!(@row_only last_message_at, NullWhenEmpty),
            agent_fields!(@row_only last_reconciled_at, OmitWhenEmpty),
        ];
    };
    (@row_only $f:ident, $v4:ident) => {
        FieldSpec::new(
            stringify!($f),
            FieldKind::Time,
            |a| a.$f.to_ref(),
            |a, v| a.$f = FieldType::from_value(v),
            None,
        )
        .v4(V4Key::$v4)
    };
    (@structs
        required { $( $(#[$qm:meta])* $q:ident: $qt:ty, )* }
        identity { $( $(#[$im:meta])* $i:ident: $it:ty, )* }
        process { $( $(#[$pm:meta])* $p:ident: $pt:ty, )* }
        workspace { $( $(#[$wm:meta])* $w:ident: $wt:ty, )* }
    ) => {
        /// Every field a registration sets (docs/behaviour.md §2 and the
        /// schema-v4 row).
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        pub struct Registration {
            $( $(#[$qm])* pub $q: $qt, )*
            $( $(#[$im])* pub $i: $it, )*
            $( $(#[$pm])* pub $p: $pt, )*
            $( $(#[$wm])* pub $w: $wt, )*
        }

        impl Registration {
            /// A registration with only the required fields set.
            pub fn new(name: &str, provider: &str, cwd: &str) -> Self {
                Registration {
                    name: name.to_string(),
                    provider: provider.to_string(),
                    cwd: cwd.to_string(),
                    $( $i: Default::default(), )*
                    $( $p: Default::default(), )*
                    $( $w: Default::default(), )*
                }
            }
        }

        /// One agent as the fold keeps it: every schema-v4 row field plus
        /// what the registry itself needs. Optional text fields are `None`
        /// when empty.
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        pub struct Agent {
            $( $(#[$qm])* pub $q: $qt, )*
            $( $(#[$im])* pub $i: $it, )*

            pub status: Status,
            pub status_message: Option<String>,
            pub status_cause: StatusCause,

            /// First registration of the current life (schema-v4 `created_at`).
            pub created_at: Timestamp,
            /// Latest registration or renewal (the broadcast floor is relative to it).
            pub registered_at: Timestamp,
            /// Latest registration, heartbeat or status change.
            pub last_active: Timestamp,
            /// 1 for the first life of this name, +1 for each re-registration
            /// after the name's holder finished.
            pub life: u32,

            $( $(#[$pm])* pub $p: $pt, )*
            pub last_message_at: Option<Timestamp>,
            $( $(#[$wm])* pub $w: $wt, )*
            pub last_reconciled_at: Option<Timestamp>,
            /// Keys newer v4 writers add (`spawned_by_session`, …) kept from
            /// an import as (key, JSON text) pairs; never exported.
            pub extra: Vec<(String, String)>,

            // Registry-only fields below: no schema-v4 row has them, so they
            // are never exported. They are left out of the row's own serde
            // form on purpose (the `AgentImported` event body is that form,
            // and its layout is frozen so old logs still read); `AgentMap`
            // persists them beside the rows in snapshots.
            /// A name for people (`update --display-name`); `name` stays the key.
            #[serde(skip)]
            pub display_name: Option<String>,
            /// The client (editor, IDE) the agent is attached through, when
            /// it registered through a transport such as an MCP server.
            #[serde(skip)]
            pub transport_client: Option<TransportClient>,
            /// LSN of the last event that changed this row (registration,
            /// heartbeat, status, fields, display name, transport, import);
            /// 0 = none yet.
            #[serde(skip)]
            pub last_event_lsn: u64,
            /// The host id of the replica its latest registration was made
            /// on (`None` on a local store): only that host's process probe
            /// judges its pid (docs/scaling.md §7).
            #[serde(skip)]
            pub host: Option<String>,
        }

        impl Agent {
            /// A fresh agent row with every optional field empty.
            pub fn new(name: &str, provider: &str, cwd: &str, at: Timestamp) -> Self {
                Agent {
                    name: name.to_string(),
                    provider: provider.to_string(),
                    cwd: cwd.to_string(),
                    $( $i: Default::default(), )*
                    status: Status::Live,
                    status_message: None,
                    status_cause: StatusCause::Command,
                    created_at: at,
                    registered_at: at,
                    last_active: at,
                    life: 1,
                    $( $p: Default::default(), )*
                    last_message_at: None,
                    $( $w: Default::default(), )*
                    last_reconciled_at: None,
                    extra: Vec::new(),
                    display_name: None,
                    transport_client: None,
                    last_event_lsn: 0,
                    host: None,
                }
            }

            /// Copies every field `reg` sets except the name (the key).
            pub fn set_registered_fields(&mut self, reg: &Registration) {
                $( self.$i.clone_from(&reg.$i); )*
                $( self.$p.clone_from(&reg.$p); )*
                $( self.$w.clone_from(&reg.$w); )*
                self.provider.clone_from(&reg.provider);
                self.cwd.clone_from(&reg.cwd);
            }
        }
    };
}

/// Generates [`FieldUpdates`] and [`FieldUpdates::FIELDS`]. The compiler
/// checks each type against the row's field of that name (`apply_to`).
macro_rules! field_updates {
    ( $( $f:ident: $t:ty => $flag:expr, )* ) => {
        /// Field changes: `None` leaves a field alone, `Some(None)` clears
        /// it, `Some(Some(v))` sets it.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct FieldUpdates {
            $( pub $f: Option<$t>, )*
        }

        impl FieldUpdates {
            /// The fields an update can change, in the event's order.
            pub const FIELDS: &'static [UpdatableSpec] = &[
                $(
                    UpdatableSpec {
                        name: stringify!($f),
                        kind: <$t as FieldType>::KIND,
                        flag: $flag,
                        is_set: |u| u.$f.is_some(),
                        set: |u, v| u.$f = Some(<$t as FieldType>::from_value(v)),
                    },
                )*
            ];

            pub fn is_empty(&self) -> bool {
                *self == FieldUpdates::default()
            }

            /// Applies the changes to a row.
            pub fn apply_to(&self, a: &mut Agent) {
                $( if let Some(v) = &self.$f { a.$f.clone_from(v); } )*
            }
        }
    };
}

// The first list: the row's descriptive fields in row (and bincode) order.
// `.v4(..)` says how the export writes a field (default: not exported),
// `.register(..)` gives its `register` flag, `.hidden()` keeps it out of the
// JSON view (durable_identity, messaging_socket_path and cc_session_id were
// never in it: the view is also the daemon's `get` reply), `.label(..)`
// names it in validation errors. A new flag takes the next free `order`.
agent_fields! {
    required {
        /// Subject agent (first field: the history prefilter relies on it).
        name: String => .v4(V4Key::Required),
        provider: String => .v4(V4Key::Required),
        cwd: String => .v4(V4Key::Required),
    }
    identity {
        role: Option<String> => .register(flag(4, "ROLE")),
        agent_type: Option<String> => .label("agent type"),
        /// Parent agent's name, for child agents.
        parent: Option<String> => .register(flag_help(5, "NAME", "Parent agent (makes this a child agent)")),
        durable_identity: Option<String> => .label("durable identity").hidden(),
    }
    process {
        pid: Option<u32> => .v4(V4Key::OmitWhenEmpty).register(flag(2, "PID")),
        pid_start_time: Option<u64> => .v4(V4Key::OmitWhenEmpty)
            .register(flag_help(3, "N", "Process start time (Linux /proc/<pid>/stat field 22)")),
        host_mode: Option<HostMode> => .v4(V4Key::OmitWhenEmpty)
            .register(flag_help(8, "MODE", "exec or interactive")),
        log_path: Option<String> => .v4(V4Key::NullWhenEmpty).register(flag(7, "P")),
        claude_short_id: Option<String> => .v4(V4Key::NullWhenEmpty),
        codex_session_id: Option<String> => .v4(V4Key::NullWhenEmpty),
        gemini_session_id: Option<String> => .v4(V4Key::NullWhenEmpty),
        claude_session_uuid: Option<String> => .v4(V4Key::NullWhenEmpty),
        mcp_channel_id: Option<String> => .v4(V4Key::NullWhenEmpty),
    }
    workspace {
        /// Schema-v4 `short_id`: a string, empty when unset.
        short_id: String => .v4(V4Key::OmitWhenEmpty).register(flag(9, "S")),
        /// Schema-v4 `project_root`: a string, empty when unset.
        project_root: String => .v4(V4Key::OmitWhenEmpty).register(flag(6, "P")),
        messaging_socket_path: Option<String> => .v4(V4Key::OmitWhenEmpty).hidden(),
        cc_session_id: Option<String> => .v4(V4Key::OmitWhenEmpty).hidden(),
    }
}

// The second list: what `FieldsUpdated` can change, in its bincode order,
// with each field's `update` flag.
field_updates! {
    claude_short_id: Option<String> => Some(flag(2, "ID")),
    codex_session_id: Option<String> => Some(flag(0, "ID")),
    gemini_session_id: Option<String> => Some(flag(3, "ID")),
    claude_session_uuid: Option<String> => Some(flag(1, "UUID")),
    cc_session_id: Option<String> => None,
    mcp_channel_id: Option<String> => Some(flag(4, "ID")),
    host_mode: Option<HostMode> => Some(flag_help(5, "MODE", "exec or interactive")),
    last_message_at: Option<Timestamp> => Some(flag(6, "TIME")),
    log_path: Option<String> => Some(flag(7, "P")),
    pid: Option<u32> => Some(flag(8, "PID")),
    pid_start_time: Option<u64> => Some(flag(9, "N")),
    last_reconciled_at: Option<Timestamp> => Some(flag(10, "TIME")),
    messaging_socket_path: Option<String> => None,
}

/// The table entry of a field by name.
pub fn field(name: &str) -> Option<&'static FieldSpec> {
    AGENT_FIELDS.iter().find(|f| f.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_updatable_field_is_a_row_field_of_the_same_kind() {
        for u in FieldUpdates::FIELDS {
            let f = field(u.name).unwrap_or_else(|| panic!("{} is not in AGENT_FIELDS", u.name));
            assert_eq!(f.kind, u.kind, "{}", u.name);
        }
    }

    #[test]
    fn update_offers_every_updatable_field_but_two_and_flags_keep_distinct_places() {
        // `update` never had flags for these two (library and import only);
        // adding one is a deliberate change of `update --help`.
        let without: Vec<&str> = FieldUpdates::FIELDS
            .iter()
            .filter(|f| f.flag.is_none())
            .map(|f| f.name)
            .collect();
        assert_eq!(without, ["cc_session_id", "messaging_socket_path"]);
        let mut update: Vec<usize> = FieldUpdates::FIELDS
            .iter()
            .filter_map(|f| Some(f.flag?.order))
            .collect();
        update.sort_unstable();
        assert_eq!(update, (0..update.len()).collect::<Vec<_>>());
        // `register`'s come after `--provider` (0) and `--cwd` (1).
        let mut register: Vec<usize> = AGENT_FIELDS
            .iter()
            .filter_map(|f| Some(f.register?.order))
            .collect();
        register.sort_unstable();
        assert_eq!(register, (2..2 + register.len()).collect::<Vec<_>>());
    }

    #[test]
    fn table_setters_and_getters_reach_every_field() {
        let mut a = Agent::new("a", "claude", "/", Timestamp(0));
        let mut reg = Registration::new("a", "claude", "/");
        for (i, f) in AGENT_FIELDS.iter().enumerate() {
            let v = match f.kind {
                FieldKind::Text | FieldKind::Str => FieldValue::Text(format!("v{i}")),
                FieldKind::U32 => FieldValue::U32(i as u32),
                FieldKind::U64 => FieldValue::U64(i as u64),
                FieldKind::HostMode => FieldValue::HostMode(HostMode::Interactive),
                FieldKind::Time => FieldValue::Time(Timestamp(i as i64)),
            };
            f.set(&mut a, Some(v.clone()));
            let owned = match f.get(&a) {
                Some(FieldRef::Text(s)) => FieldValue::Text(s.to_string()),
                Some(FieldRef::U32(n)) => FieldValue::U32(n),
                Some(FieldRef::U64(n)) => FieldValue::U64(n),
                Some(FieldRef::HostMode(h)) => FieldValue::HostMode(h),
                Some(FieldRef::Time(t)) => FieldValue::Time(t),
                None => panic!("{} unset after set", f.name),
            };
            assert_eq!(owned, v, "{}", f.name);
            if f.set_in_registration(&mut reg, Some(v)) && f.name != "name" {
                let mut row = Agent::new("a", "claude", "/", Timestamp(0));
                row.set_registered_fields(&reg);
                assert_eq!(
                    f.get(&row),
                    f.get(&a),
                    "{} not copied from a registration",
                    f.name
                );
            }
        }
    }
}
