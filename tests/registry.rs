//! The pure registry (`agentlog::registry`): every rule of docs/behaviour.md
//! §3, and property tests of the fold.
//!
//! One test binary: each file of `tests/registry/` is a module here, and every
//! group shares `tests/support/` (TESTING.md, "Layout").

mod support;

mod registry {
    mod event_layout;
    mod fold_props;
    mod host_sweep;
    mod rules;
}
