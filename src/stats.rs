//! Counters behind `INFO lock`.
//!
//! Plain relaxed atomics: commands run on Redis's main thread, and INFO only
//! needs each number to be right, not a consistent snapshot of all of them.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::lock::{Acquired, Forced, HandedOff, Released};

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

/// Counts a read-write lock grant.
pub fn count_rw_grant(mode: crate::grant_policy::Mode) {
    match mode {
        crate::grant_policy::Mode::Read => RW_READS_GRANTED.incr(),
        crate::grant_policy::Mode::Write => RW_WRITES_GRANTED.incr(),
    }
}

/// A decision's outcome, counted where it is carried out (`handoff::carry_out`):
/// the one place the lock counters move.
pub trait Counted {
    fn count(&self);
}

impl Counted for Acquired {
    fn count(&self) {
        match self {
            Acquired::Taken => ACQUIRED.incr(),
            Acquired::Reentered => REENTERED.incr(),
            Acquired::Busy => CONTENDED.incr(),
        }
    }
}

impl Counted for Released {
    fn count(&self) {
        if *self == Released::Freed {
            RELEASED.incr();
        }
    }
}

impl Counted for Forced {
    fn count(&self) {
        if *self == Forced::Deleted {
            FORCED.incr();
        }
    }
}

/// A lock handed from a freeing event straight to its first waiter.
impl Counted for HandedOff {
    fn count(&self) {
        ACQUIRED.incr();
        HANDOFFS.incr();
        WAITS_GRANTED.incr();
    }
}

/// A read or write acquire: one that found the lock not grantable is
/// contended, as for the lock (grants are counted by mode, where the mode is
/// known: [`count_rw_grant`]).
impl Counted for crate::rwlock::RwAcquired {
    fn count(&self) {
        if let crate::rwlock::RwAcquired::Busy(_) = self {
            CONTENDED.incr();
        }
    }
}

/// A read or write release: a lock left free is counted by its event.
impl Counted for crate::rwlock::RwReleased {
    fn count(&self) {}
}

/// A renewal (whether the owner held the lock): not counted.
impl Counted for bool {
    fn count(&self) {}
}

impl Counted for crate::semaphore::Took {
    fn count(&self) {
        match self.0 {
            true => PERMITS_ACQUIRED.incr(),
            false => PERMITS_CONTENDED.incr(),
        }
    }
}

/// A leased acquire: the ids granted, or none.
impl Counted for Option<Vec<crate::semaphore::PermitId>> {
    fn count(&self) {
        match self {
            Some(_) => PERMITS_ACQUIRED.incr(),
            None => PERMITS_CONTENDED.incr(),
        }
    }
}

/// Leased permits reclaimed.
impl Counted for usize {
    fn count(&self) {
        PERMITS_RECLAIMED.add(*self as u64);
    }
}

/// A count or number of permits answered (`LOCK.SEMADD`, `LOCK.SEMRELEASE`,
/// `LOCK.SEMDRAIN`, `LOCK.PERMITRELEASE`): not counted.
impl Counted for i64 {
    fn count(&self) {}
}

/// Every counter with its `INFO` field name, in display order.
pub fn all() -> [(&'static str, &'static Counter); 22] {
    [
        ("acquired", &ACQUIRED),
        ("reentered", &REENTERED),
        ("contended", &CONTENDED),
        ("released", &RELEASED),
        ("forced", &FORCED),
        ("waits_started", &WAITS_STARTED),
        ("waits_granted", &WAITS_GRANTED),
        ("waits_timed_out", &WAITS_TIMED_OUT),
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
