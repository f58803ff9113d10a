//! The MANIFEST: which compacted generation is current. Written atomically
//! (tmp → fsync → rename → fsync dir); a checksum guards its content.
//!
//! Layout (little-endian): magic `b"AGLOGMAN"`, version u32, count u32,
//! generation u64, compacted_end u64, next_segment_id u64, then `count`
//! entries of (first_lsn u64, segment_id u64), then crc32 (crc32fast) of all
//! preceding bytes. No MANIFEST = generation 0, compacted_end 0, no entries.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::record::u64_at;
use super::segment::sync_dir;
use crate::log::{LogError, Result};

pub const MAGIC: &[u8; 8] = b"AGLOGMAN";
pub const VERSION: u32 = 1;

/// The decoded MANIFEST.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub generation: u64,
    /// LSNs below this live in the generation's segments.
    pub compacted_end: u64,
    pub next_segment_id: u64,
    /// (first_lsn, segment_id) of each file in `gen-{generation:06}/`.
    pub segments: Vec<(u64, u64)>,
}

pub fn gen_dir(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("gen-{generation:06}"))
}

pub fn parse_gen_dir(name: &str) -> Option<u64> {
    let n = name.strip_prefix("gen-")?;
    if n.len() == 6 && n.bytes().all(|b| b.is_ascii_digit()) {
        n.parse().ok()
    } else {
        None
    }
}

impl Manifest {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(44 + 16 * self.segments.len());
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&VERSION.to_le_bytes());
        v.extend_from_slice(&(self.segments.len() as u32).to_le_bytes());
        v.extend_from_slice(&self.generation.to_le_bytes());
        v.extend_from_slice(&self.compacted_end.to_le_bytes());
        v.extend_from_slice(&self.next_segment_id.to_le_bytes());
        for (lsn, id) in &self.segments {
            v.extend_from_slice(&lsn.to_le_bytes());
            v.extend_from_slice(&id.to_le_bytes());
        }
        let crc = crc32fast::hash(&v);
        v.extend_from_slice(&crc.to_le_bytes());
        v
    }

    pub fn decode(b: &[u8], path: &Path) -> Result<Manifest> {
        let bad = |offset: u64, reason: &str| LogError::Corrupt {
            segment: path.to_path_buf(),
            offset,
            lsn: None,
            reason: reason.to_string(),
        };
        if b.len() < 44 {
            return Err(bad(0, "MANIFEST too short"));
        }
        if &b[0..8] != MAGIC {
            return Err(bad(0, "bad MANIFEST magic"));
        }
        let version = u32::from_le_bytes(b[8..12].try_into().expect("4"));
        if version != VERSION {
            return Err(bad(8, "unsupported MANIFEST version"));
        }
        let count = u32::from_le_bytes(b[12..16].try_into().expect("4")) as usize;
        let body = 40 + 16 * count;
        if b.len() != body + 4 {
            return Err(bad(12, "MANIFEST length does not match its entry count"));
        }
        let crc = u32::from_le_bytes(b[body..body + 4].try_into().expect("4"));
        if crc32fast::hash(&b[..body]) != crc {
            return Err(bad(body as u64, "MANIFEST checksum mismatch"));
        }
        let segments = (0..count)
            .map(|i| (u64_at(b, 40 + 16 * i), u64_at(b, 48 + 16 * i)))
            .collect();
        Ok(Manifest {
            generation: u64_at(b, 16),
            compacted_end: u64_at(b, 24),
            next_segment_id: u64_at(b, 32),
            segments,
        })
    }

    /// Read `dir/MANIFEST`; a missing file is generation 0.
    pub fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join("MANIFEST");
        match fs::read(&path) {
            Ok(b) => Manifest::decode(&b, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Manifest::default()),
            Err(e) => Err(LogError::io(&path, e)),
        }
    }

    /// Atomically replace `dir/MANIFEST` (the commit point of a compaction).
    /// `before_rename` lets tests inject a crash between the tmp write and the rename.
    pub fn store(&self, dir: &Path, before_rename: impl FnOnce() -> Result<()>) -> Result<()> {
        self.write_tmp(dir)?;
        before_rename()?;
        commit_tmp(dir)
    }

    /// Write and fsync `dir/MANIFEST.tmp` (nothing is committed yet).
    pub fn write_tmp(&self, dir: &Path) -> Result<()> {
        let tmp = dir.join("MANIFEST.tmp");
        let mut f = crate::files::create_fresh(&tmp).map_err(|e| LogError::io(&tmp, e))?;
        f.write_all(&self.encode())
            .and_then(|_| f.sync_all())
            .map_err(|e| LogError::io(&tmp, e))
    }
}

/// Rename `MANIFEST.tmp` over `MANIFEST` and fsync `dir`. Once the rename was
/// attempted the commit may have happened, whatever this returns.
pub fn commit_tmp(dir: &Path) -> Result<()> {
    let path = dir.join("MANIFEST");
    fs::rename(dir.join("MANIFEST.tmp"), &path).map_err(|e| LogError::io(&path, e))?;
    sync_dir(dir)
}

/// The highest generation directory present in `dir` (0 if none).
pub fn max_gen_on_disk(dir: &Path) -> Result<u64> {
    let mut max = 0;
    for ent in fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
        let ent = ent.map_err(|e| LogError::io(dir, e))?;
        if let Some(g) = ent.file_name().to_str().and_then(parse_gen_dir) {
            max = max.max(g);
        }
    }
    Ok(max)
}
