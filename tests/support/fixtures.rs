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

/// Fixtures the import accepts that no schema-v4 reader reads, with their
/// number of rows: an unknown key (kept verbatim) and a newer, additive
/// schema with a harness outside claude/codex/gemini.
pub const BEYOND_V4: [(&str, usize); 2] = [("unknown-key.json", 1), ("v17-additive.json", 1)];

/// A schema-v4 row's keys in the existing writers' order (docs/registry-v4.md),
/// written out here rather than taken from `agentlog::check::ROW_KEYS`, so
/// the tests check the library against the spec, not against itself.
pub const ROW_KEYS: [&str; 20] = [
    "name",
    "provider",
    "cwd",
    "log_path",
    "claude_short_id",
    "codex_session_id",
    "gemini_session_id",
    "created_at",
    "status",
    "last_message_at",
    "mcp_channel_id",
    "host_mode",
    "claude_session_uuid",
    "short_id",
    "project_root",
    "messaging_socket_path",
    "cc_session_id",
    "pid",
    "pid_start_time",
    "last_reconciled_at",
];
