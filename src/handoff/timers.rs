//! The queues' timers: each queue has at most one, due when its lock must be
//! looked at next (the lease's deadline, "now" after a DEL, a poll while
//! writes are held back, just after a WAIT timeout).

use std::cell::Cell;

use super::{grant_next, latch, queues, queues_then_stop_timers, semaphore};
use crate::ffi::timer::{self, TimerJob};
use crate::ffi::{Ctx, OwnedStr};
use crate::grant_policy::Kind;
use crate::lock_key::LockKey;
use crate::replicas;
use crate::wait_queue::{QueueTimer, TimerPlan};

thread_local! {
    static NEXT_TIMER_SEQ: Cell<u64> = const { Cell::new(0) };
}

/// Makes sure the server wakes up just after the earliest WAIT timeout of
/// `key`'s queue, so Redis answers it on time (see
/// [`crate::wait_queue::WaitQueues::timeout_wake`]).
pub(super) fn wake_for_timeouts(ctx: Ctx, db: i32, key: &[u8]) {
    if let Some(at) = queues(|q| q.timeout_wake(db, key, ctx.now_ms())) {
        look_at(ctx, db, key, at);
    }
}

/// The first moment a lock with `deadline` counts as expired: Redis expires
/// a key once now > deadline.
pub(super) fn after(deadline: i64) -> i64 {
    deadline.saturating_add(1)
}

/// How often a lock that must be handed on is looked at again while writes
/// are paused: the hand-off follows the end of a pause by at most this.
pub const PAUSE_POLL_MS: i64 = 5;

/// The longest a timer is set for. A lease may end centuries from now, and
/// Redis computes a timer's due time as `now_us + period_ms * 1000`, which
/// overflows (undefined behaviour, a due time anywhere) for periods past
/// ~292 000 years. A timer that fires before the deadline finds the lock held
/// and sets the next one, so long leases just take a few hops.
const MAX_TIMER_DELAY_MS: i64 = 3_600_000;

/// A queue's timer job: look at the lock of `key` in `db`. `seq` tells whether
/// it is still the queue's current timer when it fires (see [`QueueTimer`]).
pub(super) struct LookAt {
    db: i32,
    key: Vec<u8>,
    seq: u64,
}

impl TimerJob for LookAt {
    fn fire(self, ctx: Ctx) {
        if queues(|q| q.timer_fired(self.db, &self.key, self.seq)) {
            settle_key(ctx, self.db, &self.key);
            wake_for_timeouts(ctx, self.db, &self.key);
        }
    }
}

/// Makes sure the lock of `key` is looked at by `at` (unix ms), by the
/// queue's one timer; nothing if nobody waits for it.
pub(super) fn look_at(ctx: Ctx, db: i32, key: &[u8], at: i64) {
    let stop = match queues(|q| q.plan_timer(db, key, at)) {
        TimerPlan::NoQueue | TimerPlan::Keep => return,
        TimerPlan::Start { stop } => stop,
    };
    if let Some(id) = stop {
        timer::stop(ctx, id);
    }
    let seq = NEXT_TIMER_SEQ.with(|next| {
        next.set(next.get().wrapping_add(1));
        next.get()
    });
    let job = LookAt {
        db,
        key: key.to_vec(),
        seq,
    };
    let delay_ms = at.saturating_sub(ctx.now_ms()).clamp(0, MAX_TIMER_DELAY_MS);
    let id = timer::start(ctx, delay_ms, job);
    queues_then_stop_timers(ctx, |q| {
        q.timer_started(db, key, QueueTimer { id, seq, due: at })
    });
}

/// What a queue's timer finds when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    /// The lock is free (deleted, or expired just now).
    Free,
    /// Still held, until this deadline (`None`: no expiry).
    Held(Option<i64>),
}

/// What to do next for a waited-for lock (the policy, without Redis).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Nothing: nobody waits, or this server is no master.
    Nothing,
    /// Look again at this time (unix ms).
    LookAgainAt(i64),
    /// Open the key and see (then [`next_step`] with what was found).
    Open,
    /// Hand the lock to the first waiter.
    HandOn,
}

/// Decides, for a fired timer, what to do: never open a key while writes are
/// held back (paused: Redis holds expiry back then; or too few good replicas
/// for `min-replicas-to-write`), hand on a free lock, and otherwise wait for
/// the lock's deadline.
fn next_step(waiters: bool, master: bool, held_back: bool, now: i64, found: Option<Found>) -> Step {
    if !waiters || !master {
        return Step::Nothing;
    }
    if held_back {
        return Step::LookAgainAt(now.saturating_add(PAUSE_POLL_MS));
    }
    match found {
        None => Step::Open,
        Some(Found::Free) => Step::HandOn,
        Some(Found::Held(Some(deadline))) => Step::LookAgainAt(after(deadline)),
        Some(Found::Held(None)) => Step::Nothing,
    }
}

/// Whether a write the module would make on its own (a timer's hand-off)
/// must wait: Redis promises no writes while writes are paused, and refuses
/// write commands with `NOREPLICAS` while fewer than `min-replicas-to-write`
/// replicas are good. Commands need no check: Redis refuses them itself
/// (a script's writes, MULTI's EXEC included) before they reach the module.
pub fn writes_held_back(ctx: Ctx) -> bool {
    ctx.writes_paused() || replicas::too_few_good(ctx)
}

/// Outside a command: carries out [`next_step`] for the object of `key` in
/// `db`, whatever its kind: a lock or read-write lock here, a semaphore or
/// latch in their files. The checks before opening the key (a master,
/// writes not held back) are the same for every kind.
pub(super) fn settle_key(ctx: Ctx, db: i32, key: &[u8]) {
    let kind = queues(|q| q.kind(db, key));
    let held_back = kind.is_some() && writes_held_back(ctx);
    let step = |found| {
        next_step(
            kind.is_some(),
            ctx.is_master(),
            held_back,
            ctx.now_ms(),
            found,
        )
    };
    match step(None) {
        Step::Nothing | Step::HandOn => {}
        Step::LookAgainAt(at) => look_at(ctx, db, key, at),
        Step::Open => {
            if !ctx.select_db(db) {
                return;
            }
            match kind {
                Some(Kind::Semaphore) => semaphore::look(ctx, key),
                Some(Kind::Latch) => latch::look(ctx, key),
                Some(Kind::Lock) | None => settle_lock(ctx, db, key, step),
            }
        }
    }
}

/// [`settle_key`] for a lock or read-write lock.
fn settle_lock(ctx: Ctx, db: i32, key: &[u8], step: impl Fn(Option<Found>) -> Step) {
    let name = OwnedStr::new(key);
    let Ok(lock) = LockKey::open_write(ctx, name.borrow()) else {
        return;
    };
    if lock.exists() {
        // A read-write lock held for reading may admit the readers
        // at the head (the writer ahead of them left); for anything
        // else held, the pass grants nothing.
        grant_next(ctx, &lock, db);
    }
    let found = if lock.exists() {
        Found::Held(lock.deadline_ms())
    } else {
        Found::Free
    };
    match step(Some(found)) {
        Step::HandOn => {
            grant_next(ctx, &lock, db);
        }
        Step::LookAgainAt(at) => look_at(ctx, db, key, at),
        Step::Nothing | Step::Open => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000;

    #[test]
    fn nothing_is_opened_or_handed_on_while_writes_are_paused() {
        for found in [None, Some(Found::Free), Some(Found::Held(Some(900)))] {
            assert_eq!(
                next_step(true, true, true, NOW, found),
                Step::LookAgainAt(NOW + PAUSE_POLL_MS),
                "{found:?}"
            );
        }
    }

    #[test]
    fn a_free_lock_is_handed_on_and_a_held_one_waited_for() {
        assert_eq!(next_step(true, true, false, NOW, None), Step::Open);
        assert_eq!(
            next_step(true, true, false, NOW, Some(Found::Free)),
            Step::HandOn
        );
        assert_eq!(
            next_step(true, true, false, NOW, Some(Found::Held(Some(5_000)))),
            Step::LookAgainAt(5_001),
            "just after the deadline, when Redis counts the key expired"
        );
        assert_eq!(
            next_step(true, true, false, NOW, Some(Found::Held(None))),
            Step::Nothing,
            "without expiry, only a release or a delete frees it"
        );
    }

    #[test]
    fn without_waiters_or_as_a_replica_nothing_happens() {
        for (waiters, master) in [(false, true), (true, false), (false, false)] {
            for paused in [false, true] {
                assert_eq!(
                    next_step(waiters, master, paused, NOW, Some(Found::Free)),
                    Step::Nothing
                );
            }
        }
    }

    #[test]
    fn deadlines_count_from_the_first_expired_millisecond() {
        assert_eq!(after(10), 11);
        assert_eq!(after(i64::MAX), i64::MAX);
    }
}
