//! Compaction of the fleet's stream (docs/scaling.md §6): the local
//! compaction's plan, carried out on the stream of record.
//!
//! One host at a time (the fleet's compaction lock, a key of the lease
//! bucket) plans with [`crate::compact::plan`] over its mirror at its last
//! folded sequence `S` — the same retention and heartbeat-run rule as a
//! local `compact` — then:
//! 0. finishes the deletions of the last compaction in its log (a compactor
//!    that died after its marker, or a race that stopped it between two of
//!    its markers, left what the markers name in the stream): if the last
//!    thing that compaction deletes is still there, it deletes again what
//!    the markers name (each step is idempotent);
//! 1. publishes [`EventKind::StreamCompacted`] markers naming every agent,
//!    message and session whose records the plan drops: one, or several
//!    when one would exceed the servers' largest message
//!    ([`StreamCompaction::marker_max_bytes`]), each carrying `upto = S`.
//!    **A marker need not be last** (issue 27): it is published without a
//!    condition on the stream's last sequence, so writes landing between
//!    `S` and the marker never make it lose (under load the old
//!    "right after `S`" condition lost every retry). Its fold removes only
//!    what nothing touched since `S` ([`crate::registry::State`]: an agent
//!    whose last event is at or before `S`, a session still timed out at
//!    the marker's time, the posts named);
//! 2. purges the subjects of the agents and sessions named that the
//!    marker's fold removed (one atomic purge each, up to `S`; those absent
//!    from the fold once the markers are folded here), deletes the named
//!    posts by sequence, then the other dropped sequences one by one
//!    (middle heartbeats of runs, receipts and cap-drop records naming
//!    only dropped messages).
//!
//! Invariant: the fold of the stream, by any host at any time after step 1
//! (whatever part of step 2 it saw), equals retention of the fold before,
//! less what was touched after `S`: each marker's fold removes what it
//! names and nothing touched since; a record the deletion has not reached
//! (or that a host folded before it went) only concerns what the markers
//! remove or is a middle heartbeat; and an agent or session the marker
//! kept is never purged (skipping a purge is always safe: the marker's
//! fold removes those records on every host). Between two markers of one
//! compaction a host holds the state with the first part removed: still a
//! state of a fold.
//!
//! A dry run (`opts.dry_run`) catches the mirror up to the stream and
//! plans, taking no lock and publishing nothing.

use super::publish::check_publishable;
use super::{nats_err, ClusterError, ClusterNode, ClusterResult, LeaseKey, SweepLease};
use crate::compact::{CompactOptions, CompactionReport};
use crate::registry::codec::{self, Origin};
use crate::registry::{tag, Event, EventKind, Lsn, SessionKey};
use crate::store::StoreError;
use crate::time::Timestamp;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{
    DeleteMessageErrorKind, LastRawMessageErrorKind, RawMessageErrorKind,
};
use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

/// How long the compaction lock lives without renewal, when the bucket is
/// created here (a daemon creates it with its `--lease-ttl`).
const LOCK_TTL: Duration = Duration::from_secs(15);
/// How often the compactor renews its lock while it deletes.
const LOCK_RENEW: Duration = Duration::from_millis(500);
/// JetStream's "no message found" and "sequence not found" on a delete:
/// the record is already gone (a delete retried after a lost reply).
const GONE: [u64; 2] = [10037, 10057];
/// Bytes of a marker's message kept for its headers (`Nats-Msg-Id`,
/// `Nats-Expected-Last-Sequence`, about 150 bytes): the servers' message
/// limit counts headers and payload together.
pub const MARKER_HEADROOM: usize = 1024;
/// Most bytes one name adds to a marker's payload beyond its own text: a
/// varint length (or a varint LSN) is at most 9 bytes (bincode).
const VARINT_MAX: usize = 9;
/// Deletions of single sequences in flight at once.
const DELETES_IN_FLIGHT: usize = 32;

/// How the stream is compacted (a field of [`super::ClusterOptions`]).
#[derive(Debug, Clone, Default)]
pub struct StreamCompaction {
    /// Largest marker payload; `None`: the servers' largest message
    /// (`max_payload`, 1 MB unless configured, learnt at connect) less
    /// [`MARKER_HEADROOM`]. Tests lower it to split small histories.
    pub marker_max_bytes: Option<usize>,
    /// Test hook: the compaction fails after this many deletions of step 2
    /// (its markers stored), as a compactor that died there.
    #[cfg(any(test, feature = "fault-injection"))]
    pub fail_after_deletions: Option<usize>,
}

/// What one compaction removes from the stream: planned over the mirror,
/// or gathered from the markers of an earlier one (its `deletes` unknown).
#[derive(Debug, Default)]
struct StreamPlan {
    agents: BTreeSet<String>,
    messages: BTreeSet<Lsn>,
    sessions: BTreeSet<SessionKey>,
    /// Sequences deleted one by one that no marker names (middle
    /// heartbeats, receipts and cap-drop records of dropped messages).
    deletes: Vec<Lsn>,
}

/// The markers of the latest compaction in a log: its `upto` and the union
/// of what they name.
#[derive(Debug, Default)]
struct LastCompaction {
    upto: Option<Lsn>,
    named: StreamPlan,
}

/// The last thing a compaction deletes of what its markers name (the order
/// of [`ClusterNode::delete_named`]): once it is gone, all of it is.
enum LastNamed {
    Subject(String),
    Message(Lsn),
    Nothing,
}

/// Step 2 under way: the lock it renews and the deletions done so far.
struct Deleting<'a> {
    lock: &'a SweepLease,
    renewed: Instant,
    done: usize,
}

impl ClusterNode {
    /// The largest marker payload this node publishes (see
    /// [`StreamCompaction::marker_max_bytes`]).
    pub fn marker_max_bytes(&self) -> usize {
        self.opts
            .compaction
            .marker_max_bytes
            .unwrap_or_else(|| self.client.max_payload().saturating_sub(MARKER_HEADROOM))
    }

    /// Compacts the fleet's stream at `now` with `opts`' retention (see the
    /// module docs); returns once the local mirror folded the markers and
    /// compacted its log up to them. Refused while another host compacts.
    /// With `opts.dry_run`, only reports what a compaction would drop now.
    pub async fn compact_stream(
        &self,
        origin: Option<Origin>,
        now: Timestamp,
        opts: &CompactOptions,
    ) -> ClusterResult<CompactionReport> {
        if opts.dry_run {
            let started = Instant::now();
            self.catch_up().await?;
            let (mut report, ..) = self.plan_stream(now, opts)?;
            report.duration_ms = started.elapsed().as_millis() as u64;
            return Ok(report);
        }
        let o = &self.opts;
        let lock = SweepLease::open(
            &self.js,
            &o.fleet,
            &o.host_id,
            LeaseKey::Compactor,
            LOCK_TTL,
            o.replicas,
        )
        .await?;
        if !lock.acquire_or_renew().await? {
            let holder = lock
                .holder()
                .await?
                .unwrap_or_else(|| "another host".into());
            return Err(ClusterError::Store(StoreError::Replication(format!(
                "the stream of fleet `{}` is being compacted by {holder}; nothing was compacted",
                o.fleet
            ))));
        }
        let done = self.compact_locked(&lock, origin, now, opts).await;
        let released = lock.release().await;
        let report = done?;
        released?;
        Ok(report)
    }

    /// Plans a compaction over the mirror at its last folded sequence:
    /// the local planner's report, what the stream loses, and the markers
    /// of the latest compaction already in the log.
    fn plan_stream(
        &self,
        now: Timestamp,
        opts: &CompactOptions,
    ) -> ClusterResult<(CompactionReport, Lsn, StreamPlan, LastCompaction)> {
        let store = self.store();
        let (state, upto) = store.with_state(|s, applied| (s.clone(), applied));
        let view = store.view();
        let plan = crate::compact::plan(&view, &state, upto, now, opts)
            .map_err(|e| ClusterError::Store(e.into()))?;
        let mut report = plan.report;
        report.dry_run = opts.dry_run;
        report.generation_before = store.log().stats().generation;
        report.generation = report.generation_before;
        let kept = plan.retained.kept();
        let mut sp = StreamPlan::default();
        let mut last = LastCompaction::default();
        for r in view.iter() {
            let r = r.map_err(|e| ClusterError::Store(e.into()))?;
            if r.lsn > upto {
                break;
            }
            let decode_err = |source| StoreError::Decode {
                dir: store.dir().to_path_buf(),
                lsn: r.lsn,
                source,
            };
            if plan.drop.contains(r.lsn) {
                sp.add(r.lsn, r.payload, &kept.agents).map_err(decode_err)?;
            } else if super::mirror::is_tag(r.payload, tag::STREAM_COMPACTED) {
                let marker = codec::decode(r.payload).map_err(decode_err)?;
                last.add(marker.kind);
            }
        }
        Ok((report, upto, sp, last))
    }

    async fn compact_locked(
        &self,
        lock: &SweepLease,
        origin: Option<Origin>,
        now: Timestamp,
        opts: &CompactOptions,
    ) -> ClusterResult<CompactionReport> {
        let started = Instant::now();
        self.catch_up().await?;
        let (mut report, upto, sp, last) = self.plan_stream(now, opts)?;
        let mut deleting = Deleting {
            lock,
            renewed: Instant::now(),
            done: 0,
        };
        if let Some(before) = last.upto {
            self.finish(&mut deleting, &last.named, before).await?;
        }
        if sp.is_empty() {
            report.duration_ms = started.elapsed().as_millis() as u64;
            return Ok(report);
        }
        let markers = sp.markers(upto, now, origin, self.marker_max_bytes())?;
        let subject = self.shared.subjects.ctl();
        for payload in &markers {
            check_publishable(&subject, payload, self.max_payload())?;
        }
        let mut seq = upto;
        for payload in markers {
            // No condition on the stream's last sequence: a marker need not
            // be last (see the module docs). Its message id makes a retry
            // after a lost ack land once.
            let msg = PublishMessage::build()
                .payload(payload.into())
                .message_id(self.next_msg_id());
            seq = self
                .publish_acked(&subject, msg)
                .await
                .map_err(|e| nats_err(format!("publish compaction marker on {subject}"), e))?
                .sequence;
        }
        self.wait_applied(seq).await?;
        self.delete_named(&mut deleting, &sp, upto).await?;
        self.delete_sequences(&mut deleting, &sp.deletes).await?;
        let store = self.store();
        report.generation = store.log().stats().generation;
        report.bytes_after = store.log().stats().bytes;
        report.duration_ms = started.elapsed().as_millis() as u64;
        Ok(report)
    }

    /// Step 0: if the last thing the compaction whose markers are `named`
    /// deletes is still in the stream, deletes again all they name.
    async fn finish(
        &self,
        d: &mut Deleting<'_>,
        named: &StreamPlan,
        upto: Lsn,
    ) -> ClusterResult<()> {
        let left = match named.last_named(&self.shared.subjects) {
            LastNamed::Nothing => false,
            LastNamed::Message(seq) => match self.stream.get_raw_message(seq).await {
                Ok(_) => true,
                Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => false,
                Err(e) => return Err(nats_err(format!("get stream sequence {seq}"), e)),
            },
            LastNamed::Subject(subject) => {
                match self
                    .stream
                    .get_first_raw_message_by_subject(&subject, 1)
                    .await
                {
                    Ok(m) => m.sequence <= upto,
                    Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => false,
                    Err(e) => return Err(nats_err(format!("first message of {subject}"), e)),
                }
            }
        };
        if left {
            tracing::warn!(
                upto,
                "the compaction up to {upto} did not finish its deletions; deleting what its \
                 markers name"
            );
            self.delete_named(d, named, upto).await?;
        }
        Ok(())
    }

    /// Step 2 for what markers name: purges the agents' and the sessions'
    /// subjects up to `upto`, then deletes the posts, renewing the lock as
    /// it goes. Losing the lock stops it (what is left is invisible to
    /// every fold, and the next compaction finishes it).
    async fn delete_named(
        &self,
        d: &mut Deleting<'_>,
        named: &StreamPlan,
        upto: Lsn,
    ) -> ClusterResult<()> {
        let subjects = &self.shared.subjects;
        // Those the markers' fold kept (touched after `upto`) keep their
        // records: the fold here is past the markers (the caller waited).
        let (agents, sessions) = self.store().with_state(|s, _| {
            let agents: Vec<String> = (named.agents.iter())
                .filter(|a| s.agent(a).is_none())
                .map(|a| subjects.agent(a))
                .collect();
            let sessions: Vec<String> = (named.sessions.iter())
                .filter(|k| !s.sessions().contains_key(*k))
                .map(|k| subjects.session(k))
                .collect();
            (agents, sessions)
        });
        for subject in agents.into_iter().chain(sessions) {
            self.step(d).await?;
            self.stream
                .purge()
                .filter(subject.clone())
                .sequence(upto + 1)
                .await
                .map_err(|e| nats_err(format!("purge {subject} below {}", upto + 1), e))?;
        }
        let posts: Vec<Lsn> = named.messages.iter().copied().collect();
        self.delete_sequences(d, &posts).await
    }

    /// Deletes stream sequences, [`DELETES_IN_FLIGHT`] at a time (one by
    /// one, a compaction naming thousands of posts took half a minute).
    async fn delete_sequences(&self, d: &mut Deleting<'_>, seqs: &[Lsn]) -> ClusterResult<()> {
        for chunk in seqs.chunks(DELETES_IN_FLIGHT) {
            for _ in chunk {
                self.step(d).await?;
            }
            let deletes = chunk.iter().copied().map(|seq| self.delete_one(seq));
            futures_util::future::try_join_all(deletes).await?;
        }
        Ok(())
    }

    /// Deletes one stream sequence (one already gone is done).
    async fn delete_one(&self, seq: Lsn) -> ClusterResult<()> {
        match self.stream.delete_message(seq).await {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(e.kind(), DeleteMessageErrorKind::JetStream(ref j)
                    if GONE.contains(&j.error_code().0)) =>
            {
                Ok(())
            }
            Err(e) => Err(nats_err(format!("delete stream sequence {seq}"), e)),
        }
    }

    /// Before each deletion: renews the lock when due (every
    /// [`LOCK_RENEW`]), and counts the deletion.
    async fn step(&self, d: &mut Deleting<'_>) -> ClusterResult<()> {
        let done = d.done;
        #[cfg(any(test, feature = "fault-injection"))]
        if self.opts.compaction.fail_after_deletions == Some(done) {
            return Err(ClusterError::Store(StoreError::Replication(format!(
                "injected fault: the compaction stops after {done} deletions"
            ))));
        }
        if d.renewed.elapsed() >= LOCK_RENEW {
            d.renewed = Instant::now();
            if !d.lock.acquire_or_renew().await? {
                return Err(ClusterError::Store(StoreError::Replication(format!(
                    "lost the compaction lock after {done} deletions; the markers keep what \
                     remains out of every fold, and the next compaction deletes it"
                ))));
            }
        }
        d.done += 1;
        Ok(())
    }

    /// After losing a conditional publish on `subject` and catching up:
    /// asks the stream for the subject's last sequence, and corrects the
    /// expectation if a compaction deleted the record it named (else every
    /// retry would lose again).
    pub(crate) async fn refresh_subject(&self, subject: &str) -> ClusterResult<()> {
        // What the map says before the leader is asked: a record folded
        // after the question is newer than the answer (see
        // `mirror::Shared::correct_folded`).
        let asked_at = self.shared.folded_of(subject);
        let last = match self.stream.get_last_raw_message_by_subject(subject).await {
            Ok(m) => m.sequence,
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => 0,
            Err(e) => return Err(nats_err(format!("last message of {subject}"), e)),
        };
        self.wait_applied(last).await?;
        if self.shared.correct_folded(subject, asked_at, last) {
            tracing::debug!(
                subject,
                was = asked_at,
                now = last,
                "corrected a subject's expected sequence"
            );
        }
        Ok(())
    }
}

impl StreamPlan {
    fn is_empty(&self) -> bool {
        self.agents.is_empty()
            && self.messages.is_empty()
            && self.sessions.is_empty()
            && self.deletes.is_empty()
    }

    /// Sorts one dropped record: an agent that is not kept is named (its
    /// subject is purged whole); a post names its message (deleted by
    /// sequence), a session event its session (whose subject is purged);
    /// anything else dropped (a middle heartbeat, a receipt naming only
    /// dropped messages, a cap-drop record, a batch of such heartbeats) is
    /// deleted by sequence. `Purged` fillers exist only in the local log.
    fn add(
        &mut self,
        lsn: Lsn,
        payload: &[u8],
        kept_agents: &HashSet<String>,
    ) -> Result<(), codec::DecodeError> {
        if let Some(hb) = codec::decode_heartbeat(payload)? {
            if kept_agents.contains(hb.agent) {
                self.deletes.push(lsn);
            } else if !self.agents.contains(hb.agent) {
                self.agents.insert(hb.agent.to_string());
            }
            return Ok(());
        }
        let event = codec::decode(payload)?;
        match &event.kind {
            EventKind::Purged | EventKind::StreamCompacted { .. } => {}
            EventKind::MessagePosted(_) => {
                self.messages.insert(lsn);
            }
            kind => {
                if let Some(key) = kind.session() {
                    self.sessions.insert(key.clone());
                } else if let Some(agent) =
                    kind.subject_agent().filter(|a| !kept_agents.contains(*a))
                {
                    self.agents.insert(agent.to_string());
                } else {
                    self.deletes.push(lsn);
                }
            }
        }
        Ok(())
    }

    /// The markers naming what this plan drops, each payload at most
    /// `max_bytes`: one marker, or as many as it takes, each naming a part
    /// (agents, then messages, then sessions, in order). An error if one
    /// name alone does not fit.
    fn markers(
        &self,
        upto: Lsn,
        now: Timestamp,
        origin: Option<Origin>,
        max_bytes: usize,
    ) -> ClusterResult<Vec<Vec<u8>>> {
        let encode = |kind: EventKind| {
            let mut payload = codec::encode(&Event { at: now, kind });
            if let Some(o) = origin {
                codec::push_origin(&mut payload, o);
            }
            payload
        };
        let empty = || EventKind::StreamCompacted {
            upto,
            agents: Vec::new(),
            messages: Vec::new(),
            sessions: Vec::new(),
        };
        // An upper bound of the payload's size, name by name: the empty
        // marker's bytes (its three lengths at most 9 bytes each) plus, per
        // name, its text and a varint.
        let base = encode(empty()).len() + 3 * VARINT_MAX;
        let mut parts = vec![empty()];
        let mut size = base;
        let names = (self
            .agents
            .iter()
            .map(|a| (a.len() + VARINT_MAX, Name::Agent(a))))
        .chain(
            self.messages
                .iter()
                .map(|&m| (VARINT_MAX, Name::Message(m))),
        )
        .chain(self.sessions.iter().map(|k| {
            let text = k.source.len() + k.workspace.len() + k.session_id.len();
            (text + 3 * VARINT_MAX, Name::Session(k))
        }));
        for (cost, name) in names {
            if base + cost > max_bytes {
                return Err(ClusterError::Store(StoreError::Replication(format!(
                    "a compaction marker naming {name:?} alone would exceed {max_bytes} bytes \
                     (the stream's largest message); nothing was compacted"
                ))));
            }
            if size + cost > max_bytes {
                parts.push(empty());
                size = base;
            }
            size += cost;
            let Some(EventKind::StreamCompacted {
                agents,
                messages,
                sessions,
                ..
            }) = parts.last_mut()
            else {
                unreachable!("parts are markers")
            };
            match name {
                Name::Agent(a) => agents.push(a.clone()),
                Name::Message(m) => messages.push(m),
                Name::Session(k) => sessions.push(k.clone()),
            }
        }
        Ok(parts.into_iter().map(encode).collect())
    }

    /// The last thing [`ClusterNode::delete_named`] deletes of what this
    /// plan names.
    fn last_named(&self, subjects: &super::FleetSubjects) -> LastNamed {
        if let Some(&m) = self.messages.last() {
            LastNamed::Message(m)
        } else if let Some(k) = self.sessions.last() {
            LastNamed::Subject(subjects.session(k))
        } else if let Some(a) = self.agents.last() {
            LastNamed::Subject(subjects.agent(a))
        } else {
            LastNamed::Nothing
        }
    }
}

/// One name of a marker, as [`StreamPlan::markers`] packs them.
#[derive(Debug)]
enum Name<'a> {
    Agent(&'a String),
    Message(Lsn),
    Session(&'a SessionKey),
}

impl LastCompaction {
    /// Takes in a marker found in the log, in log order: the markers of one
    /// compaction share their `upto`, and a later `upto` starts a later
    /// compaction.
    fn add(&mut self, marker: EventKind) {
        let EventKind::StreamCompacted {
            upto,
            agents,
            messages,
            sessions,
        } = marker
        else {
            return;
        };
        if self.upto != Some(upto) {
            *self = LastCompaction {
                upto: Some(upto),
                named: StreamPlan::default(),
            };
        }
        self.named.agents.extend(agents);
        self.named.messages.extend(messages);
        self.named.sessions.extend(sessions);
    }
}
