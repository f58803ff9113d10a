//! The seal footer: what a sealed segment says about itself, so reopening
//! and verifying a long log need not walk every record again.
//!
//! When a segment is sealed, the writer appends a 48-byte footer at
//! `sealed_len(used) - 48`, where `used` is the offset of the end-of-data
//! marker, and trims the file to `sealed_len(used)`: records, the zero end
//! marker, zeros, the footer, end of file. The footer carries the record
//! count, the LSN range and a CRC32 of every byte from the segment header to
//! `used`, salted with the segment id (like record CRCs, so another segment's
//! bytes never validate). One CRC pass over a sealed segment runs at memory
//! speed instead of parsing each record.
//!
//! Invariants: a footer is trusted only if its own CRC holds, its `used`
//! puts it exactly where it lies, the bytes between the end marker and the
//! footer are zero, and the data CRC matches the bytes it covers — which were
//! all whole, valid records when the writer sealed them. Anything else falls
//! back to the record-by-record scan, which names the precise damage.

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
    /// whose data ends at `used`: present at its place, zeros around it, data
    /// CRC matching. Works whether or not the file was trimmed yet.
    pub fn verified_at(bytes: &[u8], used: usize, segment_id: u64) -> Option<SealFooter> {
        let pos = footer_offset(used);
        let f = SealFooter::decode(bytes.get(pos..pos + SEAL_FOOTER)?)?;
        let tail_zero = |r: &[u8]| r.iter().all(|&b| b == 0);
        (f.used == used as u64
            && used >= SEG_HDR
            && tail_zero(&bytes[used..pos])
            && tail_zero(&bytes[pos + SEAL_FOOTER..])
            && data_crc(segment_id, &bytes[SEG_HDR..used]) == f.data_crc)
            .then_some(f)
    }

    /// The trusted footer at the very end of a trimmed sealed file, found
    /// without walking the records (the fast path of open and verify).
    pub fn at_file_end(bytes: &[u8], segment_id: u64) -> Option<SealFooter> {
        let pos = bytes.len().checked_sub(SEAL_FOOTER)?;
        let f = SealFooter::decode(&bytes[pos..])?;
        let used = usize::try_from(f.used).ok()?;
        if used % 8 != 0 || used > pos || footer_offset(used) != pos {
            return None;
        }
        SealFooter::verified_at(bytes, used, segment_id)
    }
}

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
