//! The registry file (`agentlog::export`, `agentlog::import`,
//! `agentlog::check`): the rendered schema-v4 file, atomic publishing, import
//! of the fixtures, and the readers' contract.
//!
//! One test binary: each file of `tests/interop/` is a module here, and every
//! group shares `tests/support/` (TESTING.md, "Layout").

mod support;

mod interop {
    mod agent_fields;
    mod check_contract;
    mod export_format;
    mod export_publish;
    mod import_events;
    mod import_fixtures;
    mod upstream;
}
