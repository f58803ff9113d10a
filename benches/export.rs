//! Export speed: `render_v4` of 10,000 agents against `serde_json` writing the
//! same rows (target: within 2×). Two baselines: serde-derived rows built from
//! the agents inside the timed loop (the same work the export does), and the
//! pure serialisation of rows prepared beforehand (the harder baseline).
//!
//! A second group measures snapshot files of a registry `State` holding the
//! same 10,000 agents: `snapshot::write` (encode + fsync + rename) and
//! `snapshot::load_newest` (read + crc + decode).
//!
//! `cargo bench --bench export`

use agentlog::export::{render_v4, ExportOptions};
use agentlog::internals::snapshot;
use agentlog::model::{Agent, HostMode, Status};
use agentlog::registry::{Event, EventKind, State};
use agentlog::time::Timestamp;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use serde::Serialize;
use std::time::Duration;

fn fleet(n: usize) -> Vec<Agent> {
    (0..n)
        .map(|i| {
            let mut a = Agent::new(
                &format!("worker-{i:05}"),
                ["claude", "codex", "gemini"][i % 3],
                "/home/dev/projects/agentlog",
                Timestamp::from_secs(1_790_000_000 + i as i64),
            );
            a.status = Status::ALL[i % Status::ALL.len()];
            a.log_path = Some(format!(
                "/home/dev/.fno/agents/worker-{i:05}/timeline.jsonl"
            ));
            a.claude_session_uuid = Some(format!("5f0c2d1e-8a7b-4c6d-9e0f-{i:012x}"));
            a.codex_session_id = (i % 3 == 1).then(|| format!("019e7157-aaaa-bbbb-cccc-{i:012}"));
            a.last_message_at = Some(Timestamp::from_secs(1_790_000_500 + i as i64));
            if i % 2 == 0 {
                a.host_mode = Some(HostMode::Interactive);
                a.short_id = format!("k{i:05}");
                a.project_root = "/home/dev/projects/agentlog".into();
                a.messaging_socket_path =
                    Some(format!("/home/dev/.fno/agents/k{i:05}/worker.sock"));
                a.pid = Some(40_000 + i as u32);
                a.pid_start_time = Some(987_654_321 + i as u64);
                a.last_reconciled_at = Some(Timestamp::from_secs(1_790_001_000 + i as i64));
            }
            a
        })
        .collect()
}

#[derive(Serialize)]
struct Doc<R> {
    schema_version: u32,
    agents: Vec<R>,
}

/// The schema-v4 row as a serde struct with the existing Rust writer's attributes.
#[derive(Serialize)]
struct Row<S: AsRef<str> + Serialize> {
    name: S,
    provider: S,
    cwd: S,
    log_path: Option<S>,
    claude_short_id: Option<S>,
    codex_session_id: Option<S>,
    gemini_session_id: Option<S>,
    created_at: String,
    status: &'static str,
    last_message_at: Option<String>,
    mcp_channel_id: Option<S>,
    #[serde(skip_serializing_if = "Option::is_none")]
    host_mode: Option<&'static str>,
    claude_session_uuid: Option<S>,
    #[serde(skip_serializing_if = "is_empty")]
    short_id: S,
    #[serde(skip_serializing_if = "is_empty")]
    project_root: S,
    #[serde(skip_serializing_if = "Option::is_none")]
    messaging_socket_path: Option<S>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cc_session_id: Option<S>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid_start_time: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_reconciled_at: Option<String>,
}

fn is_empty<S: AsRef<str>>(s: &S) -> bool {
    s.as_ref().is_empty()
}

fn row(a: &Agent) -> Row<&str> {
    Row {
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
    }
}

fn bench_export(c: &mut Criterion) {
    let agents = fleet(10_000);
    let (bytes, report) = render_v4(
        &agents,
        &ExportOptions {
            strict: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(report.rows, agents.len());
    // The baseline writes the very same bytes (minus our trailing newline).
    let doc = Doc {
        schema_version: 4,
        agents: agents.iter().map(row).collect(),
    };
    let reference = serde_json::to_vec_pretty(&doc).unwrap();
    assert_eq!(&bytes[..bytes.len() - 1], &reference[..]);

    let mut g = c.benchmark_group("export_10k_agents");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.sample_size(30).measurement_time(Duration::from_secs(4));
    g.bench_function("agentlog_render_v4", |b| {
        b.iter(|| render_v4(black_box(&agents), &ExportOptions::default()).unwrap())
    });
    g.bench_function("serde_json_rows_from_agents", |b| {
        b.iter(|| {
            let doc = Doc {
                schema_version: 4,
                agents: black_box(&agents).iter().map(row).collect(),
            };
            serde_json::to_vec_pretty(&doc).unwrap()
        })
    });
    g.bench_function("serde_json_prebuilt_rows", |b| {
        b.iter(|| serde_json::to_vec_pretty(black_box(&doc)).unwrap())
    });
    g.finish();
}

fn bench_snapshot(c: &mut Criterion) {
    let mut state = State::default();
    for (i, a) in fleet(10_000).into_iter().enumerate() {
        let event = Event {
            at: a.created_at,
            kind: EventKind::AgentImported(Box::new(a)),
        };
        state.apply(i as u64 + 1, &event);
    }
    let dir = tempfile::tempdir().unwrap();
    let info = snapshot::write(dir.path(), 10_000, &state, 2).unwrap();
    eprintln!("snapshot of 10,000 agents: {} bytes", info.len);

    let mut g = c.benchmark_group("snapshot_10k_agents");
    g.throughput(Throughput::Bytes(info.len));
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    g.bench_function("write_fsync_rename", |b| {
        b.iter(|| snapshot::write(dir.path(), 10_000, black_box(&state), 2).unwrap())
    });
    g.bench_function("load_newest", |b| {
        b.iter(|| {
            snapshot::load_newest::<State>(dir.path())
                .unwrap()
                .unwrap()
                .lsn
        })
    });
    g.finish();
}

criterion_group!(benches, bench_export, bench_snapshot);
criterion_main!(benches);
