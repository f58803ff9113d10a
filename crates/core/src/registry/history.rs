//! Folding and scanning a log view: the one fold loop ([`fold`], stopping at
//! an [`Until`]) behind `Store::open`, `Store::state_at`, the read-only
//! store, compaction's refolds and `replay`, and the history scan behind
//! `Store::history` and `audit`. A fold resumes from any (state, LSN), so a
//! snapshot loader hands it the snapshot's.
//!
//! History strategy: a scan, no index. Every record's subject-agent prefix
//! is compared in place in the mapped log ([`SubjectFilter`]); only records
//! that may concern the agent (its own events, plus posts and registrations
//! containing its name's bytes) are decoded. The scan costs one CRC check and
//! one byte comparison per record, measured in `benches/fold.rs`.

use super::codec::{self, DecodeError, SubjectFilter};
use super::events::{Event, Lsn};
use super::state::{FoldScratch, State};
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

impl ScanError {
    /// This error as the log's: an event that does not decode is damage at
    /// the segment and offset where its record lies in `view` (the one
    /// mapping, so every caller names the real place).
    pub fn into_log_error(self, view: &LogView) -> crate::log::LogError {
        match self {
            ScanError::Log(e) => e,
            ScanError::Decode { lsn, source } => undecodable(view, lsn, source),
        }
    }
}

/// Record `lsn` of `view` holds an event that does not decode: damage named
/// by its segment, offset and LSN.
pub fn undecodable(view: &LogView, lsn: Lsn, source: DecodeError) -> crate::log::LogError {
    let reason = format!("undecodable event: {source}");
    match view.locate(lsn) {
        Some((segment, offset)) => crate::log::LogError::Corrupt {
            segment: segment.to_path_buf(),
            offset,
            lsn: Some(lsn),
            reason,
        },
        // Read once, gone now: damaged after the view was taken.
        None => crate::log::LogError::Corrupt {
            segment: view
                .segment_paths()
                .first()
                .map_or_else(Default::default, |p| p.to_path_buf()),
            offset: 0,
            lsn: Some(lsn),
            reason: format!("{reason} (its record no longer reads back)"),
        },
    }
}

/// Where a fold stops: the one stop-point type of the crate (the store's
/// `state_at`, the read-only fold, `replay`, compaction and the followers
/// all fold through [`fold`] with one of these).
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

/// What a [`fold`] applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Folded {
    /// The last LSN applied (the `after` it started from if none).
    pub last: Lsn,
    /// Records applied.
    pub events: u64,
    /// The first record past the stop point, if the view goes on: the one
    /// an [`Until::Lsn`] fold stopped at, or the first one an
    /// [`Until::Time`] fold skipped.
    pub next: Option<Lsn>,
}

/// Records applied between two calls of a fold's progress callback (keeps
/// the loop tight).
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// The fold loop: applies the records of `view` after `after` up to `until`
/// onto `state`, calling `progress` with `after` first, then with the LSN
/// reached every [`PROGRESS_EVERY`] records. Decodes nothing but what
/// `State::apply_payload_with` decodes (each once, a batch into scratch
/// space kept for the whole loop), plus each record's header for a time
/// point.
pub fn fold(
    view: &LogView,
    state: &mut State,
    after: Lsn,
    until: Until,
    progress: &mut dyn FnMut(Lsn),
) -> Result<Folded, ScanError> {
    let mut out = Folded {
        last: after,
        events: 0,
        next: None,
    };
    progress(after);
    let mut scratch = FoldScratch::default();
    for rec in view.iter_from(after + 1) {
        let rec = rec?;
        let decode_err = |source| ScanError::Decode {
            lsn: rec.lsn,
            source,
        };
        match until {
            Until::End => {}
            Until::Lsn(l) => {
                if rec.lsn > l {
                    out.next = Some(rec.lsn);
                    break;
                }
            }
            Until::Time(t) => {
                let (_, at) = codec::decode_header(rec.payload).map_err(decode_err)?;
                if at > t {
                    out.next.get_or_insert(rec.lsn);
                    continue;
                }
            }
        }
        state
            .apply_payload_with(rec.lsn, rec.payload, &mut scratch)
            .map_err(decode_err)?;
        out.last = rec.lsn;
        out.events += 1;
        if out.events.is_multiple_of(PROGRESS_EVERY) {
            progress(rec.lsn);
        }
    }
    Ok(out)
}

/// [`fold`] without progress; returns the last LSN applied (`after` if none).
pub fn fold_view(
    view: &LogView,
    state: &mut State,
    after: Lsn,
    until: Until,
) -> Result<Lsn, ScanError> {
    fold(view, state, after, until, &mut |_| {}).map(|f| f.last)
}

/// The event time of the record at `lsn` of `view`, if it holds one (found
/// through the segment's sparse index, not a scan).
pub fn event_time(view: &LogView, lsn: Lsn) -> Result<Option<Timestamp>, ScanError> {
    let Some(rec) = view.iter_from(lsn).next() else {
        return Ok(None);
    };
    let rec = rec?;
    if rec.lsn != lsn {
        return Ok(None);
    }
    let (_, at) =
        codec::decode_header(rec.payload).map_err(|source| ScanError::Decode { lsn, source })?;
    Ok(Some(at))
}

/// Every event of `view` that concerns `agent`, in log order; a heartbeat
/// batch stands for each of the agent's heartbeats in it (at its LSN).
pub fn scan_history(view: &LogView, agent: &str) -> Result<Vec<(Lsn, Event)>, ScanError> {
    let mut out = Vec::new();
    for_each_in_history(view, agent, |lsn, _, event| out.push((lsn, event)))?;
    Ok(out)
}

/// Hands every event of `view` that concerns `agent` to `each`, in log
/// order, with its LSN and raw payload (e.g. to read its origin trailer),
/// keeping none of them: a caller that reduces the history as it goes (an
/// audit's collapsed lines) holds memory for its result, not for the log.
pub fn for_each_in_history(
    view: &LogView,
    agent: &str,
    mut each: impl FnMut(Lsn, &[u8], Event),
) -> Result<(), ScanError> {
    let filter = SubjectFilter::new(agent);
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
            let mut single = Vec::new();
            for beat in beats.iter().filter(|b| b.agent == agent) {
                single.clear();
                codec::encode_heartbeat_into(&mut single, beat.at, agent, beat.pid);
                if let Some(o) = beat.origin {
                    codec::push_origin(&mut single, o);
                }
                each(rec.lsn, &single, beat.event());
            }
        } else if event.kind.concerns_agent(agent) {
            each(rec.lsn, rec.payload, event);
        }
    }
    Ok(())
}
