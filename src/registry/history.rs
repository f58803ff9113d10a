//! Folding and scanning a log view: the pieces of `Store::open`,
//! `Store::history` and `Store::state_at`, kept here so the store stays small
//! and a snapshot loader can resume a fold from any (state, LSN).
//!
//! History strategy: a scan, no index. Every record's subject-agent prefix
//! is compared in place in the mapped log ([`SubjectFilter`]); only records
//! that may concern the agent (its own events, plus posts and registrations
//! containing its name's bytes) are decoded. The scan costs one CRC check and
//! one byte comparison per record, measured in `benches/fold.rs`.

use super::codec::{self, DecodeError, SubjectFilter};
use super::events::{Event, Lsn};
use super::state::State;
use crate::log::LogView;
use crate::time::Timestamp;

/// Why a fold or scan stopped.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("event at lsn {lsn}: {source}")]
    Decode {
        lsn: Lsn,
        #[source]
        source: DecodeError,
    },
    #[error(transparent)]
    Log(#[from] crate::log::LogError),
}

/// Where a fold stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// Everything in the view.
    End,
    /// Records with LSN ≤ this.
    Lsn(Lsn),
    /// Every record of the view whose event time is ≤ this, in log order:
    /// a record stamped later is skipped alone, so one out-of-order stamp
    /// never hides the records after it (FORMAT.md, "Event times").
    Time(Timestamp),
}

/// Folds the records of `view` after `after` into `state`; returns the last
/// LSN applied (`after` if none).
pub fn fold_view(
    view: &LogView,
    state: &mut State,
    after: Lsn,
    until: Until,
) -> Result<Lsn, ScanError> {
    let mut last = after;
    for rec in view.iter_from(after + 1) {
        let rec = rec?;
        match until {
            Until::End => {}
            Until::Lsn(l) if rec.lsn > l => break,
            Until::Lsn(_) => {}
            Until::Time(t) => {
                let (_, at) =
                    codec::decode_header(rec.payload).map_err(|source| ScanError::Decode {
                        lsn: rec.lsn,
                        source,
                    })?;
                if at > t {
                    continue;
                }
            }
        }
        state
            .apply_payload(rec.lsn, rec.payload)
            .map_err(|source| ScanError::Decode {
                lsn: rec.lsn,
                source,
            })?;
        last = rec.lsn;
    }
    Ok(last)
}

/// Every event of `view` that concerns `agent`, in log order; a heartbeat
/// batch stands for each of the agent's heartbeats in it (at its LSN).
pub fn scan_history(view: &LogView, agent: &str) -> Result<Vec<(Lsn, Event)>, ScanError> {
    scan_history_with(view, agent, |_, _| {})
}

/// [`scan_history`], also handing `on_payload` the LSN and raw payload of
/// every event kept (e.g. to read its origin trailer).
pub fn scan_history_with(
    view: &LogView,
    agent: &str,
    mut on_payload: impl FnMut(Lsn, &[u8]),
) -> Result<Vec<(Lsn, Event)>, ScanError> {
    let filter = SubjectFilter::new(agent);
    let mut out = Vec::new();
    for rec in view.iter() {
        let rec = rec?;
        if !filter.may_match(rec.payload) {
            continue;
        }
        let event = codec::decode(rec.payload).map_err(|source| ScanError::Decode {
            lsn: rec.lsn,
            source,
        })?;
        if let super::EventKind::HeartbeatBatch { beats } = &event.kind {
            // Each of the agent's heartbeats in the batch, as the heartbeat
            // record it stands for (with its own origin).
            for beat in beats.iter().filter(|b| b.agent == agent) {
                let mut single = Vec::with_capacity(32 + agent.len());
                codec::encode_heartbeat_into(&mut single, beat.at, agent, beat.pid);
                if let Some(o) = beat.origin {
                    codec::push_origin(&mut single, o);
                }
                on_payload(rec.lsn, &single);
                out.push((rec.lsn, beat.event()));
            }
        } else if event.kind.concerns_agent(agent) {
            on_payload(rec.lsn, rec.payload);
            out.push((rec.lsn, event));
        }
    }
    Ok(out)
}
