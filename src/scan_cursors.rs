//! The listing's cursors: each object exactly once, however the keyspace
//! changes between calls. Pure.
//!
//! The listing walks the keyspace with Redis's own `SCAN`, which returns
//! every key present for the whole walk *at least* once, but may return a
//! key twice: when the table shrinks between two calls, the buckets of the
//! larger table fold into fewer, and the cursor, which counts buckets in
//! bit-reversed order, meets again keys of buckets it had passed. Nothing
//! outside the server's dict (whose hash seed is private) can tell which
//! keys those are. So the walk remembers what it returned: a 128-bit
//! fingerprint per object, and an object whose fingerprint was returned
//! before is skipped. Together:
//! * at least once: every object present from the first call to the last
//!   is met by `SCAN`;
//! * at most once: it is returned only the first time its fingerprint is
//!   met. (Two different keys would have to share 128 bits for one to be
//!   skipped: with a million objects, a chance of about 1 in 10^27.)
//!
//! That memory is the price, and it lives on the server, so a cursor is an
//! id into [`ScanCursors`], not SCAN's number: about 20 to 40 bytes per
//! object returned (a 16-byte fingerprint and a control byte per bucket of
//! a hash set at most 7/8 full), for as long as the walk
//! is live. A walk ends when `SCAN` does, after [`IDLE_MS`] without a call,
//! or when [`MAX_WALKS`] newer ones push it out; continuing it then is an
//! error that says to start again. Ids start at a random point, so a
//! restarted server does not take an old id for a new walk.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;

/// A walk unused this long is forgotten.
pub const IDLE_MS: i64 = 300_000;
/// At most this many walks are kept; a new one pushes out the least
/// recently used.
pub const MAX_WALKS: usize = 16;

/// One listing in progress.
pub struct Walk {
    /// The database it lists.
    pub db: i32,
    /// `SCAN`'s cursor for the next call.
    pub scan: u64,
    seen: HashSet<u128>,
    last_used_ms: i64,
}

impl Walk {
    /// Objects returned so far.
    #[cfg(test)]
    pub fn returned(&self) -> usize {
        self.seen.len()
    }

    /// The bytes its memory of returned objects takes: the hash set's
    /// buckets (a power of two, at most 7/8 full), each a fingerprint and
    /// a control byte.
    pub fn memory_bytes(&self) -> usize {
        let buckets = match self.seen.capacity() {
            0 => 0,
            capacity => (capacity * 8 / 7).next_power_of_two(),
        };
        buckets * (std::mem::size_of::<u128>() + 1)
    }
}

/// 128-bit fingerprints of keys: two independently keyed SipHashes.
pub struct Fingerprints(RandomState, RandomState);

impl Default for Fingerprints {
    fn default() -> Self {
        Fingerprints(RandomState::new(), RandomState::new())
    }
}

impl Fingerprints {
    pub fn of(&self, key: &[u8]) -> u128 {
        (u128::from(self.0.hash_one(key)) << 64) | u128::from(self.1.hash_one(key))
    }
}

/// Why a cursor cannot go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lost {
    /// Not a live walk: finished, forgotten, pushed out, or from before a
    /// restart.
    Unknown,
    /// A walk of another database (the number).
    OtherDb(i32),
}

/// The live walks, by id.
pub struct ScanCursors {
    next_id: u64,
    walks: HashMap<u64, Walk>,
    fingerprints: Fingerprints,
}

impl Default for ScanCursors {
    fn default() -> Self {
        ScanCursors::new()
    }
}

impl ScanCursors {
    pub fn new() -> ScanCursors {
        // A random start (never 0, which starts a walk), far from u64::MAX.
        let start = RandomState::new().hash_one(0u8) >> 16;
        ScanCursors {
            next_id: start.max(1),
            walks: HashMap::new(),
            fingerprints: Fingerprints::default(),
        }
    }

    /// Starts a walk of database `db`; its id.
    pub fn begin(&mut self, db: i32, now_ms: i64) -> u64 {
        self.forget_idle(now_ms);
        while self.walks.len() >= MAX_WALKS {
            let oldest = self
                .walks
                .iter()
                .min_by_key(|(_, walk)| walk.last_used_ms)
                .map(|(&id, _)| id);
            match oldest {
                Some(id) => self.walks.remove(&id),
                None => break,
            };
        }
        let id = self.next_id;
        self.next_id += 1;
        let walk = Walk {
            db,
            scan: 0,
            seen: HashSet::new(),
            last_used_ms: now_ms,
        };
        self.walks.insert(id, walk);
        id
    }

    /// The walk `id`, to go on with in database `db`.
    pub fn resume(&mut self, id: u64, db: i32, now_ms: i64) -> Result<&mut Walk, Lost> {
        self.forget_idle(now_ms);
        let walk = self.walks.get_mut(&id).ok_or(Lost::Unknown)?;
        if walk.db != db {
            return Err(Lost::OtherDb(walk.db));
        }
        walk.last_used_ms = now_ms;
        Ok(walk)
    }

    /// Whether `key` is met for the first time in walk `id` (and so is to
    /// be returned); remembers it. False for a walk that is not live.
    pub fn first_meeting(&mut self, id: u64, key: &[u8]) -> bool {
        let fingerprint = self.fingerprints.of(key);
        self.walks
            .get_mut(&id)
            .is_some_and(|walk| walk.seen.insert(fingerprint))
    }

    /// The walk `id` is over (`SCAN` came back to 0): forgotten.
    pub fn finish(&mut self, id: u64) {
        self.walks.remove(&id);
    }

    /// Live walks, and the bytes their memories of returned objects take.
    pub fn usage(&self) -> (usize, usize) {
        let bytes = self.walks.values().map(Walk::memory_bytes).sum();
        (self.walks.len(), bytes)
    }

    fn forget_idle(&mut self, now_ms: i64) {
        self.walks
            .retain(|_, walk| now_ms.saturating_sub(walk.last_used_ms) < IDLE_MS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_returns_each_key_once_however_often_it_is_met() {
        let mut cursors = ScanCursors::new();
        let id = cursors.begin(0, 1_000);
        assert!(cursors.first_meeting(id, b"a"));
        assert!(cursors.first_meeting(id, b"b"));
        assert!(!cursors.first_meeting(id, b"a"), "met again after a shrink");
        let other = cursors.begin(0, 1_000);
        assert!(
            cursors.first_meeting(other, b"a"),
            "each walk has its own memory"
        );
        assert!(!cursors.first_meeting(id + 1_000_000, b"c"), "no such walk");
        let walk = cursors.resume(id, 0, 1_001).unwrap();
        assert_eq!(walk.returned(), 2);
        assert!(walk.memory_bytes() >= 2 * 17);
    }

    #[test]
    fn walks_are_per_database_and_end_when_finished() {
        let mut cursors = ScanCursors::new();
        let id = cursors.begin(3, 0);
        assert_ne!(id, 0);
        assert_eq!(cursors.resume(id, 0, 1).err(), Some(Lost::OtherDb(3)));
        cursors.resume(id, 3, 1).unwrap().scan = 42;
        assert_eq!(cursors.resume(id, 3, 2).unwrap().scan, 42);
        cursors.finish(id);
        assert_eq!(cursors.resume(id, 3, 3).err(), Some(Lost::Unknown));
        assert_eq!(cursors.resume(0, 3, 3).err(), Some(Lost::Unknown));
    }

    #[test]
    fn an_idle_walk_is_forgotten() {
        let mut cursors = ScanCursors::new();
        let id = cursors.begin(0, 0);
        assert!(
            cursors.resume(id, 0, IDLE_MS - 1).is_ok(),
            "used: idle again from here"
        );
        assert!(cursors.resume(id, 0, 2 * IDLE_MS - 2).is_ok());
        assert_eq!(
            cursors.resume(id, 0, 3 * IDLE_MS).err(),
            Some(Lost::Unknown)
        );
        assert_eq!(cursors.usage().0, 0);
    }

    #[test]
    fn the_least_recently_used_walk_makes_room() {
        let mut cursors = ScanCursors::new();
        let ids: Vec<u64> = (0..MAX_WALKS as i64).map(|t| cursors.begin(0, t)).collect();
        cursors.resume(ids[0], 0, 100).unwrap(); // ids[1] is now the oldest
        let newest = cursors.begin(0, 101);
        assert_eq!(cursors.usage().0, MAX_WALKS);
        assert!(cursors.resume(ids[0], 0, 102).is_ok());
        assert_eq!(cursors.resume(ids[1], 0, 102).err(), Some(Lost::Unknown));
        assert!(cursors.resume(newest, 0, 102).is_ok());
    }

    #[test]
    fn fingerprints_tell_keys_apart() {
        let f = Fingerprints::default();
        assert_eq!(f.of(b"k"), f.of(b"k"));
        assert_ne!(f.of(b"k"), f.of(b"k2"));
        let many: HashSet<u128> = (0..10_000u32).map(|n| f.of(&n.to_be_bytes())).collect();
        assert_eq!(many.len(), 10_000);
    }
}
