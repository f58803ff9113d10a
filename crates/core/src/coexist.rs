//! Coexistence with upstream fno's own writers (docs/registry.md,
//! "Coexistence"): agentlog never silently overwrites a foreign write to a
//! `registry.json` it publishes.
//!
//! Invariants:
//! - Beside every published file agentlog keeps a copy of the bytes it last
//!   published there ([`base_path`]). The file on disk differing from that
//!   copy is the sign of a foreign write; then the file is parsed
//!   (`crate::import`, every schema) and compared row by row, three ways:
//!   the last publish (base), the file (theirs) and the fold (ours).
//! - Only what the other writer changed becomes an event: a key whose value
//!   differs between base and theirs, and still differs from ours. Rows
//!   are compared in a normal form (upstream's schema-9/10 migrations
//!   applied, `null` ≡ absent, times to the second), so a writer that
//!   rewrote the whole file in its own schema (upstream's writers do) does
//!   not make every row look changed.
//! - Without a base (nothing published here yet by this store), only rows
//!   agentlog does not hold are taken: nothing says who changed the others.
//! - The comparison is pure; the caller holds both writers' locks from the
//!   read to the republish, so no write can land in between.

use crate::import::{parse_registry, ImportError, ParsedRegistry};
use crate::model::fields::{FieldRef, FieldValue, V4Key, AGENT_FIELDS};
use crate::model::{Agent, HostMode, StatusCause};
use crate::registry::{Event, EventKind, ExternalChange, State};
use crate::schemas::{extra, legacy_session_key, never_exported};
use crate::time::Timestamp;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The `source` of changes found in a `registry.json`.
pub const REGISTRY_SOURCE: &str = "registry.json";

/// Where agentlog keeps what it last published at `path`:
/// `<dir>/.<name>.agentlog-published` (a dot name, which upstream's
/// directory walkers skip).
pub fn base_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "registry.json".into(), |n| n.to_string_lossy());
    crate::files::parent_dir(path).join(format!(".{name}.agentlog-published"))
}

/// Records `bytes` as what agentlog last published at `path`.
pub fn record_published(path: &Path, bytes: &[u8]) -> Result<(), crate::files::PublishError> {
    crate::files::publish_atomic(&base_path(path), bytes, 0o600, || Ok(()))
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, ImportError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ImportError::Io {
            file: path.to_path_buf(),
            source,
        }),
    }
}

/// Whether the file at `path` differs from what agentlog last published
/// there. A missing file, or none recorded, counts as unchanged: the
/// daemon's first publish (`Store::publish_registry`) ingests what a file
/// it finds holds before anything else publishes.
pub fn changed_on_disk(path: &Path) -> Result<bool, ImportError> {
    let (Some(disk), Some(base)) = (read_optional(path)?, read_optional(&base_path(path))?) else {
        return Ok(false);
    };
    Ok(disk != base)
}

/// A `registry.json` another writer changed since agentlog published it.
#[derive(Debug, Clone)]
pub struct ForeignWrite {
    /// The file as it is now.
    pub theirs: ParsedRegistry,
    /// What agentlog last published (`None`: nothing recorded).
    pub base: Option<ParsedRegistry>,
}

/// Reads the file at `path` when it differs from what agentlog last
/// published there; `None` when it does not (or is missing). A file that
/// does not parse is an error: it is never overwritten.
pub fn read_foreign(path: &Path) -> Result<Option<ForeignWrite>, ImportError> {
    let Some(disk) = read_optional(path)? else {
        return Ok(None);
    };
    let base = read_optional(&base_path(path))?;
    if base.as_deref() == Some(disk.as_slice()) {
        return Ok(None);
    }
    let theirs = parse_registry(&disk, path)?;
    // A base that no longer parses (never written by this build) is none.
    let base = base.and_then(|b| parse_registry(&b, &base_path(path)).ok());
    Ok(Some(ForeignWrite { theirs, base }))
}

/// A row's file keys in normal form: key → comparable text.
type FileValues = BTreeMap<String, String>;

/// The legacy keys upstream's readers migrate away (schemas 9 and 10).
const LEGACY: [&str; 4] = [
    "claude_short_id",
    "claude_session_uuid",
    "codex_session_id",
    "gemini_session_id",
];

/// `a` with upstream's read-time migrations applied: `claude_short_id`
/// fills an empty `short_id`, the harness's legacy session key fills an
/// empty `harness_session_id`, the legacy keys are cleared, and an unset
/// `host_mode` is `exec`.
pub fn normalized(a: &Agent) -> Agent {
    let mut n = a.clone();
    if let Some(c) = n.claude_short_id.take() {
        if n.short_id.is_empty() {
            n.short_id = c;
        }
    }
    let legacy = legacy_session_key(&n.provider).and_then(|key| match key {
        "claude_session_uuid" => n.claude_session_uuid.clone(),
        "codex_session_id" => n.codex_session_id.clone(),
        _ => n.gemini_session_id.clone(),
    });
    if let Some(id) = legacy.filter(|_| extra(&n, "harness_session_id").is_none()) {
        n.extra.push((
            "harness_session_id".to_string(),
            serde_json::Value::from(id).to_string(),
        ));
    }
    n.claude_session_uuid = None;
    n.codex_session_id = None;
    n.gemini_session_id = None;
    if n.host_mode.is_none() && extra(&n, "host_mode").is_none() {
        n.host_mode = Some(HostMode::Exec);
    }
    n
}

fn file_values(a: &Agent) -> FileValues {
    let n = normalized(a);
    let mut v = FileValues::new();
    v.insert("harness".into(), n.provider.clone());
    v.insert("cwd".into(), n.cwd.clone());
    v.insert("created_at".into(), secs(n.created_at));
    v.insert("status".into(), n.status.as_str().into());
    let typed = AGENT_FIELDS.iter().filter(|f| {
        f.v4 != V4Key::None
            && !matches!(f.name, "name" | "provider" | "cwd")
            && !LEGACY.contains(&f.name)
    });
    for f in typed {
        let text = match f.get(&n) {
            None | Some(FieldRef::Text("")) => continue,
            Some(FieldRef::Text(s)) => s.to_string(),
            Some(FieldRef::U32(x)) => x.to_string(),
            Some(FieldRef::U64(x)) => x.to_string(),
            Some(FieldRef::HostMode(m)) => m.as_str().to_string(),
            Some(FieldRef::Time(t)) => secs(t),
        };
        v.insert(f.name.to_string(), text);
    }
    for (key, text) in &n.extra {
        if !never_exported(key) {
            v.insert(key.clone(), text.clone());
        }
    }
    v
}

fn secs(t: Timestamp) -> String {
    let mut s = String::with_capacity(20);
    t.write_rfc3339_secs(&mut s);
    s
}

/// The keys whose values differ between `a` and `b`.
fn differing(a: &FileValues, b: &FileValues) -> Vec<String> {
    let mut keys: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Copies file key `key` of `from` into `to`.
fn copy_key(to: &mut Agent, from: &Agent, key: &str) {
    match key {
        "harness" => to.provider.clone_from(&from.provider),
        "cwd" => to.cwd.clone_from(&from.cwd),
        "created_at" => to.created_at = from.created_at,
        "status" => {
            to.status = from.status;
            to.status_message = None;
            to.status_cause = StatusCause::Import;
        }
        _ => match AGENT_FIELDS.iter().find(|f| f.name == key) {
            Some(f) => {
                let value = f.get(from).map(|r| match r {
                    FieldRef::Text(s) => FieldValue::Text(s.to_string()),
                    FieldRef::U32(x) => FieldValue::U32(x),
                    FieldRef::U64(x) => FieldValue::U64(x),
                    FieldRef::HostMode(m) => FieldValue::HostMode(m),
                    FieldRef::Time(t) => FieldValue::Time(t),
                });
                f.set(to, value);
            }
            None => {
                to.extra.retain(|(k, _)| k != key);
                if let Some(text) = extra(from, key) {
                    to.extra.push((key.to_string(), text.to_string()));
                }
            }
        },
    }
}

/// The events that bring what another writer changed into the fold, all at
/// `at`, in file order (removals last). See the module docs for the rule.
pub fn changes(state: &State, foreign: &ForeignWrite, source: &str, at: Timestamp) -> Vec<Event> {
    let base: Option<HashMap<&str, FileValues>> = foreign.base.as_ref().map(|b| {
        b.rows
            .iter()
            .map(|r| (r.agent.name.as_str(), file_values(&r.agent)))
            .collect()
    });
    let mut events = Vec::new();
    let mut push = |agent: &str, change| {
        events.push(Event {
            at,
            kind: EventKind::ExternalChange {
                agent: agent.to_string(),
                source: source.to_string(),
                change,
            },
        })
    };
    for row in &foreign.theirs.rows {
        let theirs = &row.agent;
        let name = theirs.name.as_str();
        let t = file_values(theirs);
        let ours = state.agent(name);
        let ours_values = ours.map(file_values);
        let before = base.as_ref().map(|b| b.get(name));
        let mut keys = match (before, &ours_values) {
            // Nothing recorded: only a row agentlog does not hold is taken.
            (None, Some(_)) => continue,
            (Some(Some(b)), _) => differing(b, &t),
            (_, Some(o)) => differing(o, &t),
            (_, None) => Vec::new(),
        };
        if let Some(o) = &ours_values {
            // A change the fold already holds needs no event.
            keys.retain(|k| o.get(k) != t.get(k));
        }
        match ours {
            None if keys.is_empty() && !matches!(before, Some(None) | None) => {}
            None => {
                let mut row = normalized(theirs);
                row.status_cause = StatusCause::Import;
                row.registered_at = at;
                row.last_active = at;
                push(name, ExternalChange::Registered(Box::new(row)));
            }
            Some(_) if keys.is_empty() => {}
            Some(_) if keys == ["status"] => push(
                name,
                ExternalChange::Status {
                    status: theirs.status,
                },
            ),
            Some(o) => {
                let mut row = normalized(o);
                for key in &keys {
                    copy_key(&mut row, theirs, key);
                }
                push(
                    name,
                    ExternalChange::Updated {
                        row: Box::new(row),
                        keys,
                    },
                );
            }
        }
    }
    if let Some(b) = &foreign.base {
        let kept: std::collections::HashSet<&str> = foreign
            .theirs
            .rows
            .iter()
            .map(|r| r.agent.name.as_str())
            .collect();
        for row in &b.rows {
            let name = row.agent.name.as_str();
            if !kept.contains(name) && state.agent(name).is_some() {
                push(name, ExternalChange::Removed);
            }
        }
    }
    events
}
