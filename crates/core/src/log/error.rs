//! The log engine's error, [`LogError`]. Every variant names what went wrong
//! and where (file, offset, LSN) so a caller can act on it without guessing.
//! The layers above wrap it via `#[from]` (the store's `StoreError`; the
//! binary's `OpsError` only through `StoreError`, never twice).

use std::path::PathBuf;

use super::Lsn;

/// The log's `Result`.
pub type Result<T, E = LogError> = std::result::Result<T, E>;

fn fmt_lsn(lsn: &Option<Lsn>) -> String {
    match lsn {
        Some(l) => format!("lsn {l}"),
        None => "lsn unknown".to_string(),
    }
}

fn fmt_pid(pid: u32) -> String {
    match pid {
        0 => "pid unknown: its LOCK file was deleted or is unreadable".to_string(),
        p => format!("pid {p}"),
    }
}

/// Everything that can fail in the log engine.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An operating-system I/O error on a named file or directory.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Another process holds the writer lock.
    #[error("log {} is locked by another writer ({})", path.display(), fmt_pid(*pid))]
    Locked { pid: u32, path: PathBuf },
    /// Damaged data that recovery must not paper over.
    #[error("corrupt log: segment {}, offset {offset}, {}: {reason}", segment.display(), fmt_lsn(lsn))]
    Corrupt {
        segment: PathBuf,
        offset: u64,
        lsn: Option<Lsn>,
        reason: String,
    },
    /// A payload larger than `LogOptions::max_record_size`.
    #[error("record of {len} bytes exceeds the maximum record size of {max} bytes")]
    RecordTooLarge { len: usize, max: u32 },
    /// The filesystem has no room for the next segment; nothing acknowledged is lost.
    #[error("disk full: cannot allocate {} ({source}); free space on that file system, then `agentlog compact` shrinks the log (it needs only about one record's worth of room)", path.display())]
    DiskFull {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An fsync/msync (or a step that leaves memory and disk apart) failed;
    /// the writer is poisoned and must be reopened. `detail` is that error.
    #[error("the log stopped taking writes after an earlier failure ({detail}); the log must be reopened")]
    FsyncFailed { detail: String },
    /// A sync failed in an earlier process during this boot (see the marker).
    #[error("log refused: a sync of its data failed earlier during this boot ({detail}), so the page cache may show records that never reached the disk. Reboot (the log then recovers from what is on disk), or, to accept the risk of a hole, delete {} and run `agentlog verify`", marker.display())]
    Poisoned { marker: PathBuf, detail: String },
    /// A caller passed an argument the log cannot honour.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A failure injected by a test hook (`FaultInjection`).
    #[cfg(any(test, feature = "fault-injection"))]
    #[error("injected failure: {0}")]
    Injected(String),
}

impl LogError {
    /// Wrap an `io::Error` with the path it concerns; ENOSPC/EDQUOT become `DiskFull`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> LogError {
        let path = path.into();
        match source.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => LogError::DiskFull { path, source },
            _ => LogError::Io { path, source },
        }
    }
}
