//! agentlog: an event-sourced store for agent registries.
//!
//! Every registration, heartbeat, status change and message is appended as a
//! checksummed record to a memory-mapped log; a fold rebuilds the registry;
//! snapshots make reopening cheap and publish schema-v4 `registry.json`;
//! compaction drops what retention no longer needs.
//!
//! The common types are re-exported here: open a [`Store`] to write (one
//! writer process per directory), a [`ReadOnlyStore`] to read beside it,
//! or the bare [`Log`] of payloads; commands append [`Event`]s that fold
//! into a [`State`]; [`export`] and [`import`] read and write the schema-v4
//! `registry.json`; a [`Client`] talks to a running daemon, and a
//! [`ClusterNode`] shares one registry among hosts over NATS.
//!
//! ```
//! use agentlog::{ReadOnlyStore, Registration, Store, StoreOptions, Timestamp};
//!
//! let dir = tempfile::tempdir()?;
//! let at = Timestamp::parse_rfc3339("2030-01-01T00:00:00Z")?;
//! let store = Store::open(dir.path(), StoreOptions::short_lived())?;
//! let mut reg = Registration::new("builder", "claude", "/work");
//! reg.pid = Some(4242);
//! store.register(reg, Some(at))?;
//! store.heartbeat("builder", Some(4242), Some(at))?;
//! store.close()?;
//!
//! // A reader takes no lock: it runs beside a live writer.
//! let read = ReadOnlyStore::open(dir.path(), &StoreOptions::default())?.state()?;
//! let agent = read.state.agent("builder").expect("registered");
//! assert_eq!(agent.pid, Some(4242));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layout
//!
//! The library, by layer, bottom up:
//!
//! - [`log`]: the log engine. Segments, records, seals, recovery, verify and
//!   the lock-free reader; knows bytes and LSNs, nothing of agents. Its bytes
//!   are specified in FORMAT.md.
//! - [`registry`]: the pure registry. [`Event`]s, command validation, the
//!   fold into a [`State`], queries, sweep and retention; no I/O.
//! - [`store`]: the registry over the log. [`Store`] validates a command
//!   against the state, appends its events and folds them; it takes
//!   snapshots and opens from the newest trusted one. [`ReadOnlyStore`] reads
//!   beside a writer and takes no lock.
//! - [`compact`]: retention applied to the log (which records survive) and
//!   the automatic compaction policy.
//! - [`export`], [`import`], [`check`]: the schema-v4 `registry.json` that
//!   other tools read and write, and the readers' contract it must meet.
//! - [`daemon`]: `agentlog serve` (one process owns the store and serves
//!   PROTOCOL.md over a Unix socket, optionally HTTP) and its [`Client`].
//! - [`cluster`]: a [`ClusterNode`] mirrors a fleet's NATS JetStream stream
//!   into a local store.
//! - [`probe`]: the sweep's process probe (`/proc`), outside the pure
//!   registry: a pid means something only on its own host.
//! - [`model`], [`time`]: the agent's fields and timestamps shared by all.
//!
//! Private: `snapshot` (checkpoint files), `layout` (the store directory's
//! file names; [`StoreLayout`] is public), `files` (atomic publish, files
//! created afresh), `fslock` and `telemetry` (the daemon's metrics).
//!
//! Tooling is not the library's API and is compiled only with its cargo
//! feature (unstable, hidden from these docs even then):
//! `agentlog::internals` (feature `internals`) re-exports engine internals
//! for the format tests, the benches and the binary's benchmark harness:
//! record, segment and seal encodings, snapshot files, the lock, the
//! daemon's wire parsing, the bare-copy bound of an append, reaping a child
//! with its peak RSS. `agentlog::fuzzing` (feature `fuzzing`) holds the fuzz
//! targets' in-memory entry points. The benchmark harness itself and the
//! command line's operations are the binary's (`src/bench`, `src/cli`,
//! `src/ops`, declared by `src/main.rs`).
//!
//! Cargo features: `cli` (default) is the binary's: its command line and
//! benchmark dependencies (clap, indicatif, tracing-subscriber, anyhow,
//! ureq) and `internals`; `sqlite-baseline` (default) adds SQLite to `bench
//! clients --compare`; `internals` and `fuzzing` are the tooling above;
//! `fault-injection` adds the log's test hooks (`LogOptions::faults`). The
//! tests and benches turn on `fault-injection`, `internals` and `fuzzing`
//! (the dev-dependency on this package), the fuzz crate (`tests/fuzz`)
//! `fuzzing` and `internals`. A library user takes
//! `default-features = false`: the API these docs show.
//!
//! `unsafe` is denied everywhere but `log::mmap`, which holds the map, the
//! FIEMAP ioctl, and (with `internals`) `wait4` and the `pre_exec` hook that
//! ties a spawned server to its spawning thread, each with its safety
//! argument.

#![deny(unsafe_code)]

mod bounded_decode;

pub mod check;
pub mod cluster;
pub mod coexist;
pub mod compact;
pub mod daemon;
pub mod export;
pub mod import;
pub mod log;
pub mod model;
pub mod probe;
pub mod registry;
pub mod schemas;
pub mod state_json;
pub mod store;
pub mod time;

mod files;
mod fslock;
mod layout;
mod snapshot;
mod telemetry;

// Tooling, not the library's API (see "Layout").
/// Entry points for the fuzz targets: not a stable API (see the module).
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

pub use cluster::{ClusterError, ClusterNode, ClusterOptions};
pub use daemon::client::{Client, ClientError};
pub use export::{ExportError, ExportOptions, ExportReport};
pub use import::{ImportError, ParsedRegistry};
pub use layout::StoreLayout;
// The errors of private layers that public errors carry
// (`StoreError::Snapshot`, `ExportError::{Lock, Publish, Io}`, `ImportError::Lock`).
pub use files::{IoError, PublishError};
pub use fslock::LockError;
pub use log::{Durability, Log, LogError, LogOptions, LogReader, Lsn};
pub use model::{Agent, Status};
pub use registry::{Event, EventKind, Registration, RegistryError, State};
pub use snapshot::SnapshotError;
pub use store::{ReadOnlyStore, Store, StoreError, StoreOptions};
pub use time::Timestamp;

/// Engine internals for the format tests, the fuzz targets, the benches and
/// the `agentlog` binary's benchmark harness: the record and segment
/// encodings, the bare-copy speed bound of an append (it owns a map, whose
/// `unsafe` lives in the log), seal footers, snapshot files, creating a
/// file afresh, the lock, the daemon's wire parsing, and reaping a child
/// with its peak RSS. Only with the `internals` feature (which `cli` turns
/// on). **Not a stable API**; hidden from the docs.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub use crate::log::bound::CopyBound;
    pub use crate::log::mmap::{die_with_spawning_thread, wait_child, ChildUsage};
    pub use crate::log::record::{
        checksum, encode_record, parse_at, record_size, Parsed, CONT, LEN_MASK,
    };
    pub use crate::log::seal::{data_crc, footer_offset, SealFooter, SEAL_FOOTER};
    pub use crate::log::segment::{SegHeader, SEG_HDR};

    /// Snapshot files (`snapshots/*.snap`): FORMAT.md, "Snapshots".
    pub mod snapshot {
        pub use crate::snapshot::{
            file_name, list, load_newest_upto, write, Loaded, SkipReason, SnapshotError,
            SnapshotInfo, FORMAT_VERSION, HEADER_LEN, MAGIC,
        };

        /// The newest usable snapshot in `dir`, however new (the store
        /// itself always bounds it by the log's end: `load_newest_upto`).
        pub fn load_newest<T: serde::de::DeserializeOwned>(
            dir: &std::path::Path,
        ) -> Result<Option<Loaded<T>>, SnapshotError> {
            load_newest_upto(dir, u64::MAX)
        }
    }

    /// Creating a file afresh, never through a planted link.
    pub mod files {
        pub use crate::files::create_fresh;
    }

    /// The advisory file lock the store and the export publish take.
    pub mod fslock {
        pub use crate::fslock::{FileLock, LockError, LockMode};
    }

    /// The daemon's request-line framing and parsing, for the echo server
    /// that measures the protocol's own cost (`bench clients --echo`).
    pub mod wire {
        pub use crate::daemon::conn::{error_doc, parse, send, Request};
        pub use crate::daemon::frame::{read_line, Frame};
        pub use crate::daemon::heartbeat::{write_result, HeartbeatLine};
    }
}
