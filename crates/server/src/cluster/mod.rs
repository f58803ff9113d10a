//! The replicated mode (docs/scaling.md): one registry across hosts, with a
//! NATS JetStream stream as the log of record and each host's local store
//! as its mirror.
//!
//! A [`ClusterNode`] owns a local [`Store`] and a connection to the
//! cluster. Invariants:
//! * the local log is a prefix of the stream, LSN = stream sequence, with
//!   `Purged` fillers where compaction deleted a sequence (`mirror`); every write goes through the stream, never
//!   straight into the local store;
//! * a command is validated against the folded state and published with
//!   `Nats-Expected-Last-Subject-Sequence` = the last sequence of its subject
//!   in that state; on "wrong last sequence" (JetStream error 10071) the node
//!   catches up and validates again, so racing commands are decided exactly
//!   as docs/behaviour.md §3 decides them one after the other;
//! * a durable command returns after the stream's ack (a quorum stored it)
//!   and after the local mirror folded it (read-your-writes per host); the
//!   time each stage took is summed in [`DurableStages`];
//! * every durable publish carries a `Nats-Msg-Id` kept across its retries,
//!   so a publish retried after a lost ack is stored once;
//! * lazy heartbeats are coalesced per host into one message per few
//!   milliseconds (`heartbeats`), published asynchronously with a bounded
//!   number of batches in flight (back-pressure past it);
//! * compaction runs on the stream, one host at a time, behind a marker
//!   whose fold removes what it deletes (`compact`).

mod bridge;
mod compact;
mod connect;
mod heartbeats;
mod lease;
mod liveness;
mod mirror;
mod publish;
mod requested_sweep;
mod sink;
mod stages;
pub mod subjects;
mod sweep;
pub(crate) use sweep::own_origin;

pub use compact::{StreamCompaction, MARKER_HEADROOM};
pub use heartbeats::{BatchLimits, HeartbeatTicket};
pub use lease::{LeaseKey, SweepLease};
pub use liveness::Staleness;
pub use mirror::{Folded, RefusedRecord, REFUSED_FILE};
pub use stages::DurableStages;

use publish::{check_publishable, publish_retried};
pub use subjects::FleetSubjects;

use crate::log::Durability;
use crate::model::Status;
use crate::probe::SharedProbe;
use crate::registry::codec::Origin;
use crate::registry::{
    codec, Event, EventKind, FieldUpdates, Lsn, Message, PostMessage, PostOutcome, Registration,
    RegistrationKind, RegistryError, SessionKey, SessionOp, State, SweepPolicy,
};
use crate::store::{Check, Store, StoreError};
use crate::time::Timestamp;
use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, stream};
use async_nats::Subject;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// Why a replicated command failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The command was refused by the fold; nothing was published.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Store(StoreError),
    /// Talking to the NATS cluster failed (what, where, why).
    #[error("nats: {what}: {detail}")]
    Nats { what: String, detail: String },
    /// Lost the conditional publish this many times in a row.
    #[error("conflict: subject {subject} changed under {rounds} validations in a row")]
    Conflict { subject: String, rounds: usize },
    /// The local mirror stopped (this host cannot write its mirror).
    #[error("mirror stopped: {0}")]
    Mirror(String),
    /// A record refused before it was published: no host could apply it
    /// (this build's decoder, every mirror's, does not read it back, or it
    /// exceeds the servers' largest message). Nothing was published.
    #[error("unpublishable record on {subject} ({bytes} bytes): {reason}; nothing was published")]
    Unpublishable {
        subject: String,
        bytes: usize,
        reason: String,
    },
    /// A batch of lazy heartbeats was not stored (or not folded here).
    #[error("heartbeat batch: {0}")]
    HeartbeatBatch(String),
    /// The mirror did not reach a sequence in time.
    #[error(
        "mirror of {dir} did not reach stream sequence {seq} within {waited:?} (at {applied})"
    )]
    Lagging {
        dir: String,
        seq: Lsn,
        applied: Lsn,
        waited: Duration,
    },
}

pub type ClusterResult<T> = std::result::Result<T, ClusterError>;

/// A refusal of the fold stays a refusal, whichever layer reports it.
impl From<StoreError> for ClusterError {
    fn from(e: StoreError) -> ClusterError {
        match e {
            StoreError::Registry(e) => ClusterError::Registry(e),
            other => ClusterError::Store(other),
        }
    }
}

/// A failed publish: an unpublishable record as itself, else a NATS error.
fn publish_err(subject: &str, e: PublishError) -> ClusterError {
    use std::error::Error;
    if let Some(ClusterError::Unpublishable {
        subject,
        bytes,
        reason,
    }) = e.source().and_then(|s| s.downcast_ref::<ClusterError>())
    {
        return ClusterError::Unpublishable {
            subject: subject.clone(),
            bytes: *bytes,
            reason: reason.clone(),
        };
    }
    nats_err(format!("publish on {subject}"), e)
}

/// The subject of each event of a command's batch: each its own
/// ([`FleetSubjects::of`]), except a cap-drop record, which travels on the
/// subject of the event after it (the post that needs the room, on its
/// sender's subject). So posts past the cap through several hosts contend
/// only per sender, never on the fleet-wide control subject (issue 27): two
/// hosts dropping the same messages at once is harmless, since a drop of a
/// message already gone folds to nothing and the fold's own cap drops
/// whatever a racing post still overflows (docs/scaling.md §2).
fn batch_subjects(subjects: &FleetSubjects, events: &[Event]) -> Vec<String> {
    let mut out: Vec<String> = events.iter().map(|e| subjects.of(&e.kind)).collect();
    for i in (0..events.len().saturating_sub(1)).rev() {
        if matches!(events[i].kind, EventKind::MessagesDropped { .. }) {
            out[i] = out[i + 1].clone();
        }
    }
    out
}

fn nats_err(what: impl Into<String>, e: impl std::fmt::Display) -> ClusterError {
    ClusterError::Nats {
        what: what.into(),
        detail: e.to_string(),
    }
}

/// How a node joins the cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// NATS server URLs (`nats://host:port`); any one reachable is enough.
    pub servers: Vec<String>,
    /// The fleet: stream `AGENTLOG_<FLEET>`, subjects `al.<fleet>.>`.
    pub fleet: String,
    /// This host's id (in message ids and the sweeper lease).
    pub host_id: String,
    /// Stream replicas (3 in production; the stream is created if absent).
    pub replicas: usize,
    /// How lazy heartbeats are coalesced into batches (docs/scaling.md §5).
    pub heartbeat_batches: BatchLimits,
    /// Validate-and-publish rounds before [`ClusterError::Conflict`] (default 8).
    pub conflict_rounds: usize,
    /// How long a publish is retried through leader changes, and how long a
    /// command waits for the mirror to fold its ack (default 30 s).
    pub deadline: Duration,
    /// Lease of agents (sweeps): the same policy on every host.
    pub sweep: SweepPolicy,
    /// This host's process probe, asked only about the agents registered
    /// on this host (docs/scaling.md §7); `/proc` by default.
    pub probe: SharedProbe,
    /// How the stream is compacted (docs/scaling.md §6).
    pub compaction: StreamCompaction,
}

impl ClusterOptions {
    pub fn new(servers: Vec<String>, fleet: &str, host_id: &str) -> ClusterOptions {
        ClusterOptions {
            servers,
            fleet: fleet.to_string(),
            host_id: host_id.to_string(),
            replicas: 3,
            heartbeat_batches: BatchLimits::default(),
            conflict_rounds: 8,
            deadline: Duration::from_secs(30),
            sweep: SweepPolicy::default(),
            probe: SharedProbe::default(),
            compaction: StreamCompaction::default(),
        }
    }
}

/// How often the client pings its server; three unanswered pings and it
/// moves to another server (failover from a hung server, issue 27;
/// `connect`).
pub const PING_EVERY: Duration = Duration::from_millis(500);
/// How long one connection attempt may take (a paused server accepts the
/// TCP connection and never says hello).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a request to the cluster (a publish's ack among them) waits.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// A command slower than this is logged at debug level with where its
/// time went (sealing, publishing, folding, rounds).
const SLOW_COMMAND: Duration = Duration::from_millis(250);

/// Duplicate window of the stream: a retried `Nats-Msg-Id` inside it is
/// stored once (docs/scaling.md §3).
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(600);

/// One host of the replicated registry. See the module docs.
pub struct ClusterNode {
    shared: Arc<mirror::Shared>,
    opts: ClusterOptions,
    client: async_nats::Client,
    /// Counts the client's connections: a publish waiting for an ack from
    /// a server the client left is resent on the new one (`connect`).
    reconnects: connect::Reconnects,
    js: jetstream::Context,
    heartbeats: Arc<heartbeats::Batcher>,
    stream: stream::Stream,
    mirror: Option<JoinHandle<()>>,
    flusher: Option<JoinHandle<()>>,
    /// Contact with the stream's quorum, and the task probing it.
    liveness: Arc<liveness::Liveness>,
    prober: Option<JoinHandle<()>>,
    boot: u64,
    requests: AtomicU64,
    stages: stages::StageClock,
    /// The runtime the node runs on: blocking callers ([`crate::store::CommandSink`])
    /// wait on it.
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for ClusterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterNode")
            .field("host", &self.opts.host_id)
            .field("dir", &self.shared.store.dir())
            .finish()
    }
}

/// Creates the fleet's stream if absent (R = `replicas`, file storage,
/// subjects `al.<fleet>.>`, deletes and purges allowed for compaction).
pub async fn ensure_stream(
    js: &jetstream::Context,
    subjects: &FleetSubjects,
    replicas: usize,
) -> ClusterResult<stream::Stream> {
    let name = subjects.stream_name();
    js.get_or_create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![subjects.wildcard()],
        storage: stream::StorageType::File,
        num_replicas: replicas,
        discard: stream::DiscardPolicy::New,
        duplicate_window: DUPLICATE_WINDOW,
        allow_direct: true,
        ..Default::default()
    })
    .await
    .map_err(|e| nats_err(format!("create or get stream {name}"), e))
}

impl ClusterNode {
    /// Connects to the cluster, creates the stream if absent, and starts the
    /// mirror of `store` from its applied LSN + 1 (a restarted node resumes
    /// where its local log ends; nothing is refolded).
    pub async fn start(store: Store, opts: ClusterOptions) -> ClusterResult<ClusterNode> {
        let subjects = FleetSubjects::new(&opts.fleet).map_err(|e| nats_err("options", e))?;
        // Pings, bounded connection attempts, a reconnect that leaves the
        // server it left for another first (`connect`): within the stale
        // bound (docs/scaling.md §8).
        let (client, reconnects) = connect::connect(&opts.servers)
            .await
            .map_err(|e| nats_err(format!("connect to {}", opts.servers.join(",")), e))?;
        // An ack not back within this is retried (same message id: stored
        // once), on whichever server the client reached meanwhile: what
        // bounds a write's stall on a server that stopped answering.
        let js = jetstream::ContextBuilder::new()
            .timeout(REQUEST_TIMEOUT)
            .build(client.clone());
        let stream = ensure_stream(&js, &subjects, opts.replicas).await?;
        let batch_subject = subjects.heartbeats(&opts.host_id);
        let shared = Arc::new(mirror::Shared::new(Arc::new(store), subjects)?);
        let mirror = tokio::spawn(mirror::run(shared.clone(), stream.clone()));
        let liveness = Arc::new(liveness::Liveness::new(shared.applied.subscribe()));
        let prober = tokio::spawn(liveness::run(liveness.clone(), stream.clone()));
        let heartbeats = Arc::new(heartbeats::Batcher::new(opts.heartbeat_batches));
        let flusher = tokio::spawn(heartbeats::run(
            heartbeats.clone(),
            shared.clone(),
            js.clone(),
            Subject::from(batch_subject),
            opts.deadline,
        ));
        let boot = Timestamp::now().as_millis() as u64;
        Ok(ClusterNode {
            shared,
            opts,
            client,
            reconnects,
            js,
            heartbeats,
            stream,
            mirror: Some(mirror),
            liveness,
            prober: Some(prober),
            flusher: Some(flusher),
            boot,
            requests: AtomicU64::new(0),
            stages: stages::StageClock::default(),
            runtime: tokio::runtime::Handle::current(),
        })
    }

    /// The local mirror (read-only use: writes go through the node).
    pub fn store(&self) -> &Store {
        &self.shared.store
    }
    /// The local mirror, shared (a daemon serves it); drop every clone
    /// before [`ClusterNode::close`].
    pub fn shared_store(&self) -> Arc<Store> {
        self.shared.store.clone()
    }
    pub fn options(&self) -> &ClusterOptions {
        &self.opts
    }
    /// Whether the connection to the cluster is up now (writes need it;
    /// reads are served from the mirror either way).
    pub fn connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }
    /// The name of the NATS server the client is on (or was on last):
    /// where a failover moved it.
    pub fn server_name(&self) -> String {
        self.client.server_info().server_name
    }
    /// Whether this host reached a quorum of the stream lately
    /// (docs/scaling.md §8): reads from a stale replica may be behind.
    pub fn staleness(&self) -> Staleness {
        self.liveness.get()
    }
    /// [`ClusterNode::staleness`]'s `stale`, without a lock.
    pub fn is_stale(&self) -> bool {
        self.liveness.is_stale()
    }
    /// Follows the last stream sequence folded locally.
    pub fn applied_watch(&self) -> tokio::sync::watch::Receiver<Lsn> {
        self.shared.applied.subscribe()
    }
    pub fn subjects(&self) -> &FleetSubjects {
        &self.shared.subjects
    }
    pub fn host_id(&self) -> &str {
        &self.opts.host_id
    }
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.js
    }
    /// The last stream sequence folded locally.
    pub fn applied(&self) -> Lsn {
        *self.shared.applied.borrow()
    }

    /// The stream records this host's mirror refused and went past
    /// (docs/scaling.md §4, "Refused records").
    pub fn refused(&self) -> Vec<RefusedRecord> {
        self.shared.refused()
    }

    /// The largest message the connected server takes (headers included).
    pub fn max_payload(&self) -> usize {
        self.client.max_payload()
    }

    /// Every record the local mirror folds from now on, in stream order
    /// (one follower at a time; a dropped receiver ends it). Bounded to
    /// 65,536 records: the mirror never waits for the reader, and a reader
    /// that far behind sees the channel end.
    pub fn follow_folded(&self) -> tokio::sync::mpsc::Receiver<Folded> {
        self.shared.tap()
    }

    /// Where this host's durable commands spent their time so far.
    pub fn durable_stages(&self) -> DurableStages {
        self.stages.snapshot()
    }

    /// The stream's last sequence, asked of the cluster.
    pub async fn stream_last_sequence(&self) -> ClusterResult<Lsn> {
        let mut s = self.stream.clone();
        let info = s.info().await.map_err(|e| {
            nats_err(
                format!("info of stream {}", self.shared.subjects.stream_name()),
                e,
            )
        })?;
        Ok(info.state.last_sequence)
    }

    /// Waits until the mirror folded `seq` (bounded by the deadline).
    pub async fn wait_applied(&self, seq: Lsn) -> ClusterResult<()> {
        self.shared.wait_applied(seq, self.opts.deadline).await
    }

    /// Catches the mirror up to the stream's current last sequence.
    pub async fn catch_up(&self) -> ClusterResult<Lsn> {
        let last = self.stream_last_sequence().await?;
        self.wait_applied(last).await?;
        Ok(last)
    }

    fn next_msg_id(&self) -> String {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        format!("{}:{}:{n}", self.opts.host_id, self.boot)
    }

    async fn publish_acked(
        &self,
        subject: &str,
        msg: PublishMessage,
    ) -> Result<jetstream::publish::PublishAck, PublishError> {
        let subject = Subject::from(subject);
        publish_retried(
            &self.js,
            &subject,
            || msg.clone(),
            self.opts.deadline,
            Some(&self.reconnects),
        )
        .await
    }

    /// Publishes one event's encoded `payload`, with `origin` appended,
    /// under a fresh message id (stored once however often it is retried),
    /// conditional on the subject's last sequence being `expect` when given.
    /// Each attempt builds its message (a publish consumes it).
    async fn publish_event(
        &self,
        subject: &Subject,
        mut payload: Vec<u8>,
        origin: Option<Origin>,
        expect: Option<u64>,
    ) -> Result<jetstream::publish::PublishAck, PublishError> {
        if let Some(o) = origin {
            codec::push_origin(&mut payload, o);
        }
        let payload = bytes::Bytes::from(payload);
        check_publishable(subject.as_str(), &payload, self.max_payload())
            .map_err(|e| PublishError::with_source(PublishErrorKind::Other, e))?;
        let msg_id = self.next_msg_id();
        let msg = || {
            let m = PublishMessage::build()
                .payload(payload.clone())
                .message_id(msg_id.as_str());
            match expect {
                Some(seq) => m.expected_last_subject_sequence(seq),
                None => m,
            }
        };
        publish_retried(
            &self.js,
            subject,
            msg,
            self.opts.deadline,
            Some(&self.reconnects),
        )
        .await
    }

    /// Validates with `check` against the folded state and publishes the
    /// events it returns, one message each and in order, each conditional on
    /// its subject's last sequence in that state (an event after another of
    /// the batch on the same subject: on that one's sequence). On a lost race
    /// catches up and runs `check` again against the newer state, which holds
    /// the part of the batch already stored (docs/scaling.md §2, "Batches").
    /// Returns the events stored, with their sequences, once folded here.
    pub(crate) async fn publish_decided(
        &self,
        origin: Option<Origin>,
        check: &mut Check<'_>,
    ) -> ClusterResult<Vec<(Lsn, Event)>> {
        if let Some(f) = self.shared.failure() {
            return Err(ClusterError::Mirror(f));
        }
        let began = Instant::now();
        // After the lazy heartbeats this host accepted before the command.
        self.heartbeats.seal().await;
        let sealed = began.elapsed();
        let mut done = Vec::new();
        let mut lost_on = String::new();
        for round in 0..self.opts.conflict_rounds.max(1) {
            let validating = Instant::now();
            let planned = self.shared.with_folded(|folded| {
                let events = self.shared.store.with_state(|s, _| check(s))?;
                let subjects = batch_subjects(&self.shared.subjects, &events);
                Ok::<_, StoreError>(
                    events
                        .into_iter()
                        .zip(subjects)
                        .map(|(mut e, subject)| {
                            sweep::stamp_host(&mut e, &self.opts.host_id);
                            let expect = folded.get(&subject).copied().unwrap_or(0);
                            (Subject::from(subject), expect, e)
                        })
                        .collect::<Vec<_>>(),
                )
            })?;
            let sending = Instant::now();
            self.stages.validated(sending - validating);
            let mut lost = false;
            let mut stored_on: Vec<(Subject, Lsn)> = Vec::new();
            for (subject, expect, event) in planned {
                let expect = stored_on
                    .iter()
                    .rev()
                    .find(|(s, _)| *s == subject)
                    .map_or(expect, |(_, seq)| *seq);
                let payload = codec::encode(&event);
                match self
                    .publish_event(&subject, payload, origin, Some(expect))
                    .await
                {
                    Ok(ack) => {
                        done.push((ack.sequence, event));
                        stored_on.push((subject, ack.sequence));
                    }
                    Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                        lost_on = subject.to_string();
                        lost = true;
                        break;
                    }
                    Err(e) => return Err(publish_err(&subject, e)),
                }
            }
            if !lost {
                if let Some(&(last, _)) = done.last() {
                    let acked = Instant::now();
                    self.wait_applied(last).await?;
                    self.stages.done(acked - sending, acked.elapsed());
                    if began.elapsed() >= SLOW_COMMAND {
                        tracing::debug!(
                            lsn = last,
                            rounds = round + 1,
                            took = ?began.elapsed(),
                            seal = ?sealed,
                            publish = ?(acked - sending),
                            fold = ?acked.elapsed(),
                            "slow command"
                        );
                    }
                }
                return Ok(done);
            }
            self.stages.conflict();
            let caught = Instant::now();
            self.catch_up().await?;
            self.refresh_subject(&lost_on).await?;
            tracing::debug!(
                subject = lost_on.as_str(),
                round,
                publish = ?(caught - sending),
                catch_up = ?caught.elapsed(),
                "command lost a race; validating again"
            );
        }
        Err(ClusterError::Conflict {
            subject: lost_on,
            rounds: self.opts.conflict_rounds.max(1),
        })
    }

    /// [`ClusterNode::publish_decided`] for a command of at most one event,
    /// with a value computed by the validation that published.
    async fn decide<T: Send>(
        &self,
        origin: Option<Origin>,
        mut check: impl FnMut(&State) -> Result<(T, Option<Event>), RegistryError> + Send,
    ) -> ClusterResult<(T, Option<Lsn>)> {
        let mut value = None;
        let done = self
            .publish_decided(origin, &mut |s| {
                let (v, e) = check(s)?;
                value = Some(v);
                Ok(e.into_iter().collect())
            })
            .await?;
        let value = value.expect("a successful decision ran its check");
        Ok((value, done.last().map(|(lsn, _)| *lsn)))
    }

    async fn decide_one(
        &self,
        check: impl FnMut(&State) -> Result<Event, RegistryError> + Send,
    ) -> ClusterResult<Lsn> {
        let mut check = check;
        let ((), lsn) = self
            .decide(None, |s| check(s).map(|e| ((), Some(e))))
            .await?;
        Ok(lsn.expect("an event was published"))
    }

    /// Registers (docs/behaviour.md §3): of two hosts racing for a name, exactly one wins;
    /// the other gets "name held by pid N".
    pub async fn register(
        &self,
        reg: Registration,
        at: Option<Timestamp>,
    ) -> ClusterResult<(Lsn, RegistrationKind)> {
        let at = at.unwrap_or_else(Timestamp::now);
        let (kind, lsn) = self
            .decide(None, |s| {
                let e = s.check_register(reg.clone(), at)?;
                let kind = match &e.kind {
                    EventKind::AgentRegistered { kind, .. } => *kind,
                    _ => unreachable!("check_register returns a registration"),
                };
                Ok((kind, Some(e)))
            })
            .await?;
        Ok((lsn.expect("published"), kind))
    }

    /// A heartbeat, validated against the local fold; the ticket gives its
    /// LSN (its stream sequence) once the stream stored it and the local
    /// mirror folded it. Not conditional: an agent's heartbeats come from
    /// one process, and one that lands after the agent finished folds as a
    /// no-op.
    ///
    /// * [`Durability::Lazy`]: added to this host's open heartbeat batch
    ///   (waits only while `heartbeat_batches.in_flight` batches await their
    ///   ack and the open one is full) and returned at once; the ticket
    ///   resolves to the batch's sequence. A caller that drops the ticket
    ///   still has the heartbeat stored: a failed batch is logged and
    ///   counted ([`ClusterNode::heartbeats_failed`]), the loss window of a
    ///   lazy heartbeat.
    /// * [`Durability::Durable`]: its own message on the agent's subject,
    ///   with a message id (a retry after a lost ack is stored once),
    ///   published once the batches sealed before it were answered (so it
    ///   lands after them) and returned only once stored and folded: the
    ///   ticket is already resolved.
    pub async fn heartbeat(
        &self,
        origin: Option<Origin>,
        agent: &str,
        pid: Option<u32>,
        at: Option<Timestamp>,
        mode: Durability,
    ) -> ClusterResult<HeartbeatTicket> {
        let at = self.check_heartbeat(agent, pid, at)?;
        if mode == Durability::Lazy {
            return Ok(self.heartbeats.push(at, agent, pid, origin).await);
        }
        self.heartbeats.seal().await;
        let mut payload = Vec::with_capacity(32 + agent.len());
        codec::encode_heartbeat_into(&mut payload, at, agent, pid);
        let subject = Subject::from(self.shared.subjects.agent(agent));
        let ack = self
            .publish_event(&subject, payload, origin, None)
            .await
            .map_err(|e| publish_err(&subject, e))?;
        self.wait_applied(ack.sequence).await?;
        Ok(HeartbeatTicket::ready(ack.sequence))
    }

    /// Seals the open heartbeat batch and waits until every batch sealed
    /// so far was answered; the highest batch sequence stored and folded
    /// here (0 if none).
    pub async fn flush_heartbeats(&self) -> Lsn {
        self.heartbeats.flush().await
    }

    /// Lazy heartbeats accepted whose batch was not stored.
    pub fn heartbeats_failed(&self) -> u64 {
        self.heartbeats.failed()
    }

    /// Validates a heartbeat against the local fold; its event time.
    fn check_heartbeat(
        &self,
        agent: &str,
        pid: Option<u32>,
        at: Option<Timestamp>,
    ) -> ClusterResult<Timestamp> {
        if let Some(f) = self.shared.failure() {
            return Err(ClusterError::Mirror(f));
        }
        self.shared
            .store
            .with_state(|s, _| s.check_heartbeat(agent, pid))?;
        Ok(at.unwrap_or_else(Timestamp::now))
    }

    pub async fn set_status(
        &self,
        agent: &str,
        status: Status,
        message: Option<String>,
        at: Option<Timestamp>,
    ) -> ClusterResult<Lsn> {
        let at = at.unwrap_or_else(Timestamp::now);
        self.decide_one(|s| s.check_set_status(agent, status, message.clone(), at))
            .await
    }

    pub async fn update_fields(
        &self,
        agent: &str,
        fields: FieldUpdates,
        at: Option<Timestamp>,
    ) -> ClusterResult<Lsn> {
        let at = at.unwrap_or_else(Timestamp::now);
        self.decide_one(|s| s.check_update(agent, fields.clone(), at))
            .await
    }

    pub async fn remove(&self, agent: &str, at: Option<Timestamp>) -> ClusterResult<Lsn> {
        let at = at.unwrap_or_else(Timestamp::now);
        self.decide_one(|s| s.check_remove(agent, at)).await
    }

    /// Posts a message; returns its id (= its stream sequence). A retried
    /// request id gets the first post's id from the fold's request index: a
    /// sender's posts share one subject, published conditionally, so a retry
    /// racing its first post through another host re-validates after it.
    pub async fn post_message(
        &self,
        post: PostMessage,
        at: Option<Timestamp>,
    ) -> ClusterResult<Lsn> {
        let at = at.unwrap_or_else(Timestamp::now);
        let (existing, lsn) = self
            .decide(None, |s| match s.check_post(post.clone(), at)? {
                PostOutcome::Append(e) => Ok((None, Some(e))),
                PostOutcome::Existing(id) => Ok((Some(id), None)),
            })
            .await?;
        Ok(existing.or(lsn).expect("a post or its first id"))
    }

    /// Returns the unread messages of `reader` and publishes their receipt.
    pub async fn read_messages(
        &self,
        reader: &str,
        project_root: Option<&str>,
        at: Option<Timestamp>,
    ) -> ClusterResult<Vec<Message>> {
        let at = at.unwrap_or_else(Timestamp::now);
        let (msgs, _) = self
            .decide(None, |s| s.check_read(reader, project_root, at))
            .await?;
        Ok(msgs)
    }

    /// Marks messages read; returns how many were newly marked.
    pub async fn mark_read(
        &self,
        reader: &str,
        ids: &[Lsn],
        at: Option<Timestamp>,
    ) -> ClusterResult<usize> {
        let at = at.unwrap_or_else(Timestamp::now);
        let (n, _) = self
            .decide(None, |s| {
                let e = s.check_mark_read(reader, ids, at)?;
                let n = match &e {
                    Some(Event {
                        kind: EventKind::MessagesRead { ids, .. },
                        ..
                    }) => ids.len(),
                    _ => 0,
                };
                Ok((n, e))
            })
            .await?;
        Ok(n)
    }

    /// Logical-session presence; `None` when nothing was published.
    pub async fn session(
        &self,
        op: SessionOp,
        key: SessionKey,
        ttl_ms: Option<i64>,
        at: Option<Timestamp>,
    ) -> ClusterResult<Option<Lsn>> {
        let at = at.unwrap_or_else(Timestamp::now);
        let ((), lsn) = self
            .decide(None, |s| {
                Ok(((), s.check_session(op, key.clone(), ttl_ms, at)?))
            })
            .await?;
        Ok(lsn)
    }

    /// Stops the mirror and closes the local store cleanly (snapshot, sync,
    /// unlock); the stream and the other hosts are untouched.
    pub async fn close(mut self) -> ClusterResult<()> {
        // Lazy heartbeats accepted are published before the node goes.
        self.heartbeats.flush().await;
        if let Some(flusher) = self.flusher.take() {
            flusher.abort();
            let _ = flusher.await;
        }
        if let Some(prober) = self.prober.take() {
            prober.abort();
        }
        if let Some(mirror) = self.mirror.take() {
            mirror.abort();
            let _ = mirror.await;
        }
        self.client
            .flush()
            .await
            .map_err(|e| nats_err("flush before close", e))?;
        let shared = self.shared.clone();
        drop(self);
        let store = Arc::try_unwrap(shared)
            .map_err(|_| ClusterError::Mirror("mirror state still shared at close".into()))?
            .into_store();
        match Arc::try_unwrap(store) {
            Ok(store) => store.close().map(|_| ()).map_err(Into::into),
            Err(_) => Err(ClusterError::Mirror(
                "local store still shared at close".into(),
            )),
        }
    }
}

impl Drop for ClusterNode {
    fn drop(&mut self) {
        for task in [&self.mirror, &self.flusher, &self.prober]
            .into_iter()
            .flatten()
        {
            task.abort();
        }
    }
}
