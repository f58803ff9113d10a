//! The benchmark harness: what `agentlog bench …` runs. It is the binary's
//! tooling, not library API: it uses the library's public API and
//! `agentlog::internals` (feature `internals`, which `cli` turns on), and the cargo benches that need it include this
//! directory by path (`benches/heartbeat_harness.rs`).
//!
//! Every figure this module reports was measured in the same process run that
//! reports it: rates are computed from counted events and a measured elapsed
//! time, latencies from a [`latency::Histogram`] fed one sample per
//! acknowledged event, ratios from two such rates. A phase that measured
//! nothing (zero events, zero elapsed time) is an error, never a made-up rate.
//!
//! - [`machine`]: what the figures were measured on (cores, kernel, CPU,
//!   memory, filesystem and disk of the data directory).
//! - [`latency`]: a fixed-size log-linear histogram (O(1), allocation-free
//!   `record`).
//! - [`rss`]: peak resident set size per phase.
//! - [`baseline`]: the whole-file `registry.json` rewrite the replaced systems
//!   do per heartbeat.
//! - [`heartbeats`]: the heartbeat workload over any [`heartbeats::HeartbeatTarget`].
//! - [`reports`]: the report shapes of `bench replay | open | export | compact`.
//! - [`runners`]: the runners of `bench replay | open | export | compact`.
//! - [`scaling`]: the agents × writers sweep, its CSV and SVG plot.
//! - [`cli`]: `bench cli`, whole one-shot CLI invocations on stores of
//!   several log lengths (median wall time, peak RSS).
//! - [`targets`], [`raw_log`]: the agentlog side of the workload (registry
//!   `Store` commands; raw log appends for the log-only figure).
//! - [`clients`], [`clients_worker`], [`echo`], [`sqlite`]: `bench clients`,
//!   P client processes through the daemon against the protocol's bound,
//!   SQLite and the JSON rewrite.
//! - [`soak`], [`soak_worker`], [`soak_load`], [`soak_check`]: `bench
//!   soak`, the daemon under client processes, watchers, SSE clients, a
//!   scraper, compactions and `kill -9` for minutes, its history judged.
//! - [`cluster`], [`cluster_host`], [`servers`], [`etcd`]: `bench cluster`,
//!   the replicated registry on a real NATS cluster ([`nats`], shared with
//!   the cluster tests) against a real etcd
//!   cluster doing the same work, with one process per host.

pub mod baseline;
pub mod cli;
pub mod clients;
pub mod clients_worker;
pub mod cluster;
pub mod cluster_host;
pub mod echo;
pub mod etcd;
pub mod heartbeats;
pub mod latency;
pub mod machine;
pub mod nats;
pub mod reports;
pub mod rss;
pub mod runners;
pub mod scaling;
// Run by the cargo benches and the tests, not by the binary's commands.
#[allow(dead_code)]
pub mod raw_log;
pub mod servers;
pub mod soak;
pub mod soak_check;
pub mod soak_load;
pub mod soak_worker;
#[cfg(feature = "sqlite-baseline")]
pub mod sqlite;
pub mod targets;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

/// What went wrong while benchmarking, naming the file or phase involved.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{what} `{path}`: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot parse `{path}` (row-level JSON error at line {line}, column {column}): {message}"
    )]
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("unexpected content in `{path}`: {message}")]
    Format { path: PathBuf, message: String },
    #[error("benchmark phase `{phase}` measured nothing ({detail}); refusing to report a rate")]
    NothingMeasured { phase: String, detail: String },
    #[error("invalid benchmark configuration: {0}")]
    Config(String),
    /// A process or server of the benchmark failed (what and its output).
    #[error("benchmark run failed: {0}")]
    Run(String),
    #[error("benchmark target `{target}` failed on agent #{agent}: {message}")]
    Target {
        target: &'static str,
        agent: usize,
        message: String,
    },
    #[error("agentlog under benchmark failed: {0}")]
    Engine(#[from] agentlog::log::LogError),
    #[error("agentlog store under benchmark failed: {0}")]
    Store(#[from] agentlog::store::StoreError),
    #[error("a benchmark writer thread panicked: {0}")]
    WriterPanicked(String),
}

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

impl BenchError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            what,
            path: path.into(),
            source,
        }
    }
}
