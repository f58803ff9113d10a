//! Bincode decodes whose allocations are bounded by the input's size.
//!
//! bincode's serde decoder allocates a string or byte buffer of whatever
//! length prefix it reads, so a crafted length (behind a valid CRC: the CRC
//! guards against damage, not against a writer of garbage) would abort the
//! process on allocation. Every such buffer is claimed against the config's
//! limit first, and every claimed byte must then come from the input, so a
//! limit of at least the input's length admits every honest payload. The
//! limit is a const generic, hence a few tiers, each at most 16 times the
//! input it serves.

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
        n if n <= 64 * KIB => limited!(64 * KIB),
        n if n <= MIB => limited!(16 * MIB),
        n if n <= 16 * MIB => limited!(256 * MIB),
        n if n <= 256 * MIB => limited!(4096 * MIB),
        _ => limited!(usize::MAX),
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
    fn honest_payloads_decode() {
        let v = ("x".repeat(70 * 1024), vec!["ab".to_string(); 1000]);
        let b = bincode::serde::encode_to_vec(&v, standard()).unwrap();
        let (back, used): ((String, Vec<String>), usize) = decode_from_slice(&b).unwrap();
        assert_eq!((back, used), (v, b.len()));
    }
}
