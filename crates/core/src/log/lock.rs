//! The writer lock: an exclusive `flock` (std's `File::try_lock`) on the log
//! directory itself and on `<dir>/LOCK`, which holds the writer's pid. Held
//! for the life of the `Log` (released when the files are closed, also when
//! the process dies). Readers never take it. The writer also holds an
//! open-file-description lock on `LOCK`: the presence mark readers probe
//! ([`writer_present`]) from any pid namespace.
//!
//! Invariants: the directory lock is what excludes a second writer, so
//! deleting `LOCK` (a common way to clear a "stale" lock) does not let one
//! in; `LOCK` is still locked too (tools probe it). `LOCK` is opened without following a symlink and must be a
//! regular file (a planted link cannot make a writer truncate its target);
//! after the lock is taken, the locked inode must still be the one at the
//! path, otherwise (someone deleted or replaced `LOCK` to clear a "stale"
//! lock) the lock is retaken on the new file, so two writers never hold
//! locks on different inodes at once; the pid is written before the file is
//! truncated to it, so a reader of `LOCK` never sees it empty.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::log::{LogError, Result};

/// How long a lock held under this process's own pid may linger (see `acquire`).
const OWN_LOCK_GRACE: Duration = Duration::from_secs(1);

/// An acquired writer lock (dropping it releases the lock).
#[derive(Debug)]
pub(crate) struct LockFile {
    _dir: File,
    _file: File,
}

fn holder_pid(file: &File) -> u32 {
    let mut s = String::new();
    if (&*file).read_to_string(&mut s).is_err() {
        return 0;
    }
    s.trim().parse().unwrap_or(0)
}

/// Open `path` for locking: no symlink, a regular file.
fn open_lock_file(path: &Path) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => LogError::InvalidArgument(format!(
                "{} is a symbolic link; the writer lock must be a regular file (remove the link)",
                path.display()
            )),
            _ => LogError::io(path, e),
        })?;
    let meta = file.metadata().map_err(|e| LogError::io(path, e))?;
    if !meta.is_file() {
        return Err(LogError::InvalidArgument(format!(
            "{} is not a regular file; the writer lock must be one (remove it)",
            path.display()
        )));
    }
    Ok(file)
}

/// Whether `file` is still the inode at `path`.
fn still_at_path(file: &File, path: &Path) -> Result<bool> {
    let held = file.metadata().map_err(|e| LogError::io(path, e))?;
    match std::fs::symlink_metadata(path) {
        Ok(now) => Ok(now.dev() == held.dev() && now.ino() == held.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(LogError::io(path, e)),
    }
}

/// Take the lock on `dir/LOCK`, waiting up to `timeout` (None = fail at once).
pub(crate) fn acquire(dir: &Path, timeout: Option<Duration>) -> Result<LockFile> {
    let path: PathBuf = dir.join("LOCK");
    let mut deadline = timeout.map(|t| Instant::now() + t);
    let mut own_grace = false;
    let dir_file = File::open(dir).map_err(|e| LogError::io(dir, e))?;
    let file = loop {
        let file = open_lock_file(&path)?;
        let locked = match dir_file.try_lock() {
            Ok(()) => match file.try_lock() {
                Ok(()) => true,
                Err(e) => {
                    // Held on LOCK alone (an older agentlog): wait for it.
                    dir_file.unlock().map_err(|e| LogError::io(dir, e))?;
                    match e {
                        TryLockError::WouldBlock => false,
                        TryLockError::Error(e) => return Err(LogError::io(&path, e)),
                    }
                }
            },
            Err(TryLockError::WouldBlock) => false,
            Err(TryLockError::Error(e)) => return Err(LogError::io(dir, e)),
        };
        if locked {
            if still_at_path(&file, &path)? {
                break file;
            }
            // LOCK was deleted or replaced after we opened it: retake the
            // locks with the file now at the path.
            dir_file.unlock().map_err(|e| LogError::io(dir, e))?;
            continue;
        }
        match deadline {
            Some(d) if Instant::now() < d => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let pid = holder_pid(&file);
                // A flock belongs to the open file description, and a child
                // this process forks shares it until the child execs. So a
                // writer of *this* process that was just closed can still
                // hold the lock for that instant if another thread spawned a
                // process meanwhile. Give such a lock a short grace period;
                // a live second writer in this process still gets `Locked`.
                if pid == std::process::id() && !own_grace {
                    own_grace = true;
                    deadline = Some(Instant::now() + OWN_LOCK_GRACE);
                    continue;
                }
                return Err(LogError::Locked { pid, path });
            }
        }
    };
    let line = format!("{}\n", std::process::id());
    file.write_all_at(line.as_bytes(), 0)
        .and_then(|_| file.set_len(line.len() as u64))
        .map_err(|e| LogError::io(&path, e))?;
    // The presence mark readers probe (see `writer_present`). Only this
    // writer holds the flocks, so nobody else holds it; a kernel without
    // OFD locks leaves readers to `/proc/locks`.
    if let Err(e) = super::mmap::ofd_lock(&file, true) {
        tracing::debug!(lock = %path.display(), error = %e, "no OFD presence lock");
    }
    Ok(LockFile {
        _dir: dir_file,
        _file: file,
    })
}

/// Does a process hold the writer lock of `dir` right now? Asked by readers,
/// which must not take the lock even briefly (a writer opening at that
/// instant would fail with `Locked`). A writer also holds an
/// open-file-description lock on `LOCK`, which `F_OFD_GETLK` sees from any
/// pid namespace (a container beside the writer) without taking anything.
/// When that probe finds none (a writer of an older agentlog, or a kernel
/// without OFD locks), the kernel's table of `flock`s (`/proc/locks`),
/// matched by the `LOCK` file's inode, decides; it hides the locks of
/// processes outside the reader's pid namespace, hence the probe first.
/// When the table cannot be read the answer is "yes", the cautious one: a
/// reader then only ignores the newest segment's unfinished tail.
pub(crate) fn writer_present(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let path = dir.join("LOCK");
    let probe = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(&path);
    if let Ok(probe) = &probe {
        if super::mmap::ofd_lock_held(probe).unwrap_or(false) {
            return true;
        }
    }
    let Ok(md) = std::fs::metadata(&path) else {
        return false; // no writer ever opened this log
    };
    // One large read: each read(2) of /proc/locks takes the kernel's lock
    // table lock again, and `read_to_string` would start with 32 bytes.
    let mut raw = Vec::with_capacity(64 << 10);
    let read = std::fs::File::open("/proc/locks")
        .and_then(|mut f| std::io::Read::read_to_end(&mut f, &mut raw));
    let (Ok(_), Ok(table)) = (read, String::from_utf8(raw)) else {
        return true;
    };
    let inode = format!(":{}", md.ino());
    table.lines().any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // "N: FLOCK ADVISORY WRITE pid maj:min:inode start end"; "->" marks a waiter.
        f.get(1) == Some(&"FLOCK") && f.get(5).is_some_and(|id| id.ends_with(&inode))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deleting_lock_does_not_let_a_second_writer_in() {
        let dir = tempfile::tempdir().unwrap();
        let _first = acquire(dir.path(), None).unwrap();
        std::fs::remove_file(dir.path().join("LOCK")).unwrap();
        let e = acquire(dir.path(), None).unwrap_err();
        assert!(matches!(e, LogError::Locked { .. }), "{e}");
    }

    #[test]
    fn a_symlinked_lock_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("precious");
        std::fs::write(&target, b"do not truncate").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("LOCK")).unwrap();
        let e = acquire(dir.path(), None).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"do not truncate");
    }

    /// The probe sees a writer of this very process (a daemon's own
    /// `verify`), and probing drops nothing: POSIX locks would fail both.
    #[test]
    fn the_presence_probe_sees_the_writer_and_takes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!writer_present(dir.path()));
        let held = acquire(dir.path(), None).unwrap();
        for _ in 0..3 {
            assert!(writer_present(dir.path()));
        }
        let probe = File::open(dir.path().join("LOCK")).unwrap();
        assert!(super::super::mmap::ofd_lock_held(&probe).unwrap());
        drop(held);
        assert!(!super::super::mmap::ofd_lock_held(&probe).unwrap());
        let _again = acquire(dir.path(), None).unwrap();
    }

    #[test]
    fn a_waiting_writer_sees_the_holders_pid() {
        let dir = tempfile::tempdir().unwrap();
        let _held = acquire(dir.path(), None).unwrap();
        let contents = std::fs::read_to_string(dir.path().join("LOCK")).unwrap();
        assert_eq!(contents, format!("{}\n", std::process::id()));
    }
}
