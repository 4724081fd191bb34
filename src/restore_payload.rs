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
#[inline]
fn push_string(out: &mut Vec<u8>, bytes: &[u8]) {
    push_len(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// The RDB's length encoding: 6 bits in one byte, 14 bits in two, else a
/// marker byte and 4 or 8 big-endian bytes. The one-byte case (every count
/// and most owner ids) is written inline.
#[inline(always)]
fn push_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else {
        push_long_len(out, len);
    }
}

#[inline(never)]
fn push_long_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 14 {
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
///
/// Eight bytes a step ("slicing by 8": one table per byte position, the
/// eight lookups independent of each other), then the tail a byte at a
/// time: a Redisson owner id (a UUID and a thread id) makes a payload of
/// about 60 bytes, hashed on every grant.
pub fn crc64(bytes: &[u8]) -> u64 {
    let (words, tail) = bytes.as_chunks::<8>();
    let t = &CRC_TABLES;
    let mut crc = words.iter().fold(0, |crc, word| {
        let x = (crc ^ u64::from_le_bytes(*word)).to_le_bytes();
        t[7][usize::from(x[0])]
            ^ t[6][usize::from(x[1])]
            ^ t[5][usize::from(x[2])]
            ^ t[4][usize::from(x[3])]
            ^ t[3][usize::from(x[4])]
            ^ t[2][usize::from(x[5])]
            ^ t[1][usize::from(x[6])]
            ^ t[0][usize::from(x[7])]
    });
    for &byte in tail {
        crc = t[0][usize::from(crc as u8 ^ byte)] ^ (crc >> 8);
    }
    crc
}

/// The polynomial with its bits reflected, for the right-shifting form.
const JONES_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

/// `CRC_TABLES[0]`: the CRC of every byte value, one step of eight bits;
/// `CRC_TABLES[k]`: the same byte followed by `k` zero bytes, so that the
/// byte `k` places before the end of an 8-byte word is looked up directly.
static CRC_TABLES: [[u64; 256]; 8] = crc_tables();

const fn crc_tables() -> [[u64; 256]; 8] {
    let mut tables = [[0u64; 256]; 8];
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
        tables[0][byte] = crc;
        byte += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut byte = 0;
        while byte < 256 {
            let prev = tables[k - 1][byte];
            tables[k][byte] = tables[0][(prev & 0xff) as usize] ^ (prev >> 8);
            byte += 1;
        }
        k += 1;
    }
    tables
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

    /// The CRC one bit at a time, straight from the polynomial.
    fn crc64_bitwise(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0, |mut crc, &byte| {
            crc ^= u64::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ JONES_REFLECTED
                } else {
                    crc >> 1
                };
            }
            crc
        })
    }

    #[test]
    fn eight_bytes_a_step_is_the_same_crc_at_every_length_and_offset() {
        let data: Vec<u8> = (0..200u32).map(|i| (i * 151 + 7) as u8).collect();
        for start in 0..9 {
            for end in start..data.len() {
                let bytes = &data[start..end];
                assert_eq!(crc64(bytes), crc64_bitwise(bytes), "{start}..{end}");
            }
        }
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
