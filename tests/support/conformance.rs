//! The schema-v4 readers' contract (`agentlog::check`), run on exports made
//! by the tests. One copy for every test file that needs it; never skipped.

use std::path::Path;

/// Panics (printing every problem and the file) unless every existing
/// schema-v4 reader accepts the file at `path` as version 4.
#[track_caller]
pub fn checker_accepts(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    checker_accepts_bytes(&bytes);
}

/// [`checker_accepts`] for rendered bytes.
#[track_caller]
pub fn checker_accepts_bytes(bytes: &[u8]) {
    let problems = agentlog::check::check_bytes(bytes, Some(4));
    assert!(
        problems.is_empty(),
        "a schema-v4 reader would reject the export:\n{}\n{}",
        problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
        String::from_utf8_lossy(bytes)
    );
}
