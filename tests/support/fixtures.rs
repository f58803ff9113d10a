//! The registry files in `fixtures/registry/` and what fixtures/README.md's
//! table says about them, for every test that imports or folds them.

use std::path::{Path, PathBuf};

/// The folder of the shared `registry.json` fixtures.
pub fn registry_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/registry")
}

/// The fixtures every reader accepts, with their number of agent rows.
pub const ACCEPTED: [(&str, usize); 8] = [
    ("v4-python.json", 3),
    ("v4-rust.json", 2),
    ("v4-mixed.json", 3),
    ("v3-python.json", 1),
    ("v2-python.json", 1),
    ("v1-python.json", 1),
    ("v4-entries-key.json", 1),
    ("empty.json", 0),
];
