//! `registry.json` export from, and import into, the [`Store`], and the
//! coexisting publish ([`Store::publish_registry`], `crate::coexist`, with
//! the per-agent `state.json` files of `statefiles.rs`).
//!
//! Export renders the agents in registration order from a copy taken under
//! the read lock (appenders wait only for the copy, not for rendering or the
//! publish's fsyncs). Import parses the whole file first, validates every row
//! against the current state under the write lock, and appends all rows as
//! ONE durable record batch, so a file lands whole or not at all; any refusal
//! changes nothing.
//!
//! Merge rule: a row whose name the store holds is refused (naming file, row
//! and agent) unless that agent has finished (`failed`, `exited`,
//! `permanent_dead`); a finished holder is replaced by the imported row,
//! exactly as a registration starts a new life of a finished name.

use super::stamps::Stamp;
use super::{Store, StoreError, StoreResult};
use crate::export::ExportReport;
use crate::import;
use crate::registry::{EventKind, Lsn};
use crate::time::Timestamp;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long an import waits for the shared lock on `<file>.lock`.
const IMPORT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// What [`Store::publish_registry`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// What was written.
    pub report: ExportReport,
    /// Foreign changes appended before it (one event each).
    pub ingested: usize,
    /// The LSN the published fold is at.
    pub lsn: Lsn,
    /// `state.json` files rewritten (their content changed).
    pub states_written: usize,
    /// `state.json` files left as they are, and why.
    pub state_problems: Vec<super::statefiles::StateProblem>,
}

/// What [`Store::import_registry`] brought in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportReport {
    pub file: PathBuf,
    /// `None` for an empty file (which imports nothing).
    pub schema_version: Option<u32>,
    /// Rows imported (one `AgentImported` event each).
    pub imported: usize,
    /// Finished agents the import replaced, in file order.
    pub replaced: Vec<String>,
    /// LSNs of the imported rows, in file order (`None`: nothing imported).
    pub lsns: Option<RangeInclusive<Lsn>>,
}

impl Store {
    /// Renders the agents (registration order) as schema-v4 `registry.json`
    /// and publishes it at `path` (default `StoreOptions::export_path`)
    /// under both writers' locks. With `strict`, an agent an existing reader
    /// cannot accept fails the export instead of being left out.
    pub fn export(&self, path: Option<&Path>, strict: bool) -> StoreResult<ExportReport> {
        let path = path
            .or(self.core.opts.export_path.as_deref())
            .ok_or(StoreError::NoExportPath)?;
        // Copy only the agents: messages and sessions are not exported.
        let (agents, lsn) = self.with_state(|s, lsn| (s.agents().as_slice().to_vec(), lsn));
        // registry.json never shows what a crash could still take back.
        self.log().wait_durable(lsn)?;
        Ok(crate::export::export_to(
            path,
            agents.iter(),
            &crate::export::ExportOptions {
                strict,
                schema: self.core.opts.export_schema,
            },
            &crate::export::PublishOptions::default(),
        )?)
    }

    /// Publishes `registry.json` at `StoreOptions::export_path`, and each
    /// agent's `state.json` beside it (`crate::state_json`), without ever
    /// overwriting a foreign write (`crate::coexist`): under both writers'
    /// locks on `registry.json` (waiting at most `lock_timeout`) and each
    /// `state.json`'s own, a file another writer changed since the last
    /// publish is compared with the fold and each difference is appended
    /// (one durable batch per kind of file: `registry.json`'s first, then
    /// the `state.json` files', whose status therefore wins), and only
    /// then is the fold republished. A `registry.json` that does not parse
    /// fails the publish and is left as it is; a `state.json` that does
    /// not is left as it is and reported in [`Published::state_problems`].
    pub fn publish_registry(&self, lock_timeout: Duration) -> StoreResult<Published> {
        let path = self
            .core
            .opts
            .export_path
            .clone()
            .ok_or(StoreError::NoExportPath)?;
        let _locks = crate::export::lock_registry(&path, lock_timeout)?;
        let mut ingested = 0;
        if let Some(foreign) = crate::coexist::read_foreign(&path)? {
            let at = Timestamp::now();
            let events = self.with_state(|s, _| {
                crate::coexist::changes(s, &foreign, crate::coexist::REGISTRY_SOURCE, at)
            });
            ingested += events.len();
            self.append_external(&events)?;
        }
        // The state.json files of the fold as registry.json's changes left it.
        let targets = self.state_targets(&path);
        let mut states = super::statefiles::HeldStates::lock(targets, &self.core.stamps);
        let events = states.changes(self, Timestamp::now());
        ingested += events.len();
        self.append_external(&events)?;
        let (agents, lsn) = self.with_state(|s, lsn| (s.agents().as_slice().to_vec(), lsn));
        let (bytes, report) = crate::export::render(
            agents.iter(),
            &crate::export::ExportOptions {
                strict: self.core.opts.export_strict,
                schema: self.core.opts.export_schema,
            },
        )?;
        crate::export::publish_locked(&path, &bytes)?;
        let stamps = &self.core.stamps;
        stamps.forget(&path);
        crate::coexist::record_published(&path, &bytes)
            .map_err(crate::export::ExportError::from)?;
        // Stamped under both writers' locks, after the writes.
        let base = crate::coexist::base_path(&path);
        if let (Some(at), Some(base_at)) = (Stamp::at(&path), Stamp::at(&base)) {
            stamps.record(&path, at, base_at, &bytes);
        }
        let states_written = states.publish(self);
        Ok(Published {
            report,
            ingested,
            lsn,
            states_written,
            state_problems: states.problems,
        })
    }

    /// Whether `registry.json` (at `StoreOptions::export_path`) differs
    /// from what agentlog last published there
    /// (`crate::coexist::changed_on_disk`), read only when its stamps or
    /// its copy's changed since the last publish (`super::stamps`). An
    /// error counts as a change (the publish then reports it).
    pub fn registry_changed(&self) -> bool {
        let Some(path) = self.core.opts.export_path.as_deref() else {
            return false;
        };
        let stamps = &self.core.stamps;
        let base = crate::coexist::base_path(path);
        if stamps.clean_hash(path, &base).is_some() {
            return false;
        }
        match (stamps.read(path), stamps.read(&base)) {
            (Ok(Some((at, disk))), Ok(Some((base_at, copy)))) => {
                if disk != copy {
                    return true;
                }
                stamps.record(path, at, base_at, &disk);
                false
            }
            // Missing, either: nothing to ingest (`changed_on_disk`'s rule).
            (Ok(_), Ok(_)) => false,
            _ => true,
        }
    }

    /// Imports a `registry.json` of any upstream schema (see `crate::import`) as one
    /// durable batch of `AgentImported` events at the current time. Refused
    /// (changing nothing) when the file is refused by the parser, or a row
    /// names an agent that is registered here and not finished (see the
    /// module docs for the merge rule).
    pub fn import_registry(&self, path: &Path) -> StoreResult<ImportReport> {
        self.import_registry_from(path, import::InputKind::Any)
    }

    /// [`Store::import_registry`] reading only the inputs `kind` allows (a
    /// daemon takes only regular files), at most
    /// [`import::MAX_IMPORT_BYTES`].
    pub fn import_registry_from(
        &self,
        path: &Path,
        kind: import::InputKind,
    ) -> StoreResult<ImportReport> {
        let bytes = import::read_registry_bytes(path, IMPORT_LOCK_TIMEOUT, kind)?;
        self.import_registry_bytes(&bytes, path)
    }

    /// [`Store::import_registry`] of a file's content that the caller read
    /// (a daemon's client sends it); `file` only names it in messages and
    /// in the report.
    pub fn import_registry_bytes(&self, bytes: &[u8], file: &Path) -> StoreResult<ImportReport> {
        let path = file;
        let parsed = import::parse_registry(bytes, path)?;
        let schema_version = parsed.schema_version;
        let events = import::to_events(parsed, Timestamp::now());
        let mut replaced = Vec::new();
        let lsns = if let Some(sink) = self.sink()? {
            // A replica publishes row by row (docs/scaling.md §2, "Batches").
            let done = sink.command(super::current_origin(), &mut |s| {
                replaced = check_import(s, &events, path)?;
                Ok(events.clone())
            })?;
            done.into_iter().map(|(lsn, _)| lsn).collect()
        } else {
            let mut g = self.write();
            replaced = check_import(&g.state, &events, path)?;
            self.append_apply(&mut g, &events)?
        };
        // Imports are always durable, whatever `command_durability` says.
        self.finish(lsns.last().copied(), crate::log::Durability::Durable)?;
        Ok(ImportReport {
            file: path.to_path_buf(),
            schema_version,
            imported: lsns.len(),
            replaced,
            lsns: lsns.first().zip(lsns.last()).map(|(a, b)| *a..=*b),
        })
    }
}

/// Checks every imported row against `state` (see the module docs for the
/// merge rule); the finished agents the import replaces, in file order.
/// `parse_registry` returns every row or none, so event i is row i.
fn check_import(
    state: &crate::registry::State,
    events: &[crate::registry::Event],
    path: &Path,
) -> StoreResult<Vec<String>> {
    let file = || path.to_path_buf();
    let mut replaced = Vec::new();
    for (row, e) in events.iter().enumerate() {
        let EventKind::AgentImported(agent) = &e.kind else {
            continue;
        };
        crate::registry::validate_agent(agent).map_err(|source| StoreError::ImportRow {
            file: file(),
            row,
            source,
        })?;
        if let Some(held) = state.agent(&agent.name) {
            if !held.is_finished() {
                return Err(StoreError::ImportConflict {
                    file: file(),
                    row,
                    agent: agent.name.clone(),
                    status: held.status,
                });
            }
            replaced.push(agent.name.clone());
        }
    }
    Ok(replaced)
}

#[cfg(test)]
mod tests {
    use crate::registry::Registration;
    use crate::store::{Store, StoreOptions};

    /// registry.json follows the log's durable state: when the sync it
    /// waits for fails, nothing is published.
    #[test]
    fn export_publishes_nothing_a_sync_did_not_cover() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = StoreOptions::default();
        opts.log.faults.fail_syncs = true;
        let store = Store::open(dir.path(), opts).unwrap();
        let registered = store.register(Registration::new("w", "claude", "/"), None);
        assert!(registered.is_err(), "the sync must fail");
        let out = dir.path().join("registry.json");
        assert!(store.export(Some(&out), false).is_err());
        assert!(!out.exists());
    }
}
