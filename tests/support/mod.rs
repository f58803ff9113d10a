//! The one support module of the test groups (`tests/<group>.rs`, see
//! TESTING.md). Each group declares `mod support;` and uses the parts it
//! needs; what one group leaves unused is not dead code in another, hence
//! the `dead_code` allowance for the whole tree.
//!
//! - [`cli`]: run the built binary on a temporary store (`Env`, `Run`),
//!   optionally through a daemon (`AGENTLOG_TEST_VIA_DAEMON=1`).
//! - [`daemon`]: start `agentlog serve` (killed on drop), raw protocol
//!   connections, [`daemon::eventually`] (bounded polling instead of sleeps).
//! - [`http`]: a daemon serving HTTP, GETs, Prometheus samples, a WebDriver
//!   browser.
//! - [`cluster`]: a real 3-node NATS JetStream cluster and nodes over it.
//! - [`log`]: small log options, payloads, segment listings, a tiny PRNG.
//! - [`store`]: store options for tests, a refold, a mixed command and a
//!   store of them.
//! - [`ops`]: the proptest generator of validated registry commands, and the
//!   history comparison of the compaction tests.
//! - [`conformance`]: the schema-v4 readers' contract on exports.
//! - [`tmpfs`]: a small tmpfs mounted for the full-disk tests, and filling it.
//! - [`fleet`]: a steady fleet on a real log with automatic compaction,
//!   in simulated time, sampling the disk use.
//! - [`fixtures`]: the shared `registry.json` fixtures and their row counts.
//! - [`prereq`]: the outside programs tests drive (nats-server, etcd,
//!   chromium, the Python MCP SDK, the MCP Inspector), installed by the
//!   tests when absent.

#![allow(dead_code)]

pub mod cli;
pub mod cluster;
pub mod conformance;
pub mod daemon;
pub mod fixtures;
pub mod fleet;
pub mod http;
pub mod log;
pub mod ops;
pub mod prereq;
pub mod store;
pub mod tmpfs;

use std::path::Path;

/// Copies a store or log directory (files, and subdirectories such as a
/// log's generations), leaving out the `LOCK` file: the copy is opened as a
/// store of its own.
pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &to);
        } else if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// The libtest name of the test function `name` in the module `module`
/// (pass `module_path!()`): what a crash test gives its own binary
/// (`current_exe() NAME --exact`) to run one test as a child process. The
/// crate's name, which libtest leaves out, is dropped, so the name follows
/// the file wherever its group declares it.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{name}"),
        None => name.to_string(),
    }
}
