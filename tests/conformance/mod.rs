//! The shared schema-v4 conformance checker (`shared/conformance/
//! check_registry_v4.py`), run on exports made by the tests. One copy for
//! every test file that needs it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The checker script: `../shared` beside a clone (CI), or `../../shared`
/// for a git worktree one level deeper.
pub fn checker_path() -> Option<PathBuf> {
    let here = env!("CARGO_MANIFEST_DIR");
    ["/../shared", "/../../shared"]
        .iter()
        .map(|d| PathBuf::from(format!("{here}{d}/conformance/check_registry_v4.py")))
        .find(|p| p.exists())
}

/// Runs the checker on `path` with `--expect-version 4`: panics (printing
/// its report and the file) if it rejects the file; `false`, with the reason
/// printed, only when python3 or the checker is absent.
pub fn checker_accepts(path: &Path) -> bool {
    let Some(checker) = checker_path() else {
        eprintln!("SKIP conformance check: check_registry_v4.py not found beside the repo");
        return false;
    };
    let out = match Command::new("python3")
        .arg(&checker)
        .arg(path)
        .args(["--expect-version", "4"])
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            eprintln!("SKIP conformance check: cannot run python3: {e}");
            return false;
        }
    };
    assert!(
        out.status.success(),
        "checker rejected {}:\n{}{}\n{}",
        path.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(path).unwrap_or_default()
    );
    true
}

/// [`checker_accepts`] for rendered bytes (written to a temporary file).
pub fn checker_accepts_bytes(bytes: &[u8]) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("registry.json");
    std::fs::write(&file, bytes).unwrap();
    checker_accepts(&file)
}
