//! The store over the log (`agentlog::store`, snapshots): bad input,
//! concurrency, a full disk, export and import through the store, property
//! tests, snapshot files and their crash safety.
//!
//! One test binary: each file of `tests/store/` is a module here, and every
//! group shares `tests/support/` (TESTING.md, "Layout").

mod support;

mod store {
    mod bad_input;
    mod concurrency;
    mod diskfull;
    mod export_roundtrip;
    mod fold;
    mod import_fixtures;
    mod props;
    mod snapshot_crash;
    mod snapshot_files;
    mod snapshot_open;
    mod snapshot_state;
}
