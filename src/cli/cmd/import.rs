//! `agentlog import`: import a `registry.json` of schema 1 to 16 (or a newer
//! one that only adds keys) as one batch.
//!
//! Through a daemon the file travels as authority, not as a name: the client
//! reads it (bounded, [`agentlog::import::MAX_IMPORT_BYTES`]) and sends its content, unless it
//! runs as the daemon's own uid and the file is a regular one, in which case
//! the daemon opens the path itself (regular files only, so nothing it reads
//! can block it). See [`with_sent_content`].

use crate::cli::open::{served_store, with_store};
use crate::cli::output::{self, Ui, W};
use agentlog::import::InputKind;
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct Import {
    /// A registry.json of schema 1 to 16, or newer if only additive (imported as one batch, now)
    pub file: PathBuf,
}

thread_local! {
    /// Inside the daemon: the content of the file the client read and sent
    /// (`import`'s `content` parameter), which `run` imports instead of
    /// opening `file` (then only the client's name for it).
    static SENT_CONTENT: std::cell::RefCell<Option<Vec<u8>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with `import` taking `content` as its file's bytes.
pub fn with_sent_content<R>(content: Vec<u8>, f: impl FnOnce() -> R) -> R {
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            SENT_CONTENT.with(|c| c.borrow_mut().take());
        }
    }
    SENT_CONTENT.with(|c| *c.borrow_mut() = Some(content));
    let _clear = Clear;
    f()
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Import) -> Result<ExitCode> {
    let sent = SENT_CONTENT.with(|c| c.borrow_mut().take());
    // A daemon opens only regular files: a pipe or a device could hold its
    // thread (and grow its memory) after the client gave up.
    let kind = match served_store() {
        Some(_) => InputKind::RegularOnly,
        None => InputKind::Any,
    };
    let rep = with_store(&dir, |s| {
        Ok(match &sent {
            Some(bytes) => s.import_registry_bytes(bytes, &a.file)?,
            None => s.import_registry_from(&a.file, kind)?,
        })
    })?;
    let lsns = rep
        .lsns
        .as_ref()
        .map(|r| json!({"first": r.start(), "last": r.end()}));
    if ui.json {
        output::json(
            w,
            &json!({
                "file": rep.file,
                "schema_version": rep.schema_version,
                "imported": rep.imported,
                "replaced": rep.replaced,
                "lsns": lsns,
            }),
        )?;
    } else {
        let v = rep
            .schema_version
            .map_or("empty file".to_string(), |v| format!("schema {v}"));
        writeln!(
            w,
            "imported {} agents from {} ({v})",
            rep.imported,
            rep.file.display()
        )?;
        if !rep.replaced.is_empty() {
            let names = rep.replaced.join(", ");
            writeln!(w, "replaced finished agents: {}", output::escaped(&names))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
