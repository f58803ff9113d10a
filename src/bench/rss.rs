//! Resident set size of this process, from `/proc/self/status`.
//!
//! `VmHWM` is the peak RSS since start, or since the last reset: writing `5`
//! to `/proc/self/clear_refs` (Linux ≥ 4.0) sets the peak back to the current
//! RSS, so each benchmark phase can report its own peak. When the reset is not
//! permitted, [`Phase::finish`] says so (`phase_only == false`) rather than
//! passing a process-lifetime peak off as the phase's.
//!
//! The peak is per process, so two phases running at once would reset each
//! other's peak: a [`Phase`] holds a process-wide lock from start to finish,
//! and phases never nest.

use super::{BenchError, Result};
use serde::{Deserialize, Serialize};

const STATUS: &str = "/proc/self/status";

fn status_field_bytes(field: &str) -> Result<u64> {
    let text =
        std::fs::read_to_string(STATUS).map_err(|e| BenchError::io("cannot read", STATUS, e))?;
    parse_status_kb(&text, field)
        .map(|kb| kb * 1024)
        .ok_or_else(|| BenchError::Format {
            path: STATUS.into(),
            message: format!("no `{field}:` line in kB"),
        })
}

pub(super) fn parse_status_kb(text: &str, field: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    let mut parts = line[field.len() + 1..].split_whitespace();
    let n = parts.next()?.parse().ok()?;
    (parts.next() == Some("kB")).then_some(n)
}

/// Peak RSS (`VmHWM`) in bytes.
pub fn peak_rss_bytes() -> Result<u64> {
    status_field_bytes("VmHWM")
}

/// Resets the peak to the current RSS. Errors when the kernel refuses.
pub fn reset_peak() -> Result<()> {
    std::fs::write("/proc/self/clear_refs", b"5")
        .map_err(|e| BenchError::io("cannot reset peak RSS via", "/proc/self/clear_refs", e))
}

/// A measured peak RSS and whether it covers only the phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeakRss {
    pub peak_rss_bytes: u64,
    /// `true` when the peak was reset at the phase start.
    pub phase_only: bool,
    /// At the phase end: anonymous memory (heap, stacks) — what grows with
    /// the live registry. `None` on kernels without `RssAnon` (< 4.5).
    pub rss_anon_bytes: Option<u64>,
    /// At the phase end: resident file-backed pages (mapped log segments
    /// count here while mapped, and so in the peak).
    pub rss_file_bytes: Option<u64>,
}

/// Held by the one [`Phase`] running in this process (see the module doc).
static PHASE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One benchmark phase's RSS accounting: start it, run, finish it.
#[derive(Debug)]
pub struct Phase {
    reset: bool,
    _exclusive: std::sync::MutexGuard<'static, ()>,
}

impl Phase {
    /// Waits for any other phase of this process to finish, then resets the
    /// peak. A panic inside another phase does not poison the accounting.
    pub fn start() -> Phase {
        let exclusive = PHASE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        Phase {
            reset: reset_peak().is_ok(),
            _exclusive: exclusive,
        }
    }

    pub fn finish(self) -> Result<PeakRss> {
        Ok(PeakRss {
            peak_rss_bytes: peak_rss_bytes()?,
            phase_only: self.reset,
            rss_anon_bytes: status_field_bytes("RssAnon").ok(),
            rss_file_bytes: status_field_bytes("RssFile").ok(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_lines() {
        let t = "Name:\tx\nVmHWM:\t  12345 kB\nVmRSS:\t 100 kB\nVmHWMx: 1 kB\n";
        assert_eq!(parse_status_kb(t, "VmHWM"), Some(12345));
        assert_eq!(parse_status_kb(t, "VmRSS"), Some(100));
        assert_eq!(parse_status_kb(t, "VmSwap"), None);
        assert_eq!(parse_status_kb("VmHWM: 12 MB\n", "VmHWM"), None);
    }

    #[test]
    fn phase_peak_sees_a_large_allocation() {
        let phase = Phase::start();
        let before = status_field_bytes("VmRSS").unwrap();
        // Touch 64 MiB so it is resident.
        let v = vec![1u8; 64 << 20];
        std::hint::black_box(&v);
        drop(v);
        let p = phase.finish().unwrap();
        assert!(
            p.peak_rss_bytes >= before + (60 << 20),
            "{p:?} before={before}"
        );
    }
}
