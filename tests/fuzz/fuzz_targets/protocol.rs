//! Fuzz target `protocol`: see `bodies::protocol`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::protocol(data));
