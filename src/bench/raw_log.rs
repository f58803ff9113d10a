//! [`RawLogTarget`] appends one fixed-layout record per event straight to a
//! [`Log`]: a 40-byte heartbeat (kind, agent, writer, time, pid, pid start
//! time), a 40-byte status change, a 96-byte message post. It measures the log
//! engine's share of a heartbeat (encode into the map + publish, and the
//! group-commit wait when durable), not command validation or the fold: its
//! reports are labelled `raw-log`. The registry `Store` target
//! (`super::targets`) replaces it as the log-only comparison point. Appends
//! write the payload directly into the map (`append_with`): no allocation per
//! event. The cargo benches (`heartbeat_harness`, `sqlite_baseline`) run it;
//! the binary's commands do not.

use super::baseline::agent_name;
use super::heartbeats::{HeartbeatBenchConfig, HeartbeatTarget};
use super::Result;
use agentlog::log::{Durability, Log, LogOptions};
use agentlog::model::Status;
use agentlog::time::Timestamp;
use std::path::Path;

/// Payload sizes of the raw records.
pub const HEARTBEAT_PAYLOAD: usize = 40;
pub const STATUS_PAYLOAD: usize = 40;
pub const POST_PAYLOAD: usize = 96;
pub const REGISTER_PAYLOAD: usize = 64;

const KIND_REGISTER: u8 = 1;
const KIND_HEARTBEAT: u8 = 2;
const KIND_STATUS: u8 = 3;
const KIND_POST: u8 = 4;

/// Raw appends of heartbeat-sized records to a log.
pub struct RawLogTarget {
    log: Log,
    durability: Durability,
}

impl std::fmt::Debug for RawLogTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawLogTarget")
            .field("dir", &self.log.dir())
            .field("durability", &self.durability)
            .finish()
    }
}

/// The common 24-byte head: kind, status, writer, agent, time, pid.
#[inline]
fn head(buf: &mut [u8], kind: u8, status: u8, writer: usize, agent: usize) {
    buf[0] = kind;
    buf[1] = status;
    buf[2..4].copy_from_slice(&(writer as u16).to_le_bytes());
    buf[4..8].copy_from_slice(&(agent as u32).to_le_bytes());
    buf[8..16].copy_from_slice(&Timestamp::now().as_millis().to_le_bytes());
    buf[16..20].copy_from_slice(&(10_000 + agent as u32).to_le_bytes());
    buf[20..24].fill(0);
}

impl RawLogTarget {
    /// Opens (creating) a log in `dir` with default options.
    pub fn open(dir: &Path, durable: bool) -> Result<Self> {
        Self::open_with(dir, durable, LogOptions::default())
    }

    pub fn open_with(dir: &Path, durable: bool, opts: LogOptions) -> Result<Self> {
        let (log, _report) = Log::open(dir, opts)?;
        Ok(RawLogTarget {
            log,
            durability: if durable {
                Durability::Durable
            } else {
                Durability::Lazy
            },
        })
    }

    /// A factory for [`super::heartbeats::run_heartbeats_on`] and the scaling
    /// sweep: a log in `<dir>/agentlog`.
    pub fn factory(dir: &Path, cfg: &HeartbeatBenchConfig) -> Result<Box<dyn HeartbeatTarget>> {
        Ok(Box::new(Self::open(&dir.join("agentlog"), cfg.durable)?))
    }

    pub fn log(&self) -> &Log {
        &self.log
    }
}

impl HeartbeatTarget for RawLogTarget {
    fn name(&self) -> &'static str {
        "raw-log"
    }

    fn register_all(&mut self, agents: usize) -> Result<()> {
        // Registrations are setup, not measured: lazy appends, one sync at the end.
        for i in 0..agents {
            self.log
                .append_with(REGISTER_PAYLOAD, Durability::Lazy, |b| {
                    head(b, KIND_REGISTER, 0, 0, i);
                    let name = agent_name(i);
                    let n = name.len().min(REGISTER_PAYLOAD - 24);
                    b[24..24 + n].copy_from_slice(&name.as_bytes()[..n]);
                    b[24 + n..].fill(0);
                })?;
        }
        self.log.sync()?;
        Ok(())
    }

    #[inline]
    fn heartbeat(&self, agent: usize, writer: usize) -> Result<()> {
        self.log
            .append_with(HEARTBEAT_PAYLOAD, self.durability, |b| {
                head(b, KIND_HEARTBEAT, 0, writer, agent);
                b[24..32].copy_from_slice(&(1_000_000 + agent as u64).to_le_bytes());
                b[32..].fill(0);
            })?;
        Ok(())
    }

    fn status(&self, agent: usize, writer: usize, status: Status) -> Result<()> {
        let code = Status::ALL.iter().position(|s| *s == status).unwrap_or(0) as u8;
        self.log.append_with(STATUS_PAYLOAD, self.durability, |b| {
            head(b, KIND_STATUS, code, writer, agent);
            b[24..].fill(0);
        })?;
        Ok(())
    }

    fn post(&self, from: usize, to: usize, writer: usize) -> Result<()> {
        self.log.append_with(POST_PAYLOAD, self.durability, |b| {
            head(b, KIND_POST, 0, writer, from);
            b[24..28].copy_from_slice(&(to as u32).to_le_bytes());
            let body = b"benchmark message body";
            b[28..28 + body.len()].copy_from_slice(body);
            b[28 + body.len()..].fill(0);
        })?;
        Ok(())
    }

    fn log_bytes(&self) -> Result<u64> {
        Ok(self.log.stats().bytes)
    }

    fn bytes_written(&self) -> u64 {
        self.log.stats().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_land_in_the_log_with_their_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = RawLogTarget::open(dir.path(), true).unwrap();
        t.register_all(3).unwrap();
        let before = t.bytes_written();
        t.heartbeat(2, 1).unwrap();
        t.status(1, 0, Status::Busy).unwrap();
        t.post(0, 1, 0).unwrap();
        let rec = |n| agentlog::internals::record_size(n) as u64;
        assert_eq!(
            t.bytes_written() - before,
            rec(HEARTBEAT_PAYLOAD) + rec(STATUS_PAYLOAD) + rec(POST_PAYLOAD)
        );
        assert_eq!(t.log().last_lsn(), Some(6));
        assert_eq!(t.log().synced_lsn(), 6, "durable appends are synced");
        let view = t.log().view();
        let recs: Vec<_> = view.iter_from(4).map(|r| r.unwrap()).collect();
        assert_eq!(recs.len(), 3);
        let hb = recs[0].payload;
        assert_eq!(hb.len(), HEARTBEAT_PAYLOAD);
        assert_eq!(
            (hb[0], u16::from_le_bytes([hb[2], hb[3]])),
            (KIND_HEARTBEAT, 1)
        );
        assert_eq!(u32::from_le_bytes(hb[4..8].try_into().unwrap()), 2);
        assert_eq!(
            (recs[1].payload[0], recs[1].payload[1]),
            (KIND_STATUS, 3),
            "busy"
        );
        assert_eq!(recs[2].payload.len(), POST_PAYLOAD);
    }
}
