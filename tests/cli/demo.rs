//! `agentlog demo`: the default fleet finishes cleanly, its registry.json is
//! accepted by the schema-v4 readers' contract (`agentlog check`), the store it leaves
//! verifies and answers the other commands, and the simulation is
//! deterministic for a seed.

use crate::support::cli;

use crate::support::cli::Env;

#[test]
fn the_default_demo_runs_end_to_end() {
    let env = Env::new();
    let r = env.run(&["--json", "demo"]);
    let doc = r.json();
    assert!(r.stderr.is_empty(), "stderr: {}", r.stderr);
    let fleet = &doc["fleet"];
    assert!(fleet["registrations"].as_u64().unwrap() > 300, "{fleet}");
    assert!(fleet["heartbeats"].as_u64().unwrap() > 100_000, "{fleet}");
    for k in [
        "posts",
        "reads",
        "hung",
        "died",
        "swept",
        "completed",
        "failed",
    ] {
        assert!(fleet[k].as_u64().unwrap() > 0, "{k}: {fleet}");
    }
    // The export: every row of the registry, accepted by every reader.
    let export = std::path::PathBuf::from(doc["export"]["path"].as_str().unwrap());
    assert_eq!(export, env.dir.join("registry.json"));
    assert!(doc["export"]["rows"].as_u64().unwrap() > 0);
    cli::assert_accepted(&export);
    assert_eq!(doc["export"]["conformance"], "accepted");
    // Compaction dropped retired agents and collapsed heartbeat runs.
    let c = &doc["compaction"];
    assert!(c["events_dropped"].as_u64().unwrap() > 0, "{c}");
    assert!(c["bytes_after"].as_u64().unwrap() < c["bytes_before"].as_u64().unwrap());
    assert_eq!(c["generation"], 1);
    // The audit shows the featured agent's story.
    let featured = doc["featured"].as_str().unwrap();
    let audit = doc["audit"].as_array().unwrap();
    assert_eq!(audit[0]["kind"], "AgentRegistered");
    assert!(audit.iter().any(|l| l["count"].as_u64().unwrap_or(0) > 1));

    // The store it leaves is a normal store.
    let v = env.json(&["verify"]);
    assert_eq!(v["clean"], true);
    let listed = env.json(&["list", "--all"]);
    assert_eq!(
        listed["agents"].as_array().unwrap().len(),
        doc["registry"].as_array().unwrap().len()
    );
    env.ok(&["audit", featured]);
    let st = env.json(&["stats"]);
    assert_eq!(st["generation"], 1);
    assert_eq!(st["events"], doc["stats"]["events"]);
}

#[test]
fn the_demo_is_deterministic_and_refuses_a_used_directory() {
    let a = Env::new();
    let b = Env::new();
    let args = [
        "--json", "demo", "--agents", "40", "--hours", "1", "--seed", "7",
    ];
    let da = a.run(&args).json();
    let db = b.run(&args).json();
    assert_eq!(da["fleet"], db["fleet"]);
    assert_eq!(da["registry"], db["registry"]);
    assert_eq!(da["audit"], db["audit"]);
    // A directory with a store in it is not overwritten.
    a.run(&["demo", "--agents", "5", "--hours", "1"])
        .fails(1, "is not empty");
    Env::new()
        .run(&["demo", "--agents", "0"])
        .fails(2, "'0' for '--agents");
    // Text output names the parts of the tour.
    let c = Env::new();
    let text = c.ok(&["demo", "--agents", "30", "--hours", "1"]);
    for part in [
        "== snapshot",
        "== export",
        "== compaction",
        "== stats",
        "== registry",
        "== audit of",
        "== files",
    ] {
        assert!(text.contains(part), "missing {part}:\n{text}");
    }
}
