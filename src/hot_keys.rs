//! The most contended keys, in fixed memory: a Space-Saving table. Pure.
//!
//! Counting every key exactly would take memory per key ever waited on.
//! Space-Saving (Metwally, Agrawal, El Abbadi, 2005) keeps [`CAPACITY`]
//! entries: a key already there adds its weight; a new key, once the table
//! is full, takes the place of the lightest entry and inherits its weight
//! as its possible overcount (`error`). Every key whose true weight is more
//! than 1/CAPACITY of the total is in the table, and no reported weight is
//! more than `error` above the truth. Two tables feed from the waiting
//! code: by waiters (weight 1 per client that starts waiting) and by wait
//! time (the microseconds each wait lasted).
//!
//! A key is stored up to [`KEPT_KEY_BYTES`] (longer ones are told apart by
//! a hash of the whole key and shown cut, with their length), so the table's
//! memory is bounded whatever the keys.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// Entries per table.
pub const CAPACITY: usize = 16;
/// The bytes of a key kept for showing it.
pub const KEPT_KEY_BYTES: usize = 128;

/// One contended key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HotKey {
    pub db: i32,
    /// The key, or its first [`KEPT_KEY_BYTES`] bytes.
    pub key: Vec<u8>,
    /// The key's whole length (more than `key.len()` when cut).
    pub len: usize,
    /// Its weight: waiters, or microseconds waited.
    pub weight: u64,
    /// How much of `weight` may be another key's (0 = exact).
    pub error: u64,
    fingerprint: u64,
}

/// A Space-Saving table of [`CAPACITY`] keys.
pub struct HotKeys {
    entries: Vec<HotKey>,
    hasher: RandomState,
}

impl Default for HotKeys {
    fn default() -> Self {
        HotKeys::new()
    }
}

impl HotKeys {
    pub fn new() -> HotKeys {
        HotKeys {
            entries: Vec::with_capacity(CAPACITY),
            hasher: RandomState::new(),
        }
    }

    /// Adds `weight` to the key `key` of database `db`.
    pub fn add(&mut self, db: i32, key: &[u8], weight: u64) {
        let fingerprint = self.hasher.hash_one((db, key));
        let same = |e: &HotKey| e.fingerprint == fingerprint && e.db == db && e.len == key.len();
        if let Some(entry) = self.entries.iter_mut().find(|e| same(e)) {
            entry.weight = entry.weight.saturating_add(weight);
            return;
        }
        let kept = key[..key.len().min(KEPT_KEY_BYTES)].to_vec();
        let fresh = |floor: u64| HotKey {
            db,
            key: kept,
            len: key.len(),
            weight: floor.saturating_add(weight),
            error: floor,
            fingerprint,
        };
        if self.entries.len() < CAPACITY {
            self.entries.push(fresh(0));
            return;
        }
        if let Some(lightest) = self.entries.iter_mut().min_by_key(|e| e.weight) {
            let floor = lightest.weight;
            *lightest = fresh(floor);
        }
    }

    /// The heaviest `n` keys, heaviest first.
    pub fn top(&self, n: usize) -> Vec<HotKey> {
        let mut sorted = self.entries.clone();
        sorted.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.key.cmp(&b.key)));
        sorted.truncate(n);
        sorted
    }

    /// Forgets every key (`CONFIG RESETSTAT`).
    pub fn reset(&mut self) {
        self.entries.clear();
    }
}

/// A key as an `INFO` value: printable ASCII as is, anything else and the
/// characters that separate `INFO` fields and their parts (`,` `=` `\`)
/// as `\xHH`; a cut key ends in `...(<length> bytes)`.
pub fn info_text(key: &HotKey) -> String {
    let mut text = String::with_capacity(key.key.len());
    for &byte in &key.key {
        match byte {
            b',' | b'=' | b'\\' => text.push_str(&format!("\\x{byte:02x}")),
            0x21..=0x7e => text.push(byte as char),
            _ => text.push_str(&format!("\\x{byte:02x}")),
        }
    }
    if key.len > key.key.len() {
        text.push_str(&format!("...({} bytes)", key.len));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(table: &HotKeys) -> Vec<(Vec<u8>, u64, u64)> {
        table
            .top(CAPACITY)
            .into_iter()
            .map(|k| (k.key, k.weight, k.error))
            .collect()
    }

    #[test]
    fn counts_are_exact_while_the_table_has_room() {
        let mut t = HotKeys::new();
        for _ in 0..5 {
            t.add(0, b"a", 1);
        }
        t.add(0, b"b", 3);
        t.add(1, b"a", 1); // another database: another key
        assert_eq!(
            keys(&t),
            vec![
                (b"a".to_vec(), 5, 0),
                (b"b".to_vec(), 3, 0),
                (b"a".to_vec(), 1, 0)
            ]
        );
        assert_eq!(t.top(1)[0].db, 0);
    }

    /// A key heavier than 1/CAPACITY of the total is always kept, and its
    /// weight is overcounted by at most its error, however many light keys
    /// pass through.
    #[test]
    fn a_heavy_key_survives_many_light_ones() {
        let mut t = HotKeys::new();
        for round in 0..1_000u32 {
            t.add(0, b"hot", 1);
            t.add(0, format!("cold:{round}").as_bytes(), 1);
            t.add(0, format!("cold:{round}:b").as_bytes(), 1);
        }
        let top = t.top(1);
        assert_eq!(top[0].key, b"hot");
        assert!(top[0].weight >= 1_000, "never undercounted");
        assert!(
            top[0].weight - top[0].error <= 1_000,
            "the error bounds the overcount"
        );
        assert_eq!(t.top(100).len(), CAPACITY, "fixed size");
    }

    #[test]
    fn long_keys_are_cut_but_told_apart() {
        let mut t = HotKeys::new();
        let long_a = vec![b'a'; 300];
        let mut long_b = long_a.clone();
        long_b[299] = b'b';
        t.add(0, &long_a, 2);
        t.add(0, &long_b, 1);
        let top = t.top(2);
        assert_eq!(top.len(), 2, "same first 128 bytes, still two keys");
        assert_eq!(top[0].key.len(), KEPT_KEY_BYTES);
        assert_eq!(top[0].len, 300);
        assert!(info_text(&top[0]).ends_with("...(300 bytes)"));
    }

    #[test]
    fn info_text_escapes_what_would_break_info() {
        let key = HotKey {
            db: 0,
            key: b"a:b,c=d\\e f\r\n\xff{x}".to_vec(),
            len: 17,
            weight: 1,
            error: 0,
            fingerprint: 0,
        };
        assert_eq!(
            info_text(&key),
            "a:b\\x2cc\\x3dd\\x5ce\\x20f\\x0d\\x0a\\xff{x}"
        );
    }

    #[test]
    fn reset_forgets_every_key() {
        let mut t = HotKeys::new();
        t.add(0, b"a", 1);
        t.reset();
        assert!(t.top(10).is_empty());
    }
}
