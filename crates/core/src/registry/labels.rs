//! Validation of the registry-only labels of an agent: its display name and
//! the transport client it is attached through (the seed's
//! `set_display_name`, `register_transport` and `record_transport_client`).
//!
//! Both are their own events (`DisplayNameSet`, `TransportClientSet`) rather
//! than `FieldUpdates` fields, whose bincode layout old logs fix. Text is
//! validated like every other field: non-empty, bounded, no control
//! characters. Neither label is part of the schema-v4 export. Like the other
//! `check_*` functions these only read the state and return the event.

use super::commands::NAME_MAX;
use super::error::{check_text, RegistryError};
use super::events::{Event, EventKind, FieldUpdates, TransportCause};
use super::runtime::EndpointUpdates;
use super::state::State;
use crate::model::TransportClient;
use crate::time::Timestamp;

/// Longest display name, in bytes.
pub const DISPLAY_NAME_MAX: usize = 256;
/// Longest transport client name, and version, in bytes.
pub const CLIENT_NAME_MAX: usize = NAME_MAX;
pub const CLIENT_VERSION_MAX: usize = 128;

/// Checks a transport client's name and version text.
pub fn check_client(client: &TransportClient) -> Result<(), RegistryError> {
    check_text("transport client name", &client.name, CLIENT_NAME_MAX)?;
    if let Some(v) = &client.version {
        check_text("transport client version", v, CLIENT_VERSION_MAX)?;
    }
    Ok(())
}

/// The event recording that `agent` is attached through `client`, without
/// looking at the state: for a registration batch, where the agent exists
/// only once the registration before it is folded.
pub fn transport_event(
    agent: &str,
    client: TransportClient,
    cause: TransportCause,
    at: Timestamp,
) -> Result<Event, RegistryError> {
    check_client(&client)?;
    Ok(Event {
        at,
        kind: EventKind::TransportClientSet {
            agent: agent.to_string(),
            client: Some(client),
            cause,
        },
    })
}

/// An `update` command: schema-v4 fields, and the labels that are their own
/// events. Empty fields and `None` labels leave things alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentUpdate {
    pub fields: FieldUpdates,
    pub display_name: Option<String>,
    /// A reconnect of the agent's transport client.
    pub transport_client: Option<TransportClient>,
    /// Endpoint fields (`registry::runtime`), one event for all of them.
    pub endpoint: EndpointUpdates,
}

impl State {
    /// Validates an update; returns its events in order (fields, display
    /// name, transport client, endpoint fields), at least one, to append as
    /// one batch.
    pub fn check_agent_update(
        &self,
        agent: &str,
        update: AgentUpdate,
        at: Timestamp,
    ) -> Result<Vec<Event>, RegistryError> {
        let mut events = Vec::with_capacity(4);
        let AgentUpdate {
            fields,
            display_name,
            transport_client,
            endpoint,
        } = update;
        let only_fields =
            display_name.is_none() && transport_client.is_none() && endpoint.is_empty();
        if only_fields || !fields.is_empty() {
            events.push(self.check_update(agent, fields, at)?);
        }
        if let Some(d) = display_name {
            events.push(self.check_display_name(agent, Some(d), at)?);
        }
        if let Some(c) = transport_client {
            events.push(self.check_transport_client(
                agent,
                Some(c),
                TransportCause::Reconnect,
                at,
            )?);
        }
        events.extend(self.check_endpoint(agent, endpoint, at)?);
        Ok(events)
    }

    /// Sets (`Some`) or clears (`None`) an existing agent's display name.
    pub fn check_display_name(
        &self,
        agent: &str,
        display_name: Option<String>,
        at: Timestamp,
    ) -> Result<Event, RegistryError> {
        self.existing(agent)?;
        if let Some(d) = &display_name {
            check_text("display name", d, DISPLAY_NAME_MAX)?;
        }
        Ok(Event {
            at,
            kind: EventKind::DisplayNameSet {
                agent: agent.to_string(),
                display_name,
            },
        })
    }

    /// Records the client of a live agent's transport (`None` detaches it);
    /// a finished agent must register again first.
    pub fn check_transport_client(
        &self,
        agent: &str,
        client: Option<TransportClient>,
        cause: TransportCause,
        at: Timestamp,
    ) -> Result<Event, RegistryError> {
        let a = self.existing(agent)?;
        if a.is_finished() {
            return Err(RegistryError::Finished {
                agent: agent.to_string(),
                status: a.status,
            });
        }
        if let Some(c) = &client {
            check_client(c)?;
        }
        Ok(Event {
            at,
            kind: EventKind::TransportClientSet {
                agent: agent.to_string(),
                client,
                cause,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registration;

    fn state_with(name: &str) -> State {
        let mut s = State::default();
        let e = s
            .check_register(Registration::new(name, "claude", "/w"), Timestamp(1))
            .unwrap();
        s.apply(1, &e);
        s
    }

    #[test]
    fn labels_are_validated_and_folded() {
        let mut s = state_with("a");
        let e = s
            .check_display_name("a", Some("Reviewer".into()), Timestamp(2))
            .unwrap();
        s.apply(2, &e);
        assert_eq!(
            s.agent("a").unwrap().display_name.as_deref(),
            Some("Reviewer")
        );
        assert_eq!(s.agent("a").unwrap().last_event_lsn, 2);
        for bad in ["", "tab\there", &"x".repeat(DISPLAY_NAME_MAX + 1)] {
            assert!(s
                .check_display_name("a", Some(bad.into()), Timestamp(3))
                .is_err());
        }
        assert!(matches!(
            s.check_display_name("zz", None, Timestamp(3)),
            Err(RegistryError::NotFound { .. })
        ));
        let c = TransportClient::parse("cursor/1.2");
        let e = s
            .check_transport_client(
                "a",
                Some(c.clone()),
                TransportCause::Reconnect,
                Timestamp(4),
            )
            .unwrap();
        s.apply(3, &e);
        assert_eq!(s.agent("a").unwrap().transport_client, Some(c));
        let bad = TransportClient::parse("cursor/");
        let e = s
            .check_transport_client("a", Some(bad), TransportCause::Reconnect, Timestamp(5))
            .unwrap_err();
        assert!(e.to_string().contains("transport client version"), "{e}");
    }
}
