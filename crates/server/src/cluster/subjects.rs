//! How events map to subjects of the fleet's stream (docs/scaling.md §1).
//!
//! Everything an agent's fold depends on is on `al.<fleet>.agent.<name>`, a
//! sender's posts on `al.<fleet>.mail.<sender>`, a session's events on
//! `al.<fleet>.session.<hash>`, a host's heartbeat batches on
//! `al.<fleet>.hb.<host>` (never published conditionally). The mapping is a pure function of the event,
//! so every host computes the same subject for the same event (the mirror
//! rebuilds its per-subject sequences from the local log with it).

use crate::registry::{EventKind, SessionKey};

/// The subjects of one fleet: `al.<fleet>.…`, stream `AGENTLOG_<FLEET>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetSubjects {
    fleet: String,
}

impl FleetSubjects {
    /// A fleet name is one subject token: ASCII letters, digits, `_`, `-`.
    pub fn new(fleet: &str) -> Result<FleetSubjects, String> {
        let ok = !fleet.is_empty()
            && fleet.len() <= 64
            && fleet
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !ok {
            return Err(format!(
                "fleet name `{fleet}`: use 1 to 64 ASCII letters, digits, `_` or `-`"
            ));
        }
        Ok(FleetSubjects {
            fleet: fleet.to_string(),
        })
    }

    /// The stream of record: `AGENTLOG_<FLEET>` (upper case).
    pub fn stream_name(&self) -> String {
        format!(
            "AGENTLOG_{}",
            self.fleet.to_ascii_uppercase().replace('-', "_")
        )
    }

    /// The stream's subject filter, `al.<fleet>.>`.
    pub fn wildcard(&self) -> String {
        format!("al.{}.>", self.fleet)
    }

    pub fn agent(&self, name: &str) -> String {
        format!("al.{}.agent.{}", self.fleet, token(name))
    }

    pub fn mail(&self, sender: &str) -> String {
        format!("al.{}.mail.{}", self.fleet, token(sender))
    }

    pub fn session(&self, key: &SessionKey) -> String {
        format!("al.{}.session.{:016x}", self.fleet, session_hash(key))
    }

    /// The lazy heartbeat batches one host publishes (docs/scaling.md §5).
    pub fn heartbeats(&self, host: &str) -> String {
        format!("al.{}.hb.{}", self.fleet, token(host))
    }

    /// Fleet-wide events.
    pub fn ctl(&self) -> String {
        format!("al.{}.ctl", self.fleet)
    }

    /// The subject an event is published on.
    pub fn of(&self, kind: &EventKind) -> String {
        match kind {
            EventKind::MessagePosted(m) => self.mail(&m.from),
            // Which host published a batch is in its subject, not its event:
            // the mirror never records these (nothing expects them).
            EventKind::HeartbeatBatch { .. } => format!("al.{}.hb", self.fleet),
            _ => match (kind.subject_agent(), kind.session()) {
                (Some(agent), _) => self.agent(agent),
                (None, Some(key)) => self.session(key),
                (None, None) => self.ctl(),
            },
        }
    }
}

/// A name as one subject token: itself when it is a safe token, else `~`
/// plus the lower-case hex of its bytes (names may contain `.`).
fn token(name: &str) -> String {
    let safe = !name.is_empty()
        && !name.starts_with('~')
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'.' | b'*' | b'>'));
    if safe {
        return name.to_string();
    }
    let mut out = String::with_capacity(1 + 2 * name.len());
    out.push('~');
    for b in name.bytes() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// FNV-1a 64 over the length-prefixed key fields: stable across builds and
/// hosts (a session key is up to 4.4 KB, too long for a subject token).
fn session_hash(key: &SessionKey) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for field in [&key.source, &key.workspace, &key.session_id] {
        for &b in (field.len() as u64)
            .to_le_bytes()
            .iter()
            .chain(field.as_bytes())
        {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_not_tokens_are_hex_encoded() {
        let f = FleetSubjects::new("prod").unwrap();
        assert_eq!(f.agent("alpha"), "al.prod.agent.alpha");
        assert_eq!(f.agent("a.b"), "al.prod.agent.~612e62");
        assert_eq!(f.agent("~x"), "al.prod.agent.~7e78");
        assert_eq!(f.agent("a b"), "al.prod.agent.~612062");
        assert_eq!(f.stream_name(), "AGENTLOG_PROD");
        assert_eq!(f.heartbeats("host-1"), "al.prod.hb.host-1");
        assert_eq!(f.heartbeats("h.2"), "al.prod.hb.~682e32");
        assert!(FleetSubjects::new("a.b").is_err());
        assert!(FleetSubjects::new("").is_err());
    }

    #[test]
    fn session_subjects_are_stable_and_distinct() {
        let f = FleetSubjects::new("x").unwrap();
        let a = SessionKey::new("s", "w", "1");
        let b = SessionKey::new("s", "w1", "");
        assert_eq!(f.session(&a), f.session(&a.clone()));
        assert_ne!(f.session(&a), f.session(&b));
    }
}
