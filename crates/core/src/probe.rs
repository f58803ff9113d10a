//! The process probe: the sweep's liveness answers read from this host's
//! `/proc`. It lives outside the pure registry (which takes any
//! [`ProcessProbe`] as input) because it does I/O, and a pid it answers for
//! means something only on this host: a replica probes only the agents
//! registered on it (docs/scaling.md §7).

use crate::registry::{ProcessProbe, ProcessState};
use std::sync::Arc;

/// Linux: `/proc/<pid>/stat`, field 22 (`starttime`), parsed after the last
/// `)` so a command name holding spaces or parentheses cannot shift fields.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcProbe;

impl ProcessProbe for ProcProbe {
    fn probe(&self, pid: u32) -> ProcessState {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(text) => ProcessState::Running(parse_start_time(&text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if std::path::Path::new("/proc/self/stat").exists() {
                    ProcessState::Gone
                } else {
                    ProcessState::Unknown
                }
            }
            Err(_) => ProcessState::Unknown,
        }
    }
}

/// A probe a replica holds (`ClusterOptions::probe`): the `/proc` probe by
/// default; a test stands a table in for it, to play hosts whose pids differ
/// on one machine.
#[derive(Clone)]
pub struct SharedProbe(pub Arc<dyn ProcessProbe + Send + Sync>);

impl Default for SharedProbe {
    fn default() -> Self {
        SharedProbe(Arc::new(ProcProbe))
    }
}

impl std::fmt::Debug for SharedProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedProbe")
    }
}

impl ProcessProbe for SharedProbe {
    fn probe(&self, pid: u32) -> ProcessState {
        self.0.probe(pid)
    }
}

/// Field 22 of a `/proc/<pid>/stat` line.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After `)` come fields 3 (state), 4, …: field 22 is the 20th.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_field_22_after_the_last_paren() {
        let line = "1234 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987654 20";
        assert_eq!(parse_start_time(line), Some(987_654));
        assert_eq!(parse_start_time("12 (x) S 1 2"), None);
        assert_eq!(parse_start_time("no paren"), None);
        let me = std::process::id();
        match ProcProbe.probe(me) {
            ProcessState::Running(Some(_)) | ProcessState::Unknown => {}
            other => panic!("own pid probed as {other:?}"),
        }
    }
}
