//! The writer lock: an exclusive `flock` on `<dir>/LOCK` holding the writer's
//! pid. Held for the life of the `Log` (released when the file is closed, also
//! when the process dies). Readers never take it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::mmap::try_flock_exclusive;
use crate::error::{Error, Result};

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
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        if try_flock_exclusive(&file).map_err(|e| Error::io(&path, e))? {
            break;
        }
        match deadline {
            Some(d) if Instant::now() < d => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let pid = holder_pid(&mut file);
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
