//! agentlog-server: one process serves an agentlog store to many.
//!
//! - [`daemon`]: `agentlog serve`. It owns the store, the only writer of its
//!   directory, and serves PROTOCOL.md (JSON lines over a Unix socket,
//!   optionally the HTTP view and metrics) to agents and the command line;
//!   its [`Client`] is the Rust client of that protocol.
//! - [`cluster`]: a [`ClusterNode`] shares one registry among hosts over a
//!   NATS JetStream stream and mirrors it into a local store.
//!
//! The store itself is `agentlog-core`, which has no runtime or network;
//! this crate adds tokio, NATS and HTTP. Its modules reach the core's under
//! the core's own paths (`crate::store`, `crate::registry`, ...: the
//! re-exports below), so a path reads the same on either side of the crate
//! line.
//!
//! Tooling is not the API and is compiled only with its feature (unstable,
//! hidden from these docs): `internals::wire` (feature `internals`), the
//! daemon's request framing and parsing for the benchmark harness's echo
//! server; `fuzzing` (feature `fuzzing`), the same for the fuzz targets.

#![deny(unsafe_code)]

// The core's modules under their own names (see above).
pub(crate) use agentlog_core::{
    compact, export, log, model, probe, registry, store, telemetry, time,
};

pub mod cluster;
pub mod daemon;

/// Entry points for the fuzz targets: not a stable API (see the module).
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

pub use cluster::{ClusterError, ClusterNode, ClusterOptions};
pub use daemon::client::{Client, ClientError};

/// The daemon's request-line framing and parsing, for the echo server that
/// measures the protocol's own cost (`bench clients --echo`). Only with the
/// `internals` feature. **Not a stable API**; hidden from the docs.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub mod wire {
        pub use crate::daemon::conn::{error_doc, parse, send, Request};
        pub use crate::daemon::frame::{read_line, Frame};
        pub use crate::daemon::heartbeat::{write_result, HeartbeatLine};
    }
}
