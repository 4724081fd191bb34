//! The wait queues: who waits for which lock, in arrival order. No FFI.
//!
//! One FIFO queue per (database, key), for every kind of object: what a
//! pass grants is the kind's policy (`grant_policy.rs`). A waiter is a client blocked in
//! `LOCK.ACQUIRE ... WAIT`, identified by its blocked-client handle (an opaque
//! `usize` here). Waiters leave a queue in exactly one of three ways, each of
//! which removes them at once:
//! * granted: popped from the front when the object frees, as many as its
//!   grant policy serves in one pass (`pop_run`);
//! * timed out or disconnected: removed by handle (`remove_client`);
//! * the server became a replica: everything is drained (`drain_all`).
//!
//! An empty queue is dropped, so memory follows the number of live waiters,
//! unless it is **watched**: an object with a deadline of its own that must
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
use crate::replica_sync::SyncSpec;

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
    pub owner: Vec<u8>,
    /// The lease it asked for, applied from the moment it is granted.
    pub lease_ms: i64,
    /// When it started waiting (unix ms).
    pub since_ms: i64,
    /// When it started waiting, on a monotonic microsecond clock (for its
    /// wait time, `timings.rs`).
    pub joined_us: u64,
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
    /// When it started waiting (unix ms).
    pub since_ms: i64,
    pub waited_ms: i64,
    pub timeout_ms: i64,
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
    waiters: VecDeque<Waiter<C, K>>,
    /// The one timer that will look at this lock next, if any.
    timer: Option<QueueTimer<T>>,
    watch: Option<Watch<K>>,
}

impl<C, T, K> Default for Queue<C, T, K> {
    fn default() -> Self {
        Queue {
            waiters: VecDeque::new(),
            timer: None,
            watch: None,
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
}

impl<C, T, K> Default for WaitQueues<C, T, K> {
    fn default() -> Self {
        WaitQueues {
            queues: HashMap::new(),
            index: HashMap::new(),
            orphaned_timers: Vec::new(),
            dropped: 0,
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

    /// Appends a waiter to the back of its key's queue.
    pub fn push(&mut self, db: i32, key: &[u8], waiter: Waiter<C, K>) {
        self.index.insert(waiter.client, (db, key.to_vec()));
        self.queues
            .entry(db)
            .or_default()
            .entry(key.to_vec())
            .or_default()
            .waiters
            .push_back(waiter);
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

    /// Removes a client wherever it waits (timeout, disconnect), with the
    /// key it waited for. `None` if it is not waiting any more (already
    /// granted).
    pub fn remove_client(&mut self, client: C) -> Option<(Vec<u8>, Waiter<C, K>)> {
        let (db, key) = self.index.remove(&client)?;
        let queue = self.queues.get_mut(&db)?.get_mut(&key)?;
        let position = queue.waiters.iter().position(|w| w.client == client)?;
        let waiter = queue.waiters.remove(position)?;
        self.drop_if_empty(db, &key);
        Some((key, waiter))
    }

    /// Removes every waiter of every queue.
    pub fn drain_all(&mut self) -> Vec<Waiter<C, K>> {
        self.index.clear();
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
                since_ms: w.since_ms,
                waited_ms: (now_ms - w.since_ms).max(0),
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
                .is_some_and(|q| q.waiters.is_empty() && q.watch.is_none())
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
mod tests {
    use super::*;

    type Queues = WaitQueues<usize, u64, &'static str>;

    fn waiter(client: usize) -> Waiter<usize, &'static str> {
        Waiter {
            client,
            kind: "lock",
            owner: format!("o{client}").into_bytes(),
            lease_ms: 1000,
            since_ms: 100,
            joined_us: 0,
            timeout_ms: 0,
            token: false,
            sync: None,
            ask: Ask::Lock,
        }
    }

    #[test]
    fn interests_list_every_waiter_and_watch_and_drops_are_counted() {
        let mut q = Queues::default();
        let interests = |q: &Queues| {
            let mut seen = Vec::new();
            q.for_each_interest(|kind, ask| seen.push((*kind, ask)));
            seen.sort_by_key(|(kind, _)| *kind);
            seen
        };
        assert!(interests(&q).is_empty(), "nothing waits");
        q.push(0, b"rw", waiter(1));
        q.push(
            0,
            b"rw",
            Waiter {
                kind: "rwlock",
                ask: Ask::Rw(crate::grant_policy::Mode::Read),
                ..waiter(2)
            },
        );
        let watch = Watch {
            kind: "semaphore",
            deadline: None,
        };
        q.watch(1, b"sem", watch);
        assert_eq!(
            interests(&q),
            vec![
                ("lock", Some(Ask::Lock)),
                ("rwlock", Some(Ask::Rw(crate::grant_policy::Mode::Read))),
                ("semaphore", None)
            ]
        );
        let dropped = q.dropped();
        q.remove_client(2);
        assert_eq!(q.dropped(), dropped, "the queue stays with its writer");
        q.remove_client(1);
        q.unwatch(1, b"sem");
        assert_eq!(q.dropped(), dropped + 2);
        assert!(interests(&q).is_empty());
        q.push(0, b"k", waiter(3));
        q.drain_all();
        assert_eq!(q.dropped(), dropped + 3, "a demotion drops queues too");
    }

    #[test]
    fn waiters_are_granted_in_arrival_order() {
        let mut q = Queues::default();
        for c in 1..=10 {
            q.push(0, b"k", waiter(c));
        }
        let order: Vec<usize> = std::iter::from_fn(|| q.pop_next(0, b"k"))
            .map(|w| w.client)
            .collect();
        assert_eq!(order, (1..=10).collect::<Vec<_>>());
        assert_eq!(q.total(), 0);
        assert!(!q.has_waiters(0, b"k"));
    }

    #[test]
    fn a_waiter_whose_timeout_has_come_is_passed_over_and_left_to_redis() {
        use crate::grant_policy::{Mode, ReadWrite, RwHolders};
        let mut q = Queues::default();
        let mut timing_out = waiter(1);
        timing_out.timeout_ms = 50; // since 100: times out at 150
        q.push(0, b"k", timing_out);
        q.push(0, b"k", waiter(2));
        fn mode<'a>(w: &'a Waiter<usize, &'static str>) -> &'a Mode {
            w.ask.mode()
        }
        let run = q.pop_run::<ReadWrite>(0, b"k", RwHolders::default(), 149, mode);
        assert_eq!(run.iter().map(|w| w.client).collect::<Vec<_>>(), [1]);
        q.push(0, b"k", {
            let mut w = waiter(3);
            w.timeout_ms = 50;
            w
        });
        let run = q.pop_run::<ReadWrite>(0, b"k", RwHolders::default(), 150, mode);
        assert_eq!(
            run.iter().map(|w| w.client).collect::<Vec<_>>(),
            [2],
            "3 is timing out: the next one is served"
        );
        assert!(q.has_waiters(0, b"k"), "3 stays until Redis times it out");
        assert!(q.remove_client(3).is_some());
    }

    #[test]
    fn a_watched_queue_stays_without_waiters_until_unwatched() {
        let mut q = Queues::default();
        let watch = Watch {
            kind: "latch",
            deadline: Some(5),
        };
        q.watch(0, b"k", watch);
        assert_eq!(q.kind(0, b"k"), Some("latch"));
        assert!(!q.has_waiters(0, b"k"));
        q.push(0, b"k", waiter(1));
        assert_eq!(
            q.kind(0, b"k"),
            Some("lock"),
            "the head waiter's kind first"
        );
        assert!(q.remove_client(1).is_some());
        assert_eq!(q.watched(0, b"k"), Some(watch), "kept: still watched");
        q.unwatch(0, b"k");
        assert_eq!(q.kind(0, b"k"), None);
        assert!(q.keys(None).is_empty());
    }

    #[test]
    fn keys_and_databases_have_separate_queues() {
        let mut q = Queues::default();
        q.push(0, b"a", waiter(1));
        q.push(1, b"a", waiter(2));
        q.push(0, b"b", waiter(3));
        assert_eq!(q.pop_next(1, b"a").map(|w| w.client), Some(2));
        assert_eq!(q.pop_next(1, b"a"), None);
        assert_eq!(q.pop_next(0, b"a").map(|w| w.client), Some(1));
        assert_eq!(q.total(), 1);
        assert_eq!(q.keys(None), vec![(0, b"b".to_vec())]);
        assert_eq!(q.keys(Some(1)), vec![]);
    }

    #[test]
    fn a_timed_out_or_gone_waiter_leaves_at_once_and_is_never_granted() {
        let mut q = Queues::default();
        for c in 1..=3 {
            q.push(0, b"k", waiter(c));
        }
        assert_eq!(
            q.remove_client(2).map(|(key, w)| (key, w.client)),
            Some((b"k".to_vec(), 2))
        );
        assert_eq!(q.remove_client(2), None, "removing twice finds nothing");
        assert_eq!(q.pop_next(0, b"k").map(|w| w.client), Some(1));
        assert_eq!(q.pop_next(0, b"k").map(|w| w.client), Some(3));
        assert_eq!(q.remove_client(1), None, "a granted waiter is not waiting");
    }

    #[test]
    fn empty_queues_are_dropped_so_memory_stays_flat() {
        let mut q = Queues::default();
        for round in 0..10_000 {
            q.push(
                round % 7,
                format!("key{round}").as_bytes(),
                waiter(round as usize),
            );
            q.remove_client(round as usize);
        }
        assert_eq!(q.total(), 0);
        assert!(q.queues.is_empty() && q.index.is_empty());
    }

    #[test]
    fn snapshots_show_queue_order_and_waiting_time() {
        let mut q = Queues::default();
        q.push(0, b"k", waiter(1));
        q.push(
            0,
            b"k",
            Waiter {
                since_ms: 150,
                joined_us: 0,
                timeout_ms: 500,
                ..waiter(2)
            },
        );
        let shot = q.snapshot(0, b"k", 200);
        assert_eq!(shot.len(), 2);
        assert_eq!(
            (
                shot[0].owner.as_slice(),
                shot[0].waited_ms,
                shot[0].timeout_ms
            ),
            (&b"o1"[..], 100, 0)
        );
        assert_eq!(
            (
                shot[1].owner.as_slice(),
                shot[1].waited_ms,
                shot[1].timeout_ms
            ),
            (&b"o2"[..], 50, 500)
        );
        assert!(q.snapshot(0, b"other", 200).is_empty());
    }

    #[test]
    fn drain_takes_everyone() {
        let mut q = Queues::default();
        q.push(0, b"a", waiter(1));
        q.push(3, b"b", waiter(2));
        let mut drained: Vec<usize> = q.drain_all().into_iter().map(|w| w.client).collect();
        drained.sort();
        assert_eq!(drained, vec![1, 2]);
        assert_eq!(q.total(), 0);
    }

    fn timer(id: u64, due: i64) -> QueueTimer<u64> {
        QueueTimer { id, seq: id, due }
    }

    #[test]
    fn a_queue_keeps_one_timer_and_only_an_earlier_time_replaces_it() {
        let mut q = Queues::default();
        assert_eq!(q.plan_timer(0, b"k", 10), TimerPlan::NoQueue);
        q.push(0, b"k", waiter(1));
        assert_eq!(q.plan_timer(0, b"k", 10), TimerPlan::Start { stop: None });
        q.timer_started(0, b"k", timer(7, 10));
        assert_eq!(q.plan_timer(0, b"k", 10), TimerPlan::Keep);
        assert_eq!(
            q.plan_timer(0, b"k", 20),
            TimerPlan::Keep,
            "fires early, re-arms"
        );
        assert_eq!(
            q.plan_timer(0, b"k", 5),
            TimerPlan::Start { stop: Some(7) },
            "a shortened lease replaces the timer"
        );
        q.timer_started(0, b"k", timer(8, 5));
        assert_eq!(q.live_timers(), 1);
        assert!(
            !q.timer_fired(0, b"k", 7),
            "a replaced timer is not current"
        );
        assert!(q.timer_fired(0, b"k", 8));
        assert_eq!(q.live_timers(), 0);
        assert_eq!(q.plan_timer(0, b"k", 20), TimerPlan::Start { stop: None });
    }

    #[test]
    fn a_dropped_queue_hands_its_timer_back_to_be_stopped() {
        let mut q = Queues::default();
        q.push(0, b"a", waiter(1));
        q.push(0, b"a", waiter(2));
        q.timer_started(0, b"a", timer(5, 100));
        q.remove_client(1);
        assert!(q.take_orphaned_timers().is_empty(), "someone still waits");
        q.remove_client(2);
        assert_eq!(q.take_orphaned_timers(), vec![5]);
        assert!(q.take_orphaned_timers().is_empty(), "handed back once");

        q.push(0, b"b", waiter(3));
        q.timer_started(0, b"b", timer(6, 100));
        q.pop_next(0, b"b");
        assert_eq!(q.take_orphaned_timers(), vec![6]);

        q.push(1, b"c", waiter(4));
        q.timer_started(1, b"c", timer(9, 100));
        q.drain_all();
        assert_eq!(q.take_orphaned_timers(), vec![9]);

        q.timer_started(2, b"gone", timer(11, 100));
        assert_eq!(q.take_orphaned_timers(), vec![11], "no queue: stop at once");
        assert_eq!(q.live_timers(), 0);
    }

    #[test]
    fn wait_then_leave_cycles_leave_no_timer_behind() {
        let mut q = Queues::default();
        let mut stopped = 0;
        for round in 0..100_000u64 {
            q.push(0, b"k", waiter(round as usize));
            if let TimerPlan::Start { stop } = q.plan_timer(0, b"k", 1_000) {
                stopped += stop.iter().count();
                q.timer_started(0, b"k", timer(round, 1_000));
            }
            q.remove_client(round as usize);
            stopped += q.take_orphaned_timers().len();
        }
        assert_eq!(stopped, 100_000, "every timer started was stopped");
        assert_eq!(q.live_timers(), 0);
        assert!(q.queues.is_empty() && q.index.is_empty());
    }

    #[test]
    fn queues_wake_just_after_the_earliest_wait_timeout() {
        let mut q: WaitQueues<usize, u32, &str> = WaitQueues::default();
        let waiter = |client, since_ms, timeout_ms| Waiter {
            client,
            kind: "lock",
            owner: b"o".to_vec(),
            lease_ms: 1,
            since_ms,
            joined_us: 0,
            timeout_ms,
            token: false,
            sync: None,
            ask: Ask::Lock,
        };
        assert_eq!(q.timeout_wake(0, b"k", 100), None, "no queue");
        q.push(0, b"k", waiter(1, 100, 0));
        assert_eq!(q.timeout_wake(0, b"k", 100), None, "waits forever");
        q.push(0, b"k", waiter(2, 100, 50));
        q.push(0, b"k", waiter(3, 110, 20));
        assert_eq!(q.timeout_wake(0, b"k", 100), Some(131), "110 + 20 + 1");
        assert_eq!(
            q.timeout_wake(0, b"k", 131),
            Some(132),
            "just passed: again in a ms"
        );
        assert_eq!(
            q.timeout_wake(0, b"k", 136),
            Some(151),
            "past the grace: the next one"
        );
        assert_eq!(q.timeout_wake(0, b"k", 200), None);
        assert_eq!(q.timeout_wake(1, b"k", 100), None, "another db");
    }

    #[test]
    fn a_pass_takes_the_run_its_policy_grants_and_leaves_the_rest_queued() {
        use crate::grant_policy::{Mode, ReadWrite, RwHolders};
        let mut q: Queues = WaitQueues::default();
        for client in 1..=5 {
            q.push(0, b"k", waiter(client));
        }
        fn mode<'a>(w: &'a Waiter<usize, &'static str>) -> &'a Mode {
            if w.client == 4 {
                &Mode::Write
            } else {
                &Mode::Read
            }
        }
        let run = q.pop_run::<ReadWrite>(0, b"k", RwHolders::default(), 0, mode);
        assert_eq!(run.iter().map(|w| w.client).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(q.total(), 2, "the writer and the reader behind it wait");
        assert_eq!(q.remove_client(2), None, "granted clients left the index");
        let run = q.pop_run::<ReadWrite>(0, b"k", RwHolders::default(), 0, mode);
        assert_eq!(run.iter().map(|w| w.client).collect::<Vec<_>>(), [4]);
    }
}
