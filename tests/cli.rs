//! The `agentlog` binary, run as a user runs it: every command's output, exit
//! codes and errors, the read path beside a writer, hostile input, data loss,
//! a full disk, the demo, `bench`, and `agentlog mcp` driven by real MCP
//! clients.
//!
//! One test binary: each file of `tests/cli/` is a module here, and every
//! group shares `tests/support/` (TESTING.md, "Layout").

mod support;

mod cli {
    mod attach;
    mod bench;
    mod commands;
    mod dataloss;
    mod demo;
    mod diskfull;
    mod hostile;
    mod mcp;
    mod read_path;
    mod readonly;
    mod seedops;
    mod soak;
}
