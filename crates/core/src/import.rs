//! `registry.json` import of every upstream schema (1–16, and newer ones as
//! far as they only add keys): parse a file an existing writer made into
//! [`Agent`] rows, or refuse it with an error naming the file, the row and
//! the offending value.
//!
//! Invariants: parsing is pure (nothing is changed anywhere; the caller turns
//! rows into events only after the whole file parsed), so a refused file
//! changes nothing. Every key of every row is kept (`crate::schemas`): the
//! schema-v4 keys map onto [`Agent`] fields, the identity (`harness`, or
//! `provider` below schema 15) onto `Agent::provider`, and every other
//! non-null key, known or not, goes verbatim to `Agent::extra`. A file newer
//! than 16 is read with schema 16's rules; a row those rules refuse makes
//! the file incompatible, refused naming its version. Empty optional text
//! (`""` or `null`) becomes `None`, which the export writes back as the
//! existing writers do. The optional keys are read through the field table
//! (`model::fields`): each is parsed by its field's kind.

use crate::check::ROW_KEYS as KNOWN_KEYS;
use crate::fslock::{FileLock, LockError, LockMode};
use crate::model::fields::{FieldKind, FieldSpec, FieldValue, V4Key, AGENT_FIELDS};
use crate::model::{Agent, HostMode, Status, StatusCause, UnknownWord};
use crate::registry::{Event, EventKind};
use crate::schemas::{is_identity_token, LATEST};
use crate::time::{TimeParseError, Timestamp};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema versions this import reads as upstream's writers wrote them;
/// a newer one is read forward as far as it only adds keys.
pub const SUPPORTED_VERSIONS: std::ops::RangeInclusive<u64> = 1..=LATEST as u64;

/// A whole parsed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedRegistry {
    /// `None` for an empty (whitespace-only) file, which holds no registry.
    pub schema_version: Option<u32>,
    /// The rows in file order.
    pub rows: Vec<ImportedAgent>,
}

/// One row, as the agent it describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedAgent {
    /// Index of the row in the file (0-based), for messages.
    pub row: usize,
    /// Every field of the row. `status_cause` is `Import`; `registered_at` and
    /// `last_active` are `created_at` (the file records nothing later).
    pub agent: Agent,
}

/// What is wrong with one row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowProblem {
    #[error("not an object but {found}")]
    NotObject { found: &'static str },
    #[error("unknown key `{key}` (value {value})")]
    UnknownKey { key: String, value: String },
    #[error("missing required key `{key}`")]
    Missing { key: &'static str },
    #[error("`{key}` is {found}, expected {expected}")]
    WrongType {
        key: &'static str,
        expected: &'static str,
        found: String,
    },
    #[error(
        "`{key}` `{value}` is not an identity token (a non-empty lowercase word without spaces)"
    )]
    BadIdentity { key: &'static str, value: String },
    #[error("`{key}`: {source}")]
    UnknownWord {
        key: &'static str,
        #[source]
        source: UnknownWord,
    },
    #[error("`{key}`: {source}")]
    BadTime {
        key: &'static str,
        #[source]
        source: TimeParseError,
    },
    #[error("empty name")]
    EmptyName,
    #[error("duplicate name (first seen in row {first_row})")]
    Duplicate { first_row: usize },
}

/// Why a file was refused. Nothing was imported when any of these is returned.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{}: cannot read: {source}", file.display())]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: larger than the {} MiB an import reads", file.display(), MAX_IMPORT_BYTES >> 20)]
    TooLarge { file: PathBuf },
    #[error("{}: not a regular file (a daemon imports only regular files; the agentlog CLI reads anything else itself and sends its content)", file.display())]
    NotRegular { file: PathBuf },
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("{}: malformed JSON at line {line}, column {column}: {message}", file.display())]
    Malformed {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{}: top level is {found}, not an object", file.display())]
    NotObject { file: PathBuf, found: &'static str },
    #[error("{}: missing schema_version", file.display())]
    MissingVersion { file: PathBuf },
    #[error("{}: unsupported schema_version {found} (supported: 1..=16, and newer ones that only add keys)", file.display())]
    UnsupportedVersion { file: PathBuf, found: String },
    #[error("{}: schema_version {version} is newer than 16 and not only additive: row {row}{}: {problem}; nothing was imported", file.display(), name_note(name))]
    Incompatible {
        file: PathBuf,
        version: u32,
        row: usize,
        name: Option<String>,
        problem: Box<RowProblem>,
    },
    #[error("{}: `{key}` is {found}, expected a list of rows", file.display())]
    RowsNotList {
        file: PathBuf,
        key: &'static str,
        found: String,
    },
    #[error("{}: both `agents` and `entries` are present; refusing to guess which holds the rows", file.display())]
    AmbiguousRows { file: PathBuf },
    #[error("{}: row {row}{}: {problem}", file.display(), name_note(name))]
    Row {
        file: PathBuf,
        row: usize,
        name: Option<String>,
        problem: Box<RowProblem>,
    },
}

fn name_note(name: &Option<String>) -> String {
    match name {
        Some(n) => format!(" (`{n}`)"),
        None => String::new(),
    }
}

pub type Result<T, E = ImportError> = std::result::Result<T, E>;

/// The most an import reads from its input (256 MiB, a registry of several
/// hundred thousand agents): a device such as `/dev/zero` or a pipe that
/// never ends is refused at this size instead of filling memory.
pub const MAX_IMPORT_BYTES: u64 = 256 << 20;

/// Which inputs [`read_registry_bytes`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// Anything that reads (a pipe, `/dev/stdin`): the caller's own process
    /// waits on it.
    Any,
    /// Only a regular file, whose reading ends by itself: what a daemon opens
    /// for a client, since a pipe or a device could hold one of its threads
    /// long after the client went away.
    RegularOnly,
}

/// Reads `path` under a shared lock on `<path>.lock` (the lock the Rust
/// writer's readers take) where that lock file exists and can be opened, and
/// parses it; otherwise reads anyway (with a note when the lock file is
/// there but unreadable): publishers replace the file by rename, so a read
/// is never torn. Nothing is ever created beside the input. A missing file
/// is an error: importing nothing by mistake should not look like success.
pub fn read_registry_file(path: &Path, lock_timeout: Duration) -> Result<ParsedRegistry> {
    let bytes = read_registry_bytes(path, lock_timeout, InputKind::Any)?;
    parse_registry(&bytes, path)
}

/// The bytes of the registry file at `path`, read as [`read_registry_file`]
/// reads them, at most [`MAX_IMPORT_BYTES`], and only from a regular file
/// when `kind` says so. The file is opened without blocking (a FIFO with no
/// writer does not hold the open) and its type is judged on the opened file,
/// so a path swapped after a check cannot slip a device in.
pub fn read_registry_bytes(
    path: &Path,
    lock_timeout: Duration,
    kind: InputKind,
) -> Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = || path.to_path_buf();
    let io = |source| ImportError::Io {
        file: file(),
        source,
    };
    let (sidecar, _) = crate::export::lock_paths(path);
    let _guard = FileLock::acquire_existing(&sidecar, LockMode::Shared, lock_timeout)?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    if meta.is_file() {
        if meta.len() > MAX_IMPORT_BYTES {
            return Err(ImportError::TooLarge { file: file() });
        }
    } else if kind == InputKind::RegularOnly {
        return Err(ImportError::NotRegular { file: file() });
    } else {
        // A pipe is read as it comes: blocking again, as any reader of it.
        let flags = rustix::fs::fcntl_getfl(&f).map_err(|e| io(e.into()))?;
        rustix::fs::fcntl_setfl(&f, flags - rustix::fs::OFlags::NONBLOCK)
            .map_err(|e| io(e.into()))?;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    f.take(MAX_IMPORT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_IMPORT_BYTES {
        return Err(ImportError::TooLarge { file: file() });
    }
    Ok(bytes)
}

/// Parses a `registry.json` of schema 1–4. `source` only names the file in
/// errors.
pub fn parse_registry(bytes: &[u8], source: &Path) -> Result<ParsedRegistry> {
    let file = || source.to_path_buf();
    // A byte-order mark (some editors add one) carries no data.
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(ParsedRegistry {
            schema_version: None,
            rows: Vec::new(),
        });
    }
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| ImportError::Malformed {
        file: file(),
        line: e.line(),
        column: e.column(),
        // serde_json's text ends in " at line L column C", said once above.
        message: {
            let text = e.to_string();
            match text.rsplit_once(" at line ") {
                Some((message, _)) => message.to_string(),
                None => text,
            }
        },
    })?;
    let Value::Object(top) = doc else {
        return Err(ImportError::NotObject {
            file: file(),
            found: kind(&doc),
        });
    };
    let version = match top.get("schema_version") {
        None => return Err(ImportError::MissingVersion { file: file() }),
        Some(v) => match v.as_u64().filter(|n| (1..=u64::from(u32::MAX)).contains(n)) {
            Some(n) => n as u32,
            None => {
                return Err(ImportError::UnsupportedVersion {
                    file: file(),
                    found: v.to_string(),
                })
            }
        },
    };
    let (key, rows) = match (top.get("agents"), top.get("entries")) {
        (Some(_), Some(_)) => return Err(ImportError::AmbiguousRows { file: file() }),
        (Some(r), None) => ("agents", r),
        (None, Some(r)) => ("entries", r),
        (None, None) => {
            return Ok(ParsedRegistry {
                schema_version: Some(version),
                rows: Vec::new(),
            })
        }
    };
    let Value::Array(rows) = rows else {
        return Err(ImportError::RowsNotList {
            file: file(),
            key,
            found: kind(rows).to_string(),
        });
    };
    let mut out = Vec::with_capacity(rows.len());
    let mut first_row: HashMap<&str, usize> = HashMap::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let row_err = |problem| {
            let name = row.get("name").and_then(Value::as_str).map(str::to_string);
            let problem = Box::new(problem);
            if u64::from(version) > *SUPPORTED_VERSIONS.end() {
                ImportError::Incompatible {
                    file: file(),
                    version,
                    row: i,
                    name,
                    problem,
                }
            } else {
                ImportError::Row {
                    file: file(),
                    row: i,
                    name,
                    problem,
                }
            }
        };
        let Value::Object(obj) = row else {
            return Err(row_err(RowProblem::NotObject { found: kind(row) }));
        };
        let agent = parse_row(obj, version).map_err(row_err)?;
        if let Some(&first) = first_row.get(agent.name.as_str()) {
            return Err(row_err(RowProblem::Duplicate { first_row: first }));
        }
        // `row` outlives the loop body, so the map can borrow its name.
        if let Some(name) = obj.get("name").and_then(Value::as_str) {
            first_row.insert(name, i);
        }
        out.push(ImportedAgent { row: i, agent });
    }
    Ok(ParsedRegistry {
        schema_version: Some(version),
        rows: out,
    })
}

/// The events that bring a parsed file into a store: one `AgentImported` per
/// row, in file order, all at event time `at` (the import). Each agent keeps
/// the file's `created_at`; its `registered_at` and `last_active` become `at`,
/// because the import is its registration in this store (so the lease and the
/// broadcast floor count from the import, not from a creation time that may
/// be long past). Append them as one batch: a refused file produces no events
/// at all, so it changes nothing.
pub fn to_events(parsed: ParsedRegistry, at: Timestamp) -> Vec<Event> {
    parsed
        .rows
        .into_iter()
        .map(|row| {
            let mut agent = row.agent;
            agent.registered_at = at;
            agent.last_active = at;
            agent.status_cause = StatusCause::Import;
            Event {
                at,
                kind: EventKind::AgentImported(Box::new(agent)),
            }
        })
        .collect()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn parse_row(obj: &Map<String, Value>, version: u32) -> Result<Agent, RowProblem> {
    // Every key agentlog does not type is kept verbatim (a `null` is the
    // absent key's default for every upstream reader, so it is not stored).
    let mut extra = Vec::new();
    for (key, value) in obj {
        let typed = KNOWN_KEYS.contains(&key.as_str()) || key == "harness";
        // A `state.json:` key is where the fold keeps `state.json`'s worker
        // facts: a registry.json row cannot set them.
        if !typed && !value.is_null() && !crate::state_json::is_fact_key(key) {
            extra.push((key.clone(), value.to_string()));
        }
    }
    let name = req_str(obj, "name")?;
    if name.is_empty() {
        return Err(RowProblem::EmptyName);
    }
    let identity = identity(obj, version, &mut extra)?;
    let cwd = req_str(obj, "cwd")?;
    let created_at = parse_time("created_at", req_str(obj, "created_at")?)?;
    let status = match obj.get("status") {
        // Schema 1 predates status: those agents were simply live.
        None if version == 1 => Status::Live,
        None => return Err(RowProblem::Missing { key: "status" }),
        Some(v) => v
            .as_str()
            .ok_or_else(|| wrong("status", "a string", v))?
            .parse()
            .map_err(|source| RowProblem::UnknownWord {
                key: "status",
                source,
            })?,
    };
    let mut agent = Agent::new(name, identity, cwd, created_at);
    agent.status = status;
    agent.status_cause = StatusCause::Import;
    let optional = AGENT_FIELDS
        .iter()
        .filter(|f| !matches!(f.v4, V4Key::None | V4Key::Required));
    for f in optional {
        // Schema 5's `attached` has no typed form: kept verbatim instead.
        if f.name == "host_mode" && obj.get("host_mode").and_then(Value::as_str) == Some("attached")
        {
            extra.push(("host_mode".to_string(), "\"attached\"".to_string()));
            continue;
        }
        f.set(&mut agent, opt_value(obj, f)?);
    }
    agent.extra = extra;
    Ok(agent)
}

/// The row's identity (upstream's `harness`, agentlog's `provider`), read
/// by the file's version: below 15 `provider` is the harness (and `harness`
/// wins when both are set, as upstream's readers decide); from 15 on
/// `provider` is the model vendor, kept in `extra`, and `harness` is the
/// identity. Either must be an identity token; any token is accepted.
fn identity<'a>(
    obj: &'a Map<String, Value>,
    version: u32,
    extra: &mut Vec<(String, String)>,
) -> Result<&'a str, RowProblem> {
    let harness = opt_str(obj, "harness")?;
    let provider = opt_str(obj, "provider")?;
    for (key, value) in [("harness", harness), ("provider", provider)] {
        if let Some(v) = value.filter(|v| !is_identity_token(v)) {
            return Err(RowProblem::BadIdentity {
                key,
                value: v.to_string(),
            });
        }
    }
    if version >= 15 {
        if let Some(vendor) = provider {
            extra.push(("provider".to_string(), Value::from(vendor).to_string()));
        }
        return harness.ok_or(RowProblem::Missing { key: "harness" });
    }
    match (harness, provider) {
        (Some(h), Some(p)) if h != p => {
            extra.push(("legacy_provider".to_string(), Value::from(p).to_string()));
            Ok(h)
        }
        (Some(h), _) => Ok(h),
        (None, Some(p)) => Ok(p),
        (None, None) if version >= 10 => Err(RowProblem::Missing { key: "harness" }),
        (None, None) => Err(RowProblem::Missing { key: "provider" }),
    }
}

fn wrong(key: &'static str, expected: &'static str, v: &Value) -> RowProblem {
    RowProblem::WrongType {
        key,
        expected,
        found: v.to_string(),
    }
}

fn req_str<'a>(obj: &'a Map<String, Value>, key: &'static str) -> Result<&'a str, RowProblem> {
    match obj.get(key) {
        None => Err(RowProblem::Missing { key }),
        Some(v) => v.as_str().ok_or_else(|| wrong(key, "a string", v)),
    }
}

fn opt_str<'a>(
    obj: &'a Map<String, Value>,
    key: &'static str,
) -> Result<Option<&'a str>, RowProblem> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(wrong(key, "a string or null", v)),
    }
}

/// An optional schema-v4 key as its field's value: absent, `null` and `""`
/// are unset, except for the never-null text keys.
fn opt_value(obj: &Map<String, Value>, f: &FieldSpec) -> Result<Option<FieldValue>, RowProblem> {
    let key = f.name;
    Ok(match f.kind {
        FieldKind::Text => opt_str(obj, key)?.map(|s| FieldValue::Text(s.to_string())),
        FieldKind::Time => match opt_str(obj, key)? {
            Some(s) => Some(FieldValue::Time(parse_time(key, s)?)),
            None => None,
        },
        FieldKind::Str => Some(FieldValue::Text(text_never_null(obj, key)?)),
        FieldKind::HostMode => match obj.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => Some(FieldValue::HostMode(
                v.as_str()
                    .ok_or_else(|| wrong(key, "\"exec\", \"interactive\" or null", v))?
                    .parse::<HostMode>()
                    .map_err(|source| RowProblem::UnknownWord { key, source })?,
            )),
        },
        FieldKind::U32 => match obj.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => Some(FieldValue::U32(
                v.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| wrong(key, "an unsigned 32-bit integer or null", v))?,
            )),
        },
        FieldKind::U64 => match obj.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => {
                Some(FieldValue::U64(v.as_u64().ok_or_else(|| {
                    wrong(key, "an unsigned 64-bit integer or null", v)
                })?))
            }
        },
    })
}

fn parse_time(key: &'static str, s: &str) -> Result<Timestamp, RowProblem> {
    Timestamp::parse_rfc3339(s).map_err(|source| RowProblem::BadTime { key, source })
}

/// `short_id` / `project_root`: a string (empty when unset), never null — the
/// Rust reader's `String` field fails on null.
fn text_never_null(obj: &Map<String, Value>, key: &'static str) -> Result<String, RowProblem> {
    match obj.get(key) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(wrong(key, "a string (never null)", v)),
    }
}
