//! Runs the binary's heartbeat harness (src/bench, included by path: it is
//! not library API) from `cargo bench`, with what `agentlog bench heartbeats`
//! does not offer: the raw-log target and a chosen directory. Prints the
//! report as one JSON object per run.
//!
//! cargo bench --bench heartbeat_harness -- [--agents N] [--seconds S]
//!     [--writers W] [--durable] [--compare] [--mix S,P] [--dir D]
//!     [--target store|raw-log] [--scaling AGENTS,.. WRITERS,.. --out DIR]

// The harness serves the binary (and its unit tests); this bench uses a part.
#[allow(dead_code, unused_imports)]
#[path = "../src/bench/mod.rs"]
mod bench;

use bench::heartbeats::{run_heartbeats_on, HeartbeatBenchConfig, HeartbeatTarget, Mix};
use bench::raw_log::RawLogTarget;
use bench::scaling::{run_scaling_on, write_outputs};
use bench::targets::StoreTarget;
use std::path::{Path, PathBuf};

type Factory = fn(&Path, &HeartbeatBenchConfig) -> bench::Result<Box<dyn HeartbeatTarget>>;

fn list(s: &str) -> Vec<usize> {
    s.split(',')
        .map(|x| {
            x.trim()
                .replace('_', "")
                .parse()
                .expect("a comma-separated list of numbers")
        })
        .collect()
}

fn main() {
    let mut cfg = HeartbeatBenchConfig::default();
    let mut scaling: Option<(Vec<usize>, Vec<usize>)> = None;
    let mut out = PathBuf::from("target/bench-scaling");
    let mut factory: Factory = StoreTarget::factory;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--agents" => cfg.agents = val().parse().expect("--agents N"),
            "--seconds" => cfg.seconds = val().parse().expect("--seconds S"),
            "--writers" => cfg.writers = val().parse().expect("--writers W"),
            "--durable" => cfg.durable = true,
            "--compare" => cfg.compare = true,
            "--mix" => cfg.mix = Mix::parse(&val()).unwrap_or_else(|e| panic!("{e}")),
            "--dir" => cfg.dir = Some(PathBuf::from(val())),
            "--out" => out = PathBuf::from(val()),
            "--target" => {
                factory = match val().as_str() {
                    "store" => StoreTarget::factory,
                    "raw-log" => RawLogTarget::factory,
                    t => panic!("--target {t}: expected store or raw-log"),
                }
            }
            "--scaling" => {
                let a = list(&val());
                let w = list(&val());
                scaling = Some((a, w));
            }
            _ => {} // `cargo bench` passes `--bench`; ignore what is not ours.
        }
    }
    match scaling {
        None => {
            let r = run_heartbeats_on(&cfg, factory).unwrap_or_else(|e| panic!("{e}"));
            println!("{}", serde_json::to_string_pretty(&r).expect("serialize"));
        }
        Some((agents, writers)) => {
            let rows = run_scaling_on(
                &agents,
                &writers,
                cfg.seconds,
                cfg.durable,
                cfg.dir.as_deref(),
                factory,
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let (csv, svg) = write_outputs(&rows, &out).unwrap_or_else(|e| panic!("{e}"));
            print!("{}", bench::scaling::to_csv(&rows));
            eprintln!("wrote {} and {}", csv.display(), svg.display());
        }
    }
}
