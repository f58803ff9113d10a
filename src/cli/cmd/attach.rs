//! `agentlog attach` and `detach`: controller and observer leases on an
//! agent (registry::runtime), and the endpoint flags `register` and `update`
//! share. Through the daemon the lease is bound to the peer's uid (the
//! caller comes from the request's credentials, `store::caller_here`);
//! without one, to no uid.

use crate::cli::args::At;
use crate::cli::open::with_store;
use crate::cli::output::{self, Ui, W};
use agentlog::daemon::reach::live_tally;
use agentlog::registry::runtime::checks::{Attach, DEFAULT_LEASE_TTL_MS};
use agentlog::registry::runtime::{EndpointUpdates, LeaseRole};
use agentlog::store::caller_here;
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

/// How to reach the agent (registry-only: never exported).
#[derive(Debug, Args, Default)]
pub struct EndpointFlags {
    /// Where the agent answers, shown as is (http://…, unix:/path, …)
    #[arg(long, value_name = "TEXT")]
    pub endpoint: Option<String>,
    /// A transport the endpoint offers (http, acp, …); repeat for several
    #[arg(long = "capability", value_name = "CAP")]
    pub capabilities: Vec<String>,
    /// The model the agent runs
    #[arg(long, value_name = "TEXT")]
    pub model: Option<String>,
    /// A title for the agent's session
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
    /// Where the agent's durable session lives
    #[arg(long, value_name = "P")]
    pub persistence_location: Option<String>,
    /// Pid of a supervising process (shown, never used as authority)
    #[arg(long, value_name = "PID")]
    pub supervisor: Option<u32>,
}

impl EndpointFlags {
    /// The flags given, as updates (unset flags leave fields alone).
    pub fn into_updates(self) -> EndpointUpdates {
        EndpointUpdates {
            endpoint: self.endpoint.map(Some),
            capabilities: (!self.capabilities.is_empty()).then_some(self.capabilities),
            model: self.model.map(Some),
            title: self.title.map(Some),
            persistence_location: self.persistence_location.map(Some),
            supervisor: self.supervisor.map(Some),
        }
    }
}

#[derive(Debug, Args)]
pub struct AttachArgs {
    pub name: String,
    /// Take the controller lease (at most one client holds it)
    #[arg(
        long,
        conflicts_with = "observer",
        required_unless_present = "observer"
    )]
    pub controller: bool,
    /// Take an observer lease (any number)
    #[arg(long)]
    pub observer: bool,
    /// The attaching client's id; attaching again renews its lease
    #[arg(long, value_name = "ID")]
    pub client: String,
    /// Lease length in seconds [default: 60]
    #[arg(long, value_name = "S")]
    pub ttl: Option<u64>,
    /// Replace a controller whose lease has expired
    #[arg(long, requires = "controller")]
    pub take_over: bool,
    #[command(flatten)]
    pub at: At,
}

#[derive(Debug, Args)]
pub struct DetachArgs {
    pub name: String,
    /// The client whose lease ends
    #[arg(long, value_name = "ID")]
    pub client: String,
    /// Only its controller lease
    #[arg(long, conflicts_with = "observer")]
    pub controller: bool,
    /// Only its observer lease
    #[arg(long)]
    pub observer: bool,
    #[command(flatten)]
    pub at: At,
}

fn role_of(controller: bool, observer: bool) -> Option<LeaseRole> {
    match (controller, observer) {
        (true, _) => Some(LeaseRole::Controller),
        (_, true) => Some(LeaseRole::Observer),
        _ => None,
    }
}

pub fn attach(w: &mut W, ui: &Ui, dir: PathBuf, a: AttachArgs) -> Result<ExitCode> {
    let at = a.at.checked()?;
    let ttl_ms = match a.ttl {
        None => DEFAULT_LEASE_TTL_MS,
        Some(s) => i64::try_from(s).unwrap_or(i64::MAX).saturating_mul(1000),
    };
    let role = role_of(a.controller, a.observer).unwrap_or(LeaseRole::Observer);
    let req = Attach {
        agent: a.name.clone(),
        client: a.client.clone(),
        role,
        ttl_ms,
        take_over: a.take_over,
        caller: caller_here(),
        outage_tally: live_tally(&dir, &a.name).map(|t| (t.last_failure, t.failures)),
    };
    let (lsns, lease) = with_store(&dir, |s| {
        let lsns = s.attach(&req, at)?;
        let lease = s.with_state(|st, _| {
            st.runtime(&req.agent)
                .and_then(|r| r.lease(&req.client, role).cloned())
        });
        Ok((lsns, lease))
    })?;
    let lsn = lsns.last().copied().unwrap_or_default();
    let expires = lease.as_ref().map(|l| l.expires_at.to_string());
    if ui.json {
        output::json(
            w,
            &json!({"agent": a.name, "client": a.client, "role": role.as_str(), "lsn": lsn,
                    "expires_at": expires, "uid": lease.as_ref().and_then(|l| l.uid)}),
        )?;
    } else {
        writeln!(
            w,
            "`{}`: {} `{}` attached until {} (lsn {lsn})",
            output::escaped(&a.name),
            role.as_str(),
            output::escaped(&a.client),
            expires.as_deref().unwrap_or("-"),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn detach(w: &mut W, ui: &Ui, dir: PathBuf, a: DetachArgs) -> Result<ExitCode> {
    let at = a.at.checked()?;
    let role = role_of(a.controller, a.observer);
    let caller = caller_here();
    let lsn = with_store(&dir, |s| {
        Ok(s.detach(&a.name, &a.client, role, &caller, at)?)
    })?;
    if ui.json {
        output::json(w, &json!({"agent": a.name, "client": a.client, "lsn": lsn}))?;
    } else {
        writeln!(
            w,
            "`{}`: `{}` detached (lsn {lsn})",
            output::escaped(&a.name),
            output::escaped(&a.client)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
