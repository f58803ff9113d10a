//! Presence follows the MCP session: what `agentlog mcp` remembers of the
//! one client it serves.
//!
//! - The process identity of its registrations is the MCP host: the
//!   process that started the server (its parent, or `--host-pid`), with
//!   that process's start time, so pid reuse is caught.
//! - The transport client is the `clientInfo` of the client's `initialize`.
//! - The agents registered through this session have their heartbeats
//!   renewed by each tool call.
//! - When the session ends (stdin closes, the client dies, a signal), each
//!   of them gets status `idle` with [`MSG_TRANSPORT_CLOSED`]: its presence
//!   ends even while the host process lives on (`presence` says
//!   `TransportClosed`), and it is idle rather than exited, as the seed
//!   treats a transport-attached agent (a new registration attaches it
//!   again). Waiting reads still in flight are cancelled first, so nothing
//!   is marked read for a client that is gone.

use super::backend::{Backend, Cancel, Outcome};
use super::tools::Identity;
use agentlog::probe::ProcProbe;
use agentlog::registry::sweep::{ProcessProbe, ProcessState, MSG_TRANSPORT_CLOSED};
use rmcp::service::Peer;
use rmcp::RoleServer;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// The session's host identity, its agents and its waiting reads.
pub struct Session {
    host_pid: Option<u32>,
    host_start_time: Option<u64>,
    agents: Mutex<BTreeSet<String>>,
    reads: Mutex<Vec<Arc<Cancel>>>,
}

impl Session {
    /// A session whose host is `host_pid`, else this process's parent.
    pub fn new(host_pid: Option<u32>) -> Session {
        let host_pid = host_pid.or_else(|| {
            rustix::process::getppid().and_then(|p| u32::try_from(p.as_raw_nonzero().get()).ok())
        });
        let host_start_time = host_pid.and_then(|pid| match ProcProbe.probe(pid) {
            ProcessState::Running(start) => start,
            ProcessState::Gone | ProcessState::Unknown => None,
        });
        Session {
            host_pid,
            host_start_time,
            agents: Mutex::new(BTreeSet::new()),
            reads: Mutex::new(Vec::new()),
        }
    }

    /// Who this session's registrations are, with the client as the peer's
    /// `initialize` named it.
    pub fn identity(&self, peer: &Peer<RoleServer>) -> Identity {
        let transport_client = peer.peer_info().map(|init| {
            let c = &init.client_info;
            // `NAME/VERSION` splits at the first `/`: keep the name whole.
            let name = c.name.replace('/', "-");
            if c.version.is_empty() {
                name
            } else {
                format!("{name}/{}", c.version)
            }
        });
        Identity {
            host_pid: self.host_pid,
            host_start_time: self.host_start_time,
            transport_client,
        }
    }

    fn agent_set(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.agents.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `name` was registered through this session.
    pub fn joined(&self, name: String) {
        self.agent_set().insert(name);
    }

    /// The session's agents but `except`.
    pub fn agents_except(&self, except: Option<&str>) -> Vec<String> {
        self.agent_set()
            .iter()
            .filter(|a| Some(a.as_str()) != except)
            .cloned()
            .collect()
    }

    /// Renews the heartbeat of each of `agents` as the host `pid`. A
    /// refusal (the agent removed, exited, taken over) is no failure of
    /// the tool call that renews: it is logged and the call goes on.
    pub fn renew(backend: &Backend, agents: &[String], pid: Option<u32>) {
        for name in agents {
            let mut params = Map::new();
            params.insert("name".into(), json!(name));
            if let Some(pid) = pid {
                params.insert("pid".into(), json!(pid));
            }
            if let Outcome::Refused(why) = backend.call("heartbeat", &params) {
                tracing::debug!(agent = %name, "mcp: heartbeat not renewed: {why}");
            }
        }
    }

    /// A new waiting read's cancellation, which the session's end also sets.
    pub fn waiting_read(&self) -> Arc<Cancel> {
        let cancel = Arc::new(Cancel::default());
        self.reads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::clone(&cancel));
        cancel
    }

    /// The waiting read of `cancel` returned.
    pub fn read_done(&self, cancel: &Arc<Cancel>) {
        self.reads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|c| !Arc::ptr_eq(c, cancel));
    }

    /// The client went away: cancels the waiting reads, then records each
    /// of the session's agents `idle` ([`MSG_TRANSPORT_CLOSED`]). Returns
    /// the agents so recorded.
    pub fn end(&self, backend: &Backend) -> Vec<String> {
        for cancel in self
            .reads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            cancel.cancel();
        }
        let mut ended = Vec::new();
        for name in self.agents_except(None) {
            let mut params: Map<String, Value> = Map::new();
            params.insert("name".into(), json!(name));
            params.insert("status".into(), json!("idle"));
            params.insert("message".into(), json!(MSG_TRANSPORT_CLOSED));
            match backend.call("status", &params) {
                Outcome::Refused(why) => {
                    tracing::warn!(agent = %name, "mcp: session ended, agent not marked idle: {why}")
                }
                _ => ended.push(name),
            }
        }
        ended
    }
}
