//! [`AgentMap`]: agents in registration order with a fast by-name index.
//!
//! Invariants: `index[name] == position of name in rows`, for every row;
//! `hot[i] == Hot::of(&rows[i])`. `hot` is a dense copy of the fields a
//! heartbeat reads (pid, status, cause: 12 bytes a row), so validating and
//! applying a heartbeat reads no `Agent` row — at 100,000 agents the rows do
//! not fit in cache, the hot array does; the heartbeat only *writes*
//! `last_active` into the row. Rows are therefore never handed out `&mut`:
//! changes go through [`AgentMap::update`], which refreshes `hot`.
//! Lookups hash the name with FxHash plus a finalizer (names are short,
//! trusted-size keys; no DoS concern inside one process). Removal is O(n) — rare next to the
//! heartbeats that only look up. Serialized as the ordered list of rows
//! followed by the registry-only fields of each row (display name, transport
//! client, last event LSN: the row's own serde form leaves them out, see
//! `model::Agent`); the index is rebuilt on load.

use super::commands::{NAME_MAX, TEXT_MAX};
use super::error::{check_name, check_optional_text, check_text, RegistryError};
use crate::model::fields::{FieldKind, FieldRef, AGENT_FIELDS};
use crate::model::{Agent, Status, StatusCause, TransportClient};
use crate::time::Timestamp;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The one validation of a whole agent row, for every path that brings one
/// in without a registration (import, `import_agent`): the same rules as
/// `register` for the name, provider and cwd, and bounded, control-free text
/// in every other field.
pub fn validate_agent(a: &Agent) -> Result<(), RegistryError> {
    check_name("agent name", &a.name, NAME_MAX)?;
    check_text("provider", &a.provider, TEXT_MAX)?;
    check_text("cwd", &a.cwd, TEXT_MAX)?;
    if let Some(parent) = &a.parent {
        check_name("parent", parent, NAME_MAX)?;
    }
    check_optional_text("status message", a.status_message.as_deref(), TEXT_MAX)?;
    // The required three are checked above; `parent` is a name.
    let optional = AGENT_FIELDS.iter().filter(|f| {
        matches!(f.kind, FieldKind::Text | FieldKind::Str)
            && !matches!(f.name, "name" | "provider" | "cwd" | "parent")
    });
    for f in optional {
        let text = match f.get(a) {
            Some(FieldRef::Text(t)) => Some(t),
            _ => None,
        };
        check_optional_text(f.label, text, TEXT_MAX)?;
    }
    Ok(())
}

/// The rustc FxHash: a multiply-rotate hash, much faster than SipHash for
/// short keys.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    /// The multiply chain leaves the low bits weak (they depend only on the
    /// low bits of the input, and names differ in their last bytes), and
    /// hashbrown picks buckets by the low bits: fold the high bits down
    /// (murmur3's finalizer step) or lookups degrade into long probes.
    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.hash;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }
}

pub type FxBuild = BuildHasherDefault<FxHasher>;

/// The fields a heartbeat reads, copied densely out of the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hot {
    pub pid: Option<u32>,
    pub status: Status,
    pub cause: StatusCause,
}

impl Hot {
    fn of(a: &Agent) -> Hot {
        Hot {
            pid: a.pid,
            status: a.status,
            cause: a.status_cause,
        }
    }
}

/// Agents by name, iterated in registration order.
#[derive(Clone, Default)]
pub struct AgentMap {
    rows: Vec<Agent>,
    hot: Vec<Hot>,
    index: HashMap<String, usize, FxBuild>,
}

impl AgentMap {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn len(&self) -> usize {
        self.rows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
    #[inline]
    pub fn get(&self, name: &str) -> Option<&Agent> {
        self.index.get(name).map(|&i| &self.rows[i])
    }
    /// Changes the agent `name` with `f`; false if there is none.
    pub fn update(&mut self, name: &str, f: impl FnOnce(&mut Agent)) -> bool {
        match self.index.get(name) {
            Some(&i) => {
                self.update_at(i, f);
                true
            }
            None => false,
        }
    }
    /// Changes the agent at `position` with `f` (no-op if out of range).
    pub fn update_at(&mut self, position: usize, f: impl FnOnce(&mut Agent)) {
        if let Some(a) = self.rows.get_mut(position) {
            f(a);
            self.hot[position] = Hot::of(a);
        }
    }
    /// Sets `last_active` and `last_event_lsn` of the agent at `position`
    /// (a heartbeat's only writes to the row).
    #[inline]
    pub fn touch(&mut self, position: usize, at: Timestamp, lsn: u64) {
        if let Some(a) = self.rows.get_mut(position) {
            a.last_active = at;
            a.last_event_lsn = lsn;
        }
    }
    /// Position of `name` in registration order.
    #[inline]
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }
    /// The heartbeat fields of the agent at `position`.
    #[inline]
    pub fn hot(&self, position: usize) -> Option<Hot> {
        self.hot.get(position).copied()
    }
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }
    /// Inserts at the end, or replaces in place when the name exists.
    pub fn upsert(&mut self, agent: Agent) {
        let hot = Hot::of(&agent);
        match self.index.get(agent.name.as_str()) {
            Some(&i) => {
                self.rows[i] = agent;
                self.hot[i] = hot;
            }
            None => {
                self.index.insert(agent.name.clone(), self.rows.len());
                self.rows.push(agent);
                self.hot.push(hot);
            }
        }
    }
    pub fn remove(&mut self, name: &str) -> Option<Agent> {
        let i = self.index.remove(name)?;
        let a = self.rows.remove(i);
        self.hot.remove(i);
        for r in &self.rows[i..] {
            if let Some(slot) = self.index.get_mut(r.name.as_str()) {
                *slot -= 1;
            }
        }
        Some(a)
    }
    /// Keeps the agents for which `keep` is true, preserving order.
    pub fn retain(&mut self, mut keep: impl FnMut(&Agent) -> bool) {
        let before = self.rows.len();
        self.rows.retain(|a| keep(a));
        if self.rows.len() != before {
            self.reindex();
        }
    }
    pub fn iter(&self) -> std::slice::Iter<'_, Agent> {
        self.rows.iter()
    }
    pub fn as_slice(&self) -> &[Agent] {
        &self.rows
    }
    fn reindex(&mut self) {
        self.index.clear();
        self.hot.clear();
        // Sized once: a snapshot load indexes every row without rehashing.
        self.index.reserve(self.rows.len());
        self.hot.reserve(self.rows.len());
        for (i, a) in self.rows.iter().enumerate() {
            self.index.insert(a.name.clone(), i);
            self.hot.push(Hot::of(a));
        }
    }
}

impl PartialEq for AgentMap {
    fn eq(&self, other: &Self) -> bool {
        self.rows == other.rows
    }
}
impl Eq for AgentMap {}

impl std::fmt::Debug for AgentMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.rows.iter()).finish()
    }
}

/// The registry-only fields of one row, as a snapshot stores them.
#[derive(Serialize, Deserialize)]
struct RowLocal {
    display_name: Option<String>,
    transport_client: Option<TransportClient>,
    last_event_lsn: u64,
    host: Option<String>,
}

impl Serialize for AgentMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let locals: Vec<RowLocal> = self
            .rows
            .iter()
            .map(|a| RowLocal {
                display_name: a.display_name.clone(),
                transport_client: a.transport_client.clone(),
                last_event_lsn: a.last_event_lsn,
                host: a.host.clone(),
            })
            .collect();
        (&self.rows, locals).serialize(s)
    }
}

impl<'de> Deserialize<'de> for AgentMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (mut rows, locals) = <(Vec<Agent>, Vec<RowLocal>)>::deserialize(d)?;
        if locals.len() != rows.len() {
            return Err(serde::de::Error::custom(format!(
                "{} agent rows but {} registry-only field sets",
                rows.len(),
                locals.len()
            )));
        }
        for (a, l) in rows.iter_mut().zip(locals) {
            a.display_name = l.display_name;
            a.transport_client = l.transport_client;
            a.last_event_lsn = l.last_event_lsn;
            a.host = l.host;
        }
        let mut m = AgentMap {
            rows,
            hot: Vec::new(),
            index: HashMap::default(),
        };
        m.reindex();
        if m.index.len() != m.rows.len() {
            return Err(serde::de::Error::custom(
                "duplicate agent name in agent list",
            ));
        }
        Ok(m)
    }
}

impl<'a> IntoIterator for &'a AgentMap {
    type Item = &'a Agent;
    type IntoIter = std::slice::Iter<'a, Agent>;
    fn into_iter(self) -> Self::IntoIter {
        self.rows.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;

    #[test]
    fn hash_low_bits_spread_for_names_differing_at_the_end() {
        use std::hash::BuildHasher;
        let b = FxBuild::default();
        let mut buckets = std::collections::HashSet::new();
        for i in 0..4096 {
            buckets.insert(b.hash_one(format!("agent-{i:06}").as_str()) & 4095);
        }
        // A uniform hash fills ~63% of 4096 buckets with 4096 keys.
        assert!(
            buckets.len() > 2400,
            "{} distinct low-12-bit values",
            buckets.len()
        );
    }

    #[test]
    fn order_index_and_removal_stay_consistent() {
        let mut m = AgentMap::new();
        for n in ["a", "b", "c", "d"] {
            m.upsert(Agent::new(n, "claude", "/", Timestamp(0)));
        }
        m.upsert(Agent::new("b", "codex", "/", Timestamp(1)));
        assert_eq!(m.get("b").unwrap().provider, "codex");
        assert!(m.remove("b").is_some());
        assert!(m.remove("b").is_none());
        let names: Vec<_> = m.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["a", "c", "d"]);
        assert_eq!(m.get("d").unwrap().name, "d");
        m.retain(|a| a.name != "a");
        assert_eq!(m.get("c").unwrap().name, "c");
        assert!(m.update("d", |a| a.status = Status::Busy));
        assert_eq!(
            m.hot(m.position("d").unwrap()).unwrap().status,
            Status::Busy
        );
        for (i, a) in m.iter().enumerate() {
            assert_eq!(m.hot(i), Some(Hot::of(a)));
        }
        assert_eq!(m.len(), 2);
        let bytes = bincode::serde::encode_to_vec(&m, bincode::config::standard()).unwrap();
        let (back, _): (AgentMap, _) =
            bincode::serde::decode_from_slice(&bytes, bincode::config::standard()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.get("d").unwrap().name, "d");
        // The registry-only fields survive a snapshot round trip.
        let mut with_local = m.clone();
        with_local.update("c", |a| {
            a.display_name = Some("Cee".into());
            a.transport_client = Some(TransportClient::parse("zed/0.1"));
            a.last_event_lsn = 7;
            a.host = Some("host-b".into());
        });
        let bytes =
            bincode::serde::encode_to_vec(&with_local, bincode::config::standard()).unwrap();
        let (back, _): (AgentMap, _) =
            bincode::serde::decode_from_slice(&bytes, bincode::config::standard()).unwrap();
        assert_eq!(back, with_local);
        assert_eq!(back.get("c").unwrap().last_event_lsn, 7);
        assert_eq!(back.get("c").unwrap().host.as_deref(), Some("host-b"));
        assert_eq!(back.hot, m.hot);
    }
}
