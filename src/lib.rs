//! The `agentlog` command line's library half: the workspace's crates under
//! one name, for the binary (`src/main.rs`), the tests and the benches.
//!
//! - `agentlog-core` (crates/core): the store. The log, the registry and
//!   its fold, snapshots, compaction, export and import of `registry.json`;
//!   no runtime, no network. A program that embeds the store depends on it
//!   alone.
//! - `agentlog-server` (crates/server): the daemon that serves a store
//!   (PROTOCOL.md), its Rust client, the HTTP view and the NATS cluster mode.
//!
//! Every module keeps its path (`agentlog::store`, `agentlog::daemon`, ...),
//! so the binary and the tests read the same whichever crate holds it.

#![deny(unsafe_code)]

pub use agentlog_core::*;
pub use agentlog_server::{cluster, daemon};
pub use agentlog_server::{Client, ClientError, ClusterError, ClusterNode, ClusterOptions};

/// Engine and wire internals for the format tests, the benches and the
/// binary's benchmark harness. **Not a stable API**; hidden from the docs.
#[doc(hidden)]
pub mod internals {
    pub use agentlog_core::internals::*;
    pub use agentlog_server::internals::wire;
}

/// Entry points for the fuzz targets (tests/fuzz): the engine's and the
/// daemon's. **Not a stable API**; hidden from the docs.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    pub use agentlog_core::fuzzing::*;
    pub use agentlog_server::fuzzing::*;
}
