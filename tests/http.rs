//! The daemon's HTTP side (`serve --http`): the JSON API and SSE, `/metrics`,
//! and the live page in a real browser.
//!
//! One test binary: each file of `tests/http/` is a module here, and every
//! group shares `tests/support/` (TESTING.md, "Layout").

mod support;

mod http {
    mod api;
    mod browser;
    mod guard;
    mod metrics;
}
