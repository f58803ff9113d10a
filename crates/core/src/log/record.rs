//! Record encoding: a 16-byte header (`len_flags: u32`, `crc: u32`,
//! `lsn: u64`, little-endian), the payload, zero padding to 8 bytes.
//!
//! Invariants: the CRC32 (IEEE, crc32fast) covers the segment id (salt), the
//! `len_flags` and `lsn` bytes and the payload, so bytes of another segment
//! never validate; padding must be zero; `len_flags == 0 && crc == 0` is the
//! end-of-data marker. Empty payloads are not allowed (they would look like
//! the end marker).

/// Size of a record header.
pub const REC_HDR: usize = 16;
/// `len_flags` bit 28: this record is not the last of its batch.
pub const CONT: u32 = 1 << 28;
/// Low 28 bits of `len_flags`: the payload length.
pub const LEN_MASK: u32 = (1 << 28) - 1;
/// Largest payload the format can express.
pub const MAX_PAYLOAD: u32 = LEN_MASK;

/// Bytes a record with `len` payload bytes occupies (header + payload + padding).
#[inline]
pub fn record_size(len: usize) -> usize {
    (REC_HDR + len + 7) & !7
}

/// The 20 bytes hashed before the payload: salt, `len_flags`, `lsn`.
#[inline]
fn prefix(segment_id: u64, len_flags: u32, lsn: u64) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[0..8].copy_from_slice(&segment_id.to_le_bytes());
    b[8..12].copy_from_slice(&len_flags.to_le_bytes());
    b[12..20].copy_from_slice(&lsn.to_le_bytes());
    b
}

/// The record checksum.
#[inline]
pub fn checksum(segment_id: u64, len_flags: u32, lsn: u64, payload: &[u8]) -> u32 {
    let mut h = hasher_for(segment_id, len_flags, lsn);
    h.update(payload);
    h.finalize()
}

/// A hasher already fed with the salt, `len_flags` and `lsn`; feed it the
/// payload and finalize to get the record checksum.
#[inline]
pub fn hasher_for(segment_id: u64, len_flags: u32, lsn: u64) -> crc32fast::Hasher {
    let mut h = crc32fast::Hasher::new();
    h.update(&prefix(segment_id, len_flags, lsn));
    h
}

/// Encode a record header.
#[inline]
pub fn encode_header(len_flags: u32, crc: u32, lsn: u64) -> [u8; REC_HDR] {
    let mut b = [0u8; REC_HDR];
    b[0..4].copy_from_slice(&len_flags.to_le_bytes());
    b[4..8].copy_from_slice(&crc.to_le_bytes());
    b[8..16].copy_from_slice(&lsn.to_le_bytes());
    b
}

/// Encode a whole record (header + payload + padding) into a `Vec` (compaction, salvage, tests).
pub fn encode_record(segment_id: u64, lsn: u64, cont: bool, payload: &[u8]) -> Vec<u8> {
    let len_flags = payload.len() as u32 | if cont { CONT } else { 0 };
    let crc = checksum(segment_id, len_flags, lsn, payload);
    let mut v = Vec::with_capacity(record_size(payload.len()));
    v.extend_from_slice(&encode_header(len_flags, crc, lsn));
    v.extend_from_slice(payload);
    v.resize(record_size(payload.len()), 0);
    v
}

/// What lies at an offset of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// The end-of-data marker (or the end of the file).
    End,
    /// A valid record; `next` is the offset after its padding.
    Record {
        lsn: u64,
        cont: bool,
        payload: &'a [u8],
        next: usize,
    },
    /// Not a valid record; `lsn` is the header's claim (unverified) if readable.
    Bad {
        reason: &'static str,
        lsn: Option<u64>,
    },
}

#[inline]
fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

#[inline]
pub(crate) fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// Parse the record at `off` of `buf` (the segment bytes; `buf.len()` is the
/// end of usable space). `off` must be 8-aligned.
#[inline]
pub fn parse_at(buf: &[u8], off: usize, segment_id: u64) -> Parsed<'_> {
    if off + REC_HDR > buf.len() {
        // Not even room for a header: the segment is full, that is its end.
        return Parsed::End;
    }
    let len_flags = u32_at(buf, off);
    let crc = u32_at(buf, off + 4);
    let lsn = u64_at(buf, off + 8);
    if len_flags == 0 {
        if crc == 0 && lsn == 0 {
            return Parsed::End;
        }
        return Parsed::Bad {
            reason: "zero length with nonzero checksum or lsn",
            lsn: Some(lsn),
        };
    }
    if len_flags & !(LEN_MASK | CONT) != 0 {
        return Parsed::Bad {
            reason: "reserved flag bits set",
            lsn: Some(lsn),
        };
    }
    let len = (len_flags & LEN_MASK) as usize;
    if len == 0 {
        return Parsed::Bad {
            reason: "empty payload",
            lsn: Some(lsn),
        };
    }
    let size = record_size(len);
    if off + size > buf.len() {
        return Parsed::Bad {
            reason: "length beyond the space left in the segment",
            lsn: Some(lsn),
        };
    }
    let payload = &buf[off + REC_HDR..off + REC_HDR + len];
    if checksum(segment_id, len_flags, lsn, payload) != crc {
        return Parsed::Bad {
            reason: "checksum mismatch",
            lsn: Some(lsn),
        };
    }
    if buf[off + REC_HDR + len..off + size].iter().any(|&b| b != 0) {
        return Parsed::Bad {
            reason: "nonzero padding",
            lsn: Some(lsn),
        };
    }
    Parsed::Record {
        lsn,
        cont: len_flags & CONT != 0,
        payload,
        next: off + size,
    }
}

/// Parse a record already validated once (by recovery on open, by a reader's
/// refresh, or because this process wrote it): structure only, no checksum.
/// Every view's committed range is made of such records, so scans (the fold,
/// history, compaction planning) do not pay for the CRC twice; `verify` and
/// recovery use [`parse_at`]. A structural surprise falls back to
/// [`parse_at`] so the caller gets the precise reason.
#[inline]
pub fn parse_validated_at(buf: &[u8], off: usize, segment_id: u64) -> Parsed<'_> {
    if off + REC_HDR <= buf.len() {
        let len_flags = u32_at(buf, off);
        let len = (len_flags & LEN_MASK) as usize;
        if len != 0 && len_flags & !(LEN_MASK | CONT) == 0 && off + record_size(len) <= buf.len() {
            return Parsed::Record {
                lsn: u64_at(buf, off + 8),
                cont: len_flags & CONT != 0,
                payload: &buf[off + REC_HDR..off + REC_HDR + len],
                next: off + record_size(len),
            };
        }
    }
    parse_at(buf, off, segment_id)
}

/// Offset just past the last nonzero byte of `buf[from..]`, or `None` if all zero.
pub fn last_nonzero(buf: &[u8], from: usize) -> Option<usize> {
    let tail = &buf[from.min(buf.len())..];
    tail.iter().rposition(|&b| b != 0).map(|p| from + p + 1)
}

/// True if `buf[from..]` is all zero (vectorizable chunked OR).
pub fn all_zero(buf: &[u8], from: usize) -> bool {
    let tail = &buf[from.min(buf.len())..];
    let mut chunks = tail.chunks_exact(64);
    for c in &mut chunks {
        if c.iter().fold(0u8, |a, &b| a | b) != 0 {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| b == 0)
}
