//! `agentlog bench`: each subcommand runs for a fraction of a second and
//! its `--json` carries measured, positive figures (a ratio computed from the
//! two measured rates).

use crate::support::cli::Env;

#[test]
fn bench_heartbeats_reports_measured_figures_and_the_ratio() {
    let env = Env::new();
    let doc = env.json(&[
        "bench",
        "heartbeats",
        "--agents",
        "200",
        "--seconds",
        "0.2",
        "--writers",
        "2",
        "--compare",
    ]);
    // Every float figure (rates, latencies, sizes, the ratio) is measured,
    // hence positive, as is the peak RSS (the report's field names are
    // checked by src/bench/tests.rs).
    let mut floats = doc.as_object().unwrap().values().filter(|v| v.is_f64());
    assert!(floats.all(|v| v.as_f64().unwrap() > 0.0), "{doc}");
    assert!(doc["peak_rss_bytes"].as_u64().unwrap() > 0, "{doc}");
    assert_eq!(doc["agents"], 200);
    assert_eq!(doc["writers"], 2);
    let main = doc["events_per_s"].as_f64().unwrap();
    let base = doc["baseline_events_per_s"].as_f64().unwrap();
    let ratio = doc["ratio"].as_f64().unwrap();
    assert!(base > 0.0);
    assert!(
        (ratio - main / base).abs() <= 1e-9 * ratio.max(1.0),
        "{doc}"
    );
    assert!(doc["machine"]["cores"].as_u64().unwrap() >= 1);
    // The stores went to the given directory, not to ~/.agentlog.
    assert!(env.dir.exists());

    let text = env
        .run_bare(&["bench", "heartbeats", "--agents", "50", "--seconds", "0.1"])
        .ok()
        .to_string();
    assert!(text.contains("events/s") && text.contains("p99"), "{text}");
    env.run_bare(&["bench", "heartbeats", "--writers", "0"])
        .fails(2, "'0' for '--writers");
    env.run_bare(&["bench", "heartbeats", "--mix", "2,1"])
        .fails(2, "2,1");
}

#[test]
fn bench_scaling_writes_csv_and_svg() {
    let env = Env::new();
    let out = env.path("plots");
    std::fs::create_dir_all(&out).unwrap();
    let doc = env.json(&[
        "bench",
        "scaling",
        "--agents",
        "10,100",
        "--writers",
        "1,2",
        "--seconds",
        "0.1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert!(rows
        .iter()
        .all(|r| r["events_per_s"].as_f64().unwrap() > 0.0));
    let csv = std::fs::read_to_string(out.join("scaling.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");
    assert!(std::fs::read_to_string(out.join("scaling.svg"))
        .unwrap()
        .contains("<svg"));
}

fn pos(doc: &serde_json::Value, k: &str) -> f64 {
    let v = doc[k]
        .as_f64()
        .unwrap_or_else(|| panic!("{k} missing: {doc}"));
    assert!(v > 0.0, "{k}: {doc}");
    v
}

/// `rate` equals `count / seconds` (up to float rounding).
#[track_caller]
fn consistent(rate: f64, count: f64, seconds: f64) {
    let want = count / seconds;
    assert!((rate - want).abs() <= 1e-9 * want, "{rate} vs {want}");
}

#[test]
fn bench_replay_folds_the_whole_log_and_reuses_a_given_store() {
    let env = Env::new();
    let args = ["bench", "replay", "--events", "3000", "--agents", "30"];
    let doc = env.json(&args);
    // The workload's events plus the last_message_at stamps some of its
    // direct posts add (docs/upstream.md, "last_message_at").
    let events = doc["events"].as_u64().unwrap();
    assert!((3000..=3030).contains(&events), "{doc}");
    assert_eq!(doc["agents"], 30);
    let s = pos(&doc, "seconds");
    consistent(pos(&doc, "events_per_s"), events as f64, s);
    consistent(pos(&doc, "mb_per_s"), pos(&doc, "log_bytes") / 1e6, s);
    pos(&doc, "peak_rss_bytes");
    // The store built in --dir is replayed as it is the second time (the
    // sizes asked for are then not used).
    let again = env.json(&["bench", "replay", "--events", "9000", "--agents", "30"]);
    assert_eq!(again["events"], events);
    assert_eq!(again["log_bytes"], doc["log_bytes"]);

    let text = env.run_bare(&args).ok().to_string();
    assert!(text.contains("events/s") && text.contains("MB/s"), "{text}");
    env.run_bare(&["bench", "replay", "--events", "5", "--agents", "10"])
        .fails(2, "fewer than agents");
}

#[test]
fn bench_open_has_a_row_per_length_with_and_without_snapshot() {
    let env = Env::new();
    let doc = env.json(&["bench", "open", "--events", "1000,4000", "--agents", "20"]);
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{doc}");
    for (r, (n, snap)) in
        rows.iter()
            .zip([(1000, true), (1000, false), (4000, true), (4000, false)])
    {
        assert_eq!(r["log_events"], n, "{r}");
        assert_eq!(r["with_snapshot"], snap, "{r}");
        pos(r, "open_ms");
        pos(r, "log_bytes");
        // With the snapshot only its tail (a tenth) is folded.
        let folded = r["events_folded"].as_u64().unwrap();
        // Plus the last_message_at stamps of direct posts (docs/upstream.md).
        let want = if snap { n / 10 } else { n };
        assert!((want..=want + want / 100 + 1).contains(&folded), "{r}");
    }
    assert!(doc["machine"]["cores"].as_u64().unwrap() >= 1);
    let text = env
        .run_bare(&["bench", "open", "--events", "500", "--agents", "5"])
        .ok()
        .to_string();
    assert!(
        text.contains("OPEN ms") && text.contains("SNAPSHOT"),
        "{text}"
    );
    env.run_bare(&["bench", "open", "--events", "x"])
        .fails(2, "x");
}

#[test]
fn bench_export_writes_every_agent() {
    let env = Env::new();
    let doc = env.json(&["bench", "export", "--agents", "300"]);
    assert_eq!(doc["rows"], 300);
    let s = pos(&doc, "seconds");
    consistent(pos(&doc, "rows_per_s"), 300.0, s);
    consistent(pos(&doc, "mb_per_s"), pos(&doc, "bytes") / 1e6, s);
    let file = std::fs::read_to_string(env.dir.join("bench-export/registry.json")).unwrap();
    assert_eq!(file.len() as f64, pos(&doc, "bytes"));
    assert!(file.contains("agent-000299"));
    env.run_bare(&["bench", "export", "--agents", "0"])
        .fails(2, "agents");
}

#[test]
fn bench_compact_drops_the_retired_agents() {
    let env = Env::new();
    let doc = env.json(&["bench", "compact", "--events", "4000", "--agents", "40"]);
    let before = pos(&doc, "bytes_before");
    let after = pos(&doc, "bytes_after");
    assert!(after < before / 10.0, "{doc}");
    // 4000 workload events + 36 exits; the 4 live agents keep their
    // registration and first and last heartbeats.
    // Plus the last_message_at stamps of direct posts (docs/upstream.md).
    let before_events = doc["events_before"].as_u64().unwrap();
    assert!((4036..=4076).contains(&before_events), "{doc}");
    // Each live agent also keeps its latest last_message_at stamp.
    let after_events = doc["events_after"].as_u64().unwrap();
    assert!((12..=24).contains(&after_events), "{doc}");
    consistent(pos(&doc, "mb_per_s"), before / 1e6, pos(&doc, "seconds"));
    let text = env
        .run_bare(&["bench", "compact", "--events", "500", "--agents", "10"])
        .ok()
        .to_string();
    assert!(
        text.contains("compacted") && text.contains("MB/s"),
        "{text}"
    );
}

#[test]
fn bench_replay_of_an_existing_store_folds_its_records() {
    let env = Env::new();
    env.ok(&["init"]);
    env.ok(&["register", "r1", "--provider", "claude", "--cwd", "/tmp"]);
    env.ok(&["register", "r2", "--provider", "codex", "--cwd", "/tmp"]);
    env.ok(&["heartbeat", "r1"]);
    let doc = env.json(&["bench", "replay"]);
    assert_eq!(doc["events"], 3, "{doc}");
    assert_eq!(doc["agents"], 2, "{doc}");
    // Replaying wrote nothing into the store (no workload, no snapshot).
    assert!(!env.dir.join("agentlog").exists());
    assert_eq!(env.json(&["bench", "replay"])["events"], 3);
}

/// `bench clients`: separate client processes through a daemon the run
/// starts, and the same processes against the echo bound, SQLite and the
/// JSON rewrite; every phase counted acknowledged heartbeats, none refused,
/// and the servers and run directory are gone afterwards.
#[test]
fn bench_clients_measures_every_phase_through_separate_processes() {
    let env = Env::new();
    let doc = env.json(&[
        "bench",
        "clients",
        "--procs",
        "2",
        "--agents",
        "50",
        "--seconds",
        "1",
        "--pipeline",
        "4",
        "--echo",
        "--compare",
    ]);
    assert_eq!(
        (doc["procs"].as_u64(), doc["agents"].as_u64()),
        (Some(2), Some(50))
    );
    assert_eq!(doc["via"], "daemon");
    for phase in ["main", "echo", "sqlite", "json_rewrite"] {
        let p = &doc[phase];
        assert!(p["ops"].as_u64().unwrap() > 0, "{phase}: {p}");
        assert_eq!(p["refused"], 0, "{phase}: {p}");
        assert_eq!(p["failed"], 0, "{phase}: {p}");
        assert_eq!(p["processes"], 2, "{phase}: {p}");
        // The sum of each process's rate: at least all ops over the longest.
        let floor = pos(p, "ops") / pos(p, "seconds");
        assert!(pos(p, "ops_per_s") >= floor * (1.0 - 1e-9), "{phase}: {p}");
        for q in ["p50_us", "p99_us", "p999_us"] {
            assert!(p["latency"][q].as_f64().unwrap() > 0.0, "{phase} {q}: {p}");
        }
        assert_eq!(p["latency"]["count"], p["ops"], "{phase}: {p}");
    }
    assert_eq!(doc["main"]["target"], "daemon");
    assert_eq!(doc["main"]["pipeline"], 4);
    assert_eq!(doc["sqlite"]["pipeline"], 1);
    // Every acknowledged heartbeat was logged by the daemon.
    assert!(
        doc["main"]["events_logged"].as_u64() >= doc["main"]["ops"].as_u64(),
        "{doc}"
    );
    let main = pos(&doc["main"], "ops_per_s");
    for other in ["echo", "sqlite", "json_rewrite"] {
        let want = main / pos(&doc[other], "ops_per_s");
        let got = doc["ratios"][other].as_f64().unwrap();
        assert!((got - want).abs() <= 1e-9 * want, "{other}: {doc}");
    }
    let left: Vec<_> = std::fs::read_dir(&env.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "the run left {left:?}");

    let cli = env.json(&[
        "bench",
        "clients",
        "--procs",
        "2",
        "--agents",
        "10",
        "--seconds",
        "0.5",
        "--via",
        "cli",
    ]);
    assert_eq!(cli["main"]["target"], "cli");
    assert!(cli["main"]["ops"].as_u64().unwrap() > 0, "{cli}");
    assert_eq!(
        (
            cli["main"]["refused"].as_u64(),
            cli["main"]["failed"].as_u64()
        ),
        (Some(0), Some(0))
    );
    env.run_bare(&["bench", "clients", "--via", "cli", "--pipeline", "4"])
        .fails(2, "--via cli");
}

/// `bench clients --client rust,python,node --compare`: the Python and Node
/// client libraries' own worker processes, each library on a fresh daemon,
/// and Python's sqlite3 as the Python peer, all in one run; each phase
/// counted acknowledged heartbeats (every one logged by its daemon) and
/// the pairwise ratios are those of the phases' rates.
#[test]
fn bench_clients_runs_the_python_and_node_libraries_and_their_peer() {
    let (python, node) = (
        crate::support::prereq::python3(),
        crate::support::prereq::node(),
    );
    let env = Env::new();
    let out = crate::support::cli::bin()
        .env("AGENTLOG_PYTHON", python)
        .env("AGENTLOG_NODE", node)
        .arg("--dir")
        .arg(&env.dir)
        .args([
            "--json",
            "bench",
            "clients",
            "--procs",
            "2",
            "--agents",
            "20",
            "--seconds",
            "0.5",
            "--client",
            "rust,python,node",
            "--pipeline",
            "4",
            "--compare",
        ])
        .output()
        .expect("run agentlog bench clients");
    let doc = crate::support::cli::Run::from_output(out).json();
    let clients = doc["clients"].as_array().unwrap();
    let targets: Vec<_> = clients.iter().map(|p| p["target"].clone()).collect();
    assert_eq!(targets, ["daemon", "python", "node"], "{doc}");
    assert_eq!(doc["main"], clients[0], "{doc}");
    for p in clients
        .iter()
        .chain([&doc["python_sqlite"], &doc["sqlite"]])
    {
        assert!(p["ops"].as_u64().unwrap() > 0, "{p}");
        assert_eq!(
            (p["refused"].as_u64(), p["failed"].as_u64()),
            (Some(0), Some(0)),
            "{p}"
        );
        assert_eq!(p["latency"]["count"], p["ops"], "{p}");
        assert!(p["latency"]["p50_us"].as_f64().unwrap() > 0.0, "{p}");
    }
    for p in clients {
        assert_eq!(p["pipeline"], 4, "{p}");
        assert!(p["events_logged"].as_u64() >= p["ops"].as_u64(), "{p}");
    }
    assert_eq!(doc["python_sqlite"]["target"], "python_sqlite");
    assert_eq!(doc["python_sqlite"]["pipeline"], 1);
    let rate = |p: &serde_json::Value| pos(p, "ops_per_s");
    let want = rate(&clients[1]) / rate(&doc["python_sqlite"]);
    let got = doc["pair_ratios"]["python / python_sqlite"]
        .as_f64()
        .unwrap();
    assert!((got - want).abs() <= 1e-9 * want, "{doc}");
    let want = rate(&clients[2]) / rate(&clients[1]);
    assert!(doc["pair_ratios"]["node / python"].is_null(), "{doc}");
    let got = 1.0 / doc["pair_ratios"]["python / node"].as_f64().unwrap();
    assert!((got - want).abs() <= 1e-9 * want, "{doc}");
    env.run_bare(&["bench", "clients", "--client", "cobol"])
        .fails(2, "cobol");
}

/// `bench cli` on tiny stores: a row per command and log length with
/// measured figures, the RSS growth per command, and the targets judged.
/// (Shape only: no timing is asserted.)
#[test]
fn bench_cli_times_every_command_on_every_log_length() {
    let env = Env::new();
    let doc = env.json(&[
        "bench", "cli", "--events", "300,600", "--agents", "5", "--runs", "2",
    ]);
    let rows = doc["rows"].as_array().unwrap();
    let commands = ["heartbeat", "status", "list", "audit", "export"];
    assert_eq!(rows.len(), 2 * commands.len(), "{doc}");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["events"], [300, 600][i / commands.len()], "{row}");
        assert_eq!(row["command"], commands[i % commands.len()], "{row}");
        assert_eq!(row["runs"], 2);
        let (min, med, max) = (
            row["min_ms"].as_f64().unwrap(),
            row["median_ms"].as_f64().unwrap(),
            row["max_ms"].as_f64().unwrap(),
        );
        assert!(0.0 < min && min <= med && med <= max, "{row}");
        assert!(row["median_cpu_ms"].as_f64().unwrap() >= 0.0, "{row}");
        assert!(row["peak_rss_bytes"].as_u64().unwrap() > 0, "{row}");
    }
    let growth = doc["rss_growth"].as_array().unwrap();
    assert_eq!(growth.len(), commands.len(), "{doc}");
    for g in growth {
        assert!(g["ratio"].as_f64().unwrap() > 0.0, "{g}");
        assert_eq!(g["flat"], g["ratio"].as_f64().unwrap() <= 1.5, "{g}");
    }
    assert_eq!(doc["heartbeat_target_ms"], 5.0);
    assert_eq!(doc["list_target_ms"], 10.0);
    assert!(doc["targets_met"].is_boolean());
    assert!(doc["machine"]["cores"].as_u64().unwrap() > 0, "{doc}");
}
