//! Bincode decodes whose allocations are bounded by the input's size.
//!
//! bincode's serde decoder allocates a string or byte buffer of whatever
//! length prefix it reads, so a crafted length (behind a valid CRC: the CRC
//! guards against damage, not against a writer of garbage) would abort the
//! process on allocation. Every such buffer is claimed against the config's
//! limit first.
//!
//! What an honest payload claims: bincode counts, against the limit, the
//! in-memory size of every primitive it decodes, not the bytes it read (a
//! `u64` or a length written as a one-byte varint claims 8; an enum variant
//! index, 4), plus a string's or byte buffer's length. Every claim is thus
//! at most 8 times the input bytes it consumed, so a
//! payload of `n` bytes claims at most `8 n` (a marker naming 8,800 small
//! LSNs in 26 KB claims 70 KB). The limit is a const generic, hence tiers:
//! each admits at least 16 times the largest input it serves (above the 8
//! needed) and at most 16 times its smallest input over 4 KiB, which bounds
//! what a crafted length can make us allocate.

use bincode::config::standard;
use bincode::error::DecodeError;
use serde::de::DeserializeOwned;

/// `bincode::serde::decode_from_slice` (standard config) with a size limit
/// that a payload of `bytes.len()` bytes cannot legitimately exceed.
pub(crate) fn decode_from_slice<T: DeserializeOwned>(
    bytes: &[u8],
) -> Result<(T, usize), DecodeError> {
    macro_rules! limited {
        ($limit:expr) => {
            bincode::serde::decode_from_slice(bytes, standard().with_limit::<{ $limit }>())
        };
    }
    const KIB: usize = 1 << 10;
    const MIB: usize = 1 << 20;
    match bytes.len() {
        n if n <= 4 * KIB => limited!(64 * KIB),
        n if n <= 64 * KIB => limited!(MIB),
        n if n <= MIB => limited!(16 * MIB),
        n if n <= 16 * MIB => limited!(256 * MIB),
        n if n <= 256 * MIB => limited!(4096 * MIB),
        _ => limited!(usize::MAX),
    }
}

/// Most bytes bincode claims per input byte (a one-byte varint decoded
/// into a `u64`/`usize`/`i64`); no type this crate decodes claims more (no
/// `u128`/`i128`, which would claim 16).
#[cfg(test)]
const CLAIM_PER_BYTE: usize = 8;

/// The limit [`decode_from_slice`] applies to an input of `len` bytes.
#[cfg(test)]
fn limit_for(len: usize) -> usize {
    const KIB: usize = 1 << 10;
    const MIB: usize = 1 << 20;
    match len {
        n if n <= 4 * KIB => 64 * KIB,
        n if n <= 64 * KIB => MIB,
        n if n <= MIB => 16 * MIB,
        n if n <= 16 * MIB => 256 * MIB,
        n if n <= 256 * MIB => 4096 * MIB,
        _ => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crafted_string_length_is_an_error_not_an_allocation() {
        // varint 0xFD = u64 follows: a length of 2^62 bytes, then 3 bytes.
        let mut b = vec![0xFDu8];
        b.extend_from_slice(&(1u64 << 62).to_le_bytes());
        b.extend_from_slice(b"abc");
        let err = decode_from_slice::<String>(&b).unwrap_err();
        assert!(matches!(err, DecodeError::LimitExceeded), "{err:?}");
    }

    #[test]
    fn every_tier_admits_the_most_an_honest_input_claims() {
        for len in [1, 4 << 10, (4 << 10) + 1, 64 << 10, (64 << 10) + 1, 1 << 20] {
            assert!(limit_for(len) >= CLAIM_PER_BYTE * len * 2, "{len}");
        }
    }

    #[test]
    fn one_byte_varints_claim_eight_bytes_each_and_still_decode() {
        // The poison marker of issue 27: 8,800 small LSNs in about 26 KB
        // claimed 70 KB against a 64 KiB limit. The worst case per tier:
        // inputs at a tier's top made of one-byte u64 varints.
        for len in [4 << 10, 64 << 10, 1 << 20] {
            let v: Vec<u64> = (0..len as u64 - 5).map(|i| i % 250).collect();
            let b = bincode::serde::encode_to_vec(&v, standard()).unwrap();
            assert!(b.len() <= len, "{} > {len}", b.len());
            let (back, used): (Vec<u64>, usize) = decode_from_slice(&b).unwrap();
            assert_eq!((back, used), (v, b.len()));
            // Empty strings: a one-byte length each, claimed as a usize.
            let s = vec![String::new(); len - 5];
            let b = bincode::serde::encode_to_vec(&s, standard()).unwrap();
            let (back, _): (Vec<String>, usize) = decode_from_slice(&b).unwrap();
            assert_eq!(back.len(), s.len());
        }
    }

    #[test]
    fn honest_payloads_decode() {
        let v = ("x".repeat(70 * 1024), vec!["ab".to_string(); 1000]);
        let b = bincode::serde::encode_to_vec(&v, standard()).unwrap();
        let (back, used): ((String, Vec<String>), usize) = decode_from_slice(&b).unwrap();
        assert_eq!((back, used), (v, b.len()));
    }
}
