//! The store's persisted settings: `<dir>/config.json`, the live-message
//! cap (`{"max_messages": N}`) and the `registry.json` schema the store
//! publishes (`"registry_schema": 16`, absent for the default 4).
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_messages: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    registry_schema: Option<u32>,
}

fn read(dir: &Path) -> Result<Option<Config>, LogError> {
    let p = path(dir);
    let text = match std::fs::read(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io(&p, e)),
    };
    serde_json::from_slice(&text).map(Some).map_err(|e| {
        LogError::InvalidArgument(format!(
            "{}: {e} (expected {{\"max_messages\": N, \"registry_schema\": 4 or 16}})",
            p.display()
        ))
    })
}

fn write(dir: &Path, c: &Config) -> Result<(), LogError> {
    let p = path(dir);
    let body = serde_json::to_vec(c).map_err(|e| LogError::io(&p, std::io::Error::other(e)))?;
    // 0640 less the umask: the store's sharing decides who reads it.
    crate::files::publish_atomic(&p, &body, 0o640, || Ok(()))
        .map_err(|e| LogError::io(&p, e.into_io()))
}

/// The schema the store in `dir` publishes `registry.json` in (4 unless
/// `init --schema 16` set it).
pub fn registry_schema(dir: &Path) -> Result<crate::schemas::Schema, LogError> {
    let n = read(dir)?.and_then(|c| c.registry_schema).unwrap_or(4);
    crate::schemas::Schema::from_version(u64::from(n))
        .map_err(|e| LogError::InvalidArgument(format!("{}: {e}", path(dir).display())))
}

/// Persists the schema the store in `dir` publishes (it may change: it
/// decides only what is written, never how the log folds).
pub fn set_registry_schema(dir: &Path, schema: crate::schemas::Schema) -> Result<(), LogError> {
    let mut c = read(dir)?.unwrap_or_default();
    c.registry_schema = (schema.version() != 4).then_some(schema.version());
    write(dir, &c)
}

fn path(dir: &Path) -> PathBuf {
    dir.join(CONFIG_FILE)
}

/// The persisted cap of the store in `dir`, or `None` when it has no
/// settings file.
pub fn stored_max_messages(dir: &Path) -> Result<Option<usize>, LogError> {
    let Some(n) = read(dir)?.and_then(|c| c.max_messages) else {
        return Ok(None);
    };
    if n == 0 {
        return Err(LogError::InvalidArgument(format!(
            "{}: max_messages must be at least 1",
            path(dir).display()
        )));
    }
    Ok(Some(n))
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
    let mut c = read(dir)?.unwrap_or_default();
    c.max_messages = Some(max_messages);
    write(dir, &c)
}
