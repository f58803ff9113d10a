//! Appending events that were decided elsewhere: the replicated mode's
//! mirror (`crate::cluster`) hands each message of the stream of record to
//! [`Store::append_replicated`] at LSN = its stream sequence.
//!
//! Invariant: the local log stays a gap-free prefix of the stream. A record
//! is appended only at the log's next LSN, and only after its payload
//! decoded, so a mirror never holds a record its fold could not apply. The
//! event was validated by the host that published it; here it is a fact.

use super::{Store, StoreError, StoreResult};
use crate::log::Durability;
use crate::registry::{codec, Lsn};

impl Store {
    /// Appends `payload` (one encoded event) at `lsn` and folds it. `lsn` must
    /// be the log's next LSN: a stream sequence that skips one is refused
    /// with an error naming both (nothing is appended), because the local
    /// log's LSNs are the stream's sequences.
    pub fn append_replicated(&self, lsn: Lsn, payload: &[u8]) -> StoreResult<()> {
        let event = codec::decode(payload).map_err(|source| StoreError::Decode {
            dir: self.core.dir.clone(),
            lsn,
            source,
        })?;
        let mut g = self.write();
        let next = self.core.log.next_lsn();
        if lsn != next {
            return Err(StoreError::Log(crate::log::LogError::InvalidArgument(
                format!(
                    "log {}: replicated record at lsn {lsn} but the next lsn is {next} \
                 (the local log must hold every stream sequence before it)",
                    self.core.log.dir().display()
                ),
            )));
        }
        let appended = self.core.log.append(payload, Durability::Lazy)?;
        debug_assert_eq!(appended, lsn);
        g.state.apply(lsn, &event);
        g.applied = lsn;
        drop(g);
        self.after_append(lsn);
        Ok(())
    }
}
