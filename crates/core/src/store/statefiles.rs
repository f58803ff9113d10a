//! The per-agent `state.json` side of [`Store::publish_registry`]
//! (docs/upstream.md, "state.json"; the format and the rules are
//! `crate::state_json`'s).
//!
//! Protocol, per file, as upstream's own writer does it: the exclusive
//! `flock` on the sidecar `<state.json>.lock` is held from the read to the
//! rewrite; a rewrite goes to `.state.json.tmp.<pid>` in the same folder,
//! is fsynced, then renamed over the file (the folder is fsynced too).
//! Beside the file agentlog keeps the bytes it last published
//! (`.state.json.agentlog-published`, `crate::coexist::base_path`); a file
//! that differs from them is another writer's and is read and ingested
//! before anything is rewritten. A file is rewritten only when its content
//! changes. A file that cannot be read, or whose lock stays held, is
//! reported ([`StateProblem`]) and left as it is; the others go on.

use super::{Store, StoreResult};
use crate::fslock::{FileLock, LockMode};
use crate::registry::Event;
use crate::state_json::{self, StateFile};
use crate::time::Timestamp;
use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one `state.json`'s lock is waited for (upstream holds it for
/// one small write); a file still locked is skipped until the next publish.
const STATE_LOCK_WAIT: Duration = Duration::from_secs(1);

/// A `state.json` a publish left as it is, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateProblem {
    pub file: PathBuf,
    /// The bytes on disk when it was judged (`None`: not read).
    pub bytes: Option<Vec<u8>>,
    pub why: String,
}

/// The `state.json` files one publish holds: each agent's file under its
/// exclusive lock, with what was on disk and what agentlog last published.
pub(super) struct HeldStates {
    files: Vec<Held>,
    pub(super) problems: Vec<StateProblem>,
}

struct Held {
    agent: String,
    file: PathBuf,
    disk: Option<Vec<u8>>,
    base: Option<Vec<u8>>,
    _lock: FileLock,
}

fn lock_path(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_os_string();
    s.push(".lock");
    PathBuf::from(s)
}

fn read_optional(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Upstream's write: `.state.json.tmp.<pid>`, fsync, rename (and the
/// folder fsynced, which upstream skips). The caller holds the lock.
fn write_state(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = crate::files::parent_dir(file);
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        state_json::SOURCE,
        std::process::id()
    ));
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, file)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    std::fs::File::open(dir)?.sync_all()
}

impl HeldStates {
    /// Takes every target's lock (waiting at most [`STATE_LOCK_WAIT`] each)
    /// and reads its file and base.
    pub(super) fn lock(targets: Vec<(String, PathBuf)>) -> HeldStates {
        let mut held = HeldStates {
            files: Vec::with_capacity(targets.len()),
            problems: Vec::new(),
        };
        for (agent, file) in targets {
            let problem = |why: String| StateProblem {
                file: file.clone(),
                bytes: None,
                why,
            };
            let lock =
                match FileLock::acquire(&lock_path(&file), LockMode::Exclusive, STATE_LOCK_WAIT) {
                    Ok(l) => l,
                    Err(e) => {
                        held.problems.push(problem(e.to_string()));
                        continue;
                    }
                };
            let read = read_optional(&file)
                .and_then(|disk| Ok((disk, read_optional(&crate::coexist::base_path(&file))?)));
            match read {
                Ok((disk, base)) => held.files.push(Held {
                    agent,
                    file,
                    disk,
                    base,
                    _lock: lock,
                }),
                Err(e) => held.problems.push(problem(format!("cannot read: {e}"))),
            }
        }
        held
    }

    /// The events that ingest what other writers changed in the held
    /// files, all at `at`. A file that does not parse is dropped from the
    /// held set (never rewritten) and reported.
    pub(super) fn changes(&mut self, store: &Store, at: Timestamp) -> Vec<Event> {
        let mut events = Vec::new();
        let mut problems = Vec::new();
        self.files.retain(|h| {
            let Some(disk) = &h.disk else { return true };
            if h.base.as_ref() == Some(disk) {
                return true;
            }
            let theirs = match state_json::parse(disk, &h.file) {
                Ok(t) => t,
                Err(e) => {
                    problems.push(StateProblem {
                        file: h.file.clone(),
                        bytes: Some(disk.clone()),
                        why: e.to_string(),
                    });
                    return false;
                }
            };
            // A base that no longer parses is none.
            let base: Option<StateFile> = h
                .base
                .as_ref()
                .and_then(|b| state_json::parse(b, &h.file).ok());
            events.extend(
                store.with_state(|s, _| {
                    state_json::changes(s, &h.agent, base.as_ref(), &theirs, at)
                }),
            );
            true
        });
        self.problems.extend(problems);
        events
    }

    /// Renders each held agent's file from the fold and writes the ones
    /// whose content changed; counts the files written.
    pub(super) fn publish(&mut self, store: &Store) -> usize {
        let mut written = 0;
        for h in &self.files {
            let Some(bytes) = store.with_state(|s, _| s.agent(&h.agent).map(state_json::render))
            else {
                continue;
            };
            let done = (|| {
                if h.disk.as_deref() != Some(&bytes[..]) {
                    write_state(&h.file, &bytes)?;
                    written += 1;
                }
                if h.base.as_deref() != Some(&bytes[..]) {
                    crate::coexist::record_published(&h.file, &bytes)
                        .map_err(crate::files::PublishError::into_io)?;
                }
                Ok::<_, std::io::Error>(())
            })();
            if let Err(e) = done {
                self.problems.push(StateProblem {
                    file: h.file.clone(),
                    bytes: None,
                    why: format!("cannot publish: {e}"),
                });
            }
        }
        written
    }
}

impl Store {
    /// Whether a `state.json` the next publish would handle differs from
    /// what agentlog last published there (or is missing), leaving out
    /// files whose bytes are `known_bad`'s (already reported as
    /// unreadable): the daemon's cue to publish within one period.
    pub fn state_files_changed(&self, known_bad: &HashMap<PathBuf, Vec<u8>>) -> bool {
        let Some(registry) = self.core.opts.export_path.clone() else {
            return false;
        };
        let targets = self.with_state(|s, _| state_json::targets(s, &registry));
        targets.iter().any(|(_, file)| {
            let disk = read_optional(file).ok().flatten();
            let base = read_optional(&crate::coexist::base_path(file))
                .ok()
                .flatten();
            match disk {
                None => true,
                Some(d) => base.as_ref() != Some(&d) && known_bad.get(file) != Some(&d),
            }
        })
    }

    /// Appends foreign changes as one durable batch (before anything is
    /// republished over them).
    pub(super) fn append_external(&self, events: &[Event]) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let lsns = if let Some(sink) = self.sink()? {
            let done = sink.command(super::current_origin(), &mut |_| Ok(events.to_vec()))?;
            done.into_iter().map(|(lsn, _)| lsn).collect::<Vec<_>>()
        } else {
            let mut g = self.write();
            self.append_apply(&mut g, events)?
        };
        // What another writer did is durable before it is overwritten.
        self.finish(lsns.last().copied(), crate::log::Durability::Durable)
    }
}
