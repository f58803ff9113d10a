//! What the store remembers, in memory, about the files a publish left
//! clean (`registry.json` and each `state.json`, with agentlog's copy of
//! what it published beside each): their stat stamps and a keyed hash of
//! the published bytes. The daemon's periodic check and each publish then
//! `stat` a file pair instead of reading it, and read (or lock) only a
//! pair whose stamps changed (`Store::state_files_changed`,
//! `Store::publish_registry`).
//!
//! A stamp is (device, inode, size, mtime and ctime with nanoseconds). A
//! foreign write is missed only if it keeps the inode and the size and
//! lands within the same filesystem timestamp tick as the stamp taken
//! (Linux stamps files from a coarse clock: one jiffy, 1–10 ms, unless
//! the filesystem uses fine-grained timestamps). Upstream's writers
//! replace the file (a new inode), and setting the mtime back (`touch
//! -d`) still moves the ctime, which no caller can set. Stamps are taken
//! before the bytes they vouch for are read (or, for a file agentlog wrote,
//! from its own descriptor after the rename), so a write that lands
//! in between changes the file's stamp: the next check reads it again.
//! Nothing is persisted; a new process starts with no stamps and reads
//! every file once.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::fs::Metadata;
use std::hash::BuildHasher;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A file's identity and change marks as `stat` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    pub(super) fn of(m: &Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// The stamp of the file at `path` (following a symlink, as a read
    /// does); `None` when it is missing or cannot be inspected (then it is
    /// read, and the read reports why).
    pub(super) fn at(path: &Path) -> Option<Stamp> {
        std::fs::metadata(path).ok().map(|m| Stamp::of(&m))
    }
}

/// A file pair as a publish (or a check that found it unchanged) left it:
/// the file and agentlog's copy both held the bytes hashed here.
#[derive(Debug, Clone, Copy)]
struct Clean {
    file: Stamp,
    base: Stamp,
    hash: u64,
}

/// The stamps of the file pairs last seen clean, and how many files the
/// publish side has read (the daemon's `hello` reports it).
#[derive(Debug, Default)]
pub(super) struct Stamps {
    clean: Mutex<HashMap<PathBuf, Clean>>,
    /// Keyed at random per process, so no writer can aim a collision at a
    /// rewrite that must happen.
    keys: RandomState,
    reads: AtomicU64,
}

impl Stamps {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Clean>> {
        self.clean.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn hash(&self, bytes: &[u8]) -> u64 {
        self.keys.hash_one(bytes)
    }

    /// The hash of what both `file` and `base` hold when their stamps are
    /// the ones last recorded clean (stat only, nothing read).
    pub(super) fn clean_hash(&self, file: &Path, base: &Path) -> Option<u64> {
        let c = *self.map().get(file)?;
        (Stamp::at(file) == Some(c.file) && Stamp::at(base) == Some(c.base)).then_some(c.hash)
    }

    /// Records that `file` and its copy `base`, at these stamps, both hold
    /// `bytes`.
    pub(super) fn record(&self, file: &Path, at: Stamp, base: Stamp, bytes: &[u8]) {
        let hash = self.hash(bytes);
        self.map().insert(
            file.to_path_buf(),
            Clean {
                file: at,
                base,
                hash,
            },
        );
    }

    pub(super) fn forget(&self, file: &Path) {
        self.map().remove(file);
    }

    /// Drops the stamps of files `keep` does not name (agents gone or
    /// whose short id changed), so the map stays as large as the fold.
    pub(super) fn retain(&self, keep: &dyn Fn(&Path) -> bool) {
        self.map().retain(|p, _| keep(p));
    }

    /// Reads `path` with its stamp taken first (`None`: missing), counted.
    pub(super) fn read(&self, path: &Path) -> std::io::Result<Option<(Stamp, Vec<u8>)>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let mut f = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let stamp = Stamp::of(&f.metadata()?);
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        Ok(Some((stamp, bytes)))
    }

    /// Files read so far by publishes and publish checks.
    pub(super) fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, Write};

    fn set_mtime(f: &std::fs::File, sec: i64, nsec: i64) {
        let t = std::time::UNIX_EPOCH + std::time::Duration::new(sec as u64, nsec as u32);
        f.set_times(std::fs::FileTimes::new().set_modified(t).set_accessed(t))
            .unwrap();
    }

    #[test]
    fn a_same_size_rewrite_in_place_is_seen_and_an_untouched_pair_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let (file, base) = (dir.path().join("state.json"), dir.path().join(".base"));
        std::fs::write(&file, b"{\"a\":1}").unwrap();
        std::fs::write(&base, b"{\"a\":1}").unwrap();
        let stamps = Stamps::default();
        let (at, bytes) = stamps.read(&file).unwrap().unwrap();
        let (bs, _) = stamps.read(&base).unwrap().unwrap();
        stamps.record(&file, at, bs, &bytes);
        assert_eq!(stamps.reads(), 2);
        assert_eq!(stamps.clean_hash(&file, &base), Some(stamps.hash(&bytes)));
        assert_eq!(stamps.reads(), 2, "a clean pair is only stat'ed");

        // Same inode, same size, mtime set to the same second: the
        // nanoseconds (and the ctime the write moved) tell.
        let m = std::fs::metadata(&file).unwrap();
        let mut f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.write_all(b"{\"a\":2}").unwrap();
        set_mtime(&f, m.mtime(), (m.mtime_nsec() + 1) % 1_000_000_000);
        assert_eq!(std::fs::metadata(&file).unwrap().ino(), m.ino());
        assert_eq!(stamps.clean_hash(&file, &base), None);

        // A replaced copy is seen too; forgetting drops the entry.
        let (at, bytes) = stamps.read(&file).unwrap().unwrap();
        std::fs::write(&base, b"{\"a\":2}").unwrap();
        let bs = Stamp::at(&base).unwrap();
        stamps.record(&file, at, bs, &bytes);
        assert!(stamps.clean_hash(&file, &base).is_some());
        std::fs::remove_file(&base).unwrap();
        assert_eq!(stamps.clean_hash(&file, &base), None);
        stamps.retain(&|_| false);
        assert!(stamps.map().is_empty());
        assert!(stamps.read(&base).unwrap().is_none());
    }
}
