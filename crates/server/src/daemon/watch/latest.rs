//! `watch` with `latest: true`: the registry's current rows, not its log.
//! A table needs each agent's newest row, not every heartbeat, so this
//! stream never reads or decodes a record: on a commit (at most once per
//! [`TICK`]) it looks at the served state under the read lock and sends the
//! rows whose `last_event_lsn` is past what it already sent, then the agents
//! that disappeared. Its cost is O(agents) per tick (a scan of one `u64` per
//! row, plus a clone of each changed row), whatever the write rate.
//!
//! Invariants: every row change in the fold sets the row's `last_event_lsn`
//! (`registry::state`), so "changed since LSN `L`" is exactly
//! `last_event_lsn > L`. Rows go out in `last_event_lsn` order, each with
//! that LSN, all as of one state at LSN `S`; then `removed` items and, on a
//! stream's first batch, one `present` item, both at `S`. Hence a client that
//! resumes after the item with LSN `X` (`from = X + 1`) is sent every row
//! changed after `X`, and the `present` list that starts every stream tells
//! it which agents are gone: nothing is missed, rows may repeat. A slow
//! client holds the producer back (it is never `lagged`): the next batch is
//! simply taken later, from a newer state.

use super::super::server::Shared;
use super::super::Dispatch;
use crate::model::Agent;
use crate::registry::runtime::{json as runtime_json, AgentRuntime};
use crate::registry::{Lsn, State};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Batches go out at most this often: what commits meanwhile is merged, so
/// a reader's work (and the daemon's) is bounded whatever the write rate.
pub const TICK: Duration = Duration::from_millis(250);
/// A batch of `n` items is followed by a pause of at least `n` times this
/// (at most [`MAX_PAUSE`]): a stream carries at most about 500 rows a
/// second however many agents change, so a big busy fleet costs its page
/// (and the daemon) little more than a small one; a status change then
/// shows within about two seconds instead of a quarter.
const PAUSE_PER_ITEM: Duration = Duration::from_millis(2);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// What a latest stream has sent its client.
pub(super) struct Rows {
    /// Every row change up to this LSN has been sent.
    sent_through: Lsn,
    /// The agents the client has a row of; `None` before the first batch
    /// (which sends `present`).
    known: Option<HashSet<String>>,
    /// Only this agent's row (`agent` parameter).
    agent: Option<String>,
}

/// One look at the state, taken under its read lock: as little as possible
/// is done there (a scan and clones), the JSON is built after.
struct Look {
    lsn: Lsn,
    /// Rows changed since `sent_through`, with their runtime facts.
    changed: Vec<(Agent, Option<AgentRuntime>)>,
    /// Agents the client knows that are gone.
    removed: Vec<String>,
    /// Every agent there is (first batch only).
    present: Option<Vec<String>>,
}

impl Rows {
    /// A stream sending rows changed at or after `from`.
    pub(super) fn new(from: Lsn, agent: Option<String>) -> Rows {
        Rows {
            sent_through: from.saturating_sub(1),
            known: None,
            agent,
        }
    }

    fn look(&self, state: &State, lsn: Lsn) -> Look {
        let through = self.sent_through;
        let with_runtime = |a: &Agent| (a.clone(), state.runtime(&a.name).cloned());
        let (changed, there): (Vec<_>, usize) = match &self.agent {
            Some(name) => match state.agent(name) {
                Some(a) => (
                    (a.last_event_lsn > through)
                        .then(|| with_runtime(a))
                        .into_iter()
                        .collect(),
                    1,
                ),
                None => (Vec::new(), 0),
            },
            None => {
                let all = state.agents();
                let changed = all
                    .iter()
                    .filter(|a| a.last_event_lsn > through)
                    .map(with_runtime);
                (changed.collect(), all.len())
            }
        };
        let (removed, present) = match &self.known {
            None => {
                let names = match &self.agent {
                    Some(name) => state
                        .agent(name)
                        .map(|a| a.name.clone())
                        .into_iter()
                        .collect(),
                    None => state.agents().iter().map(|a| a.name.clone()).collect(),
                };
                (Vec::new(), Some(names))
            }
            Some(known) => {
                // Every agent there now that the client does not know has
                // changed since the last look (its row is new), so the known
                // ones still there number `there - new`: scan for the
                // missing only when some are.
                let new = changed
                    .iter()
                    .filter(|(a, _)| !known.contains(&a.name))
                    .count();
                let removed = if there - new < known.len() {
                    let gone = known.iter().filter(|n| state.agent(n).is_none());
                    gone.cloned().collect()
                } else {
                    Vec::new()
                };
                (removed, None)
            }
        };
        Look {
            lsn,
            changed,
            removed,
            present,
        }
    }

    /// The batch of the state `store` serves now: `change` items (in LSN
    /// order), `removed` changes, and `present` on the first batch.
    pub(super) fn next_batch(
        &mut self,
        store: &crate::store::Store,
        d: &dyn Dispatch,
    ) -> Vec<Value> {
        let mut look = store.with_state(|s, lsn| self.look(s, lsn));
        look.changed.sort_by_key(|(a, _)| a.last_event_lsn);
        let known = self.known.get_or_insert_with(HashSet::new);
        let mut out = Vec::with_capacity(look.changed.len() + look.removed.len() + 1);
        for (a, rt) in &look.changed {
            let kind = if known.contains(&a.name) {
                "updated"
            } else {
                "added"
            };
            let mut row = d.agent_json(a);
            runtime_json::merge_into(&mut row, rt.as_ref(), a.pid);
            let change =
                json!({"lsn": a.last_event_lsn, "type": kind, "agent": a.name, "row": row});
            out.push(json!({ "change": change }));
        }
        for name in look.removed {
            out.push(json!({"change": {"lsn": look.lsn, "type": "removed", "agent": name}}));
            known.remove(&name);
        }
        if let Some(names) = look.present {
            out.push(json!({"present": {"lsn": look.lsn, "agents": names}}));
            known.extend(names);
        }
        for (a, _) in look.changed {
            known.insert(a.name);
        }
        self.sent_through = self.sent_through.max(look.lsn);
        out
    }
}

/// Sends `rows`' batches into `tx` until the client goes or the daemon
/// stops: one as soon as the stream opens, then one after each commit that
/// moved the served state, at most one per [`TICK`] (longer after a big
/// batch, see [`PAUSE_PER_ITEM`]).
pub(super) async fn produce(
    shared: Arc<Shared>,
    mut rows: Rows,
    tx: mpsc::Sender<super::Group>,
    budget: Arc<tokio::sync::Semaphore>,
) {
    let mut shutdown = shared.shutdown.clone();
    // The (applied LSN, agents) of the last look: a compaction that retires
    // agents changes the second without moving the first.
    let mut seen: Option<(Lsn, usize)> = None;
    loop {
        let notified = shared.committed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if *shutdown.borrow_and_update() {
            return;
        }
        let now = shared.store.with_state(|s, lsn| (lsn, s.agents().len()));
        if seen != Some(now) {
            seen = Some(now);
            let (store, d) = (shared.store.clone(), shared.dispatch.clone());
            let step = super::readers::run(move || {
                let batch = rows.next_batch(&store, d.as_ref());
                let items: Vec<super::Item> = batch.into_iter().map(super::Item::new).collect();
                (items, rows)
            })
            .await;
            let Some((batch, r)) = step else { return };
            rows = r;
            let pause =
                PAUSE_PER_ITEM.saturating_mul(u32::try_from(batch.len()).unwrap_or(u32::MAX));
            let pause = pause.clamp(TICK, MAX_PAUSE);
            for item in batch {
                tokio::select! {
                    group = super::Group::reserve(vec![item], &budget) => {
                        let Some(group) = group else { return };
                        tokio::select! {
                            sent = tx.send(group) => if sent.is_err() { return },
                            _ = shutdown.changed() => return,
                        }
                    }
                    _ = shutdown.changed() => return,
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = shutdown.changed() => return,
                _ = tx.closed() => return,
            }
            continue;
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = shutdown.changed() => return,
            _ = tx.closed() => return,
            // The state may also change from the store's own threads.
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::{code, ErrorReply, Outcome};
    use crate::registry::codec::Origin;
    use crate::registry::{Event, Registration};
    use crate::store::{Store, StoreOptions};
    use crate::time::Timestamp;
    use serde_json::Map;

    /// Rows as `{name, status, last_active}`: enough to see which row went.
    struct Rowish;

    impl Dispatch for Rowish {
        fn knows(&self, _: &str) -> bool {
            false
        }
        fn read_only(&self, _: &str) -> bool {
            true
        }
        fn call(&self, _: &Arc<Store>, m: &str, _: &Map<String, Value>) -> Outcome {
            Err(ErrorReply::new(code::FAILED, format!("{m}: not here"), 1))
        }
        fn event_json(&self, _: Lsn, _: &Event, _: Option<Origin>) -> Value {
            Value::Null
        }
        fn agent_json(&self, a: &Agent) -> Value {
            json!({"name": a.name, "status": a.status.as_str(), "last_active": a.last_active.as_millis()})
        }
        fn applied_text(&self, agent: &str, lsn: Lsn, what: &str, _: bool) -> String {
            format!("{agent}: {what} {lsn}")
        }
    }

    const T0: Timestamp = Timestamp::from_secs(1_900_000_000);

    fn store_with(names: &[&str]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        for n in names {
            store
                .register(Registration::new(n, "claude", "/w"), Some(T0))
                .unwrap();
        }
        (dir, store)
    }

    /// `(item key, type, agent, lsn)` of each item.
    fn summary(batch: &[Value]) -> Vec<(String, String, String, u64)> {
        batch
            .iter()
            .map(|item| {
                let (key, body) = item.as_object().unwrap().iter().next().unwrap();
                let s = |k: &str| body[k].as_str().unwrap_or("").to_string();
                (
                    key.clone(),
                    s("type"),
                    s("agent"),
                    body["lsn"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    fn change(kind: &str, agent: &str, lsn: u64) -> (String, String, String, u64) {
        ("change".into(), kind.into(), agent.into(), lsn)
    }

    #[test]
    fn the_first_batch_is_the_rows_changed_since_from_in_lsn_order_then_present() {
        let (_d, store) = store_with(&["a", "b"]);
        store.heartbeat("a", None, Some(T0.add_secs(1))).unwrap();
        let batch = Rows::new(1, None).next_batch(&store, &Rowish);
        let present = ("present".to_string(), String::new(), String::new(), 3);
        assert_eq!(
            summary(&batch),
            [
                change("added", "b", 2),
                change("added", "a", 3),
                present.clone()
            ]
        );
        assert_eq!(batch[2]["present"]["agents"], json!(["a", "b"]));
        // Resuming after LSN 2: only `a` changed since; `present` still
        // names both, so a client drops rows of agents gone meanwhile.
        let batch = Rows::new(3, None).next_batch(&store, &Rowish);
        assert_eq!(summary(&batch), [change("added", "a", 3), present]);
        assert_eq!(batch[1]["present"]["agents"], json!(["a", "b"]));
        // `agent` keeps one row, and names only it.
        let batch = Rows::new(1, Some("b".into())).next_batch(&store, &Rowish);
        assert_eq!(summary(&batch)[0], change("added", "b", 2));
        assert_eq!(batch[1]["present"]["agents"], json!(["b"]));
    }

    #[test]
    fn a_burst_of_heartbeats_is_one_row_carrying_the_newest() {
        let (_d, store) = store_with(&["a", "b"]);
        let mut rows = Rows::new(store.applied_lsn() + 1, None);
        let first = rows.next_batch(&store, &Rowish);
        assert_eq!(summary(&first).len(), 1, "only `present`: {first:?}");
        let mut last = 0;
        for i in 1..=500 {
            last = store.heartbeat("a", None, Some(T0.add_secs(i))).unwrap();
        }
        let batch = rows.next_batch(&store, &Rowish);
        assert_eq!(summary(&batch), [change("updated", "a", last)]);
        let newest = T0.add_secs(500).as_millis();
        assert_eq!(batch[0]["change"]["row"]["last_active"], json!(newest));
        // Nothing changed since: nothing to send.
        assert!(rows.next_batch(&store, &Rowish).is_empty());
    }

    #[test]
    fn removals_are_sent_once_after_the_rows_and_a_new_life_is_a_row() {
        let (_d, store) = store_with(&["a", "b", "c"]);
        let mut rows = Rows::new(store.applied_lsn() + 1, None);
        rows.next_batch(&store, &Rowish);
        store.remove("b", Some(T0)).unwrap();
        let d = store
            .register(Registration::new("d", "codex", "/w"), Some(T0))
            .unwrap()
            .0;
        let batch = rows.next_batch(&store, &Rowish);
        assert_eq!(
            summary(&batch),
            [change("added", "d", d), change("removed", "b", d)]
        );
        assert!(rows.next_batch(&store, &Rowish).is_empty());
        // Removed and registered again between two looks: the new row.
        store.remove("c", Some(T0)).unwrap();
        let c = store
            .register(Registration::new("c", "claude", "/w"), Some(T0))
            .unwrap()
            .0;
        let batch = rows.next_batch(&store, &Rowish);
        assert_eq!(summary(&batch), [change("updated", "c", c)]);
        // Removed with nothing else changing is still seen.
        let gone = store.remove("a", Some(T0)).unwrap();
        let batch = rows.next_batch(&store, &Rowish);
        assert_eq!(summary(&batch), [change("removed", "a", gone)]);
    }
}
