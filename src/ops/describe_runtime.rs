//! One-line descriptions of the runtime events (tags 19–24) for `log` and
//! `audit`: which endpoint fields changed, who attached, renewed or
//! detached (and why a lease ended: detach, expiry by the sweep, take-over),
//! and outages with their counts. `own` drops the agent's name (its own
//! timeline).

use super::describe::Description;
use agentlog::registry::runtime::{
    Actor, EndpointUpdates, LeaseRole, OutageEnd, ReleaseReason, RuntimeEvent,
};
use agentlog::time::Timestamp;

fn actor(by: &Actor) -> String {
    match by {
        Actor::Peer { uid: Some(u) } => format!("by uid {u}"),
        Actor::Peer { uid: None } => "by a direct command".to_string(),
        Actor::Sweep => "by the sweep".to_string(),
    }
}

fn time(t: Timestamp) -> String {
    t.to_rfc3339_millis()
}

fn role(r: LeaseRole) -> &'static str {
    r.as_str()
}

/// `endpoint=… capabilities=[…]`: the fields set, `x cleared` for cleared ones.
fn fields(f: &EndpointUpdates) -> String {
    let mut parts = Vec::new();
    let mut text = |name: &str, v: &Option<Option<String>>| match v {
        Some(Some(t)) => parts.push(format!("{name}={t}")),
        Some(None) => parts.push(format!("{name} cleared")),
        None => {}
    };
    text("endpoint", &f.endpoint);
    text("model", &f.model);
    text("title", &f.title);
    text("persistence_location", &f.persistence_location);
    if let Some(c) = &f.capabilities {
        parts.push(format!("capabilities=[{}]", c.join(",")));
    }
    match f.supervisor {
        Some(Some(p)) => parts.push(format!("supervisor={p}")),
        Some(None) => parts.push("supervisor cleared".to_string()),
        None => {}
    }
    parts.join(" ")
}

pub(super) fn describe(r: &RuntimeEvent, own: bool) -> Description {
    let who = if own {
        String::new()
    } else {
        format!("`{}` ", r.agent())
    };
    let (what, why) = match r {
        RuntimeEvent::EndpointSet { fields: f, .. } => (
            format!("{who}endpoint fields: {}", fields(f)),
            Some("set by command; not exported".to_string()),
        ),
        RuntimeEvent::LeaseAcquired {
            client,
            role: ro,
            uid,
            expires_at,
            ..
        } => (
            format!(
                "{who}{} `{client}` attached until {}",
                role(*ro),
                time(*expires_at)
            ),
            Some(match uid {
                Some(u) => format!("bound to uid {u}"),
                None => "attached by a direct command".to_string(),
            }),
        ),
        RuntimeEvent::LeaseRenewed {
            client,
            role: ro,
            expires_at,
            by,
            ..
        } => (
            format!(
                "{who}{} `{client}` renewed until {}",
                role(*ro),
                time(*expires_at)
            ),
            Some(actor(by)),
        ),
        RuntimeEvent::LeaseReleased {
            client,
            role: ro,
            reason,
            by,
            ..
        } => {
            let how = match reason {
                ReleaseReason::Detached => "detached",
                ReleaseReason::Expired => "expired",
                ReleaseReason::TakenOver => "taken over after expiry",
            };
            (
                format!("{who}{} `{client}` {how}", role(*ro)),
                Some(actor(by)),
            )
        }
        RuntimeEvent::OutageStarted {
            endpoint, error, ..
        } => (
            format!("{who}outage started: {endpoint} does not answer"),
            Some(error.clone()),
        ),
        RuntimeEvent::OutageEnded {
            last_failure,
            failures,
            ended_by,
            ..
        } => (
            format!(
                "{who}outage ended after {failures} failed probe(s), last at {}",
                time(*last_failure)
            ),
            Some(
                match ended_by {
                    OutageEnd::Probe => "the endpoint answered a probe",
                    OutageEnd::Attach => "a client attached",
                }
                .to_string(),
            ),
        ),
    };
    Description { what, why }
}
