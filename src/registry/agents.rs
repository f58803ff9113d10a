//! [`AgentMap`]: agents in registration order with a fast by-name index.
//!
//! Invariant: `index[name] == position of name in rows`, for every row.
//! Lookups hash the name with FxHash (names are short, trusted-size keys; no
//! DoS concern inside one process). Removal is O(n) — rare next to the
//! heartbeats that only look up. Serialized as the ordered list of rows; the
//! index is rebuilt on load.

use crate::model::Agent;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

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
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

pub type FxBuild = BuildHasherDefault<FxHasher>;

/// Agents by name, iterated in registration order.
#[derive(Clone, Default)]
pub struct AgentMap {
    rows: Vec<Agent>,
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
    #[inline]
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Agent> {
        match self.index.get(name) {
            Some(&i) => Some(&mut self.rows[i]),
            None => None,
        }
    }
    /// Position of `name` in registration order.
    #[inline]
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }
    /// The agent at `position` (from [`AgentMap::position`]).
    #[inline]
    pub fn at_mut(&mut self, position: usize) -> Option<&mut Agent> {
        self.rows.get_mut(position)
    }
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }
    /// Inserts at the end, or replaces in place when the name exists.
    pub fn upsert(&mut self, agent: Agent) {
        match self.index.get(agent.name.as_str()) {
            Some(&i) => self.rows[i] = agent,
            None => {
                self.index.insert(agent.name.clone(), self.rows.len());
                self.rows.push(agent);
            }
        }
    }
    pub fn remove(&mut self, name: &str) -> Option<Agent> {
        let i = self.index.remove(name)?;
        let a = self.rows.remove(i);
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
        for (i, a) in self.rows.iter().enumerate() {
            self.index.insert(a.name.clone(), i);
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

impl Serialize for AgentMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.rows.serialize(s)
    }
}

impl<'de> Deserialize<'de> for AgentMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let rows = Vec::<Agent>::deserialize(d)?;
        let mut m = AgentMap {
            rows,
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
        assert_eq!(m.len(), 2);
        let bytes = bincode::serde::encode_to_vec(&m, bincode::config::standard()).unwrap();
        let (back, _): (AgentMap, _) =
            bincode::serde::decode_from_slice(&bytes, bincode::config::standard()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.get("d").unwrap().name, "d");
    }
}
