//! Helpers shared by the log tests.

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

/// A temp dir on tmpfs when available (fsync is free there; used by the
/// corruption loops that reopen thousands of times).
pub fn fast_tempdir() -> tempfile::TempDir {
    if Path::new("/dev/shm").is_dir() {
        if let Ok(d) = tempfile::tempdir_in("/dev/shm") {
            return d;
        }
    }
    tempfile::tempdir().unwrap()
}

/// Tiny deterministic PRNG (xorshift64*).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545F4914F6CDD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Record size on disk for a payload length (header + payload + padding).
pub fn rec_size(len: usize) -> usize {
    agentlog::internals::record_size(len)
}

/// Offset of record `lsn` in a first segment of single records with
/// [`payload`]s: the segment header, then the records before it.
pub fn offset_of(lsn: u64) -> usize {
    use agentlog::internals::SEG_HDR;
    SEG_HDR + (1..lsn).map(|l| rec_size(payload(l).len())).sum::<usize>()
}
