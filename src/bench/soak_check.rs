//! The judge of `bench soak`: reads every client process's acknowledgement
//! file ([`super::soak_worker::AckLine`]) and decides, for the whole
//! history, whether any acknowledged write was lost; and cuts the
//! acknowledgements into per-minute latency rows.
//!
//! An acknowledged write is **lost** when any of three rules fails:
//! 1. *One LSN, one write.* A local daemon gives each write its own LSN; two
//!    acknowledgements naming the same LSN mean one of them was reassigned
//!    after a crash forgot it (both count).
//! 2. *It survived each kill.* The soak reads the log's last LSN after every
//!    `kill -9` and before the restart; a write whose reply arrived before
//!    the kill was sent ([`Kill::t_ns`], the same CLOCK_MONOTONIC) must lie
//!    at or below what survived that kill and every later one.
//! 3. *It is in the final log.* After the daemon's graceful stop the store's
//!    log is read whole: the record at the write's LSN must be that write
//!    (a heartbeat of its agent; a status of its agent carrying its token).
//!    A record may be absent only as compaction allows: a heartbeat in the
//!    middle of a run of its agent's heartbeats (FORMAT.md, compaction keeps
//!    a run's first and last), so the agent's nearest kept events before
//!    and after that LSN must both be heartbeats. A status is never dropped
//!    while its agent is registered, so an absent status is lost.
//!
//! Everything is judged from files and the log; nothing is taken from the
//! daemon's word.

use super::baseline::agent_name;
use super::latency::Histogram;
use super::soak_worker::{token, AckLine, HEARTBEAT};
use super::{BenchError, Result};
use agentlog::registry::{decode, EventKind};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// One `kill -9` of the daemon: when the signal was sent and the log's last
/// LSN that survived it (read before the restart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kill {
    pub t_ns: u64,
    pub recovered_lsn: u64,
}

/// The history's verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryCheck {
    pub acked: u64,
    pub acked_heartbeats: u64,
    pub acked_statuses: u64,
    /// Found at their LSN, as written.
    pub found: u64,
    /// Heartbeats absent as compaction allows (the middle of a run).
    pub collapsed_by_compaction: u64,
    /// Acknowledged writes lost (any rule; must be 0).
    pub lost: u64,
    /// Of those: sharing an LSN with another acknowledgement (rule 1).
    pub duplicate_lsns: u64,
    /// Of those: above what survived a kill after their reply (rule 2).
    pub beyond_a_kill: u64,
    /// Of those: missing from or different in the final log (rule 3).
    pub missing_from_log: u64,
    /// Up to ten lost writes, described.
    pub examples: Vec<String>,
    /// Records in the final log and its last LSN.
    pub log_records: u64,
    pub last_lsn: u64,
}

/// One writer process's acknowledgement, with the process it came from.
#[derive(Debug, Clone, Copy)]
pub struct Ack {
    pub worker: usize,
    pub line: AckLine,
}

/// Reads the acknowledgement files, `paths[w]` being process `w`'s.
pub fn read_acks(paths: &[PathBuf]) -> Result<Vec<Ack>> {
    let mut acks = Vec::new();
    for (worker, path) in paths.iter().enumerate() {
        let f = std::fs::File::open(path).map_err(|e| BenchError::io("cannot open", path, e))?;
        for (n, line) in std::io::BufReader::new(f).lines().enumerate() {
            let line = line.map_err(|e| BenchError::io("cannot read", path, e))?;
            let a = AckLine::parse(&line).ok_or_else(|| BenchError::Format {
                path: path.clone(),
                message: format!("line {}: not an acknowledgement: {line:?}", n + 1),
            })?;
            acks.push(Ack { worker, line: a });
        }
    }
    Ok(acks)
}

/// What the final log holds of one agent-related record.
#[derive(Debug, Clone, PartialEq)]
enum Rec {
    Heartbeat(u32),
    Status(u32, Option<String>),
    /// Any other event about this agent.
    Other(u32),
}

impl Rec {
    #[cfg(test)]
    fn agent(&self) -> u32 {
        match self {
            Rec::Heartbeat(a) | Rec::Status(a, _) | Rec::Other(a) => *a,
        }
    }
}

/// The final log: agent records by LSN, and each agent's LSNs in order.
struct FinalLog {
    by_lsn: HashMap<u64, Rec>,
    of_agent: Vec<Vec<u64>>,
    records: u64,
    last_lsn: u64,
}

fn read_log(dir: &Path, agents: usize) -> Result<FinalLog> {
    let index: HashMap<String, u32> = (0..agents).map(|i| (agent_name(i), i as u32)).collect();
    let log_dir = agentlog::StoreLayout::new(dir).log();
    let reader = agentlog::LogReader::open_with(&log_dir, false)?;
    let view = reader.view();
    let mut out = FinalLog {
        by_lsn: HashMap::new(),
        of_agent: vec![Vec::new(); agents],
        records: 0,
        last_lsn: reader.last_lsn().unwrap_or(0),
    };
    for rec in view.iter() {
        let rec = rec?;
        out.records += 1;
        let ev = decode(rec.payload).map_err(|e| BenchError::Format {
            path: view
                .locate(rec.lsn)
                .map_or_else(|| log_dir.clone(), |(p, _)| p.to_path_buf()),
            message: format!("record at lsn {} does not decode: {e}", rec.lsn),
        })?;
        let Some(&a) = ev.kind.subject_agent().and_then(|n| index.get(n)) else {
            continue;
        };
        let r = match ev.kind {
            EventKind::Heartbeat { .. } => Rec::Heartbeat(a),
            EventKind::StatusChanged { message, .. } => Rec::Status(a, message),
            _ => Rec::Other(a),
        };
        out.by_lsn.insert(rec.lsn, r);
        out.of_agent[a as usize].push(rec.lsn);
    }
    Ok(out)
}

impl FinalLog {
    /// Rule 3 for one acknowledgement; `Err` describes the loss.
    fn judge(&self, a: &Ack) -> std::result::Result<bool, String> {
        let l = &a.line;
        let what = format!(
            "{} of {} (process {}, write {}) acknowledged at lsn {}",
            if l.kind == HEARTBEAT {
                "heartbeat"
            } else {
                "status"
            },
            agent_name(l.agent as usize),
            a.worker,
            l.seq,
            l.lsn
        );
        match self.by_lsn.get(&l.lsn) {
            Some(Rec::Heartbeat(g)) if l.kind == HEARTBEAT && *g == l.agent => Ok(false),
            Some(Rec::Status(g, m))
                if l.kind != HEARTBEAT
                    && *g == l.agent
                    && m.as_deref() == Some(token(a.worker, l.seq).as_str()) =>
            {
                Ok(false)
            }
            Some(other) => Err(format!("{what}: the log has {other:?} there")),
            None if l.lsn > self.last_lsn => {
                Err(format!("{what}: past the log's last lsn {}", self.last_lsn))
            }
            None if l.kind != HEARTBEAT => Err(format!("{what}: absent from the log")),
            None => {
                let Some(mine) = self.of_agent.get(l.agent as usize) else {
                    return Err(format!("{what}: an agent outside the fleet"));
                };
                let at = mine.partition_point(|&x| x < l.lsn);
                let heartbeat = |i: Option<usize>| {
                    i.and_then(|i| mine.get(i))
                        .is_some_and(|x| matches!(self.by_lsn.get(x), Some(Rec::Heartbeat(_))))
                };
                if heartbeat(at.checked_sub(1)) && heartbeat(Some(at)) {
                    Ok(true)
                } else {
                    Err(format!(
                        "{what}: absent, and not inside a run of its heartbeats"
                    ))
                }
            }
        }
    }
}

/// Counts acknowledgement `i` as lost once (keeping the first ten reasons);
/// true when it was not counted before.
fn mark(c: &mut HistoryCheck, lost: &mut [bool], i: usize, why: String) -> bool {
    if lost[i] {
        return false;
    }
    lost[i] = true;
    c.lost += 1;
    if c.examples.len() < 10 {
        c.examples.push(why);
    }
    true
}

/// Judges the whole history (see the module doc) against the store in
/// `dir`, stopped.
pub fn check_history(
    acks: &[Ack],
    kills: &[Kill],
    dir: &Path,
    agents: usize,
) -> Result<HistoryCheck> {
    Ok(judge_all(acks, kills, &read_log(dir, agents)?))
}

/// The three rules over every acknowledgement.
fn judge_all(acks: &[Ack], kills: &[Kill], log: &FinalLog) -> HistoryCheck {
    let mut c = HistoryCheck {
        acked: acks.len() as u64,
        log_records: log.records,
        last_lsn: log.last_lsn,
        ..HistoryCheck::default()
    };
    let mut lost = vec![false; acks.len()];
    // Rule 1.
    let mut order: Vec<usize> = (0..acks.len()).collect();
    order.sort_unstable_by_key(|&i| acks[i].line.lsn);
    for w in order.windows(2) {
        if acks[w[0]].line.lsn == acks[w[1]].line.lsn {
            for &i in w {
                let why = format!("two writes acknowledged at lsn {}", acks[i].line.lsn);
                if mark(&mut c, &mut lost, i, why) {
                    c.duplicate_lsns += 1;
                }
            }
        }
    }
    // Rule 2: the least LSN that survived any kill at or after each time.
    let mut kills = kills.to_vec();
    kills.sort_unstable_by_key(|k| k.t_ns);
    let mut floor = vec![u64::MAX; kills.len() + 1];
    for i in (0..kills.len()).rev() {
        floor[i] = floor[i + 1].min(kills[i].recovered_lsn);
    }
    for (i, a) in acks.iter().enumerate() {
        let k = kills.partition_point(|k| k.t_ns <= a.line.t_ns);
        if a.line.lsn > floor[k] {
            c.beyond_a_kill += 1;
            let why = format!(
                "write acknowledged at lsn {} before a kill after which only lsn ..={} survived",
                a.line.lsn, floor[k]
            );
            mark(&mut c, &mut lost, i, why);
        }
    }
    // Rule 3.
    for (i, a) in acks.iter().enumerate() {
        if a.line.kind == HEARTBEAT {
            c.acked_heartbeats += 1;
        } else {
            c.acked_statuses += 1;
        }
        match log.judge(a) {
            Ok(false) => c.found += 1,
            Ok(true) => c.collapsed_by_compaction += 1,
            Err(why) => {
                c.missing_from_log += 1;
                mark(&mut c, &mut lost, i, why);
            }
        }
    }
    c
}

/// One minute of the run: the writes acknowledged in it and their latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MinuteRow {
    /// 0-based minute since the run's start.
    pub minute: u32,
    pub writes: u64,
    pub writes_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// The daemon's peak RSS and open descriptors sampled in it.
    pub peak_rss_bytes: u64,
    pub peak_fds: u64,
}

/// Per-minute rows from `start_ns` for `seconds`: a write counts in the
/// minute its reply arrived; the last minute may be partial (its rate is
/// over its own length). A minute with no write has no latency (zeros).
pub fn minutes(acks: &[Ack], start_ns: u64, seconds: f64) -> Vec<MinuteRow> {
    let n = (seconds / 60.0).ceil().max(1.0) as usize;
    let mut h: Vec<Histogram> = (0..n).map(|_| Histogram::new()).collect();
    for a in acks {
        let m = (a.line.t_ns.saturating_sub(start_ns) / 60_000_000_000) as usize;
        h[m.min(n - 1)].record(a.line.latency_ns);
    }
    h.iter()
        .enumerate()
        .map(|(m, h)| {
            let len = (seconds - 60.0 * m as f64).clamp(1e-9, 60.0);
            let us = |q: f64| h.quantile(q).map_or(0.0, |ns| ns as f64 / 1e3);
            MinuteRow {
                minute: m as u32,
                writes: h.count(),
                writes_per_s: h.count() as f64 / len,
                p50_us: us(0.5),
                p99_us: us(0.99),
                max_us: h.max().map_or(0.0, |ns| ns as f64 / 1e3),
                peak_rss_bytes: 0,
                peak_fds: 0,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::soak_worker::STATUS;

    fn ack(worker: usize, t_ns: u64, kind: char, agent: u32, lsn: u64, seq: u64) -> Ack {
        Ack {
            worker,
            line: AckLine {
                t_ns,
                latency_ns: 1_000,
                kind,
                agent,
                lsn,
                seq,
            },
        }
    }

    fn log(recs: &[(u64, Rec)], last: u64) -> FinalLog {
        let mut l = FinalLog {
            by_lsn: HashMap::new(),
            of_agent: vec![Vec::new(); 3],
            records: recs.len() as u64,
            last_lsn: last,
        };
        for (lsn, r) in recs {
            l.of_agent[r.agent() as usize].push(*lsn);
            l.by_lsn.insert(*lsn, r.clone());
        }
        l
    }

    #[test]
    fn a_heartbeat_may_be_absent_only_inside_a_run() {
        let l = log(
            &[
                (1, Rec::Other(0)),
                (2, Rec::Heartbeat(0)),
                (5, Rec::Heartbeat(0)),
                (6, Rec::Status(0, Some(token(0, 9)))),
                (8, Rec::Heartbeat(1)),
            ],
            9,
        );
        assert_eq!(l.judge(&ack(0, 0, HEARTBEAT, 0, 2, 1)), Ok(false));
        assert_eq!(l.judge(&ack(0, 0, HEARTBEAT, 0, 3, 2)), Ok(true));
        assert_eq!(l.judge(&ack(0, 0, STATUS, 0, 6, 9)), Ok(false));
        // The wrong token, the wrong agent, past the end, outside a run.
        assert!(l.judge(&ack(1, 0, STATUS, 0, 6, 9)).is_err());
        assert!(l.judge(&ack(0, 0, HEARTBEAT, 1, 2, 1)).is_err());
        assert!(l.judge(&ack(0, 0, HEARTBEAT, 0, 10, 1)).is_err());
        assert!(l.judge(&ack(0, 0, HEARTBEAT, 0, 7, 1)).is_err());
        assert!(l.judge(&ack(0, 0, STATUS, 0, 4, 3)).is_err());
    }

    #[test]
    fn a_reused_lsn_and_a_write_above_what_a_kill_left_are_lost() {
        let l = log(&[(2, Rec::Heartbeat(0)), (3, Rec::Heartbeat(1))], 3);
        let fine = [
            ack(0, 10, HEARTBEAT, 0, 2, 1),
            ack(1, 20, HEARTBEAT, 1, 3, 1),
        ];
        let c = judge_all(
            &fine,
            &[Kill {
                t_ns: 15,
                recovered_lsn: 2,
            }],
            &l,
        );
        assert_eq!((c.acked, c.found, c.lost), (2, 2, 0), "{c:?}");
        // Acknowledged at lsn 3 before a kill that left only ..=2: the
        // restarted daemon gave lsn 3 to another write.
        let reused = [
            ack(0, 10, HEARTBEAT, 0, 3, 1),
            ack(1, 20, HEARTBEAT, 1, 3, 1),
        ];
        let c = judge_all(
            &reused,
            &[Kill {
                t_ns: 15,
                recovered_lsn: 2,
            }],
            &l,
        );
        assert_eq!(
            (c.lost, c.duplicate_lsns, c.beyond_a_kill),
            (2, 2, 1),
            "{c:?}"
        );
        assert_eq!(c.missing_from_log, 1, "{c:?}");
        assert_eq!(c.examples.len(), 2);
    }

    #[test]
    fn minutes_cut_the_run_and_rate_a_partial_minute_over_its_length() {
        let s = 1_000_000_000u64;
        let acks: Vec<Ack> = (0..90)
            .map(|i| ack(0, 5 * s + i * s, HEARTBEAT, 0, i + 1, i))
            .collect();
        let rows = minutes(&acks, 5 * s, 90.0);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].writes, rows[1].writes), (60, 30));
        assert!((rows[0].writes_per_s - 1.0).abs() < 1e-9);
        assert!((rows[1].writes_per_s - 1.0).abs() < 1e-9);
        assert!(rows[0].p99_us > 0.0);
    }
}
