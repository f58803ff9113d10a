//! `watch`: stream the log from any LSN, then live, each record exactly once
//! and in LSN order, because the stream *is* the log read in order (history
//! and live records come from the same view; nothing is broadcast, so the
//! writer never waits for a watcher).
//!
//! A producer task reads chunks of records (on the shared reader threads,
//! `readers`, so threads do not grow with watchers), filters
//! them (agent, kinds) or folds them into registry changes, encodes them
//! there (`Item`), and queues them, bounded twice: at most `watch_buffer`
//! groups and at most [`WATCH_BYTES`] encoded bytes, so a watcher that never
//! reads costs a known amount of memory whatever its items weigh. This
//! connection's task writes them out. When the queue stays full for
//! [`LAG_GRACE`] the producer stops and records the first LSN not queued:
//! the writer sends the queued lines, then `lagged` with that LSN, and
//! closes the connection; a peer that reads nothing meanwhile is dropped
//! after the write timeout (`super::deadline`).
//!
//! Items go in *groups*, the items of one record (one LSN), queued and
//! written whole: a replica's `HeartbeatBatch` (docs/scaling.md §5) is sent
//! as one `Heartbeat` event per beat, each shaped as a local daemon's and
//! all at the batch's LSN, so `lagged` (and an SSE id) never falls inside a
//! batch and resuming from an LSN gets a batch whole. `Purged` fillers (a
//! replica's placeholders for sequences the stream's compaction deleted)
//! are not sent unless asked for by kind: a local log has no such records.
//!
//! Compaction rewrites the log under a watcher: records of retired agents
//! go, with no event saying so. A changes watcher notices the new
//! generation before its next read, folds the compacted log up to where it
//! is, and sends a `removed` change (and an `updated` one, should a kept row
//! differ) for what the compaction retired, at its position. A watch asked
//! to start inside the compacted range (a client resuming from before the
//! compaction) would otherwise skip what was dropped there without a word:
//! it first gets a `compacted` item with the registry as of the range's last
//! LSN (the rows to restart from) and continues after the range.
//!
//! With `latest` (`latest`) nothing is read from the log: the producer
//! sends the rows that changed in the served state, at most once per
//! `latest::TICK`.
//!
//! A waiting `read` (`read_when_mail`) rides on the same commit signal:
//! it checks the served state for unread mail after each commit and answers
//! when there is some or its time is up, holding no thread meanwhile.

use super::conn::{error_doc, send, Request, Writer};
use super::server::Shared;
use super::{code, ErrorReply, Outcome, Peer};
use crate::model::Agent;
use crate::registry::runtime::{json as runtime_json, AgentRuntime};
use crate::registry::{codec, tag, Event, EventKind, Lsn, State};
use crate::store::{with_origin, Store, Until};
use crate::time::Timestamp;
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

mod latest;
mod readers;

/// How long a full buffer is tolerated before the watcher is dropped.
pub const LAG_GRACE: Duration = Duration::from_millis(500);
/// Records read per producer step.
const CHUNK: usize = 1024;

/// Encoded bytes a watcher may have queued (besides `watch_buffer` groups).
pub const WATCH_BYTES: usize = 1 << 20;

/// One watch item, encoded by the producer: its key (`event`, `change`,
/// `error`, `present`), the LSN it carries, and its object as JSON.
pub(crate) struct Item {
    pub key: String,
    pub lsn: Option<Lsn>,
    pub body: String,
}

impl Item {
    /// The item `{"KEY": {...}}`.
    pub fn new(doc: Value) -> Item {
        match doc {
            Value::Object(m) if m.len() == 1 => {
                let (key, v) = m.into_iter().next().expect("one entry");
                Item {
                    key,
                    lsn: v.get("lsn").and_then(Value::as_u64),
                    body: v.to_string(),
                }
            }
            other => Item {
                key: "error".into(),
                lsn: None,
                body: other.to_string(),
            },
        }
    }

    /// The socket's line for this item on the watch with request id `id`:
    /// `{"KEY": {...}, "id": ID}`.
    fn line(&self, id: &str) -> String {
        let key = Value::String(self.key.clone());
        format!("{{{key}:{},\"id\":{id}}}\n", self.body)
    }
}

/// The items of one record (one LSN): queued, written and lagged as one;
/// its bytes count against the watcher's [`WATCH_BYTES`] until it is taken.
pub(crate) struct Group {
    pub items: Vec<Item>,
    _bytes: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Group {
    fn bytes(items: &[Item]) -> u32 {
        let n: usize = items.iter().map(|i| i.body.len() + i.key.len()).sum();
        n.clamp(1, WATCH_BYTES) as u32
    }

    /// `items`, once the watcher's budget has room for them (`None`: the
    /// budget is gone, the watch ended).
    pub(super) async fn reserve(
        items: Vec<Item>,
        budget: &Arc<tokio::sync::Semaphore>,
    ) -> Option<Group> {
        let permit = budget
            .clone()
            .acquire_many_owned(Group::bytes(&items))
            .await
            .ok()?;
        Some(Group {
            items,
            _bytes: Some(permit),
        })
    }
}

/// What a watcher asked for.
#[derive(Debug, Clone, Default)]
struct Filter {
    from: Option<Lsn>,
    agent: Option<String>,
    kinds: Option<Vec<u8>>,
    changes: bool,
    /// Changes mode from the served state: each changed agent's newest
    /// row, at most once per [`latest::TICK`].
    latest: bool,
}

fn usage(msg: String) -> ErrorReply {
    ErrorReply::new(code::USAGE, msg, 2)
}

impl Filter {
    fn parse(p: &Map<String, Value>) -> Result<Filter, ErrorReply> {
        let mut f = Filter::default();
        for (k, v) in p {
            match (k.as_str(), v) {
                ("from", v) => {
                    let lsn = v.as_u64().ok_or_else(|| {
                        usage(format!(
                            "watch: `from` must be an LSN (a non-negative integer), not {v}"
                        ))
                    })?;
                    f.from = Some(lsn);
                }
                ("agent", Value::String(s)) => f.agent = Some(s.clone()),
                ("changes", Value::Bool(b)) => f.changes = *b,
                ("latest", Value::Bool(b)) => f.latest = *b,
                ("kinds", Value::Array(ks)) => {
                    let mut tags = Vec::new();
                    for k in ks {
                        let t = k
                            .as_str()
                            .and_then(|s| (1..=tag::MAX_KNOWN).find(|&t| tag::name(t).eq_ignore_ascii_case(s)))
                            .ok_or_else(|| usage(format!("watch: unknown event kind {k} (kinds are the `kind` names of `log --json`, e.g. \"Heartbeat\")")))?;
                        tags.push(t);
                    }
                    f.kinds = Some(tags);
                }
                (k, v) => {
                    return Err(usage(format!(
                        "watch: unknown or mistyped parameter `{k}`: {v}"
                    )))
                }
            }
        }
        if f.latest && !f.changes {
            return Err(usage(
                "watch: `latest` merges registry changes: it needs `changes: true`".into(),
            ));
        }
        Ok(f)
    }

    fn keeps(&self, event: &Event) -> bool {
        if matches!(event.kind, EventKind::Purged) && self.kinds.is_none() {
            return false;
        }
        self.agent
            .as_deref()
            .is_none_or(|a| event.kind.concerns_agent(a))
            && self
                .kinds
                .as_ref()
                .is_none_or(|ks| ks.contains(&event.kind.tag()))
    }
}

/// The producer's state between chunks.
struct Cursor {
    next: Lsn,
    filter: Filter,
    /// The registry folded up to `next - 1` (changes mode only).
    fold: Option<State>,
    /// The log's compaction generation `fold` was folded from.
    generation: u64,
}

/// After a compaction rewrote the log (a new generation since the cursor's),
/// a changes cursor refolds the compacted log up to where it is and returns
/// the changes from its old fold to that one: the agents the compaction
/// retired, `removed` at `next - 1`.
fn compaction_changes(
    store: &Store,
    d: &dyn super::Dispatch,
    c: &mut Cursor,
) -> Option<Vec<Value>> {
    let (generation, _) = store.log().compaction_point();
    if generation == c.generation {
        return None;
    }
    c.generation = generation;
    let old = c.fold.as_ref()?;
    let at = c.next.saturating_sub(1);
    let new = match store.state_at(Until::Lsn(at)) {
        Ok(s) => s,
        Err(e) => {
            let err = json!({"code": "log", "message": e.to_string(), "lsn": c.next});
            return Some(vec![json!({"error": err})]);
        }
    };
    let watched = |name: &str| c.filter.agent.as_deref().is_none_or(|a| a == name);
    let mut names: Vec<&str> = old.agents().iter().map(|a| a.name.as_str()).collect();
    names.extend(new.agents().iter().map(|a| a.name.as_str()));
    names.sort_unstable();
    names.dedup();
    let group: Vec<Value> = names
        .into_iter()
        .filter(|n| watched(n))
        .filter_map(|n| change_doc(d, at, n, old.agent(n), new.agent(n), new.runtime(n)))
        .collect();
    c.fold = Some(new);
    (!group.is_empty()).then_some(group)
}

/// The `compacted` item for a watch from `from` inside the compacted range
/// `[1, end)`, and the registry as of `end - 1` it carries (its rows, under
/// the agent filter): what a client resuming from there restarts from,
/// since records it has not seen were dropped. `None` when `from` is 1 (the
/// compacted log read whole is the history) or at or after `end`.
fn compacted_item(
    store: &Store,
    d: &dyn super::Dispatch,
    filter: &Filter,
    from: Lsn,
) -> Result<Option<(Vec<Value>, State, Lsn)>, ErrorReply> {
    let (generation, end) = store.log().compaction_point();
    if generation == 0 || from <= 1 || from >= end {
        return Ok(None);
    }
    let through = end - 1;
    let state = store
        .state_at(Until::Lsn(through))
        .map_err(|e| ErrorReply::from_error(&e, false))?;
    let rows: Vec<Value> = state
        .agents()
        .iter()
        .filter(|a| filter.agent.as_deref().is_none_or(|n| n == a.name))
        .map(|a| d.agent_json(a))
        .collect();
    let item = json!({"compacted": {"lsn": through, "resume_from": end, "rows": rows}});
    Ok(Some((vec![item], state, end)))
}

/// The change from `before` to `after` of agent `name` at `lsn`, if any.
/// A row carries the agent's runtime facts (`rt`): a lease or outage event
/// moves the row's `last_event_lsn`, so it is an update like any other.
fn change_doc(
    d: &dyn super::Dispatch,
    lsn: Lsn,
    name: &str,
    before: Option<&Agent>,
    after: Option<&Agent>,
    rt: Option<&AgentRuntime>,
) -> Option<Value> {
    let row = |a: &Agent| {
        let mut row = d.agent_json(a);
        runtime_json::merge_into(&mut row, rt, a.pid);
        row
    };
    let change = match (before, after) {
        (None, Some(a)) => {
            json!({"lsn": lsn, "type": "added", "agent": name, "row": row(a)})
        }
        (Some(_), None) => json!({"lsn": lsn, "type": "removed", "agent": name}),
        (Some(b), Some(a)) if b != a => {
            json!({"lsn": lsn, "type": "updated", "agent": name, "row": row(a)})
        }
        _ => return None,
    };
    Some(json!({ "change": change }))
}

/// Applies `apply` to `state` and returns the change it made to agent
/// `name`, if `filter` watches that agent.
fn fold_change(
    d: &dyn super::Dispatch,
    state: &mut State,
    filter: &Filter,
    lsn: Lsn,
    name: Option<&str>,
    apply: impl FnOnce(&mut State),
) -> Option<Value> {
    let Some(name) = name.filter(|n| filter.agent.as_deref().is_none_or(|a| a == *n)) else {
        apply(state);
        return None;
    };
    let before = state.agent(name).cloned();
    apply(state);
    change_doc(
        d,
        lsn,
        name,
        before.as_ref(),
        state.agent(name),
        state.runtime(name),
    )
}

/// Reads up to [`CHUNK`] records from `cursor.next`; returns each record's
/// group of items with the LSN to resume from if it is not sent, how many
/// records were read (0: the watcher is at the head), and whether the log
/// could not be read (the last group is that error: the watch ends after it
/// rather than repeat it).
fn read_chunk(
    store: &Store,
    d: &dyn super::Dispatch,
    c: &mut Cursor,
) -> (Vec<(Lsn, Vec<Value>)>, usize, bool) {
    let mut out = Vec::new();
    if let Some(group) = compaction_changes(store, d, c) {
        out.push((c.next, group));
    }
    let view = store.view();
    let mut read = 0;
    for rec in view.iter_from(c.next).take(CHUNK) {
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                let err = json!({"code": "log", "message": e.to_string(), "lsn": c.next});
                out.push((c.next, vec![json!({"error": err})]));
                return (out, 0, true);
            }
        };
        read += 1;
        let lsn = rec.lsn;
        c.next = lsn + 1;
        let event = match codec::decode(rec.payload) {
            Ok(e) => e,
            Err(e) => {
                let err = json!({"code": "decode", "message": e.to_string(), "lsn": lsn});
                out.push((lsn, vec![json!({"error": err})]));
                continue;
            }
        };
        let group: Vec<Value> = match (&mut c.fold, &event.kind) {
            // Beat by beat, as the fold applies a batch: one change per
            // heartbeat, as a local daemon's one record per heartbeat gives.
            (Some(state), EventKind::HeartbeatBatch { beats }) => beats
                .iter()
                .filter_map(|b| {
                    fold_change(d, state, &c.filter, lsn, Some(&b.agent), |s| {
                        s.apply_heartbeat(lsn, b.at, &b.agent, b.pid)
                    })
                })
                .collect(),
            (Some(state), kind) => {
                fold_change(d, state, &c.filter, lsn, kind.subject_agent(), |s| {
                    s.apply(lsn, &event)
                })
                .into_iter()
                .collect()
            }
            (None, EventKind::HeartbeatBatch { beats }) => beats
                .iter()
                .map(|b| (b.event(), b.origin))
                .filter(|(beat, _)| c.filter.keeps(beat))
                .map(|(beat, origin)| json!({"event": d.event_json(lsn, &beat, origin)}))
                .collect(),
            (None, _) if c.filter.keeps(&event) => {
                let origin = codec::origin(rec.payload);
                vec![json!({"event": d.event_json(lsn, &event, origin)})]
            }
            (None, _) => Vec::new(),
        };
        if !group.is_empty() {
            out.push((lsn, group));
        }
    }
    (out, read, false)
}

/// An open watch: its first LSN and its items as they are produced. When
/// `items` ends, [`Stream::lagged`] tells whether the watcher lagged (the LSN
/// to resume from) or the daemon is stopping. Dropping it stops the producer.
pub(crate) struct Stream {
    pub from: Lsn,
    pub items: mpsc::Receiver<Group>,
    ended: Arc<Mutex<Option<End>>>,
    producer: tokio::task::JoinHandle<()>,
    _slot: Slot,
}

/// Why a producer stopped early.
#[derive(Debug, Clone, Copy)]
enum End {
    /// The watcher lagged: the first LSN not sent.
    Lagged(Lsn),
    /// The log could not be read: the error was the last item.
    Failed,
}

/// One open watch, counted against `max_watchers` while it lives.
struct Slot(Arc<Shared>);

impl Slot {
    fn take(shared: &Arc<Shared>) -> Result<Slot, ErrorReply> {
        let n = shared.watchers.fetch_add(1, Ordering::AcqRel);
        let slot = Slot(shared.clone());
        if n >= shared.opts.max_watchers {
            let msg = format!("too many watchers ({n} open): try again later");
            return Err(ErrorReply::new(code::TOO_MANY_CONNECTIONS, msg, 1));
        }
        Ok(slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.watchers.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Stream {
    /// The first LSN not sent, if the watcher lagged.
    pub fn lagged(&self) -> Option<Lsn> {
        match *self.ended.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(End::Lagged(lsn)) => Some(lsn),
            _ => None,
        }
    }

    /// Whether the stream ended on a log read error (its last item).
    pub fn failed(&self) -> bool {
        matches!(
            *self.ended.lock().unwrap_or_else(|e| e.into_inner()),
            Some(End::Failed)
        )
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.producer.abort();
    }
}

/// Starts a watch with the `watch` method's `params` (PROTOCOL.md, "Watch").
pub(crate) async fn open(
    shared: &Arc<Shared>,
    params: &Map<String, Value>,
) -> Result<Stream, ErrorReply> {
    let filter = Filter::parse(params)?;
    let slot = Slot::take(shared)?;
    let head = shared.store.applied_lsn();
    let from = filter.from.unwrap_or(head + 1).max(1);
    let generation = shared.store.log().compaction_point().0;
    let (store, d, f) = (
        shared.store.clone(),
        shared.dispatch.clone(),
        filter.clone(),
    );
    let start = readers::run(move || {
        if f.latest {
            return Ok((None, None, from));
        }
        if let Some((item, state, next)) = compacted_item(&store, d.as_ref(), &f, from)? {
            return Ok((Some(item), f.changes.then_some(state), next));
        }
        // From the head (a watch from now): a copy of the served state, not
        // a fold of the whole log.
        let fold = match f.changes {
            true => Some(
                match store.with_state(|s, lsn| (lsn == from - 1).then(|| s.clone())) {
                    Some(s) => s,
                    None => store
                        .state_at(Until::Lsn(from - 1))
                        .map_err(|e| ErrorReply::from_error(&e, false))?,
                },
            ),
            false => None,
        };
        Ok((None, fold, from))
    })
    .await;
    let (compacted, fold, next) = match start {
        Some(r) => r?,
        None => {
            let msg = "internal error starting the watch (its reader panicked)";
            return Err(ErrorReply::new(code::FAILED, msg, 1));
        }
    };
    let (tx, items) = mpsc::channel::<Group>(shared.opts.watch_buffer.max(1));
    let budget = Arc::new(tokio::sync::Semaphore::new(WATCH_BYTES));
    let ended: Arc<Mutex<Option<End>>> = Arc::default();
    let producer = if filter.latest {
        let rows = latest::Rows::new(from, filter.agent);
        tokio::spawn(latest::produce(shared.clone(), rows, tx, budget))
    } else {
        let cursor = Cursor {
            next,
            filter,
            fold,
            generation,
        };
        if let Some(item) = compacted {
            // Fits: the channel holds at least one group and is empty, and
            // the budget is whole.
            let items = item.into_iter().map(Item::new).collect();
            if let Some(group) = Group::reserve(items, &budget).await {
                let _ = tx.try_send(group);
            }
        }
        tokio::spawn(produce(shared.clone(), cursor, tx, budget, ended.clone()))
    };
    Ok(Stream {
        from,
        items,
        ended,
        producer,
        _slot: slot,
    })
}

/// Runs a watch on this connection until the client goes, it lags, or the
/// daemon stops.
pub(crate) async fn run(mut wr: Writer, req: Request, shared: Arc<Shared>, _peer: Peer) {
    let id = req.id;
    let mut stream = match open(&shared, &req.params).await {
        Ok(s) => s,
        Err(e) => {
            let _ = send(&mut wr, &error_doc(id, &e)).await;
            let _ = wr.flush().await;
            return;
        }
    };
    let started = json!({"id": id, "result": {"watching": true, "from": stream.from}});
    if send(&mut wr, &started).await.is_err() || wr.flush().await.is_err() {
        return;
    }
    let id_json = id.to_string();
    while let Some(group) = stream.items.recv().await {
        for item in &group.items {
            if wr.write_all(item.line(&id_json).as_bytes()).await.is_err() {
                return;
            }
        }
        drop(group);
        if stream.items.is_empty() && wr.flush().await.is_err() {
            return;
        }
    }
    let last = match stream.lagged() {
        _ if stream.failed() => None,
        Some(resume) => Some(json!({"id": id, "lagged": {"resume_from": resume}})),
        None => Some(error_doc(
            id,
            &ErrorReply::new(code::SHUTTING_DOWN, "the daemon is shutting down", 1),
        )),
    };
    if let Some(last) = last {
        let _ = send(&mut wr, &last).await;
    }
    let _ = wr.flush().await;
    let _ = wr.shutdown().await;
}

async fn produce(
    shared: Arc<Shared>,
    mut cursor: Cursor,
    tx: mpsc::Sender<Group>,
    budget: Arc<tokio::sync::Semaphore>,
    ended: Arc<Mutex<Option<End>>>,
) {
    let mut shutdown = shared.shutdown.clone();
    loop {
        let notified = shared.committed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if *shutdown.borrow_and_update() {
            return;
        }
        let (store, d) = (shared.store.clone(), shared.dispatch.clone());
        let step = readers::run(move || {
            let (groups, read, failed) = read_chunk(&store, d.as_ref(), &mut cursor);
            let encoded: Vec<(Lsn, Vec<Item>)> = groups
                .into_iter()
                .map(|(lsn, g)| (lsn, g.into_iter().map(Item::new).collect()))
                .collect();
            ((encoded, read, failed), cursor)
        })
        .await;
        let Some(((items, read, failed), c)) = step else {
            return;
        };
        cursor = c;
        let lag = |resume| {
            *ended.lock().unwrap_or_else(|e| e.into_inner()) = Some(End::Lagged(resume));
            shared
                .lagged
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        for (resume, item) in items {
            // Both bounds (bytes, then groups) within the one grace period.
            let deadline = Instant::now() + LAG_GRACE;
            let group = match tokio::time::timeout_at(deadline, Group::reserve(item, &budget)).await
            {
                Ok(Some(g)) => g,
                Ok(None) => return,
                Err(_) => return lag(resume),
            };
            let left = deadline.saturating_duration_since(Instant::now());
            match tx.send_timeout(group, left).await {
                Ok(()) => {}
                Err(mpsc::error::SendTimeoutError::Timeout(_)) => return lag(resume),
                Err(mpsc::error::SendTimeoutError::Closed(_)) => return,
            }
        }
        if failed {
            // The error was the last item: the stream ends after it.
            *ended.lock().unwrap_or_else(|e| e.into_inner()) = Some(End::Failed);
            return;
        }
        if read > 0 {
            continue;
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = shutdown.changed() => return,
            _ = tx.closed() => return,
            // Records may also come from the store's own threads.
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
}

/// What a waiting `read` waits for: unread mail of `agent` (in
/// `project_root`) at `at` (else the clock at each check, as the read
/// itself judges it), for `wait`.
#[derive(Debug)]
struct MailWait {
    agent: String,
    project_root: Option<String>,
    at: Option<Timestamp>,
    wait: Duration,
}

impl MailWait {
    /// `None` when the parameters are not a well-formed wait: the read then
    /// runs at once and reports what is wrong as the CLI would.
    fn parse(p: &Map<String, Value>) -> Option<MailWait> {
        let text = |k: &str| match p.get(k) {
            None => Some(None),
            Some(Value::String(s)) => Some(Some(s.as_str())),
            Some(_) => None,
        };
        let wait = match p.get("wait")? {
            Value::Number(n) => n.as_f64()?,
            Value::String(s) => s.parse().ok()?,
            _ => return None,
        };
        let at = match text("at")? {
            Some(t) => Some(Timestamp::parse_rfc3339(t).ok()?),
            None => None,
        };
        Some(MailWait {
            agent: text("name")??.to_string(),
            project_root: text("project_root")?.map(str::to_string),
            at,
            wait: Duration::try_from_secs_f64(wait).ok()?,
        })
    }

    /// Whether the agent has unread mail now; `None` if the registry refuses
    /// the question (an unknown agent): the read reports it.
    fn has_mail(&self, store: &Store) -> Option<bool> {
        let now = self.at.unwrap_or_else(Timestamp::now);
        store.with_state(|s, _| {
            s.unread(&self.agent, self.project_root.as_deref(), now)
                .ok()
                .map(|m| !m.is_empty())
        })
    }
}

/// Runs a `read` with `wait` (PROTOCOL.md, "Waiting reads"): after each
/// commit it checks the served state for unread mail; once there is some,
/// or the time is up, it runs the read with `wait` set to the time left (0:
/// timed out). A read that finds the mail already taken by another reader
/// waits for the next commit. Nothing polls and no thread is held while
/// waiting; a shutdown ends the wait with `shutting_down`. A client that
/// closed its connection meanwhile gets nothing read for it: the mail it
/// gave up on stays unread.
pub(crate) async fn read_when_mail(
    shared: &Arc<Shared>,
    peer: &Peer,
    mut params: Map<String, Value>,
    sock: &UnixStream,
) -> Outcome {
    let Some(wait) = MailWait::parse(&params) else {
        return call_blocking(shared, peer, "read", params).await;
    };
    let deadline = Instant::now() + wait.wait;
    let mut shutdown = shared.shutdown.clone();
    let mut counted = None;
    loop {
        // Registered before the check, so a commit after it is not missed.
        let notified = shared.committed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let left = deadline.saturating_duration_since(Instant::now());
        if wait.has_mail(&shared.store) != Some(false) || left.is_zero() {
            counted = None;
            if peer_closed(sock) {
                let msg = "the client closed the connection during its wait: nothing was read";
                return Err(ErrorReply::new(code::FAILED, msg, 1));
            }
            params.insert("wait".into(), json!(left.as_secs_f64()));
            match call_blocking(shared, peer, "read", params.clone()).await {
                // Waits for the next commit (registered above, so none is
                // missed), never spinning on a check that disagrees.
                Err(e) if e.code == code::MAIL_TAKEN => {}
                out => return out,
            }
        }
        counted.get_or_insert_with(|| Waiting::start(shared));
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.changed() => {
                let msg = "the daemon is shutting down";
                return Err(ErrorReply::new(code::SHUTTING_DOWN, msg, 1));
            }
        }
    }
}

/// Whether the client closed its end of `sock` entirely (a half-close,
/// shutting only its writing side, still gets its answer): one `poll`
/// without waiting, asked once per wake-up.
fn peer_closed(sock: &UnixStream) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(sock, PollFlags::empty())];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(poll(&mut fds, Some(&now)), Ok(n) if n > 0)
        && fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR)
}

/// Counts a read in `hello`'s `reads_waiting` while it is blocked.
struct Waiting(Arc<Shared>);

impl Waiting {
    fn start(shared: &Arc<Shared>) -> Waiting {
        shared.waiting_reads.fetch_add(1, Ordering::AcqRel);
        Waiting(shared.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waiting_reads.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs an operation method on the blocking pool as `peer`.
async fn call_blocking(
    shared: &Arc<Shared>,
    peer: &Peer,
    method: &'static str,
    params: Map<String, Value>,
) -> Outcome {
    let (store, dispatch, origin) = (shared.store.clone(), shared.dispatch.clone(), peer.origin());
    tokio::task::spawn_blocking(move || {
        with_origin(origin, || dispatch.call(&store, method, &params))
    })
    .await
    .unwrap_or_else(|e| {
        let msg = format!("internal error running the request: {e}");
        Err(ErrorReply::new(code::FAILED, msg, 1))
    })
}
