//! The store's persisted settings: `<dir>/config.json`, today only the
//! live-message cap (`{"max_messages": N}`).
//!
//! The cap is part of the fold's semantics (logs written before
//! `MessagesDropped` existed drop through the fold's implicit cap), so it is
//! fixed when the store is created (`agentlog init --max-messages N`) and
//! every opener, writer or reader, folds with it. A store without the file
//! uses the default, [`DEFAULT_MAX_MESSAGES`], as every store did before the
//! file existed.

use crate::log::LogError;
use crate::registry::state::DEFAULT_MAX_MESSAGES;
use std::path::{Path, PathBuf};

/// File name of the settings, in the store directory.
pub const CONFIG_FILE: &str = "config.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    max_messages: usize,
}

fn path(dir: &Path) -> PathBuf {
    dir.join(CONFIG_FILE)
}

/// The persisted cap of the store in `dir`, or `None` when it has no
/// settings file.
pub fn stored_max_messages(dir: &Path) -> Result<Option<usize>, LogError> {
    let p = path(dir);
    let text = match std::fs::read(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io(&p, e)),
    };
    let c: Config = serde_json::from_slice(&text).map_err(|e| {
        LogError::InvalidArgument(format!(
            "{}: {e} (expected {{\"max_messages\": N}})",
            p.display()
        ))
    })?;
    if c.max_messages == 0 {
        return Err(LogError::InvalidArgument(format!(
            "{}: max_messages must be at least 1",
            p.display()
        )));
    }
    Ok(Some(c.max_messages))
}

/// The cap every fold of the store in `dir` uses.
pub fn max_messages(dir: &Path) -> Result<usize, LogError> {
    Ok(stored_max_messages(dir)?.unwrap_or(DEFAULT_MAX_MESSAGES))
}

/// Persists `max_messages` for the store in `dir` (written to a temporary
/// file, synced, renamed). Refuses to change a cap already set.
pub fn set_max_messages(dir: &Path, max_messages: usize) -> Result<(), LogError> {
    if max_messages == 0 {
        return Err(LogError::InvalidArgument(
            "max_messages must be at least 1".into(),
        ));
    }
    match stored_max_messages(dir)? {
        Some(n) if n == max_messages => return Ok(()),
        Some(n) => {
            return Err(LogError::InvalidArgument(format!(
                "{}: the store's message cap is {n}; it is fixed when the store is created (it decides how the log folds)",
                path(dir).display()
            )))
        }
        None => {}
    }
    let p = path(dir);
    let body = serde_json::to_vec(&Config { max_messages })
        .map_err(|e| LogError::io(&p, std::io::Error::other(e)))?;
    // 0640 less the umask: the store's sharing decides who reads it.
    crate::files::publish_atomic(&p, &body, 0o640, || Ok(()))
        .map_err(|e| LogError::io(&p, e.into_io()))
}
