//! Advisory `flock(2)` helpers (std's `File::lock` family) for the files existing registry writers share.
//!
//! The locks are the same family Python's `fcntl.flock` and the Rust daemon's
//! `File::lock` take, so agentlog serialises against them. Invariants: a lock
//! lives as long as its [`FileLock`] guard (dropping the file releases it), a
//! wait never blocks forever (it polls with back-off until a deadline), and
//! every error names the lock file. Lock files are sidecars that are never
//! renamed or deleted, so a held lock is never invalidated by a publish.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why a lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("timed out after {waited:?} waiting for the lock on {}", path.display())]
    Timeout { path: PathBuf, waited: Duration },
    #[error("cannot lock {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Which kind of `flock` to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    Shared,
    Exclusive,
}

/// A held advisory lock; released when dropped.
#[derive(Debug)]
pub struct FileLock {
    file: File,
}

impl FileLock {
    /// Opens (creating it and its folder if needed) `path` and takes a `mode`
    /// lock on it, waiting at most `timeout`.
    /// A symbolic link at `path` is refused (`O_NOFOLLOW`): a planted link
    /// must not make agentlog create or open a file elsewhere.
    pub fn acquire(path: &Path, mode: LockMode, timeout: Duration) -> Result<Self, LockError> {
        let io = |source| LockError::Io {
            path: path.to_path_buf(),
            source,
        };
        let parent = crate::files::parent_dir(path);
        std::fs::create_dir_all(parent).map_err(io)?;
        // The folder is opened without following a link as its last step and
        // the file is created relative to it: a planted `locks` link must not
        // make agentlog create a file in someone else's folder.
        use rustix::fs::{Mode, OFlags};
        let dir = rustix::fs::open(
            parent,
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io(symlink_named(e.into(), parent)))?;
        let name = path.file_name().unwrap_or(path.as_os_str());
        let fd = rustix::fs::openat(
            &dir,
            name,
            OFlags::CREATE | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o666),
        )
        .map_err(|e| io(symlink_named(e.into(), path)))?;
        Self::wait_for(File::from(fd), path, mode, timeout)
    }

    /// Takes a `mode` lock on `path` only if that lock file already exists
    /// and can be opened: `Ok(None)` (creating nothing) when it is missing or
    /// not readable. For readers, which must never create files beside
    /// what they read.
    pub fn acquire_existing(
        path: &Path,
        mode: LockMode,
        timeout: Duration,
    ) -> Result<Option<Self>, LockError> {
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path);
        match opened {
            Ok(file) => Self::wait_for(file, path, mode, timeout).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => {
                tracing::warn!(lock = %path.display(), error = %e, "reading without the shared lock");
                Ok(None)
            }
        }
    }

    fn wait_for(
        file: File,
        path: &Path,
        mode: LockMode,
        timeout: Duration,
    ) -> Result<Self, LockError> {
        let io = |source| LockError::Io {
            path: path.to_path_buf(),
            source,
        };
        let start = Instant::now();
        // Short sleeps first (an uncontended or briefly held lock is the common
        // case), growing to 20 ms so a long wait does not spin.
        let mut pause = Duration::from_micros(200);
        loop {
            let tried = match mode {
                LockMode::Shared => file.try_lock_shared(),
                LockMode::Exclusive => file.try_lock(),
            };
            match tried {
                Ok(()) => return Ok(FileLock { file }),
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(e)) => return Err(io(e)),
            }
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(LockError::Timeout {
                    path: path.to_path_buf(),
                    waited,
                });
            }
            std::thread::sleep(pause.min(timeout - waited));
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

/// ELOOP (`O_NOFOLLOW` met a link) said in words.
fn symlink_named(e: std::io::Error, path: &Path) -> std::io::Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::ENOTDIR) => std::io::Error::other(format!(
            "{} is a symbolic link or not a folder; agentlog does not follow links \
             there (one may have been planted)",
            path.display()
        )),
        _ => e,
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // Closing the descriptor releases the flock anyway; unlocking first
        // makes the release independent of other descriptors sharing the file.
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_excludes_and_times_out_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/x.lock");
        let held = FileLock::acquire(&path, LockMode::Exclusive, Duration::from_secs(1)).unwrap();
        let err =
            FileLock::acquire(&path, LockMode::Shared, Duration::from_millis(30)).unwrap_err();
        assert!(matches!(err, LockError::Timeout { .. }));
        assert!(err.to_string().contains("x.lock"), "{err}");
        drop(held);
        let _a = FileLock::acquire(&path, LockMode::Shared, Duration::from_millis(30)).unwrap();
        let _b = FileLock::acquire(&path, LockMode::Shared, Duration::from_millis(30)).unwrap();
    }
}
