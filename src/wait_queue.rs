//! The wait queues: who waits for which lock, in arrival order. No FFI.
//!
//! One FIFO queue per (database, key), for every kind of object: what a
//! pass grants is the kind's policy (`grant_policy.rs`). A waiter is a client blocked in
//! `LOCK.ACQUIRE ... WAIT`, identified by its blocked-client handle (an opaque
//! `usize` here). Waiters leave a queue in exactly one of three ways, each of
//! which removes them at once:
//! * granted: popped from the front when the object frees, as many as its
//!   grant policy serves in one pass (`pop_run`);
//! * timed out or disconnected: removed by handle (`leave`), leaving a
//!   **kept place** behind for a grace (`kept_places.rs`): the same identity
//!   asking again takes its position back ([`WaitQueues::join`]);
//! * cancelled (`LOCK.CANCEL`): removed by identity ([`WaitQueues::cancel`]);
//! * the server became a replica: everything is drained (`drain_all`).
//!
//! An empty queue is dropped, so memory follows the number of live waiters
//! (and of kept places, until their grace ends), unless it is **watched**: an object with a deadline of its own that must
//! be acted on when nobody waits (a leased permit to reclaim, a latch to
//! expire) keeps its queue, and so its one timer, until the deadline passed
//! ([`WaitQueues::watch`]).
//!
//! Each queue also owns **at most one timer**: the next moment its lock must
//! be looked at (the lease's deadline, "now" after someone deleted the key, or
//! a poll while writes are paused). A new, earlier moment replaces the timer;
//! a later one keeps it (it fires early, finds the lock held and re-arms).
//! When a queue is dropped its timer is handed back to be stopped
//! ([`WaitQueues::take_orphaned_timers`]), so no timer outlives its waiters:
//! memory stays flat however often clients come and go, and `MODULE UNLOAD`
//! is possible as soon as nobody waits.
//!
//! Each waiter and each watch carries its **kind** (`K`): in the module,
//! the callbacks of the kind it waits for (`waiting/queue.rs`), so that the
//! queue and its timer serve every kind without naming one. A queue's kind
//! is its head waiter's (or its watch's): a key that changed type while
//! clients waited is looked at as what they wait for.
//!
//! The glue that blocks clients, runs timers and hands objects over lives
//! in `waiting/`.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use crate::grant_policy::{grant_run, Ask, GrantPolicy};
use crate::kept_places::{Absent, KeptPlace};
use crate::replica_sync::SyncSpec;

mod kept;
pub use kept::{Cancel, KeptInfo};

/// How long after a WAIT deadline the queue keeps waking up for a waiter
/// Redis has not timed out yet (its clock and ours differ by a fraction of
/// a ms); after that Redis's own cron tick answers it.
pub const TIMEOUT_GRACE_MS: i64 = 5;

/// A client waiting for a lock; `C` is its blocked-client handle, `K` the
/// kind of object it waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiter<C, K> {
    /// The blocked-client handle.
    pub client: C,
    pub kind: K,
    /// Its identity: a lock's owner, an ownerless waiter's id (`WAITER`), or
    /// empty (nothing is kept for it, and it cannot be cancelled).
    pub owner: Vec<u8>,
    /// The lease it asked for, applied from the moment it is granted.
    pub lease_ms: i64,
    /// When this request started waiting (unix ms): its timeout counts from it.
    pub since_ms: i64,
    /// When it first joined the queue (unix ms), across pieces and rejoins.
    pub joined_ms: i64,
    /// When this request started waiting, on a monotonic microsecond clock
    /// (the wait time of its queue's key, `timings.rs`).
    pub since_us: u64,
    /// When it first joined the queue, on the same clock, across pieces and
    /// rejoins (its wait time when granted, `timings.rs`).
    pub joined_us: u64,
    /// Its position in the queue's arrival order (set by [`WaitQueues::join`]):
    /// waiters are in this order, and a kept place keeps it.
    pub place: u64,
    /// How long its place is kept after it leaves by its timeout or its
    /// connection closing (`KEEP`); 0: not kept.
    pub keep_ms: i64,
    /// Its WAIT timeout (0 = forever).
    pub timeout_ms: i64,
    /// It asked for a fencing token (`TOKEN`) with the grant.
    pub token: bool,
    /// Its grant is answered only once replicas acknowledged it (`SYNC`).
    pub sync: Option<SyncSpec>,
    /// What it waits for: the lock, a read or write hold, permits, a latch.
    pub ask: Ask,
}

impl<C, K> Waiter<C, K> {
    /// Whether its WAIT timeout has come by `now_ms` (Redis times it out
    /// once its clock passes since + timeout; a millisecond early, to be
    /// safe). Never for a waiter without a timeout.
    pub fn timing_out(&self, now_ms: i64) -> bool {
        self.timeout_ms > 0 && now_ms >= self.since_ms.saturating_add(self.timeout_ms)
    }
}

/// A waiter as `LOCK.INFO` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaiterInfo {
    pub owner: Vec<u8>,
    pub ask: Ask,
    /// When it first joined the queue (unix ms), across pieces and rejoins.
    pub since_ms: i64,
    pub waited_ms: i64,
    pub timeout_ms: i64,
}

/// How a waiter joined its queue ([`WaitQueues::join`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Joined<C, K> {
    /// At the back.
    Back,
    /// At the place kept for its identity.
    Rejoined,
    /// At the place of its identity's earlier request, still waiting, which
    /// is taken out: it is to be answered as if its timeout had passed.
    TookOver(Waiter<C, K>),
}

/// A waiter that left its queue ([`WaitQueues::leave`]): where it waited,
/// and what it leaves behind.
#[derive(Debug)]
pub struct Left<C, K> {
    pub db: i32,
    pub key: Vec<u8>,
    pub waiter: Waiter<C, K>,
    pub keeping: Keeping,
}

/// What a waiter that left ([`WaitQueues::leave`]) leaves behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keeping {
    /// Nothing: no grace, or no identity.
    Nothing,
    /// Its place, for its grace.
    Kept,
    /// Nothing: the cap on kept places was reached.
    OverCap,
}

/// A timer a queue owns: Redis's id for it, our own sequence number (which
/// the timer carries, so a fired timer can tell whether it is still the
/// queue's current one) and when it is due (unix ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueTimer<T> {
    pub id: T,
    pub seq: u64,
    pub due: i64,
}

/// What to do so that a queue's lock is looked at by a given time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerPlan<T> {
    /// Nobody waits for that lock: no timer.
    NoQueue,
    /// The queue's timer is already due by then.
    Keep,
    /// Start a timer (and record it with [`WaitQueues::timer_started`]),
    /// after stopping the queue's current one, if any.
    Start { stop: Option<T> },
}

/// Why a queue is kept without waiters: its object has a deadline to act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watch<K> {
    pub kind: K,
    /// The object's own deadline, when it matters after the key is gone (a
    /// latch's expiry: gone at or after it, the latch expired).
    pub deadline: Option<i64>,
}

/// The queues of one database, by key.
type Database<C, T, K> = HashMap<Vec<u8>, Queue<C, T, K>>;

struct Queue<C, T, K> {
    /// In place order.
    waiters: VecDeque<Waiter<C, K>>,
    /// The one timer that will look at this lock next, if any.
    timer: Option<QueueTimer<T>>,
    watch: Option<Watch<K>>,
    /// Kept places and remembered grants.
    absent: Absent<K>,
}

impl<C, T, K> Default for Queue<C, T, K> {
    fn default() -> Self {
        Queue {
            waiters: VecDeque::new(),
            timer: None,
            watch: None,
            absent: Absent::default(),
        }
    }
}

/// Every wait queue of the server. `C` identifies a blocked client, `T` a
/// timer, `K` a kind of object (Redis handles and the kinds' callbacks in
/// the module, plain values in tests).
pub struct WaitQueues<C, T, K> {
    queues: HashMap<i32, Database<C, T, K>>,
    /// Which queue each waiting client is in.
    index: HashMap<C, (i32, Vec<u8>)>,
    /// Timers of dropped queues, still to be stopped.
    orphaned_timers: Vec<T>,
    /// How many queues were dropped so far (a change of it says what is
    /// waited for may have shrunk).
    dropped: u64,
    /// The next waiter's place.
    next_place: u64,
    /// The weight of every queue's kept places and remembered grants.
    absent_weight: usize,
}

impl<C, T, K> Default for WaitQueues<C, T, K> {
    fn default() -> Self {
        WaitQueues {
            queues: HashMap::new(),
            index: HashMap::new(),
            orphaned_timers: Vec::new(),
            dropped: 0,
            next_place: 0,
            absent_weight: 0,
        }
    }
}

impl<C: Copy + Eq + Hash, T: Copy, K: Copy> WaitQueues<C, T, K> {
    /// Whether there is no queue at all: nobody waits, nothing is watched.
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Calls `f` with the kind and ask of every waiter, and with the kind
    /// of every watch (no ask), all queues together: what is waited for
    /// and watched (the keyspace events to hear follow from it).
    pub fn for_each_interest(&self, mut f: impl FnMut(&K, Option<Ask>)) {
        for queue in self.queues.values().flat_map(|keys| keys.values()) {
            for waiter in &queue.waiters {
                f(&waiter.kind, Some(waiter.ask));
            }
            if let Some(watch) = &queue.watch {
                f(&watch.kind, None);
            }
        }
    }

    /// How many queues were dropped since they were made (it only grows).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Number of waiting clients, all keys together.
    pub fn total(&self) -> usize {
        self.index.len()
    }

    pub fn has_waiters(&self, db: i32, key: &[u8]) -> bool {
        self.queue(db, key).is_some_and(|q| !q.waiters.is_empty())
    }

    fn queue(&self, db: i32, key: &[u8]) -> Option<&Queue<C, T, K>> {
        self.queues.get(&db).and_then(|keys| keys.get(key))
    }

    /// What kind of object a key's queue is for: its head waiter's, or its
    /// watch's. `None`: no queue.
    pub fn kind(&self, db: i32, key: &[u8]) -> Option<K> {
        let queue = self.queue(db, key)?;
        queue
            .waiters
            .front()
            .map(|w| w.kind)
            .or(queue.watch.map(|w| w.kind))
    }

    /// Whether any waiter of a key's queue asks for what `asks` says.
    pub fn any_ask(&self, db: i32, key: &[u8], asks: impl Fn(Ask) -> bool) -> bool {
        self.queue(db, key)
            .is_some_and(|q| q.waiters.iter().any(|w| asks(w.ask)))
    }

    /// The watch of a key's queue, if any.
    pub fn watched(&self, db: i32, key: &[u8]) -> Option<Watch<K>> {
        self.queue(db, key).and_then(|q| q.watch)
    }

    /// Keeps a key's queue (and its timer) while nobody waits: its object
    /// has a deadline to act on ([`Watch`]).
    pub fn watch(&mut self, db: i32, key: &[u8], watch: Watch<K>) {
        let keys = self.queues.entry(db).or_default();
        match keys.get_mut(key) {
            Some(queue) => queue.watch = Some(watch),
            None => {
                let queue = Queue {
                    watch: Some(watch),
                    ..Queue::default()
                };
                keys.insert(key.to_vec(), queue);
            }
        }
    }

    /// The object has no deadline to act on any more: its queue goes with
    /// its last waiter.
    pub fn unwatch(&mut self, db: i32, key: &[u8]) {
        if let Some(queue) = self.queues.get_mut(&db).and_then(|keys| keys.get_mut(key)) {
            queue.watch = None;
        }
        self.drop_if_empty(db, key);
    }

    /// Puts a waiter in its key's queue: at the place of its identity's
    /// earlier request if that still waits for the same thing, else at the
    /// place kept for its identity if it asks for what that place asked for
    /// (a place kept for something else is dropped), else at the back. A
    /// waiter without an identity, or that keeps no place (`KEEP 0`), goes
    /// to the back.
    pub fn join(&mut self, db: i32, key: &[u8], mut waiter: Waiter<C, K>) -> Joined<C, K> {
        self.index.insert(waiter.client, (db, key.to_vec()));
        let keys = self.queues.entry(db).or_default();
        let queue = keys.entry(key.to_vec()).or_default();
        if waiter.keep_ms > 0 && !waiter.owner.is_empty() {
            let same = |w: &Waiter<C, K>| w.owner == waiter.owner && w.ask == waiter.ask;
            if let Some(earlier) = queue.waiters.iter_mut().find(|w| same(w)) {
                (waiter.place, waiter.joined_ms) = (earlier.place, earlier.joined_ms);
                waiter.joined_us = earlier.joined_us;
                let earlier = std::mem::replace(earlier, waiter);
                self.index.remove(&earlier.client);
                return Joined::TookOver(earlier);
            }
            if let Some(kept) = queue.absent.take_kept(&waiter.owner) {
                self.absent_weight -= 1;
                if kept.ask == waiter.ask {
                    (waiter.place, waiter.joined_ms) = (kept.place, kept.joined_ms);
                    waiter.joined_us = kept.joined_us;
                    let at = queue.waiters.partition_point(|w| w.place < kept.place);
                    queue.waiters.insert(at, waiter);
                    return Joined::Rejoined;
                }
            }
        }
        waiter.place = self.next_place;
        self.next_place += 1;
        queue.waiters.push_back(waiter);
        Joined::Back
    }

    /// Appends a waiter to the back of its key's queue (tests).
    #[cfg(test)]
    pub fn push(&mut self, db: i32, key: &[u8], waiter: Waiter<C, K>) {
        self.join(db, key, waiter);
    }

    /// Takes the waiters a grant policy serves in one pass from the head of
    /// a key's queue, given what the object has `free` (see
    /// `grant_policy.rs`); `ask_of` says what each waiter asks for.
    ///
    /// Waiters whose WAIT timeout has come by `now_ms` are passed over and
    /// left in the queue: Redis is timing them out, and a grant made in that
    /// same moment could be lost with its reply (Redis 7.0 drops the reply
    /// of a client it times out after the module unblocked it).
    pub fn pop_run<P: GrantPolicy>(
        &mut self,
        db: i32,
        key: &[u8],
        free: P::Free,
        now_ms: i64,
        ask_of: impl Fn(&Waiter<C, K>) -> &P::Ask,
    ) -> Vec<Waiter<C, K>> {
        let Some(queue) = self.queues.get_mut(&db).and_then(|keys| keys.get_mut(key)) else {
            return Vec::new();
        };
        let live: Vec<usize> = (0..queue.waiters.len())
            .filter(|&i| !queue.waiters[i].timing_out(now_ms))
            .collect();
        let granted = grant_run::<P>(free, live.iter().map(|&i| ask_of(&queue.waiters[i])));
        let mut run = Vec::with_capacity(granted);
        for &i in live[..granted].iter().rev() {
            run.extend(queue.waiters.remove(i));
        }
        run.reverse();
        for waiter in &run {
            self.index.remove(&waiter.client);
        }
        self.drop_if_empty(db, key);
        run
    }

    /// Takes the first waiter of a free lock's queue: the one to grant it to
    /// (tests: the pass the module runs, on a free lock).
    #[cfg(test)]
    pub fn pop_next(&mut self, db: i32, key: &[u8]) -> Option<Waiter<C, K>> {
        use crate::grant_policy::{ReadWrite, RwHolders};
        self.pop_run::<ReadWrite>(db, key, RwHolders::default(), 0, |w| w.ask.mode())
            .pop()
    }

    /// Removes a client wherever it waits, with the key it waited for,
    /// keeping nothing. `None` if it is not waiting any more (already
    /// granted).
    #[cfg(test)]
    pub fn remove_client(&mut self, client: C) -> Option<(Vec<u8>, Waiter<C, K>)> {
        self.leave(client, 0, 0).map(|left| (left.key, left.waiter))
    }

    /// Removes a client that left by its timeout or its connection closing
    /// at `now_ms`, keeping its place for its grace when it has one and an
    /// identity, and the kept places and remembered grants weigh less than
    /// `cap`; with the database and key it waited on. `None` if it is not
    /// waiting any more (already granted).
    pub fn leave(&mut self, client: C, now_ms: i64, cap: usize) -> Option<Left<C, K>> {
        let (db, key) = self.index.remove(&client)?;
        let queue = self.queues.get_mut(&db)?.get_mut(&key)?;
        let position = queue.waiters.iter().position(|w| w.client == client)?;
        let waiter = queue.waiters.remove(position)?;
        let keeping = if waiter.keep_ms <= 0 || waiter.owner.is_empty() {
            Keeping::Nothing
        } else if self.absent_weight >= cap {
            Keeping::OverCap
        } else {
            queue.absent.keep(KeptPlace {
                place: waiter.place,
                identity: waiter.owner.clone(),
                kind: waiter.kind,
                ask: waiter.ask,
                joined_ms: waiter.joined_ms,
                joined_us: waiter.joined_us,
                left_ms: now_ms,
                until: now_ms.saturating_add(waiter.keep_ms),
            });
            self.absent_weight += 1;
            Keeping::Kept
        };
        self.drop_if_empty(db, &key);
        Some(Left {
            db,
            key,
            waiter,
            keeping,
        })
    }

    /// Removes every waiter of every queue, and every kept place and
    /// remembered grant.
    pub fn drain_all(&mut self) -> Vec<Waiter<C, K>> {
        self.index.clear();
        self.absent_weight = 0;
        let queues = std::mem::take(&mut self.queues);
        let mut drained = Vec::new();
        for queue in queues.into_values().flat_map(|keys| keys.into_values()) {
            self.dropped += 1;
            self.orphaned_timers.extend(queue.timer.map(|t| t.id));
            drained.extend(queue.waiters);
        }
        drained
    }

    /// The keys with waiters in `db`, or in every db when `db` is `None`.
    pub fn keys(&self, db: Option<i32>) -> Vec<(i32, Vec<u8>)> {
        self.queues
            .iter()
            .filter(|(id, _)| db.is_none_or(|db| db == **id))
            .flat_map(|(id, keys)| keys.keys().map(move |k| (*id, k.clone())))
            .collect()
    }

    /// The waiters of a key, in queue order, as of `now_ms`.
    pub fn snapshot(&self, db: i32, key: &[u8], now_ms: i64) -> Vec<WaiterInfo> {
        let Some(queue) = self.queues.get(&db).and_then(|keys| keys.get(key)) else {
            return Vec::new();
        };
        queue
            .waiters
            .iter()
            .map(|w| WaiterInfo {
                owner: w.owner.clone(),
                ask: w.ask,
                since_ms: w.joined_ms,
                waited_ms: (now_ms - w.joined_ms).max(0),
                timeout_ms: w.timeout_ms,
            })
            .collect()
    }

    /// When the server must next wake up so that Redis times out one of a
    /// key's waiters: just after the earliest WAIT timeout (Redis counts a
    /// blocked client timed out once now > its deadline) that has not passed
    /// by more than [`TIMEOUT_GRACE_MS`]; a deadline just passed whose waiter
    /// is still here is looked at again in a ms. `None`: no such waiter.
    ///
    /// Redis checks blocked clients' timeouts before it sleeps, but sleeps
    /// until its next cron tick (100 ms at `hz 10`) when nothing else is
    /// due: without this wake-up, `WAIT 50` answered after 100 ms.
    pub fn timeout_wake(&self, db: i32, key: &[u8], now_ms: i64) -> Option<i64> {
        let queue = self.queues.get(&db).and_then(|keys| keys.get(key))?;
        queue
            .waiters
            .iter()
            .filter(|w| w.timeout_ms > 0)
            .map(|w| w.since_ms.saturating_add(w.timeout_ms).saturating_add(1))
            .filter(|&at| at > now_ms.saturating_sub(TIMEOUT_GRACE_MS))
            .min()
            .map(|at| at.max(now_ms.saturating_add(1)))
    }

    /// How to make sure the lock of a key is looked at by `at` (unix ms).
    pub fn plan_timer(&self, db: i32, key: &[u8], at: i64) -> TimerPlan<T> {
        let Some(queue) = self.queues.get(&db).and_then(|keys| keys.get(key)) else {
            return TimerPlan::NoQueue;
        };
        match queue.timer {
            Some(timer) if timer.due <= at => TimerPlan::Keep,
            current => TimerPlan::Start {
                stop: current.map(|t| t.id),
            },
        }
    }

    /// Records the timer started for a key's queue (after [`TimerPlan::Start`]).
    /// Without a queue (never the case right after planning) the timer is
    /// orphaned at once, to be stopped.
    pub fn timer_started(&mut self, db: i32, key: &[u8], timer: QueueTimer<T>) {
        match self.queues.get_mut(&db).and_then(|keys| keys.get_mut(key)) {
            Some(queue) => queue.timer = Some(timer),
            None => self.orphaned_timers.push(timer.id),
        }
    }

    /// A timer fired: forget it if it is the queue's current one. Returns
    /// whether it was (a replaced timer that fired anyway has nothing to do).
    pub fn timer_fired(&mut self, db: i32, key: &[u8], seq: u64) -> bool {
        match self.queues.get_mut(&db).and_then(|keys| keys.get_mut(key)) {
            Some(queue) if queue.timer.is_some_and(|t| t.seq == seq) => {
                queue.timer = None;
                true
            }
            _ => false,
        }
    }

    /// The timers of queues dropped since the last call: stop them.
    pub fn take_orphaned_timers(&mut self) -> Vec<T> {
        std::mem::take(&mut self.orphaned_timers)
    }

    /// How many queues have a timer (for tests and `INFO`).
    pub fn live_timers(&self) -> usize {
        self.queues
            .values()
            .flat_map(|keys| keys.values())
            .filter(|q| q.timer.is_some())
            .count()
    }

    fn drop_if_empty(&mut self, db: i32, key: &[u8]) {
        if let Some(keys) = self.queues.get_mut(&db) {
            if keys
                .get(key)
                .is_some_and(|q| q.waiters.is_empty() && q.watch.is_none() && q.absent.is_empty())
            {
                let dropped = keys.remove(key);
                self.dropped += 1;
                if let Some(timer) = dropped.and_then(|q| q.timer) {
                    self.orphaned_timers.push(timer.id);
                }
            }
            if keys.is_empty() {
                self.queues.remove(&db);
            }
        }
    }
}

#[cfg(test)]
mod tests;
