//! Schema-v4 `registry.json` export: render the registry as existing readers
//! expect it (docs/behaviour.md §5) and publish it atomically under both writers' locks.
//!
//! Invariants:
//! - A rendered file is always one every existing reader accepts: rows carry
//!   exactly the 20 known keys in the Python writer's order, with the nulls and
//!   omissions of the existing writers; an agent that cannot be represented
//!   (provider outside claude/codex/gemini, empty or duplicate name, a time
//!   outside years 1..=9999) is left out with a warning, or refused in strict
//!   mode. `extra` keys from imports are never written.
//! - Rendering is hand-written JSON into one `Vec` (no per-row allocation):
//!   it runs on every snapshot, and must stay within 2× of `serde_json`.
//! - Publishing takes `<registry.json>.lock` then `<dir>/locks/_registry.lock`
//!   (always that order, each wait bounded), then publishes through
//!   `files::publish_atomic` (unpredictable `O_EXCL` temp name, fsync, rename,
//!   folder fsync), so a reader sees the old file or the new one, never a
//!   partial one. A `registry.json` that is a symbolic link is refused with
//!   an error naming it (a link may be planted in a shared folder); a folder
//!   is refused before any lock file is made.

use crate::fslock::{FileLock, LockError, LockMode};
use crate::model::{Agent, EXPORTABLE_PROVIDERS};
use crate::time::Timestamp;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The schema version every export declares.
pub const SCHEMA_VERSION: u32 = 4;

/// How to treat agents an existing reader could not accept.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Refuse the whole export instead of leaving such agents out.
    pub strict: bool,
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
    /// Rows written.
    pub rows: usize,
    /// Agents left out (always empty in strict mode: those are errors).
    pub skipped: Vec<SkippedAgent>,
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
    #[error("agent `{name}` cannot be written to schema-v4 registry.json: {reason}")]
    Unrepresentable { name: String, reason: String },
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    Publish(#[from] crate::files::PublishError),
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = ExportError> = std::result::Result<T, E>;

/// Renders `agents` as a schema-v4 `registry.json` (2-space indented, rows in
/// the given order, trailing newline).
pub fn render_v4<'a>(
    agents: impl IntoIterator<Item = &'a Agent>,
    opts: &ExportOptions,
) -> Result<(Vec<u8>, ExportReport)> {
    let agents = agents.into_iter();
    // ~650 bytes is a typical fully populated row; a guess only saves regrowth.
    let mut buf = Vec::with_capacity(64 + agents.size_hint().0 * 650);
    let mut report = ExportReport::default();
    let mut seen: HashSet<&'a str> = HashSet::with_capacity(agents.size_hint().0);
    let mut scratch = String::with_capacity(24);

    buf.extend_from_slice(b"{\n  \"schema_version\": 4,\n  \"agents\": [");
    for agent in agents {
        if let Some(reason) = unrepresentable(agent, &seen) {
            if opts.strict {
                return Err(ExportError::Unrepresentable {
                    name: agent.name.clone(),
                    reason,
                });
            }
            tracing::warn!(agent = %agent.name, %reason, "agent left out of the registry.json export");
            report.skipped.push(SkippedAgent {
                name: agent.name.clone(),
                reason,
            });
            continue;
        }
        seen.insert(agent.name.as_str());
        buf.extend_from_slice(if report.rows == 0 { b"\n" } else { b",\n" });
        write_row(&mut buf, agent, &mut scratch);
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

/// Why an existing reader would reject `agent`'s row, if it would.
fn unrepresentable(agent: &Agent, seen: &HashSet<&str>) -> Option<String> {
    if !EXPORTABLE_PROVIDERS.contains(&agent.provider.as_str()) {
        return Some(format!(
            "provider `{}` is not one of claude, codex, gemini",
            agent.provider
        ));
    }
    if agent.name.is_empty() {
        return Some("empty name".to_string());
    }
    if seen.contains(agent.name.as_str()) {
        return Some("duplicate name (an earlier row already has it)".to_string());
    }
    let times = [
        ("created_at", Some(agent.created_at)),
        ("last_message_at", agent.last_message_at),
        ("last_reconciled_at", agent.last_reconciled_at),
    ];
    for (key, t) in times {
        if let Some(t) = t.filter(|t| !time_ok(*t)) {
            return Some(format!(
                "{key} ({} ms since the epoch) is outside years 1..=9999",
                t.as_millis()
            ));
        }
    }
    None
}

macro_rules! key {
    ($name:literal) => {
        concat!(",\n      \"", $name, "\": ").as_bytes()
    };
}

fn write_row(buf: &mut Vec<u8>, a: &Agent, scratch: &mut String) {
    buf.extend_from_slice(b"    {\n      \"name\": ");
    push_str(buf, &a.name);
    buf.extend_from_slice(key!("provider"));
    push_str(buf, &a.provider);
    buf.extend_from_slice(key!("cwd"));
    push_str(buf, &a.cwd);
    buf.extend_from_slice(key!("log_path"));
    push_opt_str(buf, a.log_path.as_deref());
    buf.extend_from_slice(key!("claude_short_id"));
    push_opt_str(buf, a.claude_short_id.as_deref());
    buf.extend_from_slice(key!("codex_session_id"));
    push_opt_str(buf, a.codex_session_id.as_deref());
    buf.extend_from_slice(key!("gemini_session_id"));
    push_opt_str(buf, a.gemini_session_id.as_deref());
    buf.extend_from_slice(key!("created_at"));
    push_time(buf, a.created_at, scratch);
    buf.extend_from_slice(key!("status"));
    buf.push(b'"');
    buf.extend_from_slice(a.status.as_str().as_bytes());
    buf.push(b'"');
    buf.extend_from_slice(key!("last_message_at"));
    match a.last_message_at {
        Some(t) => push_time(buf, t, scratch),
        None => buf.extend_from_slice(b"null"),
    }
    buf.extend_from_slice(key!("mcp_channel_id"));
    push_opt_str(buf, a.mcp_channel_id.as_deref());
    if let Some(mode) = a.host_mode {
        buf.extend_from_slice(key!("host_mode"));
        buf.push(b'"');
        buf.extend_from_slice(mode.as_str().as_bytes());
        buf.push(b'"');
    }
    buf.extend_from_slice(key!("claude_session_uuid"));
    push_opt_str(buf, a.claude_session_uuid.as_deref());
    if !a.short_id.is_empty() {
        buf.extend_from_slice(key!("short_id"));
        push_str(buf, &a.short_id);
    }
    if !a.project_root.is_empty() {
        buf.extend_from_slice(key!("project_root"));
        push_str(buf, &a.project_root);
    }
    if let Some(s) = non_empty(a.messaging_socket_path.as_deref()) {
        buf.extend_from_slice(key!("messaging_socket_path"));
        push_str(buf, s);
    }
    if let Some(s) = non_empty(a.cc_session_id.as_deref()) {
        buf.extend_from_slice(key!("cc_session_id"));
        push_str(buf, s);
    }
    if let Some(pid) = a.pid {
        buf.extend_from_slice(key!("pid"));
        push_u64(buf, u64::from(pid));
    }
    if let Some(start) = a.pid_start_time {
        buf.extend_from_slice(key!("pid_start_time"));
        push_u64(buf, start);
    }
    if let Some(t) = a.last_reconciled_at {
        buf.extend_from_slice(key!("last_reconciled_at"));
        push_time(buf, t, scratch);
    }
    buf.extend_from_slice(b"\n    }");
}

/// `Some("")` counts as empty, like `None`: the readers see no difference.
fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

fn push_opt_str(buf: &mut Vec<u8>, s: Option<&str>) {
    match non_empty(s) {
        Some(s) => push_str(buf, s),
        None => buf.extend_from_slice(b"null"),
    }
}

fn push_time(buf: &mut Vec<u8>, t: Timestamp, scratch: &mut String) {
    scratch.clear();
    t.write_rfc3339_secs(scratch);
    buf.push(b'"');
    buf.extend_from_slice(scratch.as_bytes());
    buf.push(b'"');
}

fn push_u64(buf: &mut Vec<u8>, mut n: u64) {
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
fn push_str(buf: &mut Vec<u8>, s: &str) {
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
/// symbolic link (see [`crate::files::publish_atomic`]), is refused before any
/// lock file is created.
pub fn publish_with(path: &Path, bytes: &[u8], opts: &PublishOptions) -> Result<()> {
    let dir = parent_dir(path);
    let not_a_file = |why: &str| ExportError::Io {
        op: "publish to",
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_string()),
    };
    if path.file_name().is_none() || path.is_dir() {
        return Err(not_a_file("it is a folder, not a file name"));
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(crate::files::PublishError::Symlink(path.to_path_buf()).into());
    }
    std::fs::create_dir_all(dir).map_err(|source| ExportError::Io {
        op: "create folder",
        path: dir.to_path_buf(),
        source,
    })?;
    let (sidecar, python_lock) = lock_paths(path);
    let start = Instant::now();
    let _rust_guard = FileLock::acquire(&sidecar, LockMode::Exclusive, opts.lock_timeout)?;
    let left = opts.lock_timeout.saturating_sub(start.elapsed());
    let _python_guard = FileLock::acquire(&python_lock, LockMode::Exclusive, left)?;
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
    let (bytes, report) = render_v4(agents, opts)?;
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
