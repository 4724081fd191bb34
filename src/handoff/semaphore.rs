//! What happens when a semaphore's permits free, and when a leased permit's
//! deadline passes: the semaphores' side of the one queue.
//!
//! * A release (`LOCK.SEMRELEASE`, `LOCK.PERMITRELEASE`, `LOCK.SEMADD`,
//!   `LOCK.SEMSET`) serves the queue from its head **in the same event**,
//!   as far as the permits go ([`Permits`]): a waiter wanting more than is
//!   free keeps everyone behind it waiting, so large requests are not
//!   starved.
//! * A leased permit ends on its deadline: the queue's one timer is aimed
//!   at the earliest deadline in `{name}:timeout` (the queue is kept for it
//!   while nobody waits, [`Watch`]), takes the expired permits back and
//!   serves the queue. Every command also takes them back first
//!   ([`settle`]).
//! * Permits given back behind the module's back (a Redisson script's
//!   `INCRBY`, a `SET`) are noticed through keyspace notifications, which
//!   set the timer to "now" (`listeners.rs`).
//!
//! Writes are never made while writes are held back (pauses,
//! `min-replicas-to-write`): the timer checks that before it gets here
//! (`timers.rs`).

use std::cell::RefCell;

use super::{queues, queues_then_stop_timers, wait_in_queue, waiting_clients, watch_until, Wants};
use crate::errors::{self, Refusal};
use crate::events;
use crate::ffi::blocking::{self, BlockedClient, Wake};
use crate::ffi::key::OpenMode;
use crate::ffi::{random_bytes, Ctx, OwnedStr};
use crate::grant_policy::{Ask, Kind, Permits};
use crate::semaphore::{self, id_hex, IdSource, PermitId, SemDecision, Took, NON_EXPIRING};
use crate::semaphore_key::{SemaphoreKeys, SemaphoreNames};
use crate::stats;
use crate::wait_queue::{Waiter, Watch};

/// Carries out a semaphore decision, the one way every semaphore command
/// and hand-off does it:
/// 1. apply its writes to the keys and replicate them (`semaphore_key.rs`);
/// 2. count its outcome (`INFO lock`);
/// 3. when permits were freed, serve the queue from its head;
/// 4. announce the permits now available on `redisson_sc:{name}`;
/// 5. when leased permits came or went, aim the queue's timer at the
///    earliest deadline left.
pub fn carry_out_sem<R>(ctx: Ctx, sem: &SemaphoreKeys, decision: SemDecision<R>) -> R {
    sem.apply(&decision);
    decision.tally.count();
    if decision.freed {
        serve(ctx, sem);
    }
    if decision.publish.is_some() {
        if let Ok(value) = sem.value() {
            events::publish_permits(ctx, sem.name(), value.unwrap_or(0));
        }
    }
    // The timer follows the earliest deadline: one just leased may be it;
    // the last lease given back leaves nothing to watch. (A lease given back
    // that was the earliest leaves the timer early: it finds nothing to take
    // back and aims at the next.)
    let leased = decision.add.iter().map(|(_, at)| *at).min();
    if let Some(at) = leased.filter(|at| *at < NON_EXPIRING) {
        watch_from(ctx, sem, Some(at));
    } else if !decision.remove.is_empty() && sem.no_leases() {
        watch_from(ctx, sem, None);
    }
    decision.reply
}

/// Before a command decides on `sem`: takes expired leased permits back,
/// aims the queue's timer at the next deadline, and serves the queue
/// (permits may have come back behind its back).
/// Returns whether clients still queue, so that a newcomer queues behind
/// them.
pub fn settle(ctx: Ctx, sem: &SemaphoreKeys) -> Result<bool, Refusal> {
    let now = ctx.now_ms();
    let mut earliest = sem.earliest_deadline();
    if earliest.is_some_and(|at| at <= now) {
        let decision = semaphore::reclaim(sem.value()?, sem.expired(now))?;
        carry_out_sem(ctx, sem, decision);
        earliest = sem.earliest_deadline();
    }
    // Permits leased by someone else (Redisson's script) have deadlines too:
    // the timer follows the earliest, whoever wrote it.
    watch_from(ctx, sem, earliest.filter(|at| *at < NON_EXPIRING));
    if waiting_clients() == 0 {
        return Ok(false);
    }
    let (db, key) = (ctx.selected_db(), sem.name().as_bytes());
    if !queues(|q| q.has_waiters(db, key)) {
        return Ok(false);
    }
    serve(ctx, sem);
    Ok(queues(|q| q.has_waiters(db, key)))
}

/// Blocks the calling client until it is granted `ask` (permits, leased
/// for `lease_ms` from the grant when `leased`) or `timeout_ms` passes.
pub fn wait(ctx: Ctx, sem: &SemaphoreKeys, ask: Ask, lease_ms: i64, timeout_ms: i64) {
    let wants = Wants::ownerless(ask, lease_ms, timeout_ms);
    wait_in_queue(ctx, sem.name().as_bytes(), wants);
}

/// Serves `sem`'s queue from its head while the permits last. True if
/// anyone was granted.
fn serve(ctx: Ctx, sem: &SemaphoreKeys) -> bool {
    let Ok(value) = sem.value() else {
        return false; // not an integer: waiters wait (and time out)
    };
    let (db, key, now) = (ctx.selected_db(), sem.name().as_bytes(), ctx.live_now_ms());
    let run = queues_then_stop_timers(ctx, |q| {
        q.pop_run::<Permits>(db, key, value.unwrap_or(0), now, |w| w.ask.permits())
    });
    let mut granted = false;
    for waiter in run {
        granted |= grant(ctx, sem, waiter);
    }
    granted
}

/// Grants `waiter` the permits it asked for (the policy said they are
/// free) and answers it. False when it was refused instead.
fn grant(ctx: Ctx, sem: &SemaphoreKeys, waiter: Waiter<BlockedClient>) -> bool {
    let value = match sem.value() {
        Ok(value) => value,
        Err(e) => return refuse(waiter.client, e),
    };
    let wake = match waiter.ask {
        Ask::Permits { n, leased: false } => {
            match carry_out_sem(ctx, sem, semaphore::acquire(value, n, false)) {
                Took(true) => Wake::Integer(1),
                Took(false) => return refuse(waiter.client, errors::INTERNAL),
            }
        }
        Ask::Permits { n, leased: true } => {
            let ids = new_ids(n);
            let deadline = lease_deadline(ctx.now_ms(), waiter.lease_ms);
            match carry_out_sem(
                ctx,
                sem,
                semaphore::acquire_leased(value, ids, deadline, false),
            ) {
                Some(ids) => Wake::Strings(ids.iter().map(id_hex).collect()),
                None => return refuse(waiter.client, errors::INTERNAL),
            }
        }
        // A waiter of another kind in a semaphore's queue (its key changed
        // type while it waited): it can never be served here.
        Ask::Lock | Ask::Rw(_) | Ask::Latch => return refuse(waiter.client, errors::WRONGTYPE),
    };
    stats::WAITS_GRANTED.incr();
    blocking::unblock(waiter.client, Some(wake));
    true
}

fn refuse(client: BlockedClient, refusal: Refusal) -> bool {
    blocking::unblock(client, Some(Wake::Refused(refusal)));
    false
}

thread_local! {
    // Seeded on first use, from Redis's own random bytes.
    static IDS: RefCell<IdSource> = RefCell::new(IdSource::new(random_bytes::<32>()));
}

/// `n` new permit ids.
pub fn new_ids(n: i64) -> Vec<PermitId> {
    IDS.with(|ids| {
        let mut ids = ids.borrow_mut();
        (0..n).map(|_| ids.next_id()).collect()
    })
}

/// A leased permit's deadline: `lease_ms` from `now`; 0 = never.
pub fn lease_deadline(now: i64, lease_ms: i64) -> i64 {
    if lease_ms > 0 {
        now.saturating_add(lease_ms)
    } else {
        NON_EXPIRING
    }
}

/// A permit's lease changed (`LOCK.PERMITRENEW`): the timer follows the
/// earliest deadline.
pub fn deadlines_changed(ctx: Ctx, sem: &SemaphoreKeys) {
    let earliest = sem.earliest_deadline();
    watch_from(ctx, sem, earliest.filter(|at| *at < NON_EXPIRING));
}

/// Aims the queue's timer at `at`, a lease's deadline, keeping the queue
/// for it while nobody waits; with `None`, stops watching, and the queue
/// goes with its last waiter.
fn watch_from(ctx: Ctx, sem: &SemaphoreKeys, at: Option<i64>) {
    let watch = Watch {
        kind: Kind::Semaphore,
        deadline: None,
    };
    let (db, key) = (ctx.selected_db(), sem.name().as_bytes());
    watch_until(ctx, db, key, at.map(|at| (watch, at)));
}

/// The queue's timer fired for the semaphore `key` of the selected `db`
/// (writes are not held back): takes expired permits back, serves the
/// queue, and aims the timer at the next deadline.
pub(super) fn look(ctx: Ctx, key: &[u8]) {
    let name = OwnedStr::new(key);
    let names = SemaphoreNames::of(name.borrow());
    let Ok(sem) = SemaphoreKeys::open(ctx, &names, OpenMode::Write) else {
        // Another type now: nothing to reclaim; waiters time out.
        queues_then_stop_timers(ctx, |q| q.unwatch(ctx.selected_db(), key));
        return;
    };
    // Settling aims the timer at the next deadline.
    let _ = settle(ctx, &sem);
}
