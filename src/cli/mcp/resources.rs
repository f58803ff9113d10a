//! The MCP resources of `agentlog mcp` and their subscriptions.
//!
//! - `agentlog://agents`: the registry (`list --all --json`);
//! - `agentlog://agents/{name}`: one agent (`show --json`), a template;
//! - `agentlog://agents/{name}/audit`: its timeline (`audit --json`), a
//!   template.
//!
//! A subscribed URI gets `notifications/resources/updated` for each new
//! event that changes it: any event for the registry, the events that
//! concern the agent (`EventKind::concerns_agent`, audit's own rule) for an
//! agent and its audit. One follower thread per server feeds them: with a
//! daemon it is the daemon's watch (woken by each commit, nothing polls; it
//! resumes after `lagged` and, when the daemon goes away, follows the log
//! itself); without one it follows the log's tail as `log --follow` does,
//! every [`DIRECT_FOLLOW_POLL`]. It starts at the first subscription from
//! the log's last LSN then, so nothing committed after a subscription is
//! answered can be missed.

use super::backend::{Backend, Outcome};
use crate::ops::{self, Flow};
use agentlog::daemon::client::{Client, ClientError, WatchItem};
use agentlog::registry::EventKind;
use rmcp::model::{Resource, ResourceTemplate};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

pub const REGISTRY_URI: &str = "agentlog://agents";
const AGENT_PREFIX: &str = "agentlog://agents/";
const AUDIT_SUFFIX: &str = "/audit";

/// How often the follower looks at the log's tail when no daemon serves
/// the store (a daemon's watch needs no such interval).
pub const DIRECT_FOLLOW_POLL: Duration = Duration::from_millis(20);

/// A pause before following again after the follower failed (the store
/// unreadable for a moment, a daemon restarting), so a lasting failure
/// does not spin.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// What a resource URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Registry,
    Agent(String),
    Audit(String),
}

impl Target {
    /// Parses one of the server's URIs; `None` for any other.
    pub fn parse(uri: &str) -> Option<Target> {
        if uri == REGISTRY_URI {
            return Some(Target::Registry);
        }
        let rest = uri.strip_prefix(AGENT_PREFIX)?;
        let (name, audit) = match rest.strip_suffix(AUDIT_SUFFIX) {
            Some(name) => (name, true),
            None => (rest, false),
        };
        if name.is_empty() || name.contains('/') {
            return None;
        }
        let name = name.to_string();
        Some(if audit {
            Target::Audit(name)
        } else {
            Target::Agent(name)
        })
    }

    /// Whether an event of `kind` changes what this target shows.
    fn changed_by(&self, kind: &EventKind) -> bool {
        match self {
            Target::Registry => true,
            Target::Agent(name) | Target::Audit(name) => kind.concerns_agent(name),
        }
    }

    /// The command whose `--json` document is this resource's content.
    fn command(&self) -> (&'static str, Map<String, Value>) {
        let params = |v: Value| v.as_object().cloned().unwrap_or_default();
        match self {
            Target::Registry => ("list", params(json!({"all": true}))),
            Target::Agent(name) => ("show", params(json!({"name": name}))),
            Target::Audit(name) => ("audit", params(json!({"name": name}))),
        }
    }
}

/// The listed resources: the registry.
pub fn listed() -> Vec<Resource> {
    vec![Resource::new(REGISTRY_URI, "registry")
        .with_description("Every agent of the registry, finished ones included (list --all --json)")
        .with_mime_type("application/json")]
}

/// The resource templates: one agent, and one agent's audit.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new("agentlog://agents/{name}", "agent")
            .with_description("One agent: every field, life, unread and sent counts (show --json)")
            .with_mime_type("application/json"),
        ResourceTemplate::new("agentlog://agents/{name}/audit", "audit")
            .with_description("One agent's timeline, heartbeat runs collapsed (audit --json)")
            .with_mime_type("application/json"),
    ]
}

/// A resource's content: its command's JSON document, or the command's
/// refusal (an unknown agent: "agent `x` not found").
pub fn read(backend: &Backend, target: &Target) -> Result<String, String> {
    let (method, params) = target.command();
    match backend.call(method, &params) {
        Outcome::Done(doc) => Ok(serde_json::to_string_pretty(&doc).unwrap_or_default()),
        Outcome::Refused(message) => Err(message),
        Outcome::Cancelled => Err("cancelled".into()),
    }
}

/// The subscribed URIs and the channel their updates leave by.
pub struct Subscriptions {
    dir: PathBuf,
    state: Mutex<SubState>,
}

struct SubState {
    uris: BTreeSet<String>,
    /// Set once the follower runs: where updated URIs are sent.
    updates: Option<UnboundedSender<String>>,
}

impl Subscriptions {
    pub fn new(dir: PathBuf) -> Arc<Subscriptions> {
        Arc::new(Subscriptions {
            dir,
            state: Mutex::new(SubState {
                uris: BTreeSet::new(),
                updates: None,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SubState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Subscribes `uri`; the first subscription starts the follower, from
    /// the log's last LSN now, with `updates` as the way out. Blocking (it
    /// reads the log's end).
    pub fn subscribe(
        self: &Arc<Self>,
        uri: String,
        updates: impl FnOnce() -> UnboundedSender<String>,
    ) -> Result<(), String> {
        let mut state = self.lock();
        if state.updates.is_none() {
            let from = ops::last_lsn(&self.dir).map_err(|e| agentlog::daemon::one_line(&e))? + 1;
            state.updates = Some(updates());
            let me = Arc::clone(self);
            std::thread::Builder::new()
                .name("mcp-follow".into())
                .spawn(move || me.follow(from))
                .map_err(|e| format!("starting the subscription follower: {e}"))?;
        }
        state.uris.insert(uri);
        Ok(())
    }

    pub fn unsubscribe(&self, uri: &str) {
        self.lock().uris.remove(uri);
    }

    /// Sends an update for each subscribed URI an event of `kind` changes.
    fn changed(&self, kind: &EventKind) {
        let state = self.lock();
        let Some(updates) = &state.updates else {
            return;
        };
        for uri in &state.uris {
            if Target::parse(uri).is_some_and(|t| t.changed_by(kind)) {
                let _ = updates.send(uri.clone());
            }
        }
    }

    /// Sends an update for every subscribed URI.
    fn all_changed(&self) {
        let state = self.lock();
        if let Some(updates) = &state.updates {
            for uri in &state.uris {
                let _ = updates.send(uri.clone());
            }
        }
    }

    /// Follows new events from LSN `from` for as long as the process runs:
    /// the daemon's watch when one serves the store, else the log itself.
    fn follow(&self, mut from: u64) {
        loop {
            let ended = match Client::connect(&self.dir) {
                Ok(client) => self.follow_watch(client, &mut from),
                Err(ClientError::NoDaemon(_)) => self.follow_log(&mut from),
                Err(e) => Err(e.to_string()),
            };
            if let Err(why) = ended {
                tracing::warn!("mcp: following the store for subscriptions: {why}");
                std::thread::sleep(RETRY_AFTER);
            }
        }
    }

    /// The daemon's watch from `from`, until it ends (`lagged`, the daemon
    /// stopping); `from` advances past each event handed on.
    fn follow_watch(&self, client: Client, from: &mut u64) -> Result<(), String> {
        let watch = client
            .watch(json!({"from": *from}))
            .map_err(|e| e.to_string())?;
        for item in watch {
            match item.map_err(|e| e.to_string())? {
                WatchItem::Event(e) => {
                    if let Some(lsn) = e["lsn"].as_u64() {
                        *from = (*from).max(lsn + 1);
                    }
                    if let Ok(kind) = serde_json::from_value::<EventKind>(e["event"].clone()) {
                        self.changed(&kind);
                    }
                }
                WatchItem::Lagged(resume) => {
                    *from = resume;
                    return Ok(());
                }
                WatchItem::Compacted(c) => {
                    // Records up to `resume_from` were compacted away: any
                    // subscribed resource may have changed.
                    if let Some(resume) = c["resume_from"].as_u64() {
                        *from = (*from).max(resume);
                    }
                    self.all_changed();
                }
                WatchItem::Change(_) | WatchItem::Present(_) | WatchItem::Error(_) => {}
            }
        }
        Ok(())
    }

    /// The log's tail from `from`, read-only, while no daemon serves it.
    fn follow_log(&self, from: &mut u64) -> Result<(), String> {
        ops::dump(&self.dir, *from, Some(DIRECT_FOLLOW_POLL), |entry| {
            *from = entry.lsn + 1;
            if let Ok(event) = &entry.event {
                self.changed(&event.kind);
            }
            Flow::Continue
        })
        .map_err(|e| agentlog::daemon::one_line(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse_to_their_targets_and_nothing_else() {
        assert_eq!(Target::parse(REGISTRY_URI), Some(Target::Registry));
        assert_eq!(
            Target::parse("agentlog://agents/w1"),
            Some(Target::Agent("w1".into()))
        );
        assert_eq!(
            Target::parse("agentlog://agents/w1/audit"),
            Some(Target::Audit("w1".into()))
        );
        for bad in [
            "agentlog://agents/",
            "agentlog://agents/a/b",
            "agentlog://agents/a/audit/x",
            "file:///etc/passwd",
        ] {
            assert_eq!(Target::parse(bad), None, "{bad}");
        }
    }
}
