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
//!
//! A file whose pair (the file and the copy) still has the stat stamps a
//! publish left ([`super::stamps`]) is neither read by the periodic check
//! nor locked by a publish unless its rendering changed: an idle daemon
//! only `stat`s two files per agent.

use super::stamps::{Stamp, Stamps};
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
    /// The stamps taken before `disk` and `base` were read.
    stamps: (Option<Stamp>, Option<Stamp>),
    _lock: FileLock,
}

fn lock_path(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_os_string();
    s.push(".lock");
    PathBuf::from(s)
}

/// Upstream's write: `.state.json.tmp.<pid>`, fsync, rename (and the
/// folder fsynced, which upstream skips). The caller holds the lock.
/// Returns the new file's stamp, from its own descriptor after the rename
/// (a write that replaced it since has another inode).
fn write_state(file: &Path, bytes: &[u8]) -> std::io::Result<Stamp> {
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
    let written = (|| -> std::io::Result<Stamp> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, file)?;
        Ok(Stamp::of(&f.metadata()?))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    let stamp = written?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(stamp)
}

impl HeldStates {
    /// Takes every target's lock (waiting at most [`STATE_LOCK_WAIT`] each)
    /// and reads its file and base.
    pub(super) fn lock(targets: Vec<(String, PathBuf)>, stamps: &Stamps) -> HeldStates {
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
            let read = stamps
                .read(&file)
                .and_then(|disk| Ok((disk, stamps.read(&crate::coexist::base_path(&file))?)));
            match read {
                Ok((disk, base)) => held.files.push(Held {
                    agent,
                    file,
                    stamps: (disk.as_ref().map(|d| d.0), base.as_ref().map(|b| b.0)),
                    disk: disk.map(|d| d.1),
                    base: base.map(|b| b.1),
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
    /// whose content changed; counts the files written. Each file left
    /// holding what was published (with the copy) has its stamps recorded.
    pub(super) fn publish(&mut self, store: &Store) -> usize {
        let stamps = &store.core.stamps;
        let mut written = 0;
        for h in &self.files {
            let Some(bytes) = store.with_state(|s, _| s.agent(&h.agent).map(state_json::render))
            else {
                stamps.forget(&h.file);
                continue;
            };
            let done = (|| {
                let (mut at, mut base_at) = h.stamps;
                if h.disk.as_deref() != Some(&bytes[..]) {
                    at = Some(write_state(&h.file, &bytes)?);
                    written += 1;
                }
                if h.base.as_deref() != Some(&bytes[..]) {
                    let base = crate::coexist::base_path(&h.file);
                    crate::coexist::record_published(&h.file, &bytes)
                        .map_err(crate::files::PublishError::into_io)?;
                    // agentlog's own file (0600, a dot name), written under
                    // the lock: nobody else writes it in between.
                    base_at = Stamp::at(&base);
                }
                match (at, base_at) {
                    (Some(at), Some(base_at)) => stamps.record(&h.file, at, base_at, &bytes),
                    _ => stamps.forget(&h.file),
                }
                Ok::<_, std::io::Error>(())
            })();
            if let Err(e) = done {
                stamps.forget(&h.file);
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
    ///
    /// Only files whose stamps changed since the last publish are read
    /// (`super::stamps`); a file read and found equal to the copy gets its
    /// stamps recorded, so it is not read again while it stays so.
    pub fn state_files_changed(&self, known_bad: &HashMap<PathBuf, Vec<u8>>) -> bool {
        let Some(registry) = self.core.opts.export_path.clone() else {
            return false;
        };
        let stamps = &self.core.stamps;
        let targets = self.with_state(|s, _| state_json::targets(s, &registry));
        targets.iter().any(|(_, file)| {
            let base_path = crate::coexist::base_path(file);
            if stamps.clean_hash(file, &base_path).is_some() {
                return false;
            }
            let Some((at, disk)) = stamps.read(file).ok().flatten() else {
                return true;
            };
            match stamps.read(&base_path).ok().flatten() {
                Some((base_at, base)) if base == disk => {
                    stamps.record(file, at, base_at, &disk);
                    false
                }
                _ => known_bad.get(file) != Some(&disk),
            }
        })
    }

    /// The targets of a publish (`state_json::targets`) less the files it
    /// need not touch: their pair is as the last publish left it (stamps)
    /// and the fold renders what they hold. Forgets the stamps of files
    /// that are no longer targets (`registry`'s are kept).
    pub(super) fn state_targets(&self, registry: &Path) -> Vec<(String, PathBuf)> {
        let stamps = &self.core.stamps;
        let (targets, rendered) = self.with_state(|s, _| {
            let targets = state_json::targets(s, registry);
            let rendered: Vec<Option<u64>> = targets
                .iter()
                .map(|(agent, _)| s.agent(agent).map(|a| stamps.hash(&state_json::render(a))))
                .collect();
            (targets, rendered)
        });
        let names: std::collections::HashSet<&Path> =
            targets.iter().map(|(_, f)| f.as_path()).collect();
        stamps.retain(&|p| p == registry || names.contains(p));
        drop(names);
        targets
            .into_iter()
            .zip(rendered)
            .filter(|((_, file), hash)| {
                hash.is_none() || stamps.clean_hash(file, &crate::coexist::base_path(file)) != *hash
            })
            .map(|(t, _)| t)
            .collect()
    }

    /// Files the publish check ([`Store::state_files_changed`],
    /// [`Store::registry_changed`]) and a publish's `state.json` side have
    /// read: what the stamps save shows here (the daemon's `hello`).
    pub fn publish_file_reads(&self) -> u64 {
        self.core.stamps.reads()
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
