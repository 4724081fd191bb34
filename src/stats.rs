//! Counters behind `INFO lock`.
//!
//! Plain relaxed atomics: commands run on Redis's main thread, and INFO only
//! needs each number to be right, not a consistent snapshot of all of them.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::grant_policy::Mode;

#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub const fn new() -> Self {
        Counter(AtomicU64::new(0))
    }

    pub fn incr(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// First acquires (free -> held), by command or hand-off.
pub static ACQUIRED: Counter = Counter::new();
/// Re-entries by an owner that already held the lock.
pub static REENTERED: Counter = Counter::new();
/// Acquires that found the lock held by someone else.
pub static CONTENDED: Counter = Counter::new();
/// Last holds released (by `LOCK.RELEASE`, or a grant undone for want of
/// replica acknowledgements).
pub static RELEASED: Counter = Counter::new();
/// Locks deleted by `LOCK.FORCE`.
pub static FORCED: Counter = Counter::new();
/// Clients that started waiting with `WAIT`.
pub static WAITS_STARTED: Counter = Counter::new();
/// Waiters that were granted the lock.
pub static WAITS_GRANTED: Counter = Counter::new();
/// Waiters whose timeout passed.
pub static WAITS_TIMED_OUT: Counter = Counter::new();
/// Waiters that left (timeout, connection closed) with their place kept.
pub static PLACES_KEPT: Counter = Counter::new();
/// Asks that took a kept place back.
pub static PLACES_REJOINED: Counter = Counter::new();
/// Asks that took the place of their identity's earlier request, still
/// waiting (a sliced wait's next piece).
pub static WAITS_CONTINUED: Counter = Counter::new();
/// Kept places dropped unused: their grace ended, a flush, a demotion.
pub static PLACES_DROPPED: Counter = Counter::new();
/// Places not kept, or grants not remembered, at `lock.keep-places-max`.
pub static PLACES_OVER_CAP: Counter = Counter::new();
/// `LOCK.CANCEL`s that ended a wait or dropped a kept place.
pub static WAITS_CANCELLED: Counter = Counter::new();
/// `LOCK.CANCEL`s answered `granted`.
pub static CANCELS_AFTER_GRANT: Counter = Counter::new();
/// Locks handed from one owner straight to a waiter as they were freed.
pub static HANDOFFS: Counter = Counter::new();
/// Grants answered once the replicas they asked for acknowledged them (`SYNC`).
pub static GRANTS_SYNCED: Counter = Counter::new();
/// Grants undone because the replicas did not acknowledge them in time
/// (or their client left, or the server became a replica, first).
pub static GRANTS_UNDONE: Counter = Counter::new();
/// Fencing tokens handed out (`LOCK.ACQUIRE ... TOKEN`, by command or hand-off).
pub static TOKENS_ISSUED: Counter = Counter::new();
/// `LOCK.FENCE` calls that let a write through.
pub static FENCES_PASSED: Counter = Counter::new();
/// `LOCK.FENCE` calls that refused a stale token.
pub static FENCES_REFUSED: Counter = Counter::new();
/// Full syncs this replica loaded into a temporary database and swapped in
/// (`repl-diskless-load swapdb`; Redis falls back to a disk load, and this
/// stays 0, for modules that do not declare async-load support).
pub static SWAPDB_LOADS: Counter = Counter::new();

/// Read holds granted (fresh or re-entered, by command or hand-off).
pub static RW_READS_GRANTED: Counter = Counter::new();
/// Write holds granted (fresh or re-entered, by command or hand-off).
pub static RW_WRITES_GRANTED: Counter = Counter::new();

/// Semaphore acquires that took permits (by command or hand-off; a
/// `LOCK.PERMITACQUIRE` of n permits counts once).
pub static PERMITS_ACQUIRED: Counter = Counter::new();
/// Semaphore acquires that found too few permits free (or clients queued).
pub static PERMITS_CONTENDED: Counter = Counter::new();
/// Leased permits whose deadline passed, taken back by the module.
pub static PERMITS_RECLAIMED: Counter = Counter::new();
/// Latches that reached zero (by `LOCK.COUNTDOWN`, or deleted by someone).
pub static LATCHES_OPENED: Counter = Counter::new();
/// Latches whose `PX` expiry passed.
pub static LATCHES_EXPIRED: Counter = Counter::new();

/// What one decision counts: the decision says it (`decision.rs`), the one
/// carry-out counts it (`waiting/carry_out.rs`). The counters of waiting
/// itself (started, granted, timed out) and of `SYNC` grants move where
/// that happens, in the waiting wing; the fence's and tokens' where they
/// are decided and issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tally {
    Nothing,
    /// A lock taken: free before, the caller's now.
    Acquired,
    /// A lock re-entered by its owner.
    Reentered,
    /// An acquire that found the lock held by someone else (or, for a
    /// read-write lock, not grantable now).
    Contended,
    /// A lock's (or read-write lock's) last hold released: it is free.
    Released,
    /// A lock deleted by `LOCK.FORCE`.
    Forced,
    /// A lock handed from its freeing event straight to its first waiter.
    HandedOff,
    /// A read or write hold granted (fresh or re-entered) by a command.
    Granted(Mode),
    /// A read or write hold handed straight to a waiter.
    HandedOffAs(Mode),
    /// Permits taken (a `LOCK.PERMITACQUIRE` of n permits counts once).
    PermitsAcquired,
    /// Permits not taken: too few free, or clients queued.
    PermitsContended,
    /// This many leased permits taken back after their deadline.
    PermitsReclaimed(u64),
    /// A latch that reached zero or was deleted.
    LatchOpened,
    /// A latch whose `PX` expiry passed.
    LatchExpired,
}

impl Tally {
    pub fn count(self) {
        match self {
            Tally::Nothing => {}
            Tally::Acquired => ACQUIRED.incr(),
            Tally::Reentered => REENTERED.incr(),
            Tally::Contended => CONTENDED.incr(),
            Tally::Released => RELEASED.incr(),
            Tally::Forced => FORCED.incr(),
            Tally::HandedOff => {
                ACQUIRED.incr();
                HANDOFFS.incr();
            }
            Tally::Granted(mode) => rw_granted(mode).incr(),
            Tally::HandedOffAs(mode) => {
                rw_granted(mode).incr();
                HANDOFFS.incr();
            }
            Tally::PermitsAcquired => PERMITS_ACQUIRED.incr(),
            Tally::PermitsContended => PERMITS_CONTENDED.incr(),
            Tally::PermitsReclaimed(n) => PERMITS_RECLAIMED.add(n),
            Tally::LatchOpened => LATCHES_OPENED.incr(),
            Tally::LatchExpired => LATCHES_EXPIRED.incr(),
        }
    }
}

fn rw_granted(mode: Mode) -> &'static Counter {
    match mode {
        Mode::Read => &RW_READS_GRANTED,
        Mode::Write => &RW_WRITES_GRANTED,
    }
}

/// Every counter with its `INFO` field name, in display order.
pub fn all() -> [(&'static str, &'static Counter); 29] {
    [
        ("acquired", &ACQUIRED),
        ("reentered", &REENTERED),
        ("contended", &CONTENDED),
        ("released", &RELEASED),
        ("forced", &FORCED),
        ("waits_started", &WAITS_STARTED),
        ("waits_granted", &WAITS_GRANTED),
        ("waits_timed_out", &WAITS_TIMED_OUT),
        ("places_kept", &PLACES_KEPT),
        ("places_rejoined", &PLACES_REJOINED),
        ("waits_continued", &WAITS_CONTINUED),
        ("places_dropped", &PLACES_DROPPED),
        ("places_over_cap", &PLACES_OVER_CAP),
        ("waits_cancelled", &WAITS_CANCELLED),
        ("cancels_after_grant", &CANCELS_AFTER_GRANT),
        ("handoffs", &HANDOFFS),
        ("grants_synced", &GRANTS_SYNCED),
        ("grants_undone", &GRANTS_UNDONE),
        ("tokens_issued", &TOKENS_ISSUED),
        ("fences_passed", &FENCES_PASSED),
        ("fences_refused", &FENCES_REFUSED),
        ("swapdb_loads", &SWAPDB_LOADS),
        ("rw_reads_granted", &RW_READS_GRANTED),
        ("rw_writes_granted", &RW_WRITES_GRANTED),
        ("permits_acquired", &PERMITS_ACQUIRED),
        ("permits_contended", &PERMITS_CONTENDED),
        ("permits_reclaimed", &PERMITS_RECLAIMED),
        ("latches_opened", &LATCHES_OPENED),
        ("latches_expired", &LATCHES_EXPIRED),
    ]
}
