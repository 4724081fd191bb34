//! The semaphores' side of the one queue: what happens when permits free,
//! and when a leased permit's deadline passes.
//!
//! * A release (`LOCK.SEMRELEASE`, `LOCK.PERMITRELEASE`, `LOCK.SEMADD`,
//!   `LOCK.SEMSET`) serves the queue from its head **in the same event**,
//!   as far as the permits go (`grant_policy::Permits`): a waiter wanting
//!   more than is free keeps everyone behind it waiting, so large requests
//!   are not starved.
//! * A leased permit ends on its deadline: the queue's one timer is aimed
//!   at the earliest deadline in `{name}:timeout` (the queue is kept for it
//!   while nobody waits, a watch), takes the expired permits back and
//!   serves the queue. Every command also takes them back first
//!   ([`settle`]).
//! * Permits given back behind the module's back (a Redisson script's
//!   `INCRBY`, a `SET`) are noticed through keyspace notifications, which
//!   aim the timer at "now" (`listeners.rs`).

use std::cell::RefCell;

use super::blocked::wait_in_queue;
use super::carry_out::{carry_out, Target};
use super::hearing;
use super::queue::{self, aim_timer, has_waiters, take_run, Aim, Keep, Kind, Waiter, Wants, Watch};
use crate::errors::{self, Refusal};
use crate::events;
use crate::ffi::blocking::{BlockedClient, Wake};
use crate::ffi::context::NotifyClass;
use crate::ffi::key::OpenMode;
use crate::ffi::{random_bytes, Ctx, OwnedStr, RStr};
use crate::grant_policy::{Ask, Permits};
use crate::semaphore::{self, id_hex, IdSource, PermitId, SemDecision, Took, NON_EXPIRING};
use crate::semaphore_key::{SemaphoreKeys, SemaphoreNames};

/// The semaphore, as its queue sees it.
struct Semaphore;

static SEMAPHORE: Semaphore = Semaphore;

impl Kind for Semaphore {
    /// Takes expired permits back, serves the queue, and aims the timer at
    /// the next deadline.
    fn due(&self, ctx: Ctx, key: &[u8]) {
        let name = OwnedStr::new(key);
        let names = SemaphoreNames::of(name.borrow());
        let Ok(sem) = SemaphoreKeys::open(ctx, &names, OpenMode::Write) else {
            // Another type now: nothing to reclaim; waiters time out.
            aim_timer(ctx, ctx.selected_db(), key, Aim::Unwatch);
            return;
        };
        let _ = settle(ctx, &sem);
    }

    /// `LOCK.SEMACQUIRE`'s `0`, `LOCK.PERMITACQUIRE`'s nil.
    fn not_granted(&self, _: Ctx, _: &[u8], waiter: &Waiter) -> Wake {
        match waiter.ask {
            Ask::Permits { leased: true, .. } => Wake::Null,
            _ => Wake::Integer(0),
        }
    }

    /// Nothing on a semaphore's keys says who took its permits.
    fn remembers_grants(&self) -> bool {
        true
    }

    /// A small request behind a large one that gave up may be served.
    fn serves_when_one_leaves(&self) -> bool {
        true
    }

    /// Permits given back behind the queue's back (a Redisson script's
    /// `INCRBY`, a `SET`), leases taken, renewed or given back in
    /// `{name}:timeout` (which move the timer), and the semaphore deleted.
    fn hears(&self, _: Option<Ask>) -> NotifyClass {
        hearing::DELETED
            .or(NotifyClass::STRING)
            .or(NotifyClass::ZSET)
    }
}

/// Where the timer goes for a leased permit's deadline `at`: the queue is
/// kept for it while nobody waits.
fn watching(at: i64) -> Aim {
    let watch = Watch {
        kind: &SEMAPHORE,
        deadline: None,
    };
    Aim::Watch(watch, at)
}

/// Where the timer goes for a semaphore's leases: just after the
/// `earliest` deadline, whoever leased it (Redisson's script too), or
/// nowhere.
fn earliest_lease(earliest: Option<i64>) -> Aim {
    match earliest.filter(|at| *at < NON_EXPIRING) {
        Some(at) => watching(at),
        None => Aim::Unwatch,
    }
}

/// Before a command decides on `sem`: takes expired leased permits back,
/// aims the queue's timer at the next deadline, and serves the queue
/// (permits may have come back behind its back). Returns whether clients
/// still queue, so that a newcomer queues behind them.
pub fn settle(ctx: Ctx, sem: &SemaphoreKeys) -> Result<bool, Refusal> {
    let now = ctx.now_ms();
    let mut earliest = sem.earliest_deadline();
    if earliest.is_some_and(|at| at <= now) {
        let decision = semaphore::reclaim(sem.value()?, sem.expired(now))?;
        carry_out(ctx, sem, decision);
        earliest = sem.earliest_deadline();
    }
    let key = sem.name().as_bytes();
    aim_timer(ctx, ctx.selected_db(), key, earliest_lease(earliest));
    if !has_waiters(ctx, key) {
        return Ok(false);
    }
    serve(ctx, sem);
    Ok(has_waiters(ctx, key))
}

/// Blocks the calling client until it is granted `ask` (permits, leased
/// for `lease_ms` from the grant when `leased`) or `timeout_ms` passes,
/// its place kept as `keep` says.
pub fn wait(ctx: Ctx, sem: &SemaphoreKeys, ask: Ask, lease_ms: i64, timeout_ms: i64, keep: Keep) {
    let wants = Wants::ownerless(ask, lease_ms, timeout_ms, keep);
    wait_in_queue(ctx, sem.name().as_bytes(), &SEMAPHORE, wants);
}

/// `LOCK.PERMITRENEW`: gives the live permit `id` the deadline `at`, and
/// the timer follows the earliest deadline. False when `id` is not held
/// (expired permits were taken back by [`settle`] first).
pub fn renew(ctx: Ctx, sem: &SemaphoreKeys, id: &PermitId, at: i64) -> bool {
    if sem.deadline_of(id).is_none() {
        return false;
    }
    sem.set_deadline(id, at);
    let key = sem.name().as_bytes();
    let earliest = sem.earliest_deadline();
    aim_timer(ctx, ctx.selected_db(), key, earliest_lease(earliest));
    true
}

/// A semaphore's decisions are written to its value and its leased-permit
/// set.
impl<R> Target<SemDecision<R>> for SemaphoreKeys<'_> {
    fn name(&self) -> RStr<'_> {
        SemaphoreKeys::name(self)
    }

    fn apply(&self, decision: &SemDecision<R>) {
        SemaphoreKeys::apply(self, decision);
    }

    /// The timer follows the earliest deadline: one just leased may be it;
    /// the last lease given back leaves nothing to watch. (A lease given
    /// back that was the earliest leaves the timer early: it finds nothing
    /// to take back and aims at the next.)
    fn aim(&self, decision: &SemDecision<R>) -> Aim {
        let leased = decision.add.iter().map(|(_, at)| *at).min();
        match leased.filter(|at| *at < NON_EXPIRING) {
            Some(at) => watching(at),
            None if !decision.remove.is_empty() && self.no_leases() => Aim::Unwatch,
            None => Aim::Keep,
        }
    }

    fn serve(&self, ctx: Ctx, _: &SemDecision<R>) -> bool {
        serve(ctx, self)
    }

    /// The permits available once the queue took its share.
    fn publish(&self, ctx: Ctx, _: &SemDecision<R>) {
        if let Ok(value) = self.value() {
            events::publish_permits(ctx, SemaphoreKeys::name(self), value.unwrap_or(0));
        }
    }
}

/// Serves `sem`'s queue from its head while the permits last. True if
/// anyone was granted.
fn serve(ctx: Ctx, sem: &SemaphoreKeys) -> bool {
    let Ok(value) = sem.value() else {
        return false; // not an integer: waiters wait (and time out)
    };
    let key = sem.name().as_bytes();
    let run = take_run::<Permits>(ctx, key, value.unwrap_or(0), |w| w.ask.permits());
    let mut granted = false;
    for waiter in run {
        granted |= grant(ctx, sem, waiter);
    }
    granted
}

/// Grants `waiter` the permits it asked for (the policy said they are
/// free) and answers it. False when it was refused instead.
fn grant(ctx: Ctx, sem: &SemaphoreKeys, waiter: Waiter) -> bool {
    let value = match sem.value() {
        Ok(value) => value,
        Err(e) => return refuse(waiter.client, e),
    };
    let wake = match waiter.ask {
        Ask::Permits { n, leased: false } => {
            match carry_out(ctx, sem, semaphore::acquire(value, n, false)) {
                Took(true) => Wake::Integer(1),
                Took(false) => return refuse(waiter.client, errors::INTERNAL),
            }
        }
        Ask::Permits { n, leased: true } => {
            let ids = new_ids(n);
            let deadline = lease_deadline(ctx.now_ms(), waiter.lease_ms);
            let decision = semaphore::acquire_leased(value, ids, deadline, false);
            match carry_out(ctx, sem, decision) {
                Some(ids) => Wake::Strings(ids.iter().map(id_hex).collect()),
                None => return refuse(waiter.client, errors::INTERNAL),
            }
        }
        // Another kind's waiter in a semaphore's queue (its key changed
        // type while it waited): it can never be served here.
        _ => return refuse(waiter.client, errors::WRONGTYPE),
    };
    queue::granted(ctx, sem.name().as_bytes(), &waiter, Some(wake));
    true
}

fn refuse(client: BlockedClient, refusal: Refusal) -> bool {
    queue::refused(client, refusal);
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
