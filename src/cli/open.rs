//! Which store a command runs on, and how it is opened: the directory
//! (`--dir`, `$AGENTLOG_DIR`, `~/.agentlog`), the writer opened for one
//! command and closed after it (waiting up to `--lock-timeout` for another
//! writer), or, inside the daemon, the daemon's own open store.

use super::Usage;
use agentlog::store::Store;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The store directory: `--dir`, else `$AGENTLOG_DIR` (an empty one counts
/// as unset), else `~/.agentlog`. Only commands on the user's store read the
/// environment: `demo` and `bench` never do.
pub fn store_dir(dir: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(d) = dir {
        return Ok(d);
    }
    if let Some(d) = std::env::var_os("AGENTLOG_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Ok(PathBuf::from(home).join(".agentlog")),
        _ => Err(Usage(
            "no store directory: pass --dir DIR or set AGENTLOG_DIR (HOME is not set)".into(),
        )
        .into()),
    }
}

thread_local! {
    /// The store a daemon serves, while it runs a command on this thread.
    static SERVED: std::cell::RefCell<Option<std::sync::Arc<Store>>> = const { std::cell::RefCell::new(None) };
}

/// The store a daemon serves, when this thread runs a command for it.
pub fn served_store() -> Option<std::sync::Arc<Store>> {
    SERVED.with(|s| s.borrow().clone())
}

/// Runs `f` with [`with_store`] using `store` (a daemon's) instead of
/// opening the store directory.
pub fn serving<R>(store: std::sync::Arc<Store>, f: impl FnOnce() -> R) -> R {
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            SERVED.with(|s| s.borrow_mut().take());
        }
    }
    SERVED.with(|s| *s.borrow_mut() = Some(store));
    let _clear = Clear;
    f()
}

/// How long a direct writer waits for the writer lock (`--lock-timeout`).
static LOCK_TIMEOUT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

pub fn set_lock_timeout(t: Duration) {
    let _ = LOCK_TIMEOUT.set(t);
}

/// Opens the store (taking the writer lock, waiting up to `--lock-timeout`
/// for another writer), runs `f`, and closes it (syncing what `f` appended).
/// Inside a daemon, runs `f` on the daemon's store instead.
pub fn with_store<T>(dir: &Path, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
    if let Some(store) = SERVED.with(|s| s.borrow().clone()) {
        return f(&store);
    }
    let mut opts = agentlog::store::StoreOptions::short_lived();
    opts.log.lock_timeout = LOCK_TIMEOUT.get().copied();
    let store = crate::ops::open_store_with(dir, false, opts)?;
    let out = f(&store);
    // A command runs once per process, so its folded state is left for the
    // exit to reclaim (`Store::close_before_exit`); only the first: a
    // command that opens again (`read --wait` after losing its mail to
    // another reader) frees what it opened after that.
    static LEFT_TO_EXIT: AtomicBool = AtomicBool::new(false);
    let closed = if LEFT_TO_EXIT.swap(true, Ordering::Relaxed) {
        store.close()
    } else {
        store.close_before_exit()
    };
    let out = out?;
    closed?;
    Ok(out)
}
