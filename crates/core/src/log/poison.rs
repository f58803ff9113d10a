//! The poison marker: `<dir>/POISONED`, written when a sync of appended data
//! fails, so the poisoning outlives the process.
//!
//! Why: after a failed `msync`/`fsync`, Linux may mark the dirty pages clean
//! and keep them in the page cache. The next process would read them, find
//! valid records, acknowledge more writes on top, and a reboot would then
//! leave a hole followed by valid records. So `Log::open` refuses a log with
//! a marker written during the current boot. After a reboot the page cache
//! is gone, the disk holds exactly what reached it, and normal recovery
//! applies: the marker is then removed. Invariant: the marker is written
//! (best effort, fsynced) before the failing append returns its error.
//!
//! Layout: line 1 `boot <boot id>` (Linux `/proc/sys/kernel/random/boot_id`,
//! `unknown` elsewhere, which never matches a reboot), line 2 `pid <pid>`,
//! then the error that poisoned the log.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::segment::sync_dir;
use crate::log::{LogError, Result};

const MARKER: &str = "POISONED";

fn marker_path(dir: &Path) -> PathBuf {
    dir.join(MARKER)
}

/// This boot's id (None where the OS does not tell).
fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Record that a sync failed (best effort: a failure is logged; the
/// in-process poison still stops this writer).
pub(super) fn write_marker(dir: &Path, detail: &str) {
    let path = marker_path(dir);
    let boot = boot_id().unwrap_or_else(|| "unknown".into());
    let text = format!("boot {boot}\npid {}\n{detail}\n", std::process::id());
    let res = crate::files::create_fresh(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|_| f.sync_all()))
        .map_err(|e| LogError::io(&path, e))
        .and_then(|_| sync_dir(dir));
    if let Err(e) = res {
        tracing::error!(path = %path.display(), error = %e, "cannot write the poison marker");
    }
}

/// Refuse to open a log poisoned during this boot; remove a marker a reboot
/// made obsolete.
pub(super) fn check_marker(dir: &Path) -> Result<()> {
    let path = marker_path(dir);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(LogError::io(&path, e)),
    };
    let marked_boot = text.lines().next().and_then(|l| l.strip_prefix("boot "));
    let rebooted = match (marked_boot, boot_id()) {
        (Some(then), Some(now)) => then != "unknown" && then != now,
        _ => false,
    };
    if rebooted {
        tracing::warn!(path = %path.display(), "a sync failed before the last reboot; recovering from what reached the disk");
        fs::remove_file(&path).map_err(|e| LogError::io(&path, e))?;
        return sync_dir(dir);
    }
    let detail = text.lines().skip(2).collect::<Vec<_>>().join(" ");
    Err(LogError::Poisoned {
        marker: path,
        detail,
    })
}
