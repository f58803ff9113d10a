//! The daemon's error: what stopped `agentlog serve` from starting, serving
//! or shutting down cleanly. Each variant names what the daemon was doing
//! and on which file, address or layer; the layer's own error (the store's,
//! the cluster's, the I/O error) is its source, carried once, never re-wrapped.

use crate::cluster::ClusterError;
use crate::store::StoreError;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Why `agentlog serve` failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A file of the daemon: its socket, or the store directory.
    #[error("{what} {}: {source}", path.display())]
    File {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The process's own machinery: the runtime, the signal handlers.
    #[error("{what}: {source}")]
    System {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// The store, while the daemon opened, synced, exported or closed it.
    #[error("{what}: {source}")]
    Store {
        what: String,
        #[source]
        source: StoreError,
    },
    /// Joining the fleet, its sweeper lease, or leaving it.
    #[error("{what}: {source}")]
    Cluster {
        what: String,
        #[source]
        source: ClusterError,
    },
    /// `serve --http ADDR`: the listener, or its address.
    #[error("serve --http {addr}: {what}: {source}")]
    Http {
        addr: SocketAddr,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// The Prometheus recorder could not be built or installed.
    #[error("installing the metrics recorder: {0}")]
    Metrics(String),
    /// Listing the snapshots for `/metrics`.
    #[error(transparent)]
    Snapshot(#[from] agentlog_core::SnapshotError),
    /// A blocking task of the shutdown did not finish (it panicked).
    #[error("{what}: {source}")]
    Task {
        what: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
}

pub type ServeResult<T> = Result<T, ServeError>;

impl ServeError {
    pub(crate) fn store(what: impl Into<String>) -> impl FnOnce(StoreError) -> ServeError {
        let what = what.into();
        move |source| ServeError::Store { what, source }
    }

    pub(crate) fn cluster(what: impl Into<String>) -> impl FnOnce(ClusterError) -> ServeError {
        let what = what.into();
        move |source| ServeError::Cluster { what, source }
    }

    pub(crate) fn system(what: &'static str) -> impl FnOnce(io::Error) -> ServeError {
        move |source| ServeError::System { what, source }
    }

    pub(crate) fn file<'a>(
        what: &'static str,
        path: &'a std::path::Path,
    ) -> impl FnOnce(io::Error) -> ServeError + 'a {
        move |source| ServeError::File {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}
