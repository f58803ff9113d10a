//! `agentlog bench cluster` for real: a 3-node NATS cluster and a 3-node
//! etcd cluster on loopback, three host processes, one second per phase.
//! The report has both systems' three phases with measured, positive counts
//! and ordered latencies, no lazy heartbeat missing from the stream, and the
//! ratios and targets computed from them. The test installs nats-server and
//! etcd when they are missing (tests/support/prereq.rs); without them the
//! benchmark fails, and so does this test (never a skip).

use serde_json::Value;
use std::process::Command;

fn num(v: &Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{path} is not a number in the report: {v}"))
}

/// A latency summary with positive, ordered quantiles.
fn latency(doc: &Value, path: &str) {
    let (p50, p99, max) = (
        num(doc, &format!("{path}/p50_us")),
        num(doc, &format!("{path}/p99_us")),
        num(doc, &format!("{path}/max_us")),
    );
    assert!(
        p50 > 0.0 && p50 <= p99 && p99 <= max,
        "{path}: p50 {p50} µs, p99 {p99} µs, max {max} µs"
    );
    assert!(
        num(doc, &format!("{path}/count")) > 0.0,
        "{path}: no samples"
    );
}

#[test]
fn bench_cluster_measures_nats_and_etcd_doing_the_same_work() {
    let nats = crate::support::cluster::nats_server_binary();
    let etcd = crate::support::prereq::etcd();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agentlog"))
        .env("AGENTLOG_NATS_SERVER", &nats)
        .env("AGENTLOG_ETCD", &etcd)
        .arg("--dir")
        .arg(dir.path())
        .args(["bench", "cluster", "--hosts", "3", "--agents", "50"])
        .args(["--seconds", "1", "--concurrency", "4", "--json"])
        .output()
        .expect("run agentlog bench cluster");
    assert!(
        out.status.success(),
        "bench cluster failed ({}); it needs nats-server (AGENTLOG_NATS_SERVER) and etcd \
         (AGENTLOG_ETCD or PATH; apt-get install etcd-server):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(num(&doc, "/hosts"), 3.0);
    assert_eq!(num(&doc, "/agents"), 50.0);
    assert_eq!(num(&doc, "/concurrency"), 4.0);
    for (system, name) in [("nats", "agentlog+nats"), ("etcd", "etcd")] {
        assert_eq!(doc[system]["system"], name, "{doc}");
        assert!(
            !doc[system]["server_version"]
                .as_str()
                .unwrap_or("")
                .is_empty(),
            "{system}: no server version"
        );
        for phase in ["heartbeats", "durable", "visibility"] {
            let at = format!("/{system}/{phase}");
            assert!(num(&doc, &format!("{at}/ops")) > 0.0, "{at}: no operations");
            assert!(num(&doc, &format!("{at}/per_s")) > 0.0, "{at}: no rate");
            assert!(
                num(&doc, &format!("{at}/seconds")) >= 1.0,
                "{at}: a short phase"
            );
            assert_eq!(num(&doc, &format!("{at}/failed")), 0.0, "{at}: {doc}");
            latency(&doc, &format!("{at}/latency"));
            if phase != "heartbeats" {
                latency(&doc, &format!("{at}/visibility"));
            }
        }
        // One writer per host for visibility, 4 for the other phases.
        assert_eq!(num(&doc, &format!("/{system}/visibility/workers")), 3.0);
        assert_eq!(num(&doc, &format!("/{system}/durable/workers")), 12.0);
        // The CPU of each side's servers and hosts, per operation.
        let cpu = format!("/{system}/durable/cpu");
        let used = num(&doc, &format!("{cpu}/servers_s")) + num(&doc, &format!("{cpu}/hosts_s"));
        let per_op = num(&doc, &format!("{cpu}/per_op_us"));
        let ops = num(&doc, &format!("/{system}/durable/ops"));
        assert!(
            used > 0.0 && (per_op - used * 1e6 / ops).abs() < 1e-6 * per_op,
            "{cpu}: {doc}"
        );
    }
    // Where the durable commands' time went: every acknowledged command,
    // each stage measured; etcd has none.
    assert_eq!(
        num(&doc, "/nats/durable/stages/commands"),
        num(&doc, "/nats/durable/ops")
    );
    for stage in ["validate_us", "publish_to_ack_us", "ack_to_fold_us"] {
        assert!(
            num(&doc, &format!("/nats/durable/stages/{stage}")) > 0.0,
            "{stage}: {doc}"
        );
    }
    assert!(doc["etcd"]["durable"]["stages"].is_null(), "{doc}");
    assert_eq!(
        num(&doc, "/nats/heartbeats/lost"),
        0.0,
        "lazy heartbeats acknowledged but not folded on every host"
    );
    for r in ["heartbeats", "durable", "visibility_p50", "visibility_p99"] {
        let v = num(&doc, &format!("/ratios/{r}"));
        assert!(v.is_finite() && v > 0.0, "ratio {r} = {v}");
    }
    let durable = num(&doc, "/nats/durable/per_s") / num(&doc, "/etcd/durable/per_s");
    assert!((num(&doc, "/ratios/durable") - durable).abs() < 1e-9 * durable);
    assert_eq!(
        doc["targets"]["durable_5x_etcd"].as_bool(),
        Some(durable >= 5.0)
    );
    for t in ["heartbeats_50k_per_s", "visibility_p99_under_50ms"] {
        assert!(doc["targets"][t].is_boolean(), "target {t}: {doc}");
    }
    // Every server and run directory is gone.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with("cluster-"))
        .collect();
    assert!(left.is_empty(), "run directories left: {left:?}");
}
