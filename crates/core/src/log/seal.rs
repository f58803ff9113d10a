//! The seal footer: what a sealed segment says about itself, so reopening
//! and verifying a long log need not walk every record again.
//!
//! When a segment is sealed, the writer writes a 48-byte footer. The footer
//! carries `used` (the offset of the end-of-data marker), the record count,
//! the LSN range and a CRC32 of every byte from the segment header to `used`,
//! salted with the segment id (like record CRCs, so another segment's bytes
//! never validate). One CRC pass over a sealed segment runs at memory speed
//! instead of parsing each record. Where the footer lies depends on the
//! segment format version (FORMAT.md, "Version changes"):
//!
//! * **version 3** (written now): in the last 48 bytes of the preallocated
//!   file, whose length never changes. The space between the end marker and
//!   the footer is given back with a punched hole (zeros), never by shrinking
//!   the file: another process may map the segment at its full length, and a
//!   page past the end of a file is SIGBUS.
//! * **version 2** (still read): at `sealed_len(used) - 48`, the file trimmed
//!   to `sealed_len(used)`. Compacted segments, written whole into fresh
//!   files nobody maps yet, keep this trimmed placement in every version.
//!
//! Invariants: a footer is trusted only if its own CRC holds, its `used`
//! fits where it lies, the end marker after `used` is zero, and the data CRC
//! matches the bytes it covers, which were all whole, valid records when the
//! writer sealed them. Anything else falls back to the record-by-record scan,
//! which names the precise damage.

use super::record::REC_HDR;
use super::segment::SEG_HDR;

/// Size of the footer.
pub const SEAL_FOOTER: usize = 48;
/// Footer magic.
pub const SEAL_MAGIC: &[u8; 8] = b"AGLSEAL\0";
/// Room a writer keeps free at the end of a segment: the end marker and the footer.
pub const SEAL_RESERVE: usize = REC_HDR + SEAL_FOOTER;

/// A decoded, self-consistent footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealFooter {
    /// Offset of the end-of-data marker (= end of the last record).
    pub used: u64,
    /// First and last LSN of the segment's records (0 when it has none).
    pub first_lsn: u64,
    pub last_lsn: u64,
    pub records: u64,
    /// CRC32 over the segment id (LE) then bytes `[SEG_HDR, used)`.
    pub data_crc: u32,
}

/// Length of a sealed segment file whose data ends at `used`.
pub fn sealed_len(used: usize) -> usize {
    (used + SEAL_RESERVE + 4095) & !4095
}

/// Where the footer of a segment whose data ends at `used` lies.
pub fn footer_offset(used: usize) -> usize {
    sealed_len(used) - SEAL_FOOTER
}

/// The salted CRC of a segment's record bytes.
pub fn data_crc(segment_id: u64, records: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&segment_id.to_le_bytes());
    h.update(records);
    h.finalize()
}

impl SealFooter {
    pub fn encode(&self) -> [u8; SEAL_FOOTER] {
        let mut b = [0u8; SEAL_FOOTER];
        b[0..8].copy_from_slice(SEAL_MAGIC);
        b[8..16].copy_from_slice(&self.used.to_le_bytes());
        b[16..24].copy_from_slice(&self.first_lsn.to_le_bytes());
        b[24..32].copy_from_slice(&self.last_lsn.to_le_bytes());
        b[32..40].copy_from_slice(&self.records.to_le_bytes());
        b[40..44].copy_from_slice(&self.data_crc.to_le_bytes());
        let crc = crc32fast::hash(&b[..44]);
        b[44..48].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode 48 bytes; `None` unless magic and footer CRC hold.
    pub fn decode(b: &[u8]) -> Option<SealFooter> {
        let b: &[u8; SEAL_FOOTER] = b.get(..SEAL_FOOTER)?.try_into().ok()?;
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
        if &b[0..8] != SEAL_MAGIC || crc32fast::hash(&b[..44]) != u32_at(44) {
            return None;
        }
        Some(SealFooter {
            used: u64_at(8),
            first_lsn: u64_at(16),
            last_lsn: u64_at(24),
            records: u64_at(32),
            data_crc: u32_at(40),
        })
    }

    /// The trusted footer of a segment (`bytes` = the whole mapped file)
    /// whose data ends at `used`, lying at the trimmed place
    /// (`footer_offset(used)`, version 2 and compacted segments) or, from
    /// segment version 3 on, at the end of the file. Everything between
    /// `used` and the footer must be zero (the scan's slow path, which reads
    /// the whole file anyway).
    pub fn verified_at(
        bytes: &[u8],
        used: usize,
        segment_id: u64,
        version: u32,
    ) -> Option<SealFooter> {
        let zero = |r: &[u8]| r.iter().all(|&b| b == 0);
        let trusted = |pos: usize| {
            let f = SealFooter::decode(bytes.get(pos..pos + SEAL_FOOTER)?)?;
            (f.used == used as u64
                && used >= SEG_HDR
                && used <= pos
                && zero(&bytes[used..pos])
                && zero(&bytes[pos + SEAL_FOOTER..])
                && data_crc(segment_id, &bytes[SEG_HDR..used]) == f.data_crc)
                .then_some(f)
        };
        trusted(footer_offset(used)).or_else(|| {
            let end = bytes.len().checked_sub(SEAL_FOOTER)?;
            (version >= FIXED_FOOTER_VERSION && end != footer_offset(used))
                .then(|| trusted(end))
                .flatten()
        })
    }

    /// The trusted footer in the last 48 bytes of a sealed file, found
    /// without walking the records (the fast path of open, read and
    /// verify). For a version-3 file whose footer lies far from `used`, only
    /// the end marker and the footer's own page are checked for zeros: the
    /// rest of the gap is a punched hole, and reading it would fault in the
    /// whole preallocated segment; the data CRC and the footer CRC are what
    /// vouch for the records.
    pub fn at_file_end(bytes: &[u8], segment_id: u64, version: u32) -> Option<SealFooter> {
        let pos = bytes.len().checked_sub(SEAL_FOOTER)?;
        let f = SealFooter::decode(&bytes[pos..])?;
        let used = usize::try_from(f.used).ok()?;
        if used % 8 != 0 || used < SEG_HDR || used + REC_HDR > pos {
            return None;
        }
        if footer_offset(used) == pos {
            return SealFooter::verified_at(bytes, used, segment_id, version);
        }
        if version < FIXED_FOOTER_VERSION {
            return None;
        }
        let zero = |r: &[u8]| r.iter().all(|&b| b == 0);
        let marker_end = ((used + REC_HDR + 4095) & !4095).min(pos);
        let footer_page = (pos & !4095).max(marker_end);
        (zero(&bytes[used..marker_end])
            && zero(&bytes[footer_page..pos])
            && data_crc(segment_id, &bytes[SEG_HDR..used]) == f.data_crc)
            .then_some(f)
    }

    /// The footer of a sealed file of `len` bytes trusted by its own CRC,
    /// its placement and the zeros around it (no data CRC), reading only
    /// those bytes through `read(from, to)` (a short-lived opener reads them
    /// with `pread`: touching a map would fault in a whole large folio).
    pub fn footer_only(
        len: usize,
        version: u32,
        read: &mut dyn FnMut(usize, usize) -> Option<Vec<u8>>,
    ) -> Option<SealFooter> {
        let pos = len.checked_sub(SEAL_FOOTER)?;
        let f = SealFooter::decode(&read(pos, len)?)?;
        let used = usize::try_from(f.used).ok()?;
        if used % 8 != 0 || used < SEG_HDR || used + REC_HDR > pos {
            return None;
        }
        let mut zero =
            |a: usize, b: usize| a >= b || read(a, b).is_some_and(|r| r.iter().all(|&x| x == 0));
        if footer_offset(used) == pos {
            return zero(used, pos).then_some(f);
        }
        if version < FIXED_FOOTER_VERSION {
            return None;
        }
        let marker_end = ((used + REC_HDR + 4095) & !4095).min(pos);
        let footer_page = (pos & !4095).max(marker_end);
        (zero(used, marker_end) && zero(footer_page, pos)).then_some(f)
    }
}

/// The first segment format version whose footer lies at the end of the
/// (never shrunk) preallocated file.
pub const FIXED_FOOTER_VERSION: u32 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_round_trips_and_rejects_any_flipped_bit() {
        let f = SealFooter {
            used: 4096,
            first_lsn: 7,
            last_lsn: 90,
            records: 84,
            data_crc: 0xdead_beef,
        };
        let b = f.encode();
        assert_eq!(SealFooter::decode(&b), Some(f));
        for bit in 0..SEAL_FOOTER * 8 {
            let mut d = b;
            d[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(SealFooter::decode(&d), None, "bit {bit}");
        }
    }

    #[test]
    fn sealed_len_leaves_room_for_marker_and_footer() {
        for used in (SEG_HDR..20_000).step_by(8) {
            let len = sealed_len(used);
            assert_eq!(len % 4096, 0);
            assert!(len >= used + REC_HDR + SEAL_FOOTER);
            assert!(len < used + REC_HDR + SEAL_FOOTER + 4096);
        }
    }
}
