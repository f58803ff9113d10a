//! Helpers shared by the log tests.
#![allow(dead_code)]

use std::path::Path;

use agentlog::log::{Log, LogOptions};

/// Small segments, no background flusher: quick, deterministic tests.
pub fn small_opts() -> LogOptions {
    LogOptions {
        segment_size: 64 * 1024,
        max_record_size: 4096,
        flush_interval: None,
        ..Default::default()
    }
}

/// Deterministic payload for an LSN (length 1..=200).
pub fn payload(lsn: u64) -> Vec<u8> {
    let len = 1 + (lsn.wrapping_mul(2654435761) % 200) as usize;
    (0..len).map(|i| (lsn as usize * 31 + i) as u8).collect()
}

/// All (lsn, payload) pairs of a log's view.
pub fn read_all(log: &Log) -> Vec<(u64, Vec<u8>)> {
    log.view()
        .iter()
        .map(|r| {
            let r = r.expect("valid record");
            (r.lsn, r.payload.to_vec())
        })
        .collect()
}

/// Copy a log directory (files only, plus one level of subdirectories).
pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// The segment files of the main directory, sorted.
pub fn main_segments(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().map(|x| x == "seg").unwrap_or(false))
        .collect();
    v.sort();
    v
}
