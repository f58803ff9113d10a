//! A speed bound for benchmarks: the bare work of an append (encode a record
//! header, CRC32 the payload, copy both into a preallocated shared map) with
//! no locking, no LSN bookkeeping, no publication. `benches/log_append.rs`
//! reports the log's lazy append rate beside this bound, measured in the same run.

use std::path::Path;

use super::mmap::Map;
use super::record::{encode_header, hasher_for, record_size, REC_HDR};
use super::segment::{preallocate, SEG_HDR};
use crate::log::{LogError, Result};

/// memcpy + crc32 into a preallocated, mapped file; when full it moves on to
/// a fresh file (like the log's segments), so it pays the same page faults.
pub struct CopyBound {
    map: Map,
    off: usize,
    lsn: u64,
    path: std::path::PathBuf,
    size: u64,
}

impl CopyBound {
    /// Create `path`, preallocate `size` bytes and map it.
    pub fn new(path: &Path, size: u64) -> Result<CopyBound> {
        let file = crate::files::create_fresh(path).map_err(|e| LogError::io(path, e))?;
        preallocate(&file, 0, size, false).map_err(|e| LogError::io(path, e))?;
        let map = Map::map_rw(&file, size as usize).map_err(|e| LogError::io(path, e))?;
        Ok(CopyBound {
            map,
            off: SEG_HDR,
            lsn: 0,
            path: path.to_path_buf(),
            size,
        })
    }

    /// Write one record's bytes (header with CRC + payload + padding).
    #[inline]
    pub fn write(&mut self, payload: &[u8]) {
        let size = record_size(payload.len());
        if self.off + size > self.map.len() {
            let lsn = self.lsn;
            *self = CopyBound::new(&self.path.clone(), self.size).expect("bound: next file");
            self.lsn = lsn;
        }
        self.lsn += 1;
        let len_flags = payload.len() as u32;
        let mut h = hasher_for(7, len_flags, self.lsn);
        h.update(payload);
        self.map.write(self.off + REC_HDR, payload);
        self.map
            .write(self.off, &encode_header(len_flags, h.finalize(), self.lsn));
        self.off += size;
    }
}
