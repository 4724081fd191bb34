//! The wait queues' kept places and remembered grants (`kept_places.rs`
//! holds one queue's): leaving with a place kept is in `wait_queue.rs`
//! ([`WaitQueues::leave`]), taking it back in [`WaitQueues::join`]; here,
//! cancelling, remembering grants, and their end. No FFI.

use std::hash::Hash;

use super::WaitQueues;
use crate::grant_policy::Ask;
use crate::kept_places::{Absent, Answer, RememberedGrant};
use crate::wait_queue::Waiter;

/// A kept place as `LOCK.INFO` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptInfo {
    pub identity: Vec<u8>,
    pub ask: Ask,
    pub until_ms: i64,
}

/// What a cancel found ([`WaitQueues::cancel`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Cancel<C, K> {
    /// A waiter, taken out of its queue.
    Waiting(Waiter<C, K>),
    /// A grant since it last asked: a remembered one (taken), or `None`
    /// when the object itself says so (the owner holds the lock).
    Granted(Option<RememberedGrant>),
    /// A kept place, dropped.
    Kept,
    Nothing,
}

impl<C: Copy + Eq + Hash, T: Copy, K: Copy> WaitQueues<C, T, K> {
    /// Runs `f` on the kept places and remembered grants of a key's queue
    /// (making the queue when `make` and there is none) with their total
    /// weight before, keeping that total, then drops the queue if it is
    /// left empty. `None`: no queue.
    fn absent<R>(
        &mut self,
        db: i32,
        key: &[u8],
        make: bool,
        f: impl FnOnce(&mut Absent<K>, usize) -> R,
    ) -> Option<R> {
        let queue = match self.queues.get_mut(&db).and_then(|keys| keys.get_mut(key)) {
            Some(queue) => queue,
            None if make => self
                .queues
                .entry(db)
                .or_default()
                .entry(key.to_vec())
                .or_default(),
            None => return None,
        };
        let before = queue.absent.weight();
        let result = f(&mut queue.absent, self.absent_weight);
        self.absent_weight = self.absent_weight + queue.absent.weight() - before;
        self.drop_if_empty(db, key);
        Some(result)
    }

    /// `LOCK.CANCEL`: takes `identity`'s waiter out of a key's queue; or,
    /// when it was granted since it last asked (a remembered grant, or the
    /// object says so: `holds`), drops its kept place and takes the
    /// remembered grant; or drops its kept place. With `tombstone` (until
    /// when, under which cap), the identity (an ownerless waiter id, which
    /// names one acquisition) is then remembered as cancelled: a piece of
    /// that acquisition arriving after the cancel is refused, not served.
    pub fn cancel(
        &mut self,
        db: i32,
        key: &[u8],
        identity: &[u8],
        holds: bool,
        tombstone: Option<(i64, usize)>,
    ) -> Cancel<C, K> {
        let found = self.cancel_found(db, key, identity, holds);
        if let Some((until, cap)) = tombstone {
            let cancelled = RememberedGrant {
                identity: identity.to_vec(),
                ask: Ask::Latch,
                answer: Answer::Cancelled,
                until,
            };
            self.remember(db, key, cancelled, cap);
        }
        found
    }

    fn cancel_found(&mut self, db: i32, key: &[u8], identity: &[u8], holds: bool) -> Cancel<C, K> {
        let queue = self.queues.get_mut(&db).and_then(|keys| keys.get_mut(key));
        if let Some(queue) = queue {
            if let Some(at) = queue.waiters.iter().position(|w| w.owner == identity) {
                let waiter = queue.waiters.remove(at).expect("a position found");
                self.index.remove(&waiter.client);
                self.drop_if_empty(db, key);
                return Cancel::Waiting(waiter);
            }
        }
        let found = self.absent(db, key, false, |absent, _| {
            let remembered = absent.take_remembered(identity);
            let granted = remembered.filter(|g| g.answer != Answer::Cancelled);
            let kept = absent.take_kept(identity).is_some();
            match (granted, holds, kept) {
                (Some(grant), _, _) => Cancel::Granted(Some(grant)),
                (None, true, _) => Cancel::Granted(None),
                (None, false, true) => Cancel::Kept,
                (None, false, false) => Cancel::Nothing,
            }
        });
        match found {
            Some(found) => found,
            None if holds => Cancel::Granted(None),
            None => Cancel::Nothing,
        }
    }

    /// Remembers what a grant to `grant.identity` answered, unless the kept
    /// places and remembered grants weigh `cap` already (false). A place
    /// kept for it is dropped: it was served.
    pub fn remember(&mut self, db: i32, key: &[u8], grant: RememberedGrant, cap: usize) -> bool {
        let remembered = self.absent(db, key, true, |absent, weight| {
            absent.take_kept(&grant.identity);
            let room = weight < cap;
            if room {
                absent.remember(grant);
            }
            room
        });
        remembered.unwrap_or(false)
    }

    /// What a grant to `identity` for `ask` answered, if remembered; or
    /// that its wait was cancelled, whatever it asks.
    pub fn remembered(&self, db: i32, key: &[u8], identity: &[u8], ask: Ask) -> Option<Answer> {
        let grant = self.queue(db, key)?.absent.remembered(identity)?;
        let answers = grant.ask == ask || grant.answer == Answer::Cancelled;
        answers.then(|| grant.answer.clone())
    }

    /// A key's object was decided for everyone (a latch opened or expired):
    /// every place kept for it is answered `answer` in its absence.
    pub fn answer_absent(&mut self, db: i32, key: &[u8], answer: Answer) {
        self.absent(db, key, false, |absent, _| {
            for kept in absent.take_all_kept() {
                absent.remember(RememberedGrant {
                    identity: kept.identity,
                    ask: kept.ask,
                    answer: answer.clone(),
                    until: kept.until,
                });
            }
        });
    }

    /// Drops a key's kept places and remembered grants that ended by
    /// `now_ms`; returns how many kept places went.
    pub fn expire_absent(&mut self, db: i32, key: &[u8], now_ms: i64) -> usize {
        let expired = self.absent(db, key, false, |absent, _| absent.expire(now_ms));
        expired.unwrap_or(0)
    }

    /// When a key's next kept place or remembered grant ends.
    pub fn absent_end(&self, db: i32, key: &[u8]) -> Option<i64> {
        self.queue(db, key)?.absent.next_end()
    }

    /// Writes were paused from `since` to `end`: every kept place and
    /// remembered grant ends later ([`Absent::postpone`]).
    pub fn postpone_absent(&mut self, since: i64, end: i64, not_before: i64) {
        for queue in self.queues.values_mut().flat_map(|keys| keys.values_mut()) {
            queue.absent.postpone(since, end, not_before);
        }
    }

    /// Drops the kept places and remembered grants of `db` (every db when
    /// `None`); returns how many kept places went.
    pub fn forget_absent(&mut self, db: Option<i32>) -> usize {
        let mut dropped = 0;
        for (id, key) in self.keys(db) {
            let cleared = self.absent(id, &key, false, |absent, _| absent.clear());
            dropped += cleared.unwrap_or(0);
        }
        dropped
    }

    /// The kept places of a key, in queue order.
    pub fn kept_places(&self, db: i32, key: &[u8]) -> Vec<KeptInfo> {
        let Some(queue) = self.queue(db, key) else {
            return Vec::new();
        };
        let kept = queue.absent.kept().iter();
        kept.map(|k| KeptInfo {
            identity: k.identity.clone(),
            ask: k.ask,
            until_ms: k.until,
        })
        .collect()
    }

    /// How many places are kept and grants remembered, all queues together.
    pub fn absent_counts(&self) -> (usize, usize) {
        let queues = self.queues.values().flat_map(|keys| keys.values());
        queues.fold((0, 0), |(places, grants), queue| {
            let (p, g) = queue.absent.counts();
            (places + p, grants + g)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant_policy::Mode;
    use crate::wait_queue::{Joined, Keeping};

    type Queues = WaitQueues<usize, u64, &'static str>;

    /// Client `client` of `who`, asking `ask`, its place kept 1000 ms.
    fn waiter(client: usize, who: &str, ask: Ask) -> Waiter<usize, &'static str> {
        Waiter {
            client,
            kind: "lock",
            owner: who.as_bytes().to_vec(),
            lease_ms: 1000,
            since_ms: 100,
            joined_ms: 100,
            since_us: 0,
            joined_us: 0,
            place: 0,
            keep_ms: 1000,
            timeout_ms: 0,
            token: false,
            sync: None,
            ask,
        }
    }

    fn owners(q: &Queues) -> Vec<String> {
        let shot = q.snapshot(0, b"k", 100);
        shot.iter()
            .map(|w| String::from_utf8_lossy(&w.owner).into_owned())
            .collect()
    }

    const READ: Ask = Ask::Rw(Mode::Read);

    #[test]
    fn a_waiter_that_leaves_keeps_its_place_and_takes_it_back() {
        let mut q = Queues::default();
        for (client, who) in [(1, "a"), (2, "b"), (3, "c")] {
            q.join(0, b"k", waiter(client, who, Ask::Lock));
        }
        let left = q.leave(1, 500, 10).expect("a waits");
        let (who, keeping) = (left.waiter.owner.as_slice(), left.keeping);
        assert_eq!((who, keeping), (&b"a"[..], Keeping::Kept));
        assert_eq!(owners(&q), ["b", "c"], "the grant pass never sees it");
        assert_eq!(q.kept_places(0, b"k")[0].until_ms, 1500);
        q.join(0, b"k", waiter(4, "d", Ask::Lock));
        let back = waiter(5, "a", Ask::Lock);
        assert_eq!(q.join(0, b"k", back), Joined::Rejoined);
        assert_eq!(owners(&q), ["a", "b", "c", "d"], "ahead of those after it");
        assert!(q.kept_places(0, b"k").is_empty());
        assert_eq!(q.pop_next(0, b"k").map(|w| w.client), Some(5));
    }

    #[test]
    fn nothing_is_kept_without_a_grace_an_identity_or_room() {
        let mut q = Queues::default();
        q.join(
            0,
            b"k",
            Waiter {
                keep_ms: 0,
                ..waiter(1, "a", Ask::Lock)
            },
        );
        q.join(0, b"k", waiter(2, "", Ask::Latch));
        q.join(0, b"k", waiter(3, "c", Ask::Lock));
        q.join(0, b"k", waiter(4, "d", Ask::Lock));
        assert_eq!(q.leave(1, 0, 10).map(|l| l.keeping), Some(Keeping::Nothing));
        assert_eq!(q.leave(2, 0, 10).map(|l| l.keeping), Some(Keeping::Nothing));
        assert_eq!(q.leave(3, 0, 1).map(|l| l.keeping), Some(Keeping::Kept));
        assert_eq!(q.leave(4, 0, 1).map(|l| l.keeping), Some(Keeping::OverCap));
        assert_eq!(q.absent_counts(), (1, 0));
    }

    #[test]
    fn asking_again_while_still_waiting_takes_over_the_earlier_request() {
        let mut q = Queues::default();
        q.join(0, b"k", waiter(1, "a", READ));
        q.join(0, b"k", waiter(2, "b", READ));
        let next_piece = Waiter {
            since_ms: 300,
            ..waiter(3, "a", READ)
        };
        match q.join(0, b"k", next_piece) {
            Joined::TookOver(earlier) => assert_eq!(earlier.client, 1),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            q.remove_client(1),
            None,
            "the earlier request left the queue"
        );
        assert_eq!(owners(&q), ["a", "b"]);
        assert_eq!(
            q.snapshot(0, b"k", 400)[0].waited_ms,
            300,
            "from its first join"
        );
        let write = waiter(4, "a", Ask::Rw(Mode::Write));
        assert_eq!(
            q.join(0, b"k", write),
            Joined::Back,
            "asks for something else"
        );
    }

    #[test]
    fn a_place_kept_for_something_else_is_dropped() {
        let mut q = Queues::default();
        q.join(0, b"k", waiter(1, "a", READ));
        q.join(0, b"k", waiter(2, "b", READ));
        q.leave(1, 0, 10);
        let write = waiter(3, "a", Ask::Rw(Mode::Write));
        assert_eq!(q.join(0, b"k", write), Joined::Back);
        assert_eq!(owners(&q), ["b", "a"]);
        assert_eq!(q.absent_counts(), (0, 0));
    }

    #[test]
    fn a_cancel_finds_a_waiter_a_grant_or_a_kept_place_once() {
        let mut q = Queues::default();
        q.join(0, b"k", waiter(1, "a", Ask::Lock));
        q.join(0, b"k", waiter(2, "b", Ask::Lock));
        match q.cancel(0, b"k", b"a", false, None) {
            Cancel::Waiting(w) => assert_eq!(w.client, 1),
            other => panic!("{other:?}"),
        }
        assert_eq!(q.remove_client(1), None);
        q.leave(2, 0, 10);
        assert_eq!(
            q.cancel(0, b"k", b"b", true, None),
            Cancel::Granted(None),
            "holds"
        );
        assert!(q.is_empty(), "its kept place went too");
        q.join(0, b"k", waiter(3, "c", Ask::Lock));
        q.leave(3, 0, 10);
        assert_eq!(q.cancel(0, b"k", b"c", false, None), Cancel::Kept);
        assert_eq!(q.cancel(0, b"k", b"c", false, None), Cancel::Nothing);
        assert_eq!(
            q.cancel(0, b"other", b"c", true, None),
            Cancel::Granted(None)
        );
        assert!(q.is_empty());
    }

    fn grant(who: &str, answer: Answer) -> RememberedGrant {
        RememberedGrant {
            identity: who.as_bytes().to_vec(),
            ask: Ask::Permits {
                n: 1,
                leased: false,
            },
            answer,
            until: 200,
        }
    }

    #[test]
    fn remembered_grants_answer_asks_and_one_cancel_then_end() {
        let mut q = Queues::default();
        let sem = Ask::Permits {
            n: 1,
            leased: false,
        };
        q.join(0, b"s", waiter(1, "w", sem));
        q.leave(1, 0, 10);
        assert!(q.remember(0, b"s", grant("w", Answer::Integer(1)), 10));
        assert_eq!(
            q.absent_counts(),
            (0, 1),
            "its kept place went: it was served"
        );
        assert_eq!(q.remembered(0, b"s", b"w", sem), Some(Answer::Integer(1)));
        let other = Ask::Permits {
            n: 2,
            leased: false,
        };
        assert_eq!(q.remembered(0, b"s", b"w", other), None, "asked for other");
        assert_eq!(q.absent_end(0, b"s"), Some(200));
        match q.cancel(0, b"s", b"w", false, None) {
            Cancel::Granted(Some(g)) => assert_eq!(g.answer, Answer::Integer(1)),
            other => panic!("{other:?}"),
        }
        assert_eq!(q.cancel(0, b"s", b"w", false, None), Cancel::Nothing);
        assert!(q.remember(0, b"s", grant("x", Answer::Integer(1)), 10));
        assert!(
            !q.remember(0, b"s", grant("y", Answer::Integer(1)), 1),
            "at the cap"
        );
        assert_eq!(q.expire_absent(0, b"s", 199), 0);
        q.expire_absent(0, b"s", 200);
        assert!(
            q.is_empty(),
            "a queue of nothing but ended grants is dropped"
        );
    }

    #[test]
    fn a_cancelled_waiter_id_refuses_a_later_piece_and_a_second_cancel_finds_nothing() {
        let mut q = Queues::default();
        let sem = Ask::Permits {
            n: 1,
            leased: false,
        };
        assert!(q.remember(0, b"s", grant("w", Answer::Integer(1)), 10));
        match q.cancel(0, b"s", b"w", false, Some((500, 10))) {
            Cancel::Granted(Some(g)) => assert_eq!(g.answer, Answer::Integer(1)),
            other => panic!("{other:?}"),
        }
        assert_eq!(q.remembered(0, b"s", b"w", sem), Some(Answer::Cancelled));
        let other = Ask::Permits { n: 5, leased: true };
        assert_eq!(q.remembered(0, b"s", b"w", other), Some(Answer::Cancelled));
        assert_eq!(
            q.cancel(0, b"s", b"w", false, Some((500, 10))),
            Cancel::Nothing
        );
        assert_eq!(q.absent_counts(), (0, 1), "one tombstone");
        q.expire_absent(0, b"s", 500);
        assert!(q.is_empty());
    }

    #[test]
    fn a_decided_latch_answers_its_kept_places_in_their_absence() {
        let mut q = Queues::default();
        q.join(0, b"l", waiter(1, "w", Ask::Latch));
        q.leave(1, 0, 10);
        q.answer_absent(0, b"l", Answer::Integer(-1));
        assert_eq!(
            q.remembered(0, b"l", b"w", Ask::Latch),
            Some(Answer::Integer(-1))
        );
        assert_eq!(q.absent_counts(), (0, 1));
    }

    #[test]
    fn flushes_and_demotions_forget_what_is_kept_and_pauses_postpone_it() {
        let mut q = Queues::default();
        q.join(0, b"a", waiter(1, "a", Ask::Lock));
        q.join(1, b"b", waiter(2, "b", Ask::Lock));
        q.join(1, b"b", waiter(3, "c", Ask::Lock));
        for client in 1..=3 {
            q.leave(client, 0, 10);
        }
        q.postpone_absent(0, 500, 505);
        assert_eq!(q.absent_end(0, b"a"), Some(1500));
        assert_eq!(q.forget_absent(Some(1)), 2);
        assert_eq!(q.keys(None), vec![(0, b"a".to_vec())]);
        q.join(0, b"a", waiter(4, "d", Ask::Lock));
        q.drain_all();
        assert!(q.is_empty());
        q.join(0, b"a", waiter(5, "e", Ask::Lock));
        assert_eq!(
            q.leave(5, 0, 1).map(|l| l.keeping),
            Some(Keeping::Kept),
            "room again"
        );
    }
}
