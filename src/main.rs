//! The `agentlog` binary: a thin layer over the library. `cli` parses,
//! routes and prints; `ops` holds the operations behind the commands that
//! the library does not offer as one call; `bench` is the benchmark harness
//! behind `agentlog bench …`, tooling of the binary, not library API.

mod bench;
mod cli;
mod ops;

fn main() -> std::process::ExitCode {
    cli::main()
}
