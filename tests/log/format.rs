//! Decodes the hand-written example in FORMAT.md with the library and with
//! a from-scratch reader following the document.

use agentlog::internals::{checksum, parse_at, Parsed, CONT};
use agentlog::internals::{SegHeader, SEG_HDR};

fn example_bytes() -> Vec<u8> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/FORMAT.md")).unwrap();
    let start = doc
        .find("<!-- format-example-begin -->")
        .expect("example start marker");
    let end = doc
        .find("<!-- format-example-end -->")
        .expect("example end marker");
    let mut bytes = Vec::new();
    for line in doc[start..end].lines() {
        let Some((addr, hex)) = line.split_once(": ") else {
            continue;
        };
        assert_eq!(usize::from_str_radix(addr, 16).unwrap(), bytes.len());
        for h in hex.split_whitespace() {
            bytes.push(u8::from_str_radix(h, 16).unwrap());
        }
    }
    bytes
}

#[test]
fn format_md_example_decodes() {
    let b = example_bytes();
    assert_eq!(b.len(), 0x80);
    // With the library.
    let hdr = SegHeader::decode(&b).unwrap();
    assert_eq!(
        (hdr.version, hdr.flags, hdr.segment_id, hdr.first_lsn),
        (1, 0, 7, 42)
    );
    let Parsed::Record {
        lsn,
        cont,
        payload,
        next,
    } = parse_at(&b, SEG_HDR, 7)
    else {
        panic!("record 1")
    };
    assert_eq!((lsn, cont, payload, next), (42, true, &b"hello"[..], 0x58));
    let Parsed::Record {
        lsn,
        cont,
        payload,
        next,
    } = parse_at(&b, next, 7)
    else {
        panic!("record 2")
    };
    assert_eq!(
        (lsn, cont, payload, next),
        (43, false, &b"world!"[..], 0x70)
    );
    assert_eq!(parse_at(&b, next, 7), Parsed::End);
    // The salt matters: the same bytes under another segment id do not validate.
    assert!(matches!(parse_at(&b, SEG_HDR, 8), Parsed::Bad { .. }));

    // From scratch, as a stranger would from the document.
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    assert_eq!(&b[0..8], b"AGLOGSEG");
    assert_eq!(crc32fast::hash(&b[0..60]), u32_at(60));
    let seg_id = u64_at(16);
    let mut off = 64;
    let mut got = Vec::new();
    loop {
        let len_flags = u32_at(off);
        if len_flags == 0 {
            break;
        }
        let len = (len_flags & ((1 << 28) - 1)) as usize;
        let lsn = u64_at(off + 8);
        let mut h = crc32fast::Hasher::new();
        h.update(&seg_id.to_le_bytes());
        h.update(&len_flags.to_le_bytes());
        h.update(&lsn.to_le_bytes());
        h.update(&b[off + 16..off + 16 + len]);
        assert_eq!(h.finalize(), u32_at(off + 4));
        got.push((
            lsn,
            len_flags & CONT != 0,
            b[off + 16..off + 16 + len].to_vec(),
        ));
        off += (16 + len + 7) & !7;
    }
    assert_eq!(
        got,
        vec![
            (42, true, b"hello".to_vec()),
            (43, false, b"world!".to_vec())
        ]
    );
    assert_eq!(checksum(7, 5 | CONT, 42, b"hello"), 0xcc905e8f);
}
