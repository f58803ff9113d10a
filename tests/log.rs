//! The log engine (`agentlog::log`): records and segments, recovery, seals,
//! verify, compaction of sealed segments, the writer lock and the reader,
//! crashes and a full disk.
//!
//! One test binary: each file of `tests/log/` is a module here, and every
//! group shares `tests/support/` (TESTING.md, "Layout").

mod support;

mod log {
    mod basic;
    mod compaction;
    mod crash;
    mod diskfull;
    mod format;
    mod lock_reader;
    mod recovery;
    mod residency;
    mod seal;
    mod verify;
}
