//! Fuzz target `segment`: see `bodies::segment`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::segment(data));
