//! The `agentlog` binary: a thin layer over the library. `cli` parses,
//! routes and prints; `ops` holds the operations behind the commands that
//! the library does not offer as one call.

mod cli;
mod ops;

fn main() -> std::process::ExitCode {
    cli::main()
}
