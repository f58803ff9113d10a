//! The rendered schema-v4 file: the same bytes `serde_json` (the Python
//! writer's 2-space layout) writes for the same rows, docs/behaviour.md §5 key order,
//! nulls and omissions, unrepresentable agents left out or refused, and every
//! export accepted by the shared conformance checker.

use crate::support::conformance::checker_accepts_bytes;
use crate::support::fixtures::ROW_KEYS;
use agentlog::export::{render_v4, ExportError, ExportOptions};
use agentlog::model::{Agent, HostMode, Status};
use agentlog::time::Timestamp;
use serde::Serialize;

fn t(s: &str) -> Timestamp {
    Timestamp::parse_rfc3339(s).unwrap()
}

fn full(name: &str) -> Agent {
    let mut a = Agent::new(
        name,
        "claude",
        "/home/dev/\"proj\"\n",
        t("2026-11-20T09:00:00.750Z"),
    );
    a.status = Status::Busy;
    a.log_path = Some("/l/ünï\u{1}.log".into());
    a.claude_short_id = Some("0badf00d".into());
    a.codex_session_id = Some("c".into());
    a.gemini_session_id = Some("g".into());
    a.last_message_at = Some(t("2026-11-20T09:14:02Z"));
    a.mcp_channel_id = Some("m".into());
    a.host_mode = Some(HostMode::Interactive);
    a.claude_session_uuid = Some("u".into());
    a.short_id = "k3x9p2".into();
    a.project_root = "/home/dev/proj".into();
    a.messaging_socket_path = Some("/s.sock".into());
    a.cc_session_id = Some("cc".into());
    a.pid = Some(u32::MAX);
    a.pid_start_time = Some(u64::MAX);
    a.last_reconciled_at = Some(t("2026-11-20T10:00:05Z"));
    a.extra = vec![("spawned_by_session".into(), "\"s\"".into())];
    a
}

fn bare(name: &str) -> Agent {
    Agent::new(name, "codex", "/p", t("2026-11-01T00:00:00Z"))
}

/// An independent reference writer: serde-derived rows with the existing Rust
/// writer's attributes, in docs/behaviour.md §5 key order.
#[derive(Serialize)]
struct Doc<'a> {
    schema_version: u32,
    agents: Vec<Row<'a>>,
}

#[derive(Serialize)]
struct Row<'a> {
    name: &'a str,
    provider: &'a str,
    cwd: &'a str,
    log_path: Option<&'a str>,
    claude_short_id: Option<&'a str>,
    codex_session_id: Option<&'a str>,
    gemini_session_id: Option<&'a str>,
    created_at: String,
    status: &'a str,
    last_message_at: Option<String>,
    mcp_channel_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    host_mode: Option<&'a str>,
    claude_session_uuid: Option<&'a str>,
    #[serde(skip_serializing_if = "str::is_empty")]
    short_id: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    project_root: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    messaging_socket_path: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cc_session_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid_start_time: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_reconciled_at: Option<String>,
}

fn reference(agents: &[Agent]) -> Vec<u8> {
    let rows = agents
        .iter()
        .map(|a| Row {
            name: &a.name,
            provider: &a.provider,
            cwd: &a.cwd,
            log_path: a.log_path.as_deref(),
            claude_short_id: a.claude_short_id.as_deref(),
            codex_session_id: a.codex_session_id.as_deref(),
            gemini_session_id: a.gemini_session_id.as_deref(),
            created_at: a.created_at.to_rfc3339_secs(),
            status: a.status.as_str(),
            last_message_at: a.last_message_at.map(|t| t.to_rfc3339_secs()),
            mcp_channel_id: a.mcp_channel_id.as_deref(),
            host_mode: a.host_mode.map(|h| h.as_str()),
            claude_session_uuid: a.claude_session_uuid.as_deref(),
            short_id: &a.short_id,
            project_root: &a.project_root,
            messaging_socket_path: a.messaging_socket_path.as_deref(),
            cc_session_id: a.cc_session_id.as_deref(),
            pid: a.pid,
            pid_start_time: a.pid_start_time,
            last_reconciled_at: a.last_reconciled_at.map(|t| t.to_rfc3339_secs()),
        })
        .collect();
    let mut out = serde_json::to_vec_pretty(&Doc {
        schema_version: 4,
        agents: rows,
    })
    .unwrap();
    out.push(b'\n');
    out
}

#[test]
fn bytes_equal_the_serde_json_reference_writer() {
    for fleet in [
        vec![],
        vec![bare("a")],
        vec![full("host-a"), bare("b"), full("ü")],
    ] {
        let (bytes, report) = render_v4(
            &fleet,
            &ExportOptions {
                strict: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(report.rows, fleet.len());
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            String::from_utf8(reference(&fleet)).unwrap()
        );
        checker_accepts_bytes(&bytes);
    }
}

#[test]
fn keys_in_spec_order_nulls_and_omissions() {
    let (bytes, _) = render_v4(&[full("f"), bare("b")], &ExportOptions::default()).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let (full_row, bare_row) = text.split_once("\n    },\n").unwrap();
    let keys: Vec<&str> = full_row
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix('"')?
                .split_once("\": ")
                .map(|(k, _)| k)
        })
        .filter(|k| !matches!(*k, "schema_version" | "agents"))
        .collect();
    assert_eq!(keys, ROW_KEYS);
    assert!(
        full_row.contains("\"created_at\": \"2026-11-20T09:00:00Z\""),
        "seconds, floor"
    );
    assert!(full_row.contains("\"pid\": 4294967295"));
    assert!(full_row.contains("\"pid_start_time\": 18446744073709551615"));
    assert!(
        !text.contains("spawned_by"),
        "extra keys are never exported"
    );

    for null_key in [
        "log_path",
        "claude_short_id",
        "codex_session_id",
        "gemini_session_id",
        "last_message_at",
        "mcp_channel_id",
        "claude_session_uuid",
    ] {
        assert!(
            bare_row.contains(&format!("\"{null_key}\": null")),
            "{null_key}"
        );
    }
    for omitted in [
        "host_mode",
        "short_id",
        "project_root",
        "messaging_socket_path",
        "cc_session_id",
        "pid",
        "pid_start_time",
        "last_reconciled_at",
    ] {
        assert!(
            !bare_row.contains(&format!("\"{omitted}\":")),
            "{omitted}: {bare_row}"
        );
    }
}

#[test]
fn empty_text_in_options_is_written_as_empty() {
    let mut a = bare("e");
    a.codex_session_id = Some(String::new());
    a.cc_session_id = Some(String::new());
    let (bytes, _) = render_v4([&a], &ExportOptions::default()).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.contains("\"codex_session_id\": null"));
    assert!(!text.contains("cc_session_id"));
    checker_accepts_bytes(&bytes);
}

fn unrepresentable() -> Vec<(Agent, &'static str)> {
    let mut future = bare("far-future");
    future.created_at = t("9999-12-31T23:59:59Z").add_secs(1);
    let mut ancient = bare("ancient-message");
    ancient.last_message_at = Some(Timestamp::from_millis(-62_135_596_800_001));
    vec![
        (
            Agent::new("oc", "opencode", "/p", t("2026-11-01T00:00:00Z")),
            "provider `opencode`",
        ),
        (bare(""), "empty name"),
        (bare("a"), "duplicate name"),
        (future, "created_at"),
        (ancient, "last_message_at"),
    ]
}

#[test]
fn unrepresentable_agents_are_left_out_and_counted() {
    let bad = unrepresentable();
    let mut fleet = vec![bare("a")];
    fleet.extend(bad.iter().map(|(a, _)| a.clone()));
    fleet.push(full("z"));
    let (bytes, report) = render_v4(&fleet, &ExportOptions::default()).unwrap();
    assert_eq!(report.rows, 2);
    assert_eq!(report.skipped.len(), bad.len());
    for (skipped, (agent, why)) in report.skipped.iter().zip(&bad) {
        assert_eq!(skipped.name, agent.name);
        assert!(skipped.reason.contains(why), "{}: {}", why, skipped.reason);
    }
    // Only the two good rows, and a file every reader accepts.
    assert_eq!(bytes, reference(&[bare("a"), full("z")]));
    checker_accepts_bytes(&bytes);
}

#[test]
fn strict_mode_refuses_naming_the_agent() {
    for (agent, why) in unrepresentable() {
        let fleet = [bare("a"), agent.clone()];
        let err = render_v4(
            &fleet,
            &ExportOptions {
                strict: true,
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(matches!(err, ExportError::Unrepresentable { .. }));
        let msg = err.to_string();
        assert!(msg.contains(&format!("`{}`", agent.name)), "{msg}");
        assert!(msg.contains(why), "{msg}");
    }
    // The default leaves nothing out silently: strict and lenient agree on
    // good input.
    let good = [full("x"), bare("y")];
    assert_eq!(
        render_v4(
            &good,
            &ExportOptions {
                strict: true,
                ..Default::default()
            }
        )
        .unwrap(),
        render_v4(&good, &ExportOptions::default()).unwrap()
    );
}

/// A wild fleet (arbitrary text, colliding and empty names, foreign
/// providers, times far outside the representable years): whatever is
/// written, every reader accepts, and every agent is either a row or skipped.
#[test]
fn a_random_wild_fleet_always_exports_an_accepted_file() {
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let opt_text = || prop::option::of(any::<String>());
    let time = || {
        prop_oneof![any::<i64>(), -62_135_596_800_000i64..253_402_300_800_000]
            .prop_map(Timestamp::from_millis)
    };
    let agent = (
        prop_oneof![any::<String>(), "[ab]?"],
        prop::sample::select(vec!["claude", "codex", "gemini", "opencode", "", "Claude"]),
        any::<String>(),
        time(),
        (prop::option::of(time()), prop::option::of(time())),
        prop::collection::vec(opt_text(), 8),
        (
            any::<String>(),
            any::<String>(),
            any::<Option<u32>>(),
            any::<Option<u64>>(),
        ),
        (
            prop::sample::select(Status::ALL.to_vec()),
            prop::option::of(prop::sample::select(HostMode::ALL.to_vec())),
        ),
    )
        .prop_map(|(name, provider, cwd, created, times, texts, ids, words)| {
            let mut a = Agent::new(&name, provider, &cwd, created);
            (a.last_message_at, a.last_reconciled_at) = times;
            let mut t = texts.into_iter().flatten();
            a.log_path = t.next();
            a.claude_short_id = t.next();
            a.codex_session_id = t.next();
            a.gemini_session_id = t.next();
            a.claude_session_uuid = t.next();
            a.mcp_channel_id = t.next();
            a.messaging_socket_path = t.next();
            a.cc_session_id = t.next();
            (a.short_id, a.project_root, a.pid, a.pid_start_time) = ids;
            (a.status, a.host_mode) = words;
            a
        });
    let mut runner = TestRunner::deterministic();
    let fleet = prop::collection::vec(agent, 300)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    let (bytes, report) = render_v4(&fleet, &ExportOptions::default()).unwrap();
    assert_eq!(report.rows + report.skipped.len(), fleet.len());
    assert!(report.rows > 0 && !report.skipped.is_empty(), "{report:?}");
    checker_accepts_bytes(&bytes);
}
