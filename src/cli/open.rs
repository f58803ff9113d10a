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

/// Set by `--no-daemon`: a direct writer waiting for the lock does not look
/// for a daemon meanwhile.
static NO_DAEMON: AtomicBool = AtomicBool::new(false);

pub fn set_no_daemon(on: bool) {
    NO_DAEMON.store(on, Ordering::Relaxed);
}

/// A daemon began serving the store while this command waited for the
/// writer lock (it held the lock before its socket answered, or a new one
/// started): the command is to go through it instead. Nothing was written.
#[derive(Debug, thiserror::Error)]
#[error("a daemon began serving {} while this command waited for the writer lock", .0.display())]
pub struct DaemonAppeared(pub PathBuf);

/// How often a waiting writer tries the lock and the socket again.
const LOCK_POLL: Duration = Duration::from_millis(20);

/// Opens the store for writing, waiting up to `--lock-timeout` for another
/// writer's lock. Meanwhile the socket is tried at every poll: a daemon
/// takes the lock before it binds its socket (and keeps it while it shuts
/// down), so a client that found no socket may be waiting on exactly the
/// daemon that is about to answer; then [`DaemonAppeared`] sends the
/// command there.
fn open_waiting(dir: &Path) -> Result<Store> {
    let limit = LOCK_TIMEOUT.get().copied().unwrap_or_default();
    let deadline = std::time::Instant::now() + limit;
    loop {
        let mut opts = agentlog::store::StoreOptions::short_lived();
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        opts.log.lock_timeout = Some(left.min(LOCK_POLL));
        match crate::ops::open_store_with(dir, false, opts) {
            Err(e) if is_locked(&e) && !left.is_zero() => {
                if !NO_DAEMON.load(Ordering::Relaxed)
                    && std::os::unix::net::UnixStream::connect(agentlog::daemon::socket_path(dir))
                        .is_ok()
                {
                    return Err(DaemonAppeared(dir.to_path_buf()).into());
                }
            }
            r => return Ok(r?),
        }
    }
}

fn is_locked(e: &crate::ops::OpsError) -> bool {
    matches!(
        e,
        crate::ops::OpsError::Store(agentlog::store::StoreError::Log(
            agentlog::log::LogError::Locked { .. }
        ))
    )
}

/// Opens the store (taking the writer lock, waiting up to `--lock-timeout`
/// for another writer), runs `f`, and closes it (syncing what `f` appended).
/// Inside a daemon, runs `f` on the daemon's store instead.
pub fn with_store<T>(dir: &Path, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
    if let Some(store) = SERVED.with(|s| s.borrow().clone()) {
        return f(&store);
    }
    let store = open_waiting(dir)?;
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
