//! The `agentlog` binary: a thin layer over the library (see `cli`), and
//! the benchmark harness behind `agentlog bench …` (see `bench`), which is
//! tooling of the binary, not library API.

mod bench;
mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
