//! The serialized value `RESTORE` takes, for a small hash: how a lock's
//! whole state (its one field and its deadline) travels to replicas and the
//! AOF as **one** plain command, `RESTORE key deadline payload REPLACE
//! ABSTTL`, instead of `HSET` + `PEXPIREAT` (which Redis wraps in
//! `MULTI`/`EXEC`). No FFI.
//!
//! Why: every `RedisModule_Replicate` call costs about as much as a third of
//! a `SET` (Redis looks the command up by name, then builds an argument
//! vector), and `RESTORE ... ABSTTL` is the only command of every supported
//! server that creates a hash together with its absolute expiry. A replica
//! applies the one command for two thirds of what the transaction of two
//! costs it. Measured in `docs/performance.md`.
//!
//! The format is Redis's `DUMP` format, which every server since Redis 2.6
//! loads: the value as an RDB object, then a 2-byte RDB version and a CRC-64
//! of everything before it, both little-endian. The value is written as
//! `RDB_TYPE_HASH` (type 4: a count, then length-prefixed field and value
//! strings), the plain hash type every RDB version has and servers still
//! write for hashes too big for a listpack. The version written is 9 (Redis
//! 5 and 6): `RESTORE` refuses only versions newer than its own, and every
//! server we support is at 10 or above, Valkey included.

/// `RDB_TYPE_HASH`: a hash as a count and its field/value strings.
const RDB_TYPE_HASH: u8 = 4;

/// The RDB version in the footer: older than every supported server's.
const RDB_VERSION: u16 = 9;

/// Writes into `out` (cleared first) the `RESTORE` payload of a hash holding
/// exactly `pairs`, fields distinct.
pub fn hash(pairs: &[(&[u8], &[u8])], out: &mut Vec<u8>) {
    out.clear();
    out.push(RDB_TYPE_HASH);
    push_len(out, pairs.len() as u64);
    for (field, value) in pairs {
        push_string(out, field);
        push_string(out, value);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(out);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// A string as the RDB writes it uncompressed: its length, then its bytes.
fn push_string(out: &mut Vec<u8>, bytes: &[u8]) {
    push_len(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// The RDB's length encoding: 6 bits in one byte, 14 bits in two, else a
/// marker byte and 4 or 8 big-endian bytes.
fn push_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if let Ok(len) = u32::try_from(len) {
        out.push(0x80);
        out.extend_from_slice(&len.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// The CRC-64 Redis checks a payload with: Jones's polynomial
/// (0xad93d23594c935a9), bits reflected, starting at 0, nothing xored out.
pub fn crc64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0, |crc, &byte| {
        CRC_TABLE[((crc ^ u64::from(byte)) & 0xff) as usize] ^ (crc >> 8)
    })
}

/// The polynomial with its bits reflected, for the right-shifting form.
const JONES_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

/// The CRC of every byte value, one step of eight bits each.
static CRC_TABLE: [u64; 256] = crc_table();

const fn crc_table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = byte as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ JONES_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_is_redis_crc64_jones() {
        // The check value Redis's own crc64 test asserts for "123456789".
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64(b""), 0);
    }

    #[test]
    fn a_one_field_hash_is_type_count_strings_version_and_crc() {
        let mut out = vec![0xaa; 3];
        hash(&[(b"owner:1", b"1")], &mut out);
        let body = [
            &[4u8, 1, 7][..],
            b"owner:1",
            &[1],
            b"1",
            &[9, 0], // RDB version 9, little-endian
        ]
        .concat();
        assert_eq!(&out[..body.len()], &body[..]);
        assert_eq!(out.len(), body.len() + 8);
        assert_eq!(out[body.len()..], crc64(&body).to_le_bytes());
    }

    #[test]
    fn lengths_take_one_two_five_or_nine_bytes() {
        let encoded = |len: u64| {
            let mut out = Vec::new();
            push_len(&mut out, len);
            out
        };
        assert_eq!(encoded(0), [0]);
        assert_eq!(encoded(63), [63]);
        assert_eq!(encoded(64), [0x40, 64]);
        assert_eq!(encoded(16_383), [0x7f, 0xff]);
        assert_eq!(encoded(16_384), [0x80, 0, 0, 0x40, 0]);
        assert_eq!(encoded(u64::from(u32::MAX)), [0x80, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(encoded(1 << 32), [0x81, 0, 0, 0, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn binary_fields_and_values_are_carried_as_they_are() {
        let mut out = Vec::new();
        let long = vec![b'x'; 100];
        hash(&[(b"\0\xff", &long), (b"mode", b"write")], &mut out);
        assert_eq!(&out[..6], &[4, 2, 2, 0, 0xff, 0x40]);
        assert_eq!(out[6], 100);
        assert_eq!(&out[7..107], &long[..]);
        assert_eq!(&out[107..118], b"\x04mode\x05write");
    }
}
