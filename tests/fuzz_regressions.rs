//! Replays the fuzz corpora and every crash the fuzzers found
//! (`tests/fuzz/corpus/<target>/`, `tests/fuzz/artifacts/<target>/`)
//! through the same bodies the cargo-fuzz targets run, on stable, as part
//! of `cargo test --release`. See TESTING.md for running the fuzzers.

#[path = "fuzz/bodies.rs"]
mod bodies;

use std::path::{Path, PathBuf};

/// Every file kept for `target`, corpus and crashes alike, sorted.
fn kept_inputs(target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz");
    let mut files = Vec::new();
    for kind in ["corpus", "artifacts"] {
        let dir = root.join(kind).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path();
            if path.is_file() && path.file_name().is_some_and(|n| n != ".gitkeep") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn replay(target: &str, body: fn(&[u8])) {
    let files = kept_inputs(target);
    assert!(!files.is_empty(), "no kept inputs for fuzz target {target}");
    for path in files {
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let outcome = std::panic::catch_unwind(|| body(&data));
        assert!(
            outcome.is_ok(),
            "fuzz target {target} fails on {}",
            path.display()
        );
    }
}

#[test]
fn segment_scanning_corpus_and_crashes() {
    replay("segment", bodies::segment);
}

#[test]
fn event_decoding_corpus_and_crashes() {
    replay("event", bodies::event);
}

#[test]
fn snapshot_decoding_corpus_and_crashes() {
    replay("snapshot", bodies::snapshot);
}

#[test]
fn registry_import_corpus_and_crashes() {
    replay("import", bodies::import);
}

#[test]
fn contract_check_corpus_and_crashes() {
    replay("check", bodies::check);
}

#[test]
fn request_parsing_corpus_and_crashes() {
    replay("protocol", bodies::protocol);
}
