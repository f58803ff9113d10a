//! Compaction of the fleet's stream (docs/scaling.md §6): the local
//! compaction's plan, carried out on the stream of record.
//!
//! One host at a time (the fleet's compaction lock, a key of the lease
//! bucket) plans with [`crate::compact::plan`] over its mirror at its last
//! folded sequence `S` — the same retention and heartbeat-run rule as a
//! local `compact` — then:
//! 1. publishes a [`EventKind::StreamCompacted`] marker conditional on the
//!    stream's last sequence being `S` (so it lands at `S + 1` and judges
//!    exactly the state it was planned on; a lost race re-plans), naming
//!    every agent, message and session whose records the plan drops;
//! 2. purges the subjects of the agents it names (one atomic purge each,
//!    up to `S`) and deletes the other dropped sequences one by one
//!    (messages, ended sessions, middle heartbeats of runs, cap-drop records).
//!
//! Invariant: the fold of the stream, by any host at any time after step 1
//! (whatever part of step 2 it saw), equals retention of the fold before:
//! the marker's fold removes what it names, and a record the deletion has
//! not reached (or that a host folded before it went) only concerns what
//! the marker names or is a middle heartbeat. So a compactor that dies in
//! step 2 leaves records that no fold sees; every host's mirror, on folding
//! the marker, compacts its own log up to it.

use super::{nats_err, ClusterError, ClusterNode, ClusterResult, SweepLease};
use crate::compact::{CompactOptions, CompactionReport};
use crate::registry::codec::{self, Origin};
use crate::registry::{Event, EventKind, Lsn, SessionKey};
use crate::store::StoreError;
use crate::time::Timestamp;
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{DeleteMessageErrorKind, LastRawMessageErrorKind};
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

/// What one compaction removes from the stream, planned over the mirror.
#[derive(Debug, Default)]
struct StreamPlan {
    agents: BTreeSet<String>,
    messages: BTreeSet<Lsn>,
    sessions: BTreeSet<SessionKey>,
    /// Sequences deleted one by one (not on a purged agent subject).
    deletes: Vec<Lsn>,
}

impl ClusterNode {
    /// Compacts the fleet's stream at `now` with `opts`' retention (see the
    /// module docs); returns once the local mirror folded the marker and
    /// compacted its log up to it. Refused while another host compacts.
    pub async fn compact_stream(
        &self,
        origin: Option<Origin>,
        now: Timestamp,
        opts: &CompactOptions,
    ) -> ClusterResult<CompactionReport> {
        let o = &self.opts;
        let lock =
            SweepLease::compaction_lock(&self.js, &o.fleet, &o.host_id, LOCK_TTL, o.replicas)
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

    async fn compact_locked(
        &self,
        lock: &SweepLease,
        origin: Option<Origin>,
        now: Timestamp,
        opts: &CompactOptions,
    ) -> ClusterResult<CompactionReport> {
        let started = Instant::now();
        let rounds = self.opts.conflict_rounds.max(1);
        for _ in 0..rounds {
            self.catch_up().await?;
            let store = self.store();
            let (state, upto) = store.with_state(|s, applied| (s.clone(), applied));
            let view = store.view();
            let plan = crate::compact::plan(&view, &state, upto, now, opts)
                .map_err(|e| ClusterError::Store(e.into()))?;
            let mut report = plan.report;
            report.dry_run = false;
            report.generation_before = store.log().stats().generation;
            let kept = plan.retained.kept();
            let mut sp = StreamPlan::default();
            for r in view.iter() {
                let r = r.map_err(|e| ClusterError::Store(e.into()))?;
                if r.lsn > upto {
                    break;
                }
                if plan.drop.contains(r.lsn) {
                    sp.add(r.lsn, r.payload, &kept.agents).map_err(|source| {
                        StoreError::Decode {
                            dir: store.dir().to_path_buf(),
                            lsn: r.lsn,
                            source,
                        }
                    })?;
                }
            }
            drop(view);
            if sp.is_empty() {
                report.duration_ms = started.elapsed().as_millis() as u64;
                return Ok(report);
            }
            let marker = Event {
                at: now,
                kind: EventKind::StreamCompacted {
                    upto,
                    agents: sp.agents.iter().cloned().collect(),
                    messages: sp.messages.iter().copied().collect(),
                    sessions: sp.sessions.iter().cloned().collect(),
                },
            };
            let mut payload = codec::encode(&marker);
            if let Some(o) = origin {
                codec::push_origin(&mut payload, o);
            }
            let subject = self.shared.subjects.ctl();
            let msg = PublishMessage::build()
                .payload(payload.into())
                .message_id(self.next_msg_id())
                .expected_last_sequence(upto);
            let seq = match self.publish_acked(&subject, msg).await {
                Ok(ack) => ack.sequence,
                Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => continue,
                Err(e) => {
                    return Err(nats_err(
                        format!("publish compaction marker on {subject}"),
                        e,
                    ))
                }
            };
            self.wait_applied(seq).await?;
            self.delete_planned(lock, &sp, upto).await?;
            report.generation = store.log().stats().generation;
            report.bytes_after = store.log().stats().bytes;
            report.duration_ms = started.elapsed().as_millis() as u64;
            return Ok(report);
        }
        Err(ClusterError::Conflict {
            subject: format!(
                "{} (the stream kept moving)",
                self.shared.subjects.stream_name()
            ),
            rounds,
        })
    }

    /// Step 2: purges the named agents' subjects up to `upto`, then deletes
    /// the other sequences, renewing the lock as it goes. Losing the lock
    /// stops it (what is left is invisible to every fold: the marker).
    async fn delete_planned(
        &self,
        lock: &SweepLease,
        sp: &StreamPlan,
        upto: Lsn,
    ) -> ClusterResult<()> {
        let mut renewed = Instant::now();
        let mut renew = |n: usize| {
            let due = renewed.elapsed() >= LOCK_RENEW;
            if due {
                renewed = Instant::now();
            }
            async move {
                if due && !lock.acquire_or_renew().await? {
                    return Err(ClusterError::Store(StoreError::Replication(format!(
                        "lost the compaction lock after {n} deletions; the marker keeps what \
                         remains out of every fold, and the next compaction of a host that \
                         still holds it deletes it"
                    ))));
                }
                Ok(())
            }
        };
        let mut n = 0;
        for agent in &sp.agents {
            renew(n).await?;
            let subject = self.shared.subjects.agent(agent);
            self.stream
                .purge()
                .filter(subject.clone())
                .sequence(upto + 1)
                .await
                .map_err(|e| nats_err(format!("purge {subject} below {}", upto + 1), e))?;
            n += 1;
        }
        for &seq in &sp.deletes {
            renew(n).await?;
            match self.stream.delete_message(seq).await {
                Ok(_) => {}
                Err(e)
                    if matches!(e.kind(), DeleteMessageErrorKind::JetStream(ref j)
                        if GONE.contains(&j.error_code().0)) => {}
                Err(e) => return Err(nats_err(format!("delete stream sequence {seq}"), e)),
            }
            n += 1;
        }
        Ok(())
    }

    /// After losing a conditional publish on `subject` and catching up:
    /// asks the stream for the subject's last sequence, and corrects the
    /// expectation if a compaction deleted the record it named (else every
    /// retry would lose again).
    pub(crate) async fn refresh_subject(&self, subject: &str) -> ClusterResult<()> {
        let last = match self.stream.get_last_raw_message_by_subject(subject).await {
            Ok(m) => m.sequence,
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => 0,
            Err(e) => return Err(nats_err(format!("last message of {subject}"), e)),
        };
        self.wait_applied(last).await?;
        self.shared.correct_folded(subject, last);
        Ok(())
    }
}

impl StreamPlan {
    fn is_empty(&self) -> bool {
        self.agents.is_empty() && self.deletes.is_empty()
    }

    /// Sorts one dropped record: an agent that is not kept is named (its
    /// subject is purged whole); a post or a session event names its message
    /// or session and is deleted; anything else dropped (a middle heartbeat,
    /// a receipt naming only dropped messages, a cap-drop record) is
    /// deleted. `Purged` fillers exist only in the local log.
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
            EventKind::Purged | EventKind::StreamCompacted { .. } => return Ok(()),
            EventKind::MessagePosted(_) => {
                self.messages.insert(lsn);
            }
            kind => {
                if let Some(key) = kind.session() {
                    self.sessions.insert(key.clone());
                } else if let Some(agent) = kind.subject_agent() {
                    if !kept_agents.contains(agent) {
                        self.agents.insert(agent.to_string());
                        return Ok(());
                    }
                }
            }
        }
        self.deletes.push(lsn);
        Ok(())
    }
}
