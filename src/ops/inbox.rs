//! Read-only agent questions without a daemon: wait for mail by following
//! the log's tail ([`agentlog::ReadOnlyStore::wait_for_unread`]), describe one agent,
//! and transport presence.
//!
//! Each starts from the newest trusted snapshot plus the log after it and
//! takes no writer lock.

use super::{current, read_only, Result};
use agentlog::registry::queries::{presence, AgentSummary, Presence};
use agentlog::registry::runtime::AgentRuntime;
use agentlog::registry::sweep::is_transport_attached;
use agentlog::registry::{ProcessProbe, RegistryError};
use agentlog::store::Waited;
use agentlog::time::Timestamp;
use std::path::Path;
use std::time::Duration;

/// Blocks until `agent` has unread mail or `timeout` passes, following the
/// log of `dir` read-only ([`agentlog::ReadOnlyStore::wait_for_unread`]).
pub fn wait_for_unread(
    dir: &Path,
    agent: &str,
    project_root: Option<&str>,
    now: Option<Timestamp>,
    timeout: Duration,
    waiting: impl FnMut(),
) -> Result<Waited> {
    Ok(read_only(dir)?.wait_for_unread(agent, project_root, now, timeout, waiting)?)
}

/// One agent's row, life, unread (at `now`) and sent counts and the LSN of
/// its last event, from the snapshot and the tail only; `NotFound` for an
/// unknown name.
/// Its runtime facts come with it.
pub fn show(
    dir: &Path,
    name: &str,
    now: Timestamp,
) -> Result<(AgentSummary, Option<AgentRuntime>)> {
    let (state, _) = current(dir, &mut ())?;
    let summary = state.summary(name, now)?;
    Ok((summary, state.runtime(name).cloned()))
}

/// Whether `name`'s transport is live (see `registry::queries::presence`).
pub fn agent_presence(dir: &Path, name: &str, probe: &dyn ProcessProbe) -> Result<Presence> {
    let (state, _) = current(dir, &mut ())?;
    let a = state.agent(name).ok_or_else(|| RegistryError::NotFound {
        agent: name.to_string(),
    })?;
    Ok(presence(a, probe))
}

/// The presence of every transport-attached agent (a transport client
/// recorded, an interactive host, an MCP channel or type: the agents a
/// lapsed lease makes `idle`), in registration order.
pub fn transport_presence(dir: &Path, probe: &dyn ProcessProbe) -> Result<Vec<(String, Presence)>> {
    let (state, _) = current(dir, &mut ())?;
    Ok(state
        .agents()
        .iter()
        .filter(|a| is_transport_attached(a))
        .map(|a| (a.name.clone(), presence(a, probe)))
        .collect())
}
