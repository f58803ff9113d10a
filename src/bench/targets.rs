//! The agentlog side of the heartbeat workload.
//!
//! [`StoreTarget`] is the default: each event is a real registry command on a
//! [`Store`] (validation, encode, append, apply to the folded state), with
//! heartbeats, status changes and posts all at the run's durability (`Lazy`,
//! or `Durable` = acknowledged after a group-commit sync covering it).
//!
//! The log engine's share alone is `super::raw_log`.

use super::baseline::agent_name;
use super::heartbeats::{HeartbeatBenchConfig, HeartbeatTarget};
use super::{BenchError, Result};
use agentlog::log::Durability;
use agentlog::model::Status;
use agentlog::registry::{PostMessage, Registration};
use agentlog::store::{Store, StoreOptions};
use std::path::Path;

/// Registry commands on a [`Store`] (`target: "store"`).
pub struct StoreTarget {
    store: Store,
    names: Vec<String>,
}

impl std::fmt::Debug for StoreTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreTarget")
            .field("dir", &self.store.dir())
            .field("agents", &self.names.len())
            .finish()
    }
}

/// The pid agent `i` registers with (and names in its heartbeats).
fn pid_of(i: usize) -> u32 {
    10_000 + i as u32
}

impl StoreTarget {
    /// Opens (creating) a store in `dir`; every command at `durable`.
    pub fn open(dir: &Path, durable: bool) -> Result<Self> {
        let d = if durable {
            Durability::Durable
        } else {
            Durability::Lazy
        };
        let opts = StoreOptions {
            heartbeat_durability: d,
            command_durability: d,
            ..StoreOptions::default()
        };
        Ok(StoreTarget {
            store: Store::open(dir, opts)?,
            names: Vec::new(),
        })
    }

    /// A factory for [`super::heartbeats::run_heartbeats_on`] and the
    /// scaling sweep: a store in `<dir>/agentlog`.
    pub fn factory(dir: &Path, cfg: &HeartbeatBenchConfig) -> Result<Box<dyn HeartbeatTarget>> {
        Ok(Box::new(Self::open(&dir.join("agentlog"), cfg.durable)?))
    }

    #[cfg(test)]
    pub fn store(&self) -> &Store {
        &self.store
    }

    fn name_of(&self, i: usize) -> Result<&str> {
        self.names
            .get(i)
            .map(String::as_str)
            .ok_or_else(|| BenchError::Target {
                target: "store",
                agent: i,
                message: format!("only {} agents registered", self.names.len()),
            })
    }
}

impl HeartbeatTarget for StoreTarget {
    fn name(&self) -> &'static str {
        "store"
    }

    fn register_all(&mut self, agents: usize) -> Result<()> {
        self.names = (0..agents).map(agent_name).collect();
        for (i, name) in self.names.iter().enumerate() {
            let mut r = Registration::new(name, "claude", "/home/dev/proj");
            r.pid = Some(pid_of(i));
            r.pid_start_time = Some(1_000_000 + i as u64);
            r.log_path = Some(format!("/home/dev/.agents/{name}.log"));
            self.store.register(r, None)?;
        }
        self.store.sync()?;
        Ok(())
    }

    #[inline]
    fn heartbeat(&self, agent: usize, _writer: usize) -> Result<()> {
        self.store
            .heartbeat(self.name_of(agent)?, Some(pid_of(agent)), None)?;
        Ok(())
    }

    fn status(&self, agent: usize, _writer: usize, status: Status) -> Result<()> {
        self.store
            .set_status(self.name_of(agent)?, status, None, None)?;
        Ok(())
    }

    fn post(&self, from: usize, to: usize, _writer: usize) -> Result<()> {
        let post = PostMessage::new(
            self.name_of(from)?,
            Some(self.name_of(to)?),
            "status",
            "benchmark message body",
        );
        self.store.post_message(post, None)?;
        Ok(())
    }

    fn log_bytes(&self) -> Result<u64> {
        Ok(self.store.log().stats().bytes)
    }

    fn bytes_written(&self) -> u64 {
        self.store.log().stats().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_target_runs_real_commands() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = StoreTarget::open(dir.path(), false).unwrap();
        t.register_all(3).unwrap();
        t.heartbeat(2, 0).unwrap();
        t.status(1, 0, Status::Busy).unwrap();
        t.post(0, 1, 0).unwrap();
        let state = t.store().state();
        assert_eq!(state.agent("agent-000001").unwrap().status, Status::Busy);
        // 3 registrations, a heartbeat, a status, the post and the
        // recipient's `last_message_at` stamp written with it.
        assert_eq!(t.store().applied_lsn(), 7);
        // Out of range is a named error, not a panic.
        let e = t.heartbeat(9, 0).unwrap_err().to_string();
        assert!(e.contains("agent #9"), "{e}");
    }
}
