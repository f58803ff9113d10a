//! `agentlog serve`: the protocol over a raw socket, `watch`, who may write,
//! and SIGKILLs under load.
//!
//! One test binary: each file of `tests/daemon/` is a module here, and every
//! group shares `tests/support/` (TESTING.md, "Layout").

mod support;

mod daemon {
    mod access;
    mod attach;
    mod authority;
    mod clients;
    mod coexist;
    mod compacted;
    mod conformance;
    mod crash;
    mod group;
    mod hostile;
    mod namespace;
    mod protocol;
    mod startup;
    mod state_json;
    mod times;
    mod watch;
}
