//! Compaction (`agentlog::compact`): the retention invariant over random
//! histories, exactly what retention removes, crash safety, and the store's
//! compaction hook.
//!
//! One test binary: each file of `tests/compaction/` is a module here, and every
//! group shares `tests/support/` (TESTING.md, "Layout").

mod support;

mod compaction {
    mod crash;
    mod props;
    mod retention;
    mod store;
}
