//! The baseline: how the systems agentlog replaces record a heartbeat.
//!
//! One schema-v4-like `registry.json` holds every agent row (plus the
//! registry's `last_active` and a capped `messages` list, as the agent-registry
//! seed keeps them in the same file). Every change takes an exclusive `flock`
//! on the sidecar `registry.json.lock`, reads the whole file, parses it,
//! changes one row, serializes the whole registry, writes a temporary file in
//! the same folder, fsyncs it, renames it over `registry.json`, fsyncs the
//! folder and unlocks. The cost is O(registry size) per heartbeat: that is
//! what the comparison measures, so nothing here is cached between calls.

use super::heartbeats::HeartbeatTarget;
use super::{BenchError, Result};
use agentlog::model::Status;
use agentlog::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Live messages kept in the file (the seed's `max_messages` default).
const MAX_MESSAGES: usize = 200;

/// One schema-v4 row plus the registry's `last_active`, in the Python
/// writer's key order.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Row {
    name: String,
    provider: String,
    cwd: String,
    log_path: Option<String>,
    claude_short_id: Option<String>,
    codex_session_id: Option<String>,
    gemini_session_id: Option<String>,
    created_at: String,
    status: String,
    last_message_at: Option<String>,
    mcp_channel_id: Option<String>,
    host_mode: Option<String>,
    claude_session_uuid: Option<String>,
    short_id: String,
    project_root: String,
    messaging_socket_path: Option<String>,
    cc_session_id: Option<String>,
    pid: Option<u32>,
    pid_start_time: Option<u64>,
    last_reconciled_at: Option<String>,
    last_active: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Message {
    id: u64,
    from: String,
    to: Option<String>,
    category: String,
    body: String,
    created_at: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct RegistryFile {
    schema_version: u32,
    agents: Vec<Row>,
    #[serde(default)]
    messages: Vec<Message>,
    #[serde(default)]
    next_message_id: u64,
}

/// The whole-file JSON rewrite registry, driven by the heartbeat workload.
#[derive(Debug)]
pub struct JsonRewriteRegistry {
    dir: PathBuf,
    path: PathBuf,
    lock_path: PathBuf,
    tmp_path: PathBuf,
    names: Vec<String>,
    bytes_written: AtomicU64,
}

/// The agent name the benchmarks use for agent number `i`.
pub fn agent_name(i: usize) -> String {
    format!("agent-{i:06}")
}

fn row(i: usize, now: &str) -> Row {
    let name = agent_name(i);
    Row {
        log_path: Some(format!("/home/dev/.agents/{name}.log")),
        claude_short_id: Some(format!("{:08x}", i as u32 ^ 0x5a5a_5a5a)),
        codex_session_id: None,
        gemini_session_id: None,
        created_at: now.to_string(),
        status: Status::Live.as_str().to_string(),
        last_message_at: None,
        mcp_channel_id: None,
        host_mode: Some("exec".into()),
        claude_session_uuid: Some(format!("5f0c2d1e-8a7b-4c6d-9e0f-{:012x}", i)),
        short_id: String::new(),
        project_root: "/home/dev/proj".into(),
        messaging_socket_path: None,
        cc_session_id: None,
        pid: Some(10_000 + i as u32),
        pid_start_time: Some(1_000_000 + i as u64),
        last_reconciled_at: None,
        last_active: now.to_string(),
        provider: "claude".into(),
        cwd: "/home/dev/proj".into(),
        name,
    }
}

impl JsonRewriteRegistry {
    /// A registry in `dir` (created if missing); no file is written until
    /// [`HeartbeatTarget::register_all`].
    pub fn new(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .map_err(|e| BenchError::io("cannot create baseline directory", dir, e))?;
        Ok(JsonRewriteRegistry {
            dir: dir.to_path_buf(),
            path: dir.join("registry.json"),
            lock_path: dir.join("registry.json.lock"),
            tmp_path: dir.join(".registry.json.tmp"),
            names: Vec::new(),
            bytes_written: AtomicU64::new(0),
        })
    }

    /// The registry another process built in `dir` with
    /// [`HeartbeatTarget::register_all`] of `agents` (its rows are found by
    /// name on every change); writes nothing.
    pub fn attach(dir: &Path, agents: usize) -> Result<Self> {
        let mut reg = JsonRewriteRegistry::new(dir)?;
        reg.names = (0..agents).map(agent_name).collect();
        Ok(reg)
    }

    /// Read-modify-write of the whole file under the exclusive sidecar lock.
    fn mutate(
        &self,
        agent: usize,
        change: impl FnOnce(&mut RegistryFile) -> Result<()>,
    ) -> Result<()> {
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock_path)
            .map_err(|e| BenchError::io("cannot open lock file", &self.lock_path, e))?;
        lock_exclusive(&lock, &self.lock_path)?;
        let text =
            std::fs::read(&self.path).map_err(|e| BenchError::io("cannot read", &self.path, e))?;
        let mut reg: RegistryFile =
            serde_json::from_slice(&text).map_err(|e| BenchError::Json {
                path: self.path.clone(),
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            })?;
        if agent >= reg.agents.len() {
            return Err(BenchError::Target {
                target: "json-rewrite",
                agent,
                message: format!("not in {} ({} rows)", self.path.display(), reg.agents.len()),
            });
        }
        change(&mut reg)?;
        self.publish(&reg)
        // `lock` drops here: closing the descriptor releases the flock.
    }

    /// Temp file + fsync + rename + fsync of the folder.
    fn publish(&self, reg: &RegistryFile) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(reg).map_err(|e| BenchError::Format {
            path: self.path.clone(),
            message: format!("cannot serialize: {e}"),
        })?;
        let mut tmp = File::create(&self.tmp_path)
            .map_err(|e| BenchError::io("cannot create", &self.tmp_path, e))?;
        tmp.write_all(&bytes)
            .and_then(|_| tmp.sync_all())
            .map_err(|e| BenchError::io("cannot write+fsync", &self.tmp_path, e))?;
        drop(tmp);
        std::fs::rename(&self.tmp_path, &self.path)
            .map_err(|e| BenchError::io("cannot rename over", &self.path, e))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| BenchError::io("cannot fsync folder", &self.dir, e))?;
        self.bytes_written
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Finds the row of agent `i` by name, as the seeds do (linear scan).
    fn row_mut<'a>(&self, reg: &'a mut RegistryFile, i: usize) -> Result<&'a mut Row> {
        let name = self.names.get(i).ok_or_else(|| BenchError::Target {
            target: "json-rewrite",
            agent: i,
            message: format!("only {} agents registered", self.names.len()),
        })?;
        reg.agents
            .iter_mut()
            .find(|r| &r.name == name)
            .ok_or_else(|| BenchError::Target {
                target: "json-rewrite",
                agent: i,
                message: format!("`{name}` not found in {}", self.path.display()),
            })
    }
}

// `File::lock` is flock(LOCK_EX) on Linux, the lock family both replaced
// writers use (std since Rust 1.89, the crate's MSRV).
fn lock_exclusive(f: &File, path: &Path) -> Result<()> {
    f.lock()
        .map_err(|e| BenchError::io("cannot flock", path, e))
}

impl HeartbeatTarget for JsonRewriteRegistry {
    fn name(&self) -> &'static str {
        "json-rewrite"
    }

    fn register_all(&mut self, agents: usize) -> Result<()> {
        let now = Timestamp::now().to_rfc3339_secs();
        self.names = (0..agents).map(agent_name).collect();
        let reg = RegistryFile {
            schema_version: 4,
            agents: (0..agents).map(|i| row(i, &now)).collect(),
            messages: Vec::new(),
            next_message_id: 1,
        };
        self.publish(&reg)
    }

    fn heartbeat(&self, agent: usize, _writer: usize) -> Result<()> {
        let now = Timestamp::now().to_rfc3339_secs();
        self.mutate(agent, |reg| {
            self.row_mut(reg, agent)?.last_active = now;
            Ok(())
        })
    }

    fn status(&self, agent: usize, _writer: usize, status: Status) -> Result<()> {
        let now = Timestamp::now().to_rfc3339_secs();
        self.mutate(agent, |reg| {
            let r = self.row_mut(reg, agent)?;
            r.status = status.as_str().to_string();
            r.last_active = now;
            Ok(())
        })
    }

    fn post(&self, from: usize, to: usize, _writer: usize) -> Result<()> {
        let now = Timestamp::now().to_rfc3339_secs();
        let to_name = self.names.get(to).cloned();
        self.mutate(from, |reg| {
            self.row_mut(reg, from)?.last_message_at = Some(now.clone());
            let id = reg.next_message_id;
            reg.next_message_id += 1;
            reg.messages.push(Message {
                id,
                from: agent_name(from),
                to: to_name,
                category: "status".into(),
                body: format!("benchmark message {id}"),
                created_at: now,
            });
            if reg.messages.len() > MAX_MESSAGES {
                let excess = reg.messages.len() - MAX_MESSAGES;
                reg.messages.drain(..excess);
            }
            Ok(())
        })
    }

    fn log_bytes(&self) -> Result<u64> {
        std::fs::metadata(&self.path)
            .map(|m| m.len())
            .map_err(|e| BenchError::io("cannot stat", &self.path, e))
    }

    fn bytes_written(&self) -> u64 {
        self.bytes_written.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_rewrites_the_whole_file_and_keeps_it_valid() {
        let dir = tempfile::tempdir().unwrap();
        let mut reg = JsonRewriteRegistry::new(dir.path()).unwrap();
        reg.register_all(10).unwrap();
        let first = reg.bytes_written();
        assert!(first > 0);
        reg.heartbeat(3, 0).unwrap();
        reg.status(4, 0, Status::Busy).unwrap();
        reg.post(5, 6, 0).unwrap();
        // Each change wrote the whole file again.
        assert!(reg.bytes_written() >= 4 * first);
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&reg.path).unwrap()).unwrap();
        assert_eq!(v["schema_version"], 4);
        assert_eq!(v["agents"].as_array().unwrap().len(), 10);
        assert_eq!(v["agents"][4]["status"], "busy");
        assert_eq!(v["messages"][0]["from"], "agent-000005");
        assert!(v["agents"][5]["last_message_at"].is_string());
        assert!(!dir.path().join(".registry.json.tmp").exists());
    }

    #[test]
    fn unknown_agent_and_corrupt_file_are_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let mut reg = JsonRewriteRegistry::new(dir.path()).unwrap();
        reg.register_all(2).unwrap();
        let e = reg.heartbeat(7, 0).unwrap_err().to_string();
        assert!(e.contains("agent #7") && e.contains("2 rows"), "{e}");
        std::fs::write(&reg.path, b"{\"schema_version\": 4, \"agents\": [").unwrap();
        let e = reg.heartbeat(0, 0).unwrap_err().to_string();
        assert!(e.contains("registry.json") && e.contains("line 1"), "{e}");
    }
}
