//! The store directory's layout: the only place that knows its file names.
//!
//! A store directory holds `log/` (the log engine's segments, MANIFEST and
//! LOCK; their names belong to `crate::log`), `snapshots/` (checkpoints of
//! the folded state, named by `crate::snapshot`) and, by default, the
//! `registry.json` export. Everything else reaches these through
//! [`StoreLayout`], so moving a file is a change in one place.

use std::path::{Path, PathBuf};

/// The paths of one store directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreLayout {
    root: PathBuf,
}

impl StoreLayout {
    /// The layout of the store rooted at `root`.
    pub fn new(root: &Path) -> StoreLayout {
        StoreLayout {
            root: root.to_path_buf(),
        }
    }

    /// The store directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The log engine's directory.
    pub fn log(&self) -> PathBuf {
        self.root.join("log")
    }

    /// The snapshot directory.
    pub fn snapshots(&self) -> PathBuf {
        self.root.join("snapshots")
    }

    /// The default export path.
    pub fn registry_json(&self) -> PathBuf {
        self.root.join("registry.json")
    }

    /// Whether `root` holds a store (a `log/` directory inside it).
    pub fn exists(&self) -> bool {
        self.log().is_dir()
    }
}
