//! What a wait queue keeps for waiters that are not in it: **kept places**
//! and **remembered grants** (`docs/waiting.md`). No FFI.
//!
//! A waiter that leaves its queue by its timeout or its connection closing
//! leaves a kept place behind, for a grace period: its position in the
//! queue's arrival order, its identity (a lock's owner, an ownerless
//! waiter's id) and what it asked for. The grant pass never sees a kept
//! place (it lives here, not among the queue's waiters), so nothing is
//! granted to an absent client and nobody waits for one; the same identity
//! asking again takes the position back (`wait_queue.rs`).
//!
//! A remembered grant is what a grant answered an ownerless waiter (whose
//! grant nothing on the keys records): a waiter id asking again, or a
//! cancel naming it, within the grace, is told that grant rather than given
//! another.
//!
//! Both are memory the server holds for clients that may never come back,
//! so each has an end (`until`, dropped by the queue's one timer) and the
//! server counts their **weight** against one cap: one per kept place, one
//! per remembered grant or, for leased permits, one per permit id.
//!
//! A busy semaphore remembers a grant per acquisition (every wait of the
//! Java library names a waiter id), thousands at once, and every
//! `LOCK.SEMACQUIRE` with a waiter id looks its id up: remembered grants are
//! found by identity in a hash map and expire from an ordered set of ends,
//! never by a scan (kept places stay a short list in queue order: there is
//! at most one per waiter that left its queue).

use std::collections::{BTreeSet, HashMap};

use crate::grant_policy::Ask;

/// A place kept for a waiter that left its queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptPlace<K> {
    /// Its position in the queue's arrival order ([`crate::wait_queue::Waiter::place`]).
    pub place: u64,
    /// The owner, or the waiter id.
    pub identity: Vec<u8>,
    pub kind: K,
    pub ask: Ask,
    /// When it first joined the queue (unix ms).
    pub joined_ms: i64,
    /// When it first joined the queue, on the wait times' monotonic clock.
    pub joined_us: u64,
    /// When its waiter left (unix ms): its grace runs from then.
    pub left_ms: i64,
    /// When the place is dropped (unix ms).
    pub until: i64,
}

/// What a grant answered its waiter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `1` (permits taken), a latch's `1` (opened) or `-1` (expired).
    Integer(i64),
    /// The ids of leased permits.
    Ids(Vec<Vec<u8>>),
    /// Not a grant: the waiter id's wait was cancelled (`LOCK.CANCEL`), so
    /// a piece of it arriving later is refused.
    Cancelled,
}

/// A grant remembered for the waiter id it was made to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RememberedGrant {
    pub identity: Vec<u8>,
    pub ask: Ask,
    pub answer: Answer,
    pub until: i64,
}

impl RememberedGrant {
    /// Its weight against the cap: one, or one per permit id.
    fn weight(&self) -> usize {
        match &self.answer {
            Answer::Integer(_) | Answer::Cancelled => 1,
            Answer::Ids(ids) => ids.len().max(1),
        }
    }
}

/// What one queue keeps for those not in it.
#[derive(Debug)]
pub struct Absent<K> {
    /// In place order.
    kept: Vec<KeptPlace<K>>,
    /// By identity.
    granted: HashMap<Vec<u8>, RememberedGrant>,
    /// Every remembered grant's `(until, identity)`, earliest first.
    ends: BTreeSet<(i64, Vec<u8>)>,
    weight: usize,
}

impl<K> Default for Absent<K> {
    fn default() -> Self {
        Absent {
            kept: Vec::new(),
            granted: HashMap::new(),
            ends: BTreeSet::new(),
            weight: 0,
        }
    }
}

impl<K> Absent<K> {
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty() && self.granted.is_empty()
    }

    /// Its weight against the cap.
    pub fn weight(&self) -> usize {
        self.weight
    }

    /// How many kept places and remembered grants it holds.
    pub fn counts(&self) -> (usize, usize) {
        (self.kept.len(), self.granted.len())
    }

    /// The kept places, in queue order.
    pub fn kept(&self) -> &[KeptPlace<K>] {
        &self.kept
    }

    /// Keeps `place` (replacing a place kept for the same identity).
    pub fn keep(&mut self, place: KeptPlace<K>) {
        self.take_kept(&place.identity);
        let at = self.kept.partition_point(|k| k.place < place.place);
        self.kept.insert(at, place);
        self.weight += 1;
    }

    /// Takes the place kept for `identity`, if any.
    pub fn take_kept(&mut self, identity: &[u8]) -> Option<KeptPlace<K>> {
        let at = self.kept.iter().position(|k| k.identity == identity)?;
        self.weight -= 1;
        Some(self.kept.remove(at))
    }

    /// Remembers `grant` (replacing one remembered for the same identity).
    pub fn remember(&mut self, grant: RememberedGrant) {
        self.take_remembered(&grant.identity);
        self.weight += grant.weight();
        self.ends.insert((grant.until, grant.identity.clone()));
        self.granted.insert(grant.identity.clone(), grant);
    }

    /// The grant remembered for `identity`.
    pub fn remembered(&self, identity: &[u8]) -> Option<&RememberedGrant> {
        self.granted.get(identity)
    }

    /// Takes the grant remembered for `identity`.
    pub fn take_remembered(&mut self, identity: &[u8]) -> Option<RememberedGrant> {
        let mut grant = self.granted.remove(identity)?;
        let end = (grant.until, std::mem::take(&mut grant.identity));
        self.ends.remove(&end);
        grant.identity = end.1;
        self.weight -= grant.weight();
        Some(grant)
    }

    /// Takes every kept place (their object was decided for everyone).
    pub fn take_all_kept(&mut self) -> Vec<KeptPlace<K>> {
        self.weight -= self.kept.len();
        std::mem::take(&mut self.kept)
    }

    /// Drops what ended by `now`; returns how many kept places went.
    pub fn expire(&mut self, now: i64) -> usize {
        let before = self.kept.len();
        self.kept.retain(|k| k.until > now);
        let places = before - self.kept.len();
        let mut weight = places;
        while self.ends.first().is_some_and(|(until, _)| *until <= now) {
            let Some((_, identity)) = self.ends.pop_first() else {
                break;
            };
            if let Some(grant) = self.granted.remove(&identity) {
                weight += grant.weight();
            }
        }
        self.weight -= weight;
        places
    }

    /// When the next of them ends.
    pub fn next_end(&self) -> Option<i64> {
        let places = self.kept.iter().map(|k| k.until).min();
        let grants = self.ends.first().map(|(until, _)| *until);
        places.into_iter().chain(grants).min()
    }

    /// Writes were paused from `since` (when the server first saw it) until
    /// `end`. A client the pause held could not come back, so a grace counts
    /// only time when writes were allowed: every end moves later by the part
    /// of the pause after its grace began (a place kept during the pause has
    /// its whole grace after it), and none ends before `not_before`, so the
    /// clients the pause held, which Redis serves first once it ends, find
    /// what was kept for them.
    pub fn postpone(&mut self, since: i64, end: i64, not_before: i64) {
        let moved = |until: i64, from: i64| {
            let by = end.saturating_sub(from).max(0);
            until.saturating_add(by).max(not_before)
        };
        for kept in &mut self.kept {
            kept.until = moved(kept.until, since.max(kept.left_ms));
        }
        for grant in self.granted.values_mut() {
            grant.until = moved(grant.until, since);
        }
        let ends = self.granted.values().map(|g| (g.until, g.identity.clone()));
        self.ends = ends.collect();
    }

    /// Drops everything; returns how many kept places went.
    pub fn clear(&mut self) -> usize {
        let places = self.kept.len();
        *self = Absent::default();
        places
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(place: u64, who: &str, until: i64) -> KeptPlace<&'static str> {
        KeptPlace {
            place,
            identity: who.as_bytes().to_vec(),
            kind: "lock",
            ask: Ask::Lock,
            joined_ms: 0,
            joined_us: 0,
            left_ms: until - 100,
            until,
        }
    }

    fn grant(who: &str, answer: Answer, until: i64) -> RememberedGrant {
        RememberedGrant {
            identity: who.as_bytes().to_vec(),
            ask: Ask::Permits { n: 2, leased: true },
            answer,
            until,
        }
    }

    #[test]
    fn kept_places_stay_in_queue_order_one_per_identity() {
        let mut absent = Absent::default();
        absent.keep(kept(7, "b", 100));
        absent.keep(kept(3, "a", 100));
        absent.keep(kept(9, "c", 100));
        let order: Vec<u64> = absent.kept().iter().map(|k| k.place).collect();
        assert_eq!(order, [3, 7, 9]);
        absent.keep(kept(12, "a", 200));
        assert_eq!(
            absent.counts(),
            (3, 0),
            "the identity's older place is replaced"
        );
        assert_eq!(absent.take_kept(b"a").map(|k| k.place), Some(12));
        assert_eq!(absent.take_kept(b"a"), None);
        assert_eq!(absent.weight(), 2);
    }

    #[test]
    fn grants_weigh_one_or_one_per_permit_id() {
        let mut absent: Absent<&str> = Absent::default();
        absent.remember(grant("w1", Answer::Integer(1), 100));
        let ids = Answer::Ids(vec![vec![1; 16], vec![2; 16], vec![3; 16]]);
        absent.remember(grant("w2", ids.clone(), 100));
        assert_eq!(absent.weight(), 4);
        assert_eq!(absent.remembered(b"w2").map(|g| &g.answer), Some(&ids));
        absent.remember(grant("w2", Answer::Integer(1), 100));
        assert_eq!(absent.weight(), 2, "replaced");
        assert!(absent.take_remembered(b"w1").is_some());
        assert!(absent.take_remembered(b"w1").is_none(), "taken once");
        assert_eq!((absent.weight(), absent.counts()), (1, (0, 1)));
    }

    #[test]
    fn everything_ends_at_its_time() {
        let mut absent = Absent::default();
        absent.keep(kept(1, "a", 100));
        absent.keep(kept(2, "b", 300));
        absent.remember(grant("w", Answer::Ids(vec![vec![0; 16]; 2]), 200));
        assert_eq!(absent.next_end(), Some(100));
        assert_eq!(absent.expire(99), 0);
        assert_eq!(absent.expire(100), 1, "dropped at its end");
        assert_eq!(absent.next_end(), Some(200));
        assert_eq!(absent.expire(200), 0, "a grant is no kept place");
        assert_eq!((absent.weight(), absent.counts()), (1, (1, 0)));
        assert_eq!(absent.expire(300), 1);
        assert!(absent.is_empty() && absent.weight() == 0);
    }

    /// Writes paused from 1000 (seen then) to 2000: a grace counts only
    /// the time outside the pause.
    #[test]
    fn a_pause_postpones_each_end_by_the_part_after_its_grace_began() {
        let mut absent = Absent::default();
        let place = |n, who, left_ms, until| KeptPlace {
            left_ms,
            ..kept(n, who, until)
        };
        absent.keep(place(1, "before", 900, 1200));
        absent.keep(place(2, "during", 1500, 1800));
        absent.keep(place(3, "ran-out", 700, 1001));
        absent.remember(grant("w", Answer::Integer(1), 1100));
        absent.postpone(1000, 2000, 2005);
        let ends: Vec<(u64, i64)> = absent.kept().iter().map(|k| (k.place, k.until)).collect();
        assert_eq!(
            ends,
            [(1, 2200), (2, 2300), (3, 2005)],
            "200 ms left after the pause; the whole 300 ms grace after it; \
             ran out as the pause was seen: kept until just after it"
        );
        assert_eq!(absent.remembered(b"w").map(|g| g.until), Some(2100));
        assert_eq!(absent.next_end(), Some(2005));
        assert_eq!(absent.expire(2100), 1, "the grant went by its new end");
        assert_eq!(absent.counts(), (2, 0));
    }

    #[test]
    fn many_grants_are_found_by_id_and_end_in_order_of_their_ends() {
        let mut absent: Absent<&str> = Absent::default();
        let id = |i: i64| format!("waiter-{i}");
        // Ends out of arrival order (graces differ), as a busy semaphore's.
        for i in 0..1000 {
            absent.remember(grant(&id(i), Answer::Integer(1), 1000 + (i * 7) % 500));
        }
        assert_eq!(absent.weight(), 1000);
        assert_eq!(
            absent.remembered(b"waiter-999").map(|g| g.until),
            Some(1000 + 6993 % 500)
        );
        // Renewed with a later end: the earlier end no longer drops it.
        absent.remember(grant(&id(0), Answer::Integer(1), 5000));
        assert!(absent.take_remembered(id(7).as_bytes()).is_some());
        assert_eq!(absent.weight(), 999);
        assert_eq!(absent.next_end(), Some(1000), "waiter 500's");
        assert_eq!(absent.expire(1249), 0, "no kept place");
        let live = |a: &Absent<&str>| {
            (0..1000)
                .filter(|i| a.remembered(id(*i).as_bytes()).is_some())
                .count()
        };
        let left = live(&absent);
        assert_eq!(absent.counts().1, left);
        assert_eq!(absent.weight(), left);
        assert!(absent.remembered(id(0).as_bytes()).is_some(), "renewed");
        assert!((1..1000).all(|i| {
            let until = 1000 + (i * 7) % 500;
            absent.remembered(id(i).as_bytes()).is_some() == (until > 1249 && i != 7)
        }));
        assert_eq!(absent.expire(1499), 0);
        assert_eq!(
            (absent.counts().1, absent.weight()),
            (1, 1),
            "only the renewed one"
        );
        assert_eq!(absent.next_end(), Some(5000));
        absent.postpone(1500, 1510, 1515);
        assert_eq!(absent.next_end(), Some(5010));
        absent.expire(5010);
        assert!(absent.is_empty() && absent.weight() == 0);
    }

    #[test]
    fn a_decided_object_takes_every_kept_place_and_clear_drops_all() {
        let mut absent = Absent::default();
        absent.keep(kept(1, "a", 100));
        absent.keep(kept(2, "b", 100));
        assert_eq!(absent.take_all_kept().len(), 2);
        assert_eq!(absent.weight(), 0);
        absent.keep(kept(3, "c", 100));
        absent.remember(grant("w", Answer::Integer(1), 100));
        assert_eq!(absent.clear(), 1);
        assert!(absent.is_empty() && absent.weight() == 0);
    }
}
