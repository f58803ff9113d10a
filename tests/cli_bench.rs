//! `agentlog bench`: each subcommand runs for a fraction of a second and
//! its `--json` carries measured, positive figures (a ratio computed from the
//! two measured rates).

mod cli_support;

use cli_support::Env;

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
    for k in [
        "events_per_s",
        "p50_us",
        "p99_us",
        "p999_us",
        "bytes_per_event",
        "peak_rss_bytes",
    ] {
        assert!(doc[k].as_f64().unwrap() > 0.0, "{k}: {doc}");
    }
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
        .fails(2, "writers 0");
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
