//! `registry.json` export: render the registry as existing readers expect it
//! (docs/behaviour.md §5), as schema 4 (the default) or schema 16
//! (`export::v16`), and publish it atomically under both writers' locks.
//!
//! Invariants:
//! - A rendered file is always one every reader of its schema accepts: a
//!   schema-4 row carries exactly the 20 known keys in the Python writer's
//!   order, with the nulls and omissions of the existing writers; an agent
//!   that cannot be represented (provider outside claude/codex/gemini for
//!   4, not an identity token for 16, empty or duplicate name, a time outside
//!   years 1..=9999) is left out with a warning, or refused in strict mode.
//!   `extra` keys are written only where the schema has them; a row written
//!   without some is named in the report's `lossy` list.
//! - Rendering is hand-written JSON into one `Vec` (no per-row allocation):
//!   it runs on every snapshot, and must stay within 2× of `serde_json`.
//!   The keys are `check::ROW_KEYS` in order; each descriptive key is written
//!   by the field table (`model::fields`), which says whether it is `null`
//!   or left out when empty, so no field is spelled out here.
//! - Publishing takes `<registry.json>.lock` then `<dir>/locks/_registry.lock`
//!   (always that order, each wait bounded), then publishes through
//!   `files::publish_atomic` (unpredictable `O_EXCL` temp name, fsync, rename,
//!   folder fsync), so a reader sees the old file or the new one, never a
//!   partial one. A `registry.json` that is a symbolic link is refused with
//!   an error naming it (a link may be planted in a shared folder); a folder
//!   is refused before any lock file is made.

use crate::check::ROW_KEYS;
use crate::files::IoError;
use crate::fslock::{FileLock, LockError, LockMode};
use crate::model::fields::{field, FieldKind, FieldRef, FieldSpec, V4Key, AGENT_FIELDS};
use crate::model::{Agent, EXPORTABLE_PROVIDERS};
pub use crate::schemas::Schema;

mod v16;
use crate::time::Timestamp;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The schema version an export declares by default.
pub const SCHEMA_VERSION: u32 = 4;

/// How to treat agents an existing reader could not accept.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Refuse the whole export instead of leaving such agents out.
    pub strict: bool,
    /// The schema written (default 4).
    pub schema: Schema,
}

/// An agent written without some of the keys the log holds for it, because
/// the chosen schema has no place for them (they stay in the log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LossyAgent {
    pub name: String,
    pub keys: Vec<String>,
}

/// An agent left out of an export, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedAgent {
    pub name: String,
    pub reason: String,
}

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// The schema_version written.
    pub schema: u32,
    /// Rows written.
    pub rows: usize,
    /// Agents left out (always empty in strict mode: those are errors).
    pub skipped: Vec<SkippedAgent>,
    /// Agents written without some of their keys (see [`LossyAgent`]).
    pub lossy: Vec<LossyAgent>,
}

/// Options of [`publish_with`].
#[derive(Debug, Clone)]
pub struct PublishOptions {
    /// Longest total wait for the two locks.
    pub lock_timeout: Duration,
}

impl Default for PublishOptions {
    fn default() -> Self {
        PublishOptions {
            lock_timeout: Duration::from_secs(10),
        }
    }
}

/// Why an export failed. Nothing is replaced when any of these is returned.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("agent `{name}` cannot be written to schema-{schema} registry.json: {reason}")]
    Unrepresentable {
        name: String,
        schema: u32,
        reason: String,
    },
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Publish(#[from] crate::files::PublishError),
    #[error(transparent)]
    Io(#[from] IoError),
}

pub type Result<T, E = ExportError> = std::result::Result<T, E>;

/// Renders `agents` as a schema-v4 `registry.json` (2-space indented, rows in
/// the given order, trailing newline), whatever `opts.schema` says.
pub fn render_v4<'a>(
    agents: impl IntoIterator<Item = &'a Agent>,
    opts: &ExportOptions,
) -> Result<(Vec<u8>, ExportReport)> {
    let opts = ExportOptions {
        schema: Schema::V4,
        ..opts.clone()
    };
    render(agents, &opts)
}

/// Renders `agents` as a `registry.json` of `opts.schema` (2-space
/// indented, rows in the given order, trailing newline).
pub fn render<'a>(
    agents: impl IntoIterator<Item = &'a Agent>,
    opts: &ExportOptions,
) -> Result<(Vec<u8>, ExportReport)> {
    let agents = agents.into_iter();
    // ~650 bytes is a typical fully populated row; a guess only saves regrowth.
    let mut buf = Vec::with_capacity(64 + agents.size_hint().0 * 650);
    let mut report = ExportReport::default();
    let mut seen: HashSet<&'a str> = HashSet::with_capacity(agents.size_hint().0);
    let mut scratch = String::with_capacity(24);
    let columns = columns();
    let schema = opts.schema;
    report.schema = schema.version();

    buf.extend_from_slice(b"{\n  \"schema_version\": ");
    push_u64(&mut buf, u64::from(schema.version()));
    buf.extend_from_slice(b",\n  \"agents\": [");
    for agent in agents {
        if let Some(reason) = unrepresentable(agent, &seen, schema) {
            if opts.strict {
                return Err(ExportError::Unrepresentable {
                    name: agent.name.clone(),
                    schema: schema.version(),
                    reason,
                });
            }
            tracing::warn!(agent = %agent.name, schema = schema.version(), %reason, "agent left out of the registry.json export");
            report.skipped.push(SkippedAgent {
                name: agent.name.clone(),
                reason,
            });
            continue;
        }
        seen.insert(agent.name.as_str());
        buf.extend_from_slice(if report.rows == 0 { b"\n" } else { b",\n" });
        match schema {
            Schema::V4 => write_row(&mut buf, agent, &columns, &mut scratch),
            Schema::V16 => v16::write_row(&mut buf, agent, &mut scratch),
        }
        if !agent.extra.is_empty() {
            let keys = v16::unwritten_extras(agent, schema);
            if !keys.is_empty() {
                report.lossy.push(LossyAgent {
                    name: agent.name.clone(),
                    keys,
                });
            }
        }
        report.rows += 1;
    }
    buf.extend_from_slice(if report.rows == 0 {
        b"]\n}\n"
    } else {
        b"\n  ]\n}\n"
    });
    Ok((buf, report))
}

/// First and last instants whose `YYYY-MM-DDTHH:MM:SSZ` form has a four-digit
/// year an existing reader can parse (0001-01-01 .. 9999-12-31).
const MIN_TIME_MS: i64 = -62_135_596_800_000;
const MAX_TIME_MS: i64 = 253_402_300_799_999;

fn time_ok(t: Timestamp) -> bool {
    (MIN_TIME_MS..=MAX_TIME_MS).contains(&t.as_millis())
}

/// Why an existing reader of `schema` would reject `agent`'s row, if it would.
fn unrepresentable(agent: &Agent, seen: &HashSet<&str>, schema: Schema) -> Option<String> {
    match schema {
        Schema::V4 if !EXPORTABLE_PROVIDERS.contains(&agent.provider.as_str()) => {
            return Some(format!(
                "provider `{}` is not one of claude, codex, gemini",
                agent.provider
            ));
        }
        Schema::V16 if !crate::schemas::is_identity_token(&agent.provider) => {
            return Some(format!(
                "harness `{}` is not an identity token (a non-empty lowercase word)",
                agent.provider
            ));
        }
        _ => {}
    }
    if agent.name.is_empty() {
        return Some("empty name".to_string());
    }
    if seen.contains(agent.name.as_str()) {
        return Some("duplicate name (an earlier row already has it)".to_string());
    }
    let created = std::iter::once(("created_at", Some(agent.created_at)));
    let exported_times = AGENT_FIELDS
        .iter()
        .filter(|f| f.kind == FieldKind::Time && f.v4 != V4Key::None)
        .map(|f| match f.get(agent) {
            Some(FieldRef::Time(t)) => (f.name, Some(t)),
            _ => (f.name, None),
        });
    for (key, t) in created.chain(exported_times) {
        if let Some(t) = t.filter(|t| !time_ok(*t)) {
            return Some(format!(
                "{key} ({} ms since the epoch) is outside years 1..=9999",
                t.as_millis()
            ));
        }
    }
    None
}

/// One key of an exported row: a row field, or a descriptive field from
/// the field table.
#[derive(Clone, Copy)]
enum Column {
    CreatedAt,
    Status,
    Field(&'static FieldSpec),
}

/// The row's keys in the Python writer's order ([`ROW_KEYS`]), each with
/// what writes it.
fn columns() -> Vec<(&'static str, Column)> {
    ROW_KEYS
        .iter()
        .filter_map(|&key| match key {
            "created_at" => Some((key, Column::CreatedAt)),
            "status" => Some((key, Column::Status)),
            _ => field(key)
                .filter(|f| f.v4 != V4Key::None)
                .map(|f| (key, Column::Field(f))),
        })
        .collect()
}

fn write_row(
    buf: &mut Vec<u8>,
    a: &Agent,
    columns: &[(&'static str, Column)],
    scratch: &mut String,
) {
    buf.extend_from_slice(b"    {");
    let mut first = true;
    for &(key, column) in columns {
        let (rule, value) = match column {
            Column::CreatedAt => (V4Key::Required, Some(FieldRef::Time(a.created_at))),
            Column::Status => (V4Key::Required, Some(FieldRef::Text(a.status.as_str()))),
            Column::Field(f) => (f.v4, f.get(a).or_else(|| derived_v4(a, f.name))),
        };
        // `Some("")` counts as empty, like `None`: the readers see no difference.
        let value = match (rule, value) {
            (V4Key::Required, v) => v,
            (_, Some(FieldRef::Text(""))) | (_, None) if rule == V4Key::OmitWhenEmpty => continue,
            (_, Some(FieldRef::Text(""))) => None,
            (_, v) => v,
        };
        buf.extend_from_slice(if first { b"\n      \"" } else { b",\n      \"" });
        first = false;
        buf.extend_from_slice(key.as_bytes());
        buf.extend_from_slice(b"\": ");
        match value {
            None => buf.extend_from_slice(b"null"),
            Some(FieldRef::Text(s)) => push_str(buf, s),
            Some(FieldRef::U32(n)) => push_u64(buf, u64::from(n)),
            Some(FieldRef::U64(n)) => push_u64(buf, n),
            Some(FieldRef::HostMode(mode)) => push_str(buf, mode.as_str()),
            Some(FieldRef::Time(t)) => push_time(buf, t, scratch),
        }
    }
    buf.extend_from_slice(b"\n    }");
}

/// A schema-4 legacy session key a row imported from schema 10 or later
/// lacks: the row's `harness_session_id`, under its harness's legacy key
/// (the reverse of upstream's schema-10 migration).
fn derived_v4<'a>(a: &'a Agent, key: &str) -> Option<FieldRef<'a>> {
    if crate::schemas::legacy_session_key(&a.provider) != Some(key) {
        return None;
    }
    let text = crate::schemas::extra(a, "harness_session_id")?;
    // The extra is a JSON string literal; only a plain one is borrowed.
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\') && !inner.is_empty()).then_some(FieldRef::Text(inner))
}

pub(crate) fn push_time(buf: &mut Vec<u8>, t: Timestamp, scratch: &mut String) {
    scratch.clear();
    t.write_rfc3339_secs(scratch);
    buf.push(b'"');
    buf.extend_from_slice(scratch.as_bytes());
    buf.push(b'"');
}

pub(crate) fn push_u64(buf: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

/// 0 = copy as is; otherwise the character after the backslash (`u` = `\u00XX`).
/// Same escapes as `serde_json` (and RFC 8259's minimum): `"`, `\`, and C0.
const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Appends `s` as a JSON string literal. Runs of plain bytes (including all
/// multi-byte UTF-8, whose bytes are ≥ 0x80) are copied in one go.
pub(crate) fn push_str(buf: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    buf.push(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc = ESCAPE[b as usize];
        if esc == 0 {
            continue;
        }
        buf.extend_from_slice(&bytes[start..i]);
        if esc == b'u' {
            buf.extend_from_slice(b"\\u00");
            buf.push(HEX[usize::from(b >> 4)]);
            buf.push(HEX[usize::from(b & 0xf)]);
        } else {
            buf.push(b'\\');
            buf.push(esc);
        }
        start = i + 1;
    }
    buf.extend_from_slice(&bytes[start..]);
    buf.push(b'"');
}

/// The two lock files publishing `path` takes, in the order it takes them:
/// `<path>.lock` (the Rust writer's) and `<dir>/locks/_registry.lock` (the
/// Python writer's).
pub fn lock_paths(path: &Path) -> (PathBuf, PathBuf) {
    let mut sidecar = path.as_os_str().to_os_string();
    sidecar.push(".lock");
    (
        PathBuf::from(sidecar),
        parent_dir(path).join("locks").join("_registry.lock"),
    )
}

use crate::files::parent_dir;

/// [`publish_with`] with default options (10 s lock timeout).
pub fn publish(path: &Path, bytes: &[u8]) -> Result<()> {
    publish_with(path, bytes, &PublishOptions::default())
}

/// Atomically replaces `path` with `bytes` while holding both registry locks.
/// On error the previous file is untouched. A `path` that is a folder, or a
/// symbolic link (see `files::publish_atomic`), is refused before any
/// lock file is created.
pub fn publish_with(path: &Path, bytes: &[u8], opts: &PublishOptions) -> Result<()> {
    let _locks = lock_registry(path, opts.lock_timeout)?;
    publish_locked(path, bytes)
}

/// Both writers' locks on a `registry.json`, held until dropped.
#[derive(Debug)]
pub struct RegistryLocks {
    _rust: FileLock,
    _python: FileLock,
}

/// Takes `<path>.lock` then `<dir>/locks/_registry.lock` (always that
/// order), waiting at most `timeout` in all. A `path` that is a folder, or
/// a symbolic link, is refused before any lock file is created.
pub fn lock_registry(path: &Path, timeout: Duration) -> Result<RegistryLocks> {
    let dir = parent_dir(path);
    let not_a_file = |why: &str| {
        let why = std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_string());
        ExportError::from(IoError::doing("publish to", path)(why))
    };
    if path.file_name().is_none() || path.is_dir() {
        return Err(not_a_file("it is a folder, not a file name"));
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(crate::files::PublishError::Symlink(path.to_path_buf()).into());
    }
    std::fs::create_dir_all(dir).map_err(IoError::doing("create folder", dir))?;
    let (sidecar, python_lock) = lock_paths(path);
    let start = Instant::now();
    let rust = FileLock::acquire(&sidecar, LockMode::Exclusive, timeout)?;
    let left = timeout.saturating_sub(start.elapsed());
    let python = FileLock::acquire(&python_lock, LockMode::Exclusive, left)?;
    Ok(RegistryLocks {
        _rust: rust,
        _python: python,
    })
}

/// Atomically replaces `path` with `bytes`; the caller holds
/// [`lock_registry`]'s locks.
pub fn publish_locked(path: &Path, bytes: &[u8]) -> Result<()> {
    // Readable like the Python writer's file (less the umask).
    crate::files::publish_atomic(path, bytes, 0o644, || Ok(()))?;
    Ok(())
}

/// Renders `agents` and publishes the file at `path`: the one call the store
/// and the CLI need.
pub fn export_to<'a>(
    path: &Path,
    agents: impl IntoIterator<Item = &'a Agent>,
    opts: &ExportOptions,
    publish_opts: &PublishOptions,
) -> Result<ExportReport> {
    let (bytes, report) = render(agents, opts)?;
    publish_with(path, &bytes, publish_opts)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_serde_json() {
        for s in [
            "plain",
            "q\"b\\s",
            "ctl\u{0}\u{1f}\u{7f}\n\t\r\u{8}\u{c}",
            "ünï ☃ 𝄞",
            "",
        ] {
            let mut buf = Vec::new();
            push_str(&mut buf, s);
            assert_eq!(buf, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
        for n in [0u64, 7, 10, 4_294_967_295, u64::MAX] {
            let mut buf = Vec::new();
            push_u64(&mut buf, n);
            assert_eq!(buf, n.to_string().as_bytes());
        }
    }
}
