//! The writer lock: an exclusive `flock` on `<dir>/LOCK` holding the writer's
//! pid. Held for the life of the `Log` (released when the file is closed, also
//! when the process dies). Readers never take it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::mmap::try_flock_exclusive;
use crate::error::{Error, Result};

/// How long a lock held under this process's own pid may linger (see `acquire`).
const OWN_LOCK_GRACE: Duration = Duration::from_secs(1);

/// An acquired writer lock (dropping it releases the lock).
#[derive(Debug)]
pub(crate) struct LockFile {
    _file: File,
}

fn holder_pid(file: &mut File) -> u32 {
    let mut s = String::new();
    if file.seek(SeekFrom::Start(0)).is_err() || file.read_to_string(&mut s).is_err() {
        return 0;
    }
    s.trim().parse().unwrap_or(0)
}

/// Take the lock on `dir/LOCK`, waiting up to `timeout` (None = fail at once).
pub(crate) fn acquire(dir: &Path, timeout: Option<Duration>) -> Result<LockFile> {
    let path: PathBuf = dir.join("LOCK");
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    let mut deadline = timeout.map(|t| Instant::now() + t);
    let mut own_grace = false;
    loop {
        if try_flock_exclusive(&file).map_err(|e| Error::io(&path, e))? {
            break;
        }
        match deadline {
            Some(d) if Instant::now() < d => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let pid = holder_pid(&mut file);
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
                return Err(Error::Locked { pid, path });
            }
        }
    }
    let pid = std::process::id();
    file.set_len(0).map_err(|e| Error::io(&path, e))?;
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.write_all(format!("{pid}\n").as_bytes()))
        .map_err(|e| Error::io(&path, e))?;
    Ok(LockFile { _file: file })
}

/// Does a process hold the writer lock of `dir` right now? Asked by readers,
/// which must not take the lock even briefly (a writer opening at that
/// instant would fail with `Locked`): the answer comes from the kernel's
/// table of `flock`s (`/proc/locks`), matched by the `LOCK` file's inode.
/// When the table cannot be read the answer is "yes", the cautious one: a
/// reader then only ignores the newest segment's unfinished tail.
pub(crate) fn writer_present(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(md) = std::fs::metadata(dir.join("LOCK")) else {
        return false; // no writer ever opened this log
    };
    let Ok(table) = std::fs::read_to_string("/proc/locks") else {
        return true;
    };
    let inode = format!(":{}", md.ino());
    table.lines().any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // "N: FLOCK ADVISORY WRITE pid maj:min:inode start end"; "->" marks a waiter.
        f.get(1) == Some(&"FLOCK") && f.get(5).is_some_and(|id| id.ends_with(&inode))
    })
}
