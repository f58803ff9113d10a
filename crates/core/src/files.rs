//! How agentlog puts files on disk where other users may be watching: the one
//! atomic publish (snapshots, `MANIFEST`, `registry.json`) and files created
//! afresh. (The store directory's access modes are the command line's:
//! `src/ops/sharing.rs` in the binary.)
//!
//! Invariants:
//! - A published file appears whole or not at all: a temp file with an
//!   unpredictable name, created `O_CREAT | O_EXCL` (which never follows a
//!   symlink) in the target's folder, is written, fsynced, renamed over the
//!   target, and the folder is fsynced. A name planted by another user can
//!   neither redirect nor truncate anything.
//! - A target that is a symbolic link is refused, never replaced by a file
//!   and never written through: the link may have been planted.
//! - The log's fixed-name files (`MANIFEST.tmp`, segment temp files, new
//!   segments, the poison marker) are created afresh (`O_EXCL`, after
//!   removing whatever link sits at the name), and lock files are opened
//!   relative to a folder opened without following links: nothing planted
//!   in a shared folder makes agentlog write outside it.

use std::fs::{File, Permissions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// An I/O error naming what was being done and to which file or folder:
/// the one shape the publish, snapshot and export errors carry.
#[derive(Debug, thiserror::Error)]
#[error("cannot {op} {}: {source}", path.display())]
pub struct IoError {
    /// What was being done ("fsync", "create folder", …).
    pub op: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl IoError {
    /// The `map_err` adaptor: an error doing `op` to `path`.
    pub fn doing(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> IoError {
        let path = path.to_path_buf();
        move |source| IoError { op, path, source }
    }
}

/// Why a publish failed; the previous file is untouched.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(
        "{} is a symbolic link; agentlog does not write through links (one may \
         have been planted): remove it, or name the real file",
        .0.display()
    )]
    Symlink(PathBuf),
}

impl PublishError {
    /// The underlying I/O error, for callers whose errors carry one.
    pub fn into_io(self) -> std::io::Error {
        match self {
            PublishError::Io(e) => e.source,
            e @ PublishError::Symlink(_) => std::io::Error::other(e.to_string()),
        }
    }
}

/// The folder a file path lives in (`.` for a bare name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Atomically replaces `path` with `bytes`, created with `mode` (less the
/// umask). `before_rename` runs after the temp file is durable and before
/// the rename (a crash-injection point for tests; `|| Ok(())` otherwise).
/// The caller serialises publishers of the same `path`.
pub fn publish_atomic(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    before_rename: impl FnOnce() -> std::io::Result<()>,
) -> Result<(), PublishError> {
    let dir = parent_dir(path);
    let io = |op, p: &Path| {
        let io = IoError::doing(op, p);
        move |source| PublishError::Io(io(source))
    };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => return Err(PublishError::Symlink(path.into())),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("inspect", path)(e)),
    }
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(path.file_name().unwrap_or_else(|| "file".as_ref()));
    prefix.push(".");
    // Random name, O_EXCL; removed again if anything below fails.
    let mut tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .permissions(Permissions::from_mode(mode))
        .tempfile_in(dir)
        .map_err(io("create a temporary file in", dir))?;
    tmp.write_all(bytes).map_err(io("write", tmp.path()))?;
    tmp.as_file().sync_all().map_err(io("fsync", tmp.path()))?;
    before_rename().map_err(io("publish", path))?;
    tmp.persist(path)
        .map_err(|e| io("rename over", path)(e.error))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync folder", dir))
}

/// Creates `path` afresh, open for reading and writing: whatever is at that
/// name (a crash's leftover, or a link another user planted) is removed,
/// never followed, and the file is created `O_CREAT | O_EXCL`, so a link
/// planted in between fails the create instead of redirecting it. For the
/// log's fixed-name files (`MANIFEST.tmp`, `next-N.seg.tmp`, new segments).
pub fn create_fresh(path: &Path) -> std::io::Result<File> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_refuses_a_symlinked_target_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"secret").unwrap();
        let target = dir.path().join("registry.json");
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        let e = publish_atomic(&target, b"new", 0o644, || Ok(())).unwrap_err();
        assert!(matches!(e, PublishError::Symlink(_)), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"secret");
        assert!(std::fs::symlink_metadata(&target).unwrap().is_symlink());
        std::fs::remove_file(&target).unwrap();
        publish_atomic(&target, b"new", 0o600, || Ok(())).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 2, "no temp file left: {names:?}");
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn create_fresh_replaces_a_planted_link_without_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"secret").unwrap();
        let tmp = dir.path().join("MANIFEST.tmp");
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        let mut f = create_fresh(&tmp).unwrap();
        f.write_all(b"mine").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"secret");
        assert!(!std::fs::symlink_metadata(&tmp).unwrap().is_symlink());
        assert_eq!(std::fs::read(&tmp).unwrap(), b"mine");
    }
}
