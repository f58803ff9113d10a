//! Snapshot (checkpoint) files: the whole folded state and the LSN it covers,
//! so reopening folds only the log after it.
//!
//! File `snap-{lsn:020}.bin` = a 36-byte header + a bincode-2 (serde, standard
//! config) payload. Header, little-endian: magic `AGLSNAP\0` (8), format
//! version u32 (4), reserved u32 = 0 (4), lsn u64 (8), payload length u64 (8),
//! crc32 (IEEE) of header bytes 0..32 followed by the payload (4).
//!
//! Invariants: a snapshot is published by temp file + fsync + rename + folder
//! fsync, so a file with the final name is complete unless damaged later; a
//! snapshot is trusted only if magic, version, length, checksum, file-name LSN
//! and payload decoding all agree — otherwise it is skipped with a warning and
//! the next older one is tried (never an error: the log can always refold).
//! The newest `keep` snapshots are kept; older ones are deleted after a write.

use crate::files::IoError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// First bytes of every snapshot file.
pub const MAGIC: [u8; 8] = *b"AGLSNAP\0";
/// The format version this build writes and reads. 2: the state carries the
/// message-cap drop tally, and the agent list carries each row's
/// registry-only fields (display name, transport client, last event LSN)
/// after the rows; a version-1 file is skipped (the log refolds). 3: those
/// registry-only fields gained the host a replica's registration recorded
/// (docs/scaling.md §7); a version-2 file is skipped likewise. 4: the
/// state ends with the agents' runtime facts (endpoints, leases, outages);
/// a version-3 file is still read, as a version-4 one whose runtime facts
/// are empty ([`V3_UPGRADE`]).
pub const FORMAT_VERSION: u32 = 4;
/// The previous version, still read.
pub const PREVIOUS_VERSION: u32 = 3;
/// What version 4 appended to a version-3 payload, empty: the encoding of
/// an empty runtime map (a varint length 0). A version-3 payload followed
/// by these bytes is the version-4 payload of the same state.
pub const V3_UPGRADE: [u8; 1] = [0];
/// Header length in bytes.
pub const HEADER_LEN: usize = 36;
/// Offset of the crc32 field (the checksum covers the bytes before it + payload).
const CRC_AT: usize = 32;

/// One snapshot file found in a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub path: PathBuf,
    pub lsn: u64,
    /// File size in bytes.
    pub len: u64,
}

/// The newest trustworthy snapshot, and the newer ones that were not.
#[derive(Debug)]
pub struct Loaded<T> {
    pub lsn: u64,
    pub state: T,
    pub info: SnapshotInfo,
    /// Newer snapshot files that were skipped, newest first, with why.
    pub skipped: Vec<(PathBuf, SkipReason)>,
}

/// Why a snapshot file was not trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkipReason {
    #[error("cannot read: {0}")]
    Unreadable(String),
    #[error("truncated: {len} bytes, shorter than the {needed}-byte {what}")]
    Truncated {
        len: u64,
        needed: u64,
        what: &'static str,
    },
    #[error("not a snapshot (bad magic)")]
    BadMagic,
    #[error("format version {found} is newer than this build reads ({FORMAT_VERSION}); written by a newer agentlog")]
    FutureVersion { found: u32 },
    #[error("format version {found} is not one this build reads ({FORMAT_VERSION})")]
    UnknownVersion { found: u32 },
    #[error("file holds {len} bytes but the header says {expected}")]
    LengthMismatch { len: u64, expected: u64 },
    #[error("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Checksum { stored: u32, computed: u32 },
    #[error("header LSN {header} does not match the file name's LSN {name}")]
    LsnMismatch { header: u64, name: u64 },
    #[error("payload does not decode as the expected state: {0}")]
    Decode(String),
}

/// Why a snapshot could not be written or the folder listed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("cannot encode the snapshot state: {0}")]
    Encode(#[from] bincode::error::EncodeError),
}

pub type Result<T, E = SnapshotError> = std::result::Result<T, E>;

/// The file name of the snapshot covering `lsn`.
pub fn file_name(lsn: u64) -> String {
    format!("snap-{lsn:020}.bin")
}

fn lsn_of(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("snap-")?.strip_suffix(".bin")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Writes the snapshot of `state` at `lsn` into `dir` (created if needed),
/// then deletes all but the newest `keep` snapshots (at least the new one is
/// always kept).
pub fn write<T: Serialize>(dir: &Path, lsn: u64, state: &T, keep: usize) -> Result<SnapshotInfo> {
    // The folder's own entry is fsynced in its parent too (a new store's
    // `snapshots/` must survive a power loss with the snapshot in it).
    crate::log::create_dir_durable(dir).map_err(|e| match e {
        crate::log::LogError::Io { source, .. } | crate::log::LogError::DiskFull { source, .. } => {
            IoError::doing("create folder", dir)(source)
        }
        other => IoError::doing("create folder", dir)(std::io::Error::other(other.to_string())),
    })?;
    let mut buf = vec![0u8; HEADER_LEN];
    bincode::serde::encode_into_std_write(state, &mut buf, bincode::config::standard())?;
    fill_header(&mut buf, lsn);

    let name = file_name(lsn);
    let path = dir.join(&name);
    crate::files::publish_atomic(&path, &buf, 0o640, || Ok(()))
        .map_err(|e| IoError::doing("publish", &path)(e.into_io()))?;

    let all = list(dir)?;
    let excess = all.len().saturating_sub(keep.max(1));
    for old in all.iter().take(excess).filter(|s| s.lsn != lsn) {
        if let Err(e) = std::fs::remove_file(&old.path) {
            tracing::warn!(path = %old.path.display(), error = %e, "cannot delete an old snapshot");
        }
    }
    Ok(SnapshotInfo {
        path,
        lsn,
        len: buf.len() as u64,
    })
}

/// Writes the header into `file[..HEADER_LEN]` for the payload after it.
pub(crate) fn fill_header(file: &mut [u8], lsn: u64) {
    let payload_len = (file.len() - HEADER_LEN) as u64;
    file[0..8].copy_from_slice(&MAGIC);
    file[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    file[12..16].copy_from_slice(&0u32.to_le_bytes());
    file[16..24].copy_from_slice(&lsn.to_le_bytes());
    file[24..32].copy_from_slice(&payload_len.to_le_bytes());
    let crc = checksum(&file[..CRC_AT], &file[HEADER_LEN..]);
    file[CRC_AT..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
}

fn checksum(header: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(header);
    h.update(payload);
    h.finalize()
}

/// The snapshot files in `dir`, oldest (lowest LSN) first. A missing folder
/// has none. Only file names are read: nothing here is validated.
pub fn list(dir: &Path) -> Result<Vec<SnapshotInfo>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(IoError::doing("list", dir)(e).into()),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(IoError::doing("list", dir))?;
        let Some(lsn) = entry.file_name().to_str().and_then(lsn_of) else {
            continue;
        };
        let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
        out.push(SnapshotInfo {
            path: entry.path(),
            lsn,
            len,
        });
    }
    out.sort_by_key(|s| s.lsn);
    Ok(out)
}

/// Loads the newest snapshot in `dir` covering no LSN beyond `max_lsn` that
/// is intact and decodes as `T`, skipping (with a warning) every newer one
/// that is not; newer files are not read. `None` when there is no usable
/// snapshot: the caller folds the whole log.
pub fn load_newest_upto<T: DeserializeOwned>(
    dir: &Path,
    max_lsn: u64,
) -> Result<Option<Loaded<T>>> {
    let mut skipped = Vec::new();
    for info in list(dir)?.into_iter().rev().filter(|i| i.lsn <= max_lsn) {
        match read_one(&info) {
            Ok(state) => {
                return Ok(Some(Loaded {
                    lsn: info.lsn,
                    state,
                    info,
                    skipped,
                }))
            }
            Err(reason) => {
                tracing::warn!(path = %info.path.display(), %reason, "snapshot skipped");
                skipped.push((info.path, reason));
            }
        }
    }
    if !skipped.is_empty() {
        tracing::warn!(
            count = skipped.len(),
            "no usable snapshot; the whole log will be folded"
        );
    }
    Ok(None)
}

/// Reads and checks one snapshot file (see the module invariants).
pub(crate) fn read_one<T: DeserializeOwned>(info: &SnapshotInfo) -> Result<T, SkipReason> {
    let bytes = std::fs::read(&info.path).map_err(|e| SkipReason::Unreadable(e.to_string()))?;
    decode_file(&bytes, info.lsn)
}

/// Checks and decodes the bytes of a snapshot file whose name says `name_lsn`.
pub(crate) fn decode_file<T: DeserializeOwned>(
    bytes: &[u8],
    name_lsn: u64,
) -> Result<T, SkipReason> {
    let len = bytes.len() as u64;
    if bytes.len() < 12 {
        return Err(SkipReason::Truncated {
            len,
            needed: HEADER_LEN as u64,
            what: "header",
        });
    }
    if bytes[0..8] != MAGIC {
        return Err(SkipReason::BadMagic);
    }
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    // The version is checked before anything else in the header: a newer
    // format may lay the rest out differently.
    let version = u32_at(8);
    match version {
        FORMAT_VERSION | PREVIOUS_VERSION => {}
        v if v > FORMAT_VERSION => return Err(SkipReason::FutureVersion { found: v }),
        v => return Err(SkipReason::UnknownVersion { found: v }),
    }
    if bytes.len() < HEADER_LEN {
        return Err(SkipReason::Truncated {
            len,
            needed: HEADER_LEN as u64,
            what: "header",
        });
    }
    let payload_len = u64_at(24);
    let expected = (HEADER_LEN as u64).saturating_add(payload_len);
    if len != expected {
        return Err(SkipReason::LengthMismatch { len, expected });
    }
    let stored = u32_at(CRC_AT);
    let computed = checksum(&bytes[..CRC_AT], &bytes[HEADER_LEN..]);
    if stored != computed {
        return Err(SkipReason::Checksum { stored, computed });
    }
    let header_lsn = u64_at(16);
    if header_lsn != name_lsn {
        return Err(SkipReason::LsnMismatch {
            header: header_lsn,
            name: name_lsn,
        });
    }
    let upgraded;
    let (payload, payload_len) = if version == PREVIOUS_VERSION {
        upgraded = [&bytes[HEADER_LEN..], &V3_UPGRADE[..]].concat();
        (&upgraded[..], upgraded.len() as u64)
    } else {
        (&bytes[HEADER_LEN..], payload_len)
    };
    let (state, used) = crate::bounded_decode::decode_from_slice(payload)
        .map_err(|e| SkipReason::Decode(e.to_string()))?;
    if used as u64 != payload_len {
        return Err(SkipReason::Decode(format!(
            "{} trailing payload bytes",
            payload_len - used as u64
        )));
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Registration, State};
    use crate::store::SnapshotPayload;
    use crate::time::Timestamp;

    /// A file around `payload` with header version `version`.
    fn file(payload: &[u8], version: u32, lsn: u64) -> Vec<u8> {
        let mut f = vec![0u8; HEADER_LEN];
        f.extend_from_slice(payload);
        fill_header(&mut f, lsn);
        f[8..12].copy_from_slice(&version.to_le_bytes());
        let crc = checksum(&f[..CRC_AT], &f[HEADER_LEN..]);
        f[CRC_AT..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
        f
    }

    #[test]
    fn a_version_3_file_reads_as_version_4_with_no_runtime_facts() {
        let mut state = State::default();
        let e = state
            .check_register(Registration::new("a", "claude", "/w"), Timestamp(1))
            .unwrap();
        state.apply(1, &e);
        // `SnapshotPayload`'s layout: the generation, then the state.
        let v4 =
            bincode::serde::encode_to_vec((2u64, &state), bincode::config::standard()).unwrap();
        // Format 4 appended the runtime map: empty, one zero byte.
        assert_eq!(v4.last(), Some(&V3_UPGRADE[0]));
        let v3 = &v4[..v4.len() - 1];
        for (bytes, version) in [(v3, PREVIOUS_VERSION), (&v4[..], FORMAT_VERSION)] {
            let back: SnapshotPayload = decode_file(&file(bytes, version, 1), 1).unwrap();
            assert_eq!(
                (back.generation, &back.state),
                (2, &state),
                "version {version}"
            );
        }
        // A version-4 payload under a version-3 header is refused, not misread.
        assert!(matches!(
            decode_file::<SnapshotPayload>(&file(&v4, PREVIOUS_VERSION, 1), 1),
            Err(SkipReason::Decode(_))
        ));
        assert_eq!(
            decode_file::<SnapshotPayload>(&file(v3, 2, 1), 1).err(),
            Some(SkipReason::UnknownVersion { found: 2 })
        );
    }
}
