//! The readers' contract as a check: would every existing reader of the
//! file's schema (the Python one and the Rust one) accept this
//! `registry.json`? Schema 4's contract is `docs/registry-v4.md`'s; schema
//! 16's (`check::v16`, for files of schema 5 to 16) is upstream HEAD's
//! readers' (docs/registry.md). `agentlog check [--schema N] FILE` runs it.
//!
//! Invariants: the check only reads its input; it reports every problem it
//! finds (not just the first), each naming the row (index and name) and the
//! key; an empty list means every reader accepts the file. It is stricter
//! than no reader: where the readers disagree, the stricter one decides.

pub use crate::schemas::Schema;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::fmt;
use std::path::Path;

/// Row keys the readers know, in the Python writer's order.
pub const ROW_KEYS: [&str; 20] = [
    "name",
    "provider",
    "cwd",
    "log_path",
    "claude_short_id",
    "codex_session_id",
    "gemini_session_id",
    "created_at",
    "status",
    "last_message_at",
    "mcp_channel_id",
    "host_mode",
    "claude_session_uuid",
    "short_id",
    "project_root",
    "messaging_socket_path",
    "cc_session_id",
    "pid",
    "pid_start_time",
    "last_reconciled_at",
];

/// A key both readers tolerate although no writer should write it.
pub(crate) const TOLERATED_KEY: &str = "session_id";
const REQUIRED: [&str; 6] = [
    "name",
    "provider",
    "cwd",
    "log_path",
    "created_at",
    "status",
];
const TEXT: [&str; 5] = ["name", "provider", "cwd", "created_at", "status"];
const PROVIDERS: [&str; 3] = ["claude", "codex", "gemini"];
pub(crate) const STATUSES: [&str; 10] = [
    "spawning",
    "ready",
    "idle",
    "busy",
    "live",
    "restarting",
    "orphaned",
    "failed",
    "exited",
    "permanent_dead",
];
const HOST_MODES: [&str; 2] = ["exec", "interactive"];
pub(crate) const NEVER_NULL_TEXT: [&str; 2] = ["short_id", "project_root"];
pub(crate) const OPTIONAL_TEXT: [&str; 10] = [
    "claude_short_id",
    "codex_session_id",
    "gemini_session_id",
    "last_message_at",
    "mcp_channel_id",
    "claude_session_uuid",
    "messaging_socket_path",
    "cc_session_id",
    "last_reconciled_at",
    "log_path",
];

/// One reason a reader would reject the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The row's index under `agents`, when the problem is in a row.
    pub row: Option<usize>,
    /// The row's `name`, when it has a text one.
    pub name: Option<String>,
    /// The key at fault, when there is one.
    pub key: Option<String>,
    pub reason: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(row) = self.row {
            write!(f, "row {row}")?;
            if let Some(name) = &self.name {
                write!(f, " ({name:?})")?;
            }
            f.write_str(": ")?;
        }
        if let Some(key) = &self.key {
            write!(f, "key `{key}`: ")?;
        }
        f.write_str(&self.reason)
    }
}

fn top(key: Option<&str>, reason: impl Into<String>) -> Problem {
    Problem {
        row: None,
        name: None,
        key: key.map(str::to_string),
        reason: reason.into(),
    }
}

/// Checks the file at `path` against `contract` (`None`: the contract of
/// the schema the file declares, 4 for 1..=4, 16 above). `expect_version`
/// additionally requires that exact `schema_version`. Reading errors are
/// the only `Err`.
pub fn check_file_as(
    path: &Path,
    contract: Option<Schema>,
    expect_version: Option<u64>,
) -> std::io::Result<Vec<Problem>> {
    Ok(check_bytes_as(
        &std::fs::read(path)?,
        contract,
        expect_version,
    ))
}

/// [`check_file_as`] with the contract the file's version picks.
pub fn check_file(path: &Path, expect_version: Option<u64>) -> std::io::Result<Vec<Problem>> {
    check_file_as(path, None, expect_version)
}

/// Checks a rendered `registry.json` against the contract its declared
/// version picks; an empty list means every reader of that schema accepts it.
pub fn check_bytes(bytes: &[u8], expect_version: Option<u64>) -> Vec<Problem> {
    check_bytes_as(bytes, None, expect_version)
}

/// Checks a rendered `registry.json` against `contract` (`None`: the one its
/// declared version picks); an empty list means every reader of that schema
/// accepts it.
pub fn check_bytes_as(
    bytes: &[u8],
    contract: Option<Schema>,
    expect_version: Option<u64>,
) -> Vec<Problem> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return vec![top(None, "not UTF-8 text")];
    };
    if text.starts_with('\u{feff}') {
        return vec![top(
            None,
            "starts with a UTF-8 byte-order mark, which the Python reader rejects",
        )];
    }
    let doc: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return vec![top(None, format!("malformed JSON: {e}"))],
    };
    let Value::Object(doc) = doc else {
        return vec![top(None, "the top level is not an object")];
    };
    let mut problems = Vec::new();
    let version = doc.get("schema_version");
    let version_num = version.and_then(Value::as_u64);
    let contract = contract.unwrap_or(match version_num {
        Some(5..) => Schema::V16,
        _ => Schema::V4,
    });
    let newest = u64::from(contract.version());
    if !version_num.is_some_and(|v| (1..=newest).contains(&v)) {
        problems.push(top(
            Some("schema_version"),
            format!("{} is not an integer in 1..{newest}", shown(version)),
        ));
    }
    if let Some(want) = expect_version.filter(|&w| version_num != Some(w)) {
        problems.push(top(
            Some("schema_version"),
            format!("{}, expected {want}", shown(version)),
        ));
    }
    if doc.get("agents").is_some() && doc.get("entries").is_some() {
        problems.push(top(
            Some("entries"),
            "present beside `agents`: readers disagree on which holds the rows \
             (the Rust reader also reads `entries`)",
        ));
    }
    let Some(rows) = doc.get("agents") else {
        problems.push(top(
            Some("agents"),
            "missing (the Python reader reads rows only from `agents`)",
        ));
        return problems;
    };
    let Value::Array(rows) = rows else {
        problems.push(top(Some("agents"), "not a list"));
        return problems;
    };
    let mut names = HashSet::new();
    for (i, row) in rows.iter().enumerate() {
        match contract {
            Schema::V4 => check_row(i, row, &mut names, &mut problems),
            Schema::V16 => {
                let v = version_num.unwrap_or(u64::from(crate::schemas::LATEST));
                v16::check_row(i, row, v, &mut names, &mut problems)
            }
        }
    }
    problems
}

mod v16;

pub(crate) fn shown(v: Option<&Value>) -> String {
    v.map_or_else(|| "absent".to_string(), Value::to_string)
}

fn check_row<'a>(
    i: usize,
    row: &'a Value,
    names: &mut HashSet<&'a str>,
    problems: &mut Vec<Problem>,
) {
    let Value::Object(row) = row else {
        problems.push(Problem {
            row: Some(i),
            name: None,
            key: None,
            reason: "not an object".into(),
        });
        return;
    };
    let name = row.get("name").and_then(Value::as_str);
    let mut bad = |key: &str, reason: String| {
        problems.push(Problem {
            row: Some(i),
            name: name.map(str::to_string),
            key: Some(key.to_string()),
            reason,
        })
    };
    for key in row.keys() {
        if !ROW_KEYS.contains(&key.as_str()) && key != TOLERATED_KEY {
            bad(key, "unknown key (the Python reader fails on it)".into());
        }
    }
    for key in REQUIRED.iter().filter(|k| !row.contains_key(**k)) {
        bad(key, "required key missing".into());
    }
    for key in TEXT {
        if row.get(key).is_some_and(|v| !v.is_string()) {
            bad(key, "not a string".into());
        }
    }
    if let Some(n) = name {
        if n.is_empty() {
            bad("name", "empty".into());
        }
        if !names.insert(n) {
            bad("name", "duplicate (an earlier row has it)".into());
        }
    }
    one_of(row, "provider", &PROVIDERS, false, &mut bad);
    one_of(row, "status", &STATUSES, false, &mut bad);
    one_of(row, "host_mode", &HOST_MODES, true, &mut bad);
    if let Some(t) = row.get("created_at").and_then(Value::as_str) {
        if !is_iso_time(t) {
            bad("created_at", format!("{t:?} is not an ISO-8601 time"));
        }
    }
    for key in NEVER_NULL_TEXT {
        if row.get(key).is_some_and(|v| !v.is_string()) {
            bad(key, "must be a string (never null)".into());
        }
    }
    for key in OPTIONAL_TEXT {
        if row.get(key).is_some_and(|v| !v.is_string() && !v.is_null()) {
            bad(key, "must be a string or null".into());
        }
    }
    if let Some(pid) = row.get("pid").filter(|v| !v.is_null()) {
        if pid.as_u64().is_none_or(|p| p > u64::from(u32::MAX)) {
            bad("pid", format!("{pid} is not an unsigned 32-bit integer"));
        }
    }
    if let Some(start) = row.get("pid_start_time").filter(|v| !v.is_null()) {
        if start.as_u64().is_none() {
            bad(
                "pid_start_time",
                format!("{start} is not an unsigned 64-bit integer"),
            );
        }
    }
}

/// `key`, when present (and, if `null_ok`, not null), must be one of `allowed`.
pub(crate) fn one_of(
    row: &Map<String, Value>,
    key: &str,
    allowed: &[&str],
    null_ok: bool,
    bad: &mut impl FnMut(&str, String),
) {
    match row.get(key) {
        None => {}
        Some(Value::Null) if null_ok => {}
        Some(Value::String(s)) if allowed.contains(&s.as_str()) => {}
        Some(v) => bad(key, format!("{v} is not one of {}", allowed.join(", "))),
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, digits where digits go: the
/// shape both readers parse.
pub(crate) fn is_iso_time(t: &str) -> bool {
    let b = t.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    let shape = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    // Both readers refuse impossible dates and times (month 91, 25:00).
    let num = |r: std::ops::Range<usize>| t[r].parse::<i64>().unwrap_or(-1);
    if !shape
        || !(1..=12).contains(&num(5..7))
        || !(1..=crate::time::days_in_month(num(0..4), num(5..7))).contains(&num(8..10))
        || num(11..13) > 23
        || num(14..16) > 59
        || num(17..19) > 59
    {
        return false;
    }
    let mut rest = &b[19..];
    if rest.first() == Some(&b'.') {
        let n = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &rest[1 + n..];
    }
    match rest {
        b"Z" => true,
        [sign, h1, h2, b':', m1, m2] => {
            matches!(sign, b'+' | b'-') && [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit())
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_time_shapes() {
        for ok in [
            "2026-11-30T12:00:00Z",
            "2026-11-30T12:00:00.123Z",
            "2026-11-30T12:00:00+02:00",
            "2026-11-30T12:00:00.5-07:30",
            "2024-02-29T23:59:59Z",
        ] {
            assert!(is_iso_time(ok), "{ok}");
        }
        for bad in [
            "2026-11-30 12:00:00Z",
            "2026-11-30T12:00:00",
            "2026-11-30T12:00:00.Z",
            "2026-11-30T12:00:00+0200",
            "26-11-30T12:00:00Z",
            "2026-11-30T12:00:00Zx",
            "2026-91-20T09:00:00Z",
            "2026-02-29T09:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T12:60:00Z",
            "",
        ] {
            assert!(!is_iso_time(bad), "{bad}");
        }
    }

    #[test]
    fn names_row_and_key() {
        let doc = br#"{"schema_version": 4, "agents": [
            {"name": "a", "provider": "claude", "cwd": "/", "log_path": null,
             "created_at": "2026-01-01T00:00:00Z", "status": "live", "pid": -1, "extra": 1}]}"#;
        let p = check_bytes(doc, Some(4));
        let shown: Vec<String> = p.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "row 0 (\"a\"): key `extra`: unknown key (the Python reader fails on it)",
                "row 0 (\"a\"): key `pid`: -1 is not an unsigned 32-bit integer",
            ]
        );
    }
}
