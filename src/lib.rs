//! agentlog: an event-sourced store for agent registries.
//!
//! Every registration, heartbeat, status change and message is appended as a
//! checksummed record to a memory-mapped log; a fold rebuilds the registry;
//! snapshots make reopening cheap and publish schema-v4 `registry.json`;
//! compaction drops what retention no longer needs.
//!
//! `unsafe` is denied everywhere but `log::mmap`, which holds the map, the
//! FIEMAP ioctl and `wait4`, each with its safety argument.

#![deny(unsafe_code)]

pub mod bench;
mod bounded_decode;
pub mod check;
pub mod cluster;
pub mod compact;
pub mod daemon;
pub mod error;
pub mod export;
pub mod files;
pub mod fslock;
/// Entry points for the fuzz targets: not a stable API (see the module).
#[doc(hidden)]
pub mod fuzzing;
pub mod import;
pub mod layout;
pub mod log;
pub mod model;
pub mod ops;
pub mod registry;
pub mod snapshot;
pub mod store;
pub mod telemetry;
pub mod time;

pub use error::{Error, Result};
