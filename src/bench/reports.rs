//! Report shapes of `agentlog bench replay | open | export | compact`.
//!
//! Each report is built by a constructor that takes the measured counts and
//! elapsed time and computes the rates itself, refusing zero counts or zero
//! time: a report of these types cannot hold a figure that was not measured.
//! The JSON field names are the `--json` contract the CLI prints.

use super::machine::MachineInfo;
use super::{BenchError, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;

const MB: f64 = 1_000_000.0;

fn measured(phase: &str, what: &str, n: u64, elapsed: Duration) -> Result<f64> {
    let s = elapsed.as_secs_f64();
    if n == 0 || s <= 0.0 {
        return Err(BenchError::NothingMeasured {
            phase: phase.to_string(),
            detail: format!("{n} {what} in {s:.6} s"),
        });
    }
    Ok(s)
}

/// `bench replay`: folding the whole log into a registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    pub events: u64,
    pub log_bytes: u64,
    /// Agents in the folded registry.
    pub agents: u64,
    pub seconds: f64,
    pub events_per_s: f64,
    pub mb_per_s: f64,
    pub peak_rss_bytes: u64,
    pub machine: MachineInfo,
}

impl ReplayReport {
    pub fn from_measurement(
        events: u64,
        log_bytes: u64,
        agents: u64,
        elapsed: Duration,
        peak_rss_bytes: u64,
        machine: MachineInfo,
    ) -> Result<Self> {
        let s = measured("replay", "events", events, elapsed)?;
        Ok(ReplayReport {
            events,
            log_bytes,
            agents,
            seconds: s,
            events_per_s: events as f64 / s,
            mb_per_s: log_bytes as f64 / MB / s,
            peak_rss_bytes,
            machine,
        })
    }
}

/// One `bench open` measurement: opening a store of a given log length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenRow {
    pub log_events: u64,
    pub log_bytes: u64,
    /// Whether a snapshot was present (open = load snapshot + fold the tail).
    pub with_snapshot: bool,
    /// Events folded after the snapshot (all of them without one).
    pub events_folded: u64,
    pub open_ms: f64,
    pub peak_rss_bytes: u64,
}

impl OpenRow {
    pub fn from_measurement(
        log_events: u64,
        log_bytes: u64,
        with_snapshot: bool,
        events_folded: u64,
        elapsed: Duration,
        peak_rss_bytes: u64,
    ) -> Result<Self> {
        let s = measured("open", "log events", log_events, elapsed)?;
        Ok(OpenRow {
            log_events,
            log_bytes,
            with_snapshot,
            events_folded,
            open_ms: s * 1_000.0,
            peak_rss_bytes,
        })
    }
}

/// `bench open`: open time against log length, with and without a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenReport {
    pub rows: Vec<OpenRow>,
    pub machine: MachineInfo,
}

impl OpenReport {
    pub fn new(rows: Vec<OpenRow>, machine: MachineInfo) -> Result<Self> {
        if rows.is_empty() {
            return Err(BenchError::NothingMeasured {
                phase: "open".into(),
                detail: "no log lengths measured".into(),
            });
        }
        Ok(OpenReport { rows, machine })
    }
}

/// `bench export`: writing schema-v4 `registry.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportReport {
    pub rows: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub rows_per_s: f64,
    pub mb_per_s: f64,
    pub machine: MachineInfo,
}

impl ExportReport {
    pub fn from_measurement(
        rows: u64,
        bytes: u64,
        elapsed: Duration,
        machine: MachineInfo,
    ) -> Result<Self> {
        let s = measured("export", "rows", rows, elapsed)?;
        Ok(ExportReport {
            rows,
            bytes,
            seconds: s,
            rows_per_s: rows as f64 / s,
            mb_per_s: bytes as f64 / MB / s,
            machine,
        })
    }
}

/// `bench compact`: rewriting the log without what retention drops.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactReport {
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub events_before: u64,
    pub events_after: u64,
    pub seconds: f64,
    /// Input bytes processed per second.
    pub mb_per_s: f64,
    pub peak_rss_bytes: u64,
    pub machine: MachineInfo,
}

impl CompactReport {
    #[allow(clippy::too_many_arguments)]
    pub fn from_measurement(
        bytes_before: u64,
        bytes_after: u64,
        events_before: u64,
        events_after: u64,
        elapsed: Duration,
        peak_rss_bytes: u64,
        machine: MachineInfo,
    ) -> Result<Self> {
        let s = measured("compact", "input bytes", bytes_before, elapsed)?;
        Ok(CompactReport {
            bytes_before,
            bytes_after,
            events_before,
            events_after,
            seconds: s,
            mb_per_s: bytes_before as f64 / MB / s,
            peak_rss_bytes,
            machine,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> MachineInfo {
        MachineInfo::probe(&std::env::temp_dir()).unwrap()
    }

    #[test]
    fn rates_come_from_counts_and_time() {
        let r = ReplayReport::from_measurement(
            2_000_000,
            80_000_000,
            1_000,
            Duration::from_millis(500),
            1 << 20,
            machine(),
        )
        .unwrap();
        assert!((r.events_per_s - 4_000_000.0).abs() < 1e-6);
        assert!((r.mb_per_s - 160.0).abs() < 1e-9);
        let j = serde_json::to_value(&r).unwrap();
        for k in ["events", "events_per_s", "mb_per_s", "seconds", "machine"] {
            assert!(j.get(k).is_some(), "{k}");
        }
        let e =
            ExportReport::from_measurement(1_000, 500_000, Duration::from_millis(10), machine())
                .unwrap();
        assert!((e.rows_per_s - 100_000.0).abs() < 1e-6);
        let c = CompactReport::from_measurement(
            10_000_000,
            1_000,
            5,
            1,
            Duration::from_secs(2),
            0,
            machine(),
        )
        .unwrap();
        assert!((c.mb_per_s - 5.0).abs() < 1e-9);
        let o =
            OpenRow::from_measurement(100, 4_000, true, 3, Duration::from_micros(1500), 0).unwrap();
        assert!((o.open_ms - 1.5).abs() < 1e-9);
        assert!(OpenReport::new(vec![o], machine()).is_ok());
    }

    #[test]
    fn nothing_measured_is_an_error() {
        let e = ReplayReport::from_measurement(0, 0, 0, Duration::from_secs(1), 0, machine())
            .unwrap_err();
        assert!(
            e.to_string().contains("replay") && e.to_string().contains("0 events"),
            "{e}"
        );
        assert!(ExportReport::from_measurement(5, 5, Duration::ZERO, machine()).is_err());
        assert!(OpenReport::new(vec![], machine()).is_err());
    }
}
