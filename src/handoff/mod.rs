//! Server-side waiting and the fair hand-off: what happens when a lock frees.
//!
//! `LOCK.ACQUIRE ... WAIT` blocks the client in the key's FIFO queue
//! (`wait_queue.rs`). Whenever the lock frees, the first waiter is granted it
//! **in that same event**: the hash and lease are written and replicated as
//! effects, then the waiter is unblocked with reply nil. No other client can
//! slip in between, so waiting is fair and nobody barges.
//!
//! Why not Redis's `RedisModule_BlockClientOnKeys`? It wakes clients when a
//! key is *signalled ready*, and a freed lock is a *deleted* hash: on Redis
//! 7.0.15 the reply callback is never called once the key is gone, and a
//! deleted key never signals readiness on any version. Even where it works,
//! readiness wakes waiters to retry later in the event loop, when another
//! client may already have taken the lock; granting inside the freeing event
//! from our own queue is what makes the hand-off fair.
//!
//! How each way a lock can free reaches [`grant_next`]:
//! * `LOCK.RELEASE` (last hold) and `LOCK.FORCE`: directly, in the command.
//! * Lease expiry: the queue's timer, due just after the lock's deadline,
//!   opens the key (which makes Redis expire it) and hands it on. Redis's own
//!   active expiry can notice 100+ ms late; the timer makes it a few ms.
//!   Every way a deadline is set re-aims the timer ([`lease_changed`]): a
//!   re-entry, renewal or release with a shorter lease, a `PEXPIRE` by anyone.
//! * `DEL`/`UNLINK`/`HDEL` of the last field/`RENAME`/`MOVE`, eviction, expiry
//!   noticed by Redis, `FLUSHDB`/`FLUSHALL`: keyspace notifications and the
//!   flush server event set the queue's timer to "now". Writing keys inside a
//!   notification callback can corrupt Redis 7.0's state, hence the timer. Until it
//!   runs, any `LOCK.ACQUIRE` of that key first hands the free lock to the
//!   queue ([`settle`]), so the gap cannot be used to barge.
//!
//! Each queue has **at most one timer**, stopped as soon as its last waiter
//! leaves (see `wait_queue.rs`), so nothing piles up and `MODULE UNLOAD`
//! works as soon as nobody waits.
//!
//! **Nothing is written while writes are paused** (`CLIENT PAUSE`, `FAILOVER`,
//! `SHUTDOWN` waiting for replicas, `CLUSTER FAILOVER`). Redis promises
//! replicas that no write happens then, and it holds expired keys back, so a
//! write would either be lost by a failover after the waiter was told "yours"
//! (two holders) or abort the server. A timer that finds writes paused looks
//! again every [`PAUSE_POLL_MS`]; when the pause ends the hand-offs happen,
//! in FIFO order. Commands cannot barge meanwhile: Redis holds back every
//! write command during the pause, and afterwards `LOCK.ACQUIRE` settles the
//! queue first.
//!
//! Waiters that time out or disconnect (also `CLIENT KILL`) leave the queue at
//! once. Where blocking is not allowed (MULTI, Lua, a replica) WAIT acts as a
//! plain acquire. When the server becomes a replica, waiters get an error
//! (usually Redis's own, which it sends before telling modules; see README).
//!
//! Every blocked client is unblocked exactly once by us (grant, timeout,
//! disconnect or demotion), which is what frees Redis's handle for it.
//!
//! Where things are: this file holds the queues and what happens when a
//! lock frees ([`carry_out`], the hand-off); `semaphore.rs` and `latch.rs`
//! the same for semaphores (permits freed, leases ending) and latches
//! (opened, expired), over the same queues and timers; `timers.rs` the
//! queues' timers and when writes are held back; `blocked.rs` what a
//! blocked client is answered; `synced.rs` grants that wait for replicas;
//! `listeners.rs` keyspace notifications and server events.

mod blocked;
pub mod latch;
mod listeners;
pub mod semaphore;
mod synced;
mod timers;

use std::cell::RefCell;

// The module entry point uses these; unit-test builds leave it out.
#[cfg_attr(test, allow(unused_imports))]
pub use listeners::subscribe;
#[cfg_attr(test, allow(unused_imports))]
pub use synced::grants_awaiting_replicas;

use blocked::Waiting;
use synced::hold_reply_for_replicas;
use timers::{after, look_at, wake_for_timeouts, writes_held_back, LookAt, PAUSE_POLL_MS};

use crate::counter_key::{self, NextToken};
use crate::decision::{Decision, Event, Publish};
use crate::ffi::blocking::{self, BlockedClient, Wake};
use crate::ffi::timer::{self, TimerId};
use crate::ffi::{Ctx, OwnedStr, RStr};
use crate::grant_policy::{Ask, Mode, ReadWrite, RwHolders};
use crate::lock::{self, LockDecision};
use crate::lock_key::LockKey;
use crate::replica_sync::SyncSpec;
use crate::rwlock::{self, RwDecision, RwEvent};
use crate::rwlock_key::RwLockKey;
use crate::stats;
use crate::wait_queue::{WaitQueues, Waiter, WaiterInfo, Watch};
use crate::{errors, events};

type Queues = WaitQueues<BlockedClient, TimerId<LookAt>>;

thread_local! {
    // Redis calls commands, callbacks, timers and notifications on its main
    // thread only. Borrows are never held across a call into Redis, since a
    // call (opening a key) can fire a notification that comes back here.
    static QUEUES: RefCell<Queues> = RefCell::new(Queues::default());
}

fn queues<T>(f: impl FnOnce(&mut Queues) -> T) -> T {
    QUEUES.with(|q| f(&mut q.borrow_mut()))
}

/// Like [`queues`], for changes that may drop a queue: then stops the
/// dropped queues' timers, so none outlives its waiters.
fn queues_then_stop_timers<T>(ctx: Ctx, f: impl FnOnce(&mut Queues) -> T) -> T {
    let (result, orphaned) = queues(|q| {
        let result = f(q);
        (result, q.take_orphaned_timers())
    });
    for id in orphaned {
        timer::stop(ctx, id);
    }
    result
}

/// Number of clients waiting, all locks together (`INFO lock`).
pub fn waiting_clients() -> usize {
    queues(|q| q.total())
}

/// Number of live hand-off timers (`INFO lock`): at most one per waited-for lock.
pub fn live_timers() -> usize {
    queues(|q| q.live_timers())
}

/// The waiters of `key` in queue order, for `LOCK.INFO`.
pub fn snapshot(ctx: Ctx, key: RStr) -> Vec<WaiterInfo> {
    let (db, now) = (ctx.selected_db(), ctx.now_ms());
    queues(|q| q.snapshot(db, key.as_bytes(), now))
}

/// What a client that starts waiting asks for.
pub struct Wants<'a> {
    pub owner: &'a [u8],
    /// The lease it gets from the moment it is granted the lock.
    pub lease_ms: i64,
    /// How long it waits at most (0 = forever).
    pub timeout_ms: i64,
    /// A fencing token with the grant.
    pub token: bool,
    /// The grant is answered only once replicas acknowledged it.
    pub sync: Option<SyncSpec>,
    /// The lock, or a read-write lock's read or write hold, permits, a latch.
    pub ask: Ask,
}

impl Wants<'static> {
    /// What a semaphore's or latch's waiter asks for: no owner (permits
    /// and latches have none), no token, no replica acknowledgements.
    pub fn ownerless(ask: Ask, lease_ms: i64, timeout_ms: i64) -> Wants<'static> {
        Wants {
            owner: b"",
            lease_ms,
            timeout_ms,
            token: false,
            sync: None,
            ask,
        }
    }
}

/// Blocks the calling client until it is granted `lock` or its timeout passes.
pub fn wait(ctx: Ctx, lock: &LockKey, wants: Wants) {
    let key = lock.name().as_bytes();
    wait_in_queue(ctx, key, wants);
    if let Some(deadline) = lock.deadline_ms() {
        look_at(ctx, ctx.selected_db(), key, after(deadline));
    }
}

/// Keeps `key`'s queue (and its timer, due just after `at`) while nobody
/// waits, for an object with a deadline of its own to act on; with `None`,
/// stops watching, and the queue goes with its last waiter.
fn watch_until(ctx: Ctx, db: i32, key: &[u8], watch: Option<(Watch, i64)>) {
    match watch {
        Some((watch, at)) => {
            queues(|q| q.watch(db, key, watch));
            look_at(ctx, db, key, after(at));
        }
        None => queues_then_stop_timers(ctx, |q| q.unwatch(db, key)),
    }
}

/// Blocks the calling client at the back of `key`'s queue, asking for
/// `wants`, whatever the kind of object: it leaves when granted, timed out
/// or gone.
fn wait_in_queue(ctx: Ctx, key: &[u8], wants: Wants) {
    let client = blocking::block::<Waiting>(ctx, wants.timeout_ms);
    let db = ctx.selected_db();
    let waiter = Waiter {
        client,
        owner: wants.owner.to_vec(),
        lease_ms: wants.lease_ms,
        since_ms: ctx.now_ms(),
        timeout_ms: wants.timeout_ms,
        token: wants.token,
        sync: wants.sync,
        ask: wants.ask,
    };
    queues(|q| q.push(db, key, waiter));
    stats::WAITS_STARTED.incr();
    wake_for_timeouts(ctx, db, key);
}

/// `write` was just made to `lock`: if it set a deadline and clients wait
/// for the lock, make sure the queue's timer is due by then. (A lease made
/// shorter by re-entry, renewal or release must still be handed on when it
/// ends, not when Redis's background expiry gets to it.)
fn lease_changed(ctx: Ctx, lock: &LockKey, deadline: Option<i64>) {
    let Some(deadline) = deadline else {
        return;
    };
    if waiting_clients() == 0 {
        return;
    }
    look_at(
        ctx,
        ctx.selected_db(),
        lock.name().as_bytes(),
        after(deadline),
    );
}

/// A command granted `lock` to its caller, who asked for `spec`: the reply
/// waits for the replicas (see `replica_sync.rs`). The caller is blocked
/// without a Redis timeout: the sync timer answers it by its deadline.
pub fn await_replicas(ctx: Ctx, lock: &LockKey, owner: &[u8], token: Option<i64>, spec: SyncSpec) {
    let client = blocking::block::<Waiting>(ctx, 0);
    hold_reply_for_replicas(ctx, client, lock, owner, token, spec);
}

/// Before deciding on `lock`: if it is free but clients queue for it (it was
/// freed by DEL, expiry... and the hand-off timer has not run yet), hand it to
/// them first. Returns whether it did.
pub fn settle(ctx: Ctx, lock: &LockKey) -> bool {
    // Nobody waits anywhere (the usual case): no call into Redis at all.
    if waiting_clients() == 0 || lock.exists() {
        return false;
    }
    let db = ctx.selected_db();
    if !queues(|q| q.has_waiters(db, lock.name().as_bytes())) {
        return false;
    }
    grant_next(ctx, lock, db)
}

/// Carries out a decision on `lock`, the one way every command and every
/// hand-off does it:
/// 1. apply its write to the key and replicate the effect (`lock_key.rs`);
/// 2. if the write set a deadline, make sure the queue's timer is due by then;
/// 3. count what the decision counts (`INFO lock`, its `Tally`);
/// 4. emit its keyspace notification, and when the lock is left free, hand
///    it to the first waiter or, when nobody waits, publish the unlock message.
///
/// Returns the decision's reply, for the caller to answer.
pub fn carry_out<R>(ctx: Ctx, lock: &LockKey, decision: LockDecision<R, RStr>) -> R {
    lock.apply(decision.write);
    lease_changed(ctx, lock, decision.write.deadline());
    decision.tally().count();
    if let Some(event) = decision.event() {
        events::notify(ctx, lock.name(), event);
        if event.frees_lock() {
            hand_on_or_publish(ctx, lock);
        }
    }
    decision.into_reply()
}

/// `lock` was just left free: grant it to the first waiter, or, when nobody
/// waits, publish the unlock message.
fn hand_on_or_publish(ctx: Ctx, lock: &LockKey) {
    if !grant_next(ctx, lock, ctx.selected_db()) {
        events::publish_unlock(ctx, lock.name());
    }
}

/// Serves `lock`'s queue from its head, as far as the grant policy allows
/// (`grant_policy.rs`): a free lock to its first waiter; for a read-write
/// lock, the run of readers at the head (none while a writer holds) or one
/// writer when nobody holds. True if anyone was granted.
///
/// A waiter that asked for a token but whose counter cannot be raised (it
/// was overwritten with a non-integer, say) gets that error instead, and
/// the pass goes on to the next waiter.
fn grant_next(ctx: Ctx, lock: &LockKey, db: i32) -> bool {
    let key = lock.name().as_bytes();
    let mut granted = false;
    loop {
        let (readers, writer) = RwLockKey::of(lock).holders();
        let holders = RwHolders { readers, writer };
        let now = ctx.live_now_ms();
        let run = queues_then_stop_timers(ctx, |q| {
            q.pop_run::<ReadWrite>(db, key, holders, now, |w| w.ask.mode())
        });
        if run.is_empty() {
            return granted;
        }
        let mut refused = 0;
        for waiter in run {
            match grant_waiter(ctx, lock, waiter) {
                true => granted = true,
                false => refused += 1,
            }
        }
        if refused == 0 {
            return granted;
        }
        // Someone of the run was refused: what it would have had may go to
        // the next in line.
    }
}

/// Grants `lock` to `waiter` (the policy said it may have it) and answers
/// it. False when it was refused instead (its token counter is broken).
fn grant_waiter(ctx: Ctx, lock: &LockKey, waiter: Waiter<BlockedClient>) -> bool {
    let counter = counter_key::wanted_counter(lock.name(), waiter.token);
    let next_token = counter
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|counter| NextToken::prepare_if(ctx, counter.as_ref()));
    let next_token = match next_token {
        Ok(next) => next,
        Err(e) => {
            blocking::unblock(waiter.client, Some(Wake::Refused(e)));
            return false;
        }
    };
    let now = ctx.now_ms();
    let expire_at = now.saturating_add(waiter.lease_ms);
    let owner = OwnedStr::new(&waiter.owner);
    let mode = match waiter.ask {
        Ask::Lock => {
            carry_out(ctx, lock, lock::hand_off(owner.borrow(), expire_at));
            stats::WAITS_GRANTED.incr();
            None
        }
        Ask::Rw(mode) => Some(mode),
        // A semaphore's or latch's waiter in a lock's queue (the key
        // changed type while it waited): it can never be served here.
        Ask::Permits { .. } | Ask::Latch => {
            blocking::unblock(waiter.client, Some(Wake::Refused(errors::WRONGTYPE)));
            return false;
        }
    };
    if let Some(mode) = mode {
        let rw = RwLockKey::of(lock);
        let decision = rw.view(owner.borrow()).and_then(|view| {
            rwlock::hand_off(mode, view, now, waiter.lease_ms).map_err(|e| e.refusal())
        });
        match decision {
            // The pass admitted it, so the state machine grants it; were
            // they ever to disagree, the waiter hears an error, never a
            // grant that was not made.
            Ok(decision) if matches!(decision.reply, rwlock::RwAcquired::Busy(_)) => {
                ctx.log_warning("lock module: a read-write waiter admitted but not grantable");
                blocking::unblock(waiter.client, Some(Wake::Refused(errors::INTERNAL)));
                return false;
            }
            Ok(decision) => {
                carry_out_rw(ctx, lock, owner.borrow(), decision);
                stats::WAITS_GRANTED.incr();
            }
            Err(e) => {
                blocking::unblock(waiter.client, Some(Wake::Refused(e)));
                return false;
            }
        }
    }
    let token = next_token.map(|next| next.issue(expire_at));
    match waiter.sync {
        Some(spec) => hold_reply_for_replicas(ctx, waiter.client, lock, &waiter.owner, token, spec),
        None => blocking::unblock(waiter.client, Some(Wake::Granted { token })),
    }
    true
}

/// Before deciding on the read-write lock `lock`: serves its queue first,
/// as far as the policy allows (it was freed or left to readers behind the
/// queue's back, or the head just left). Returns whether clients still
/// queue for it, so that a newcomer queues behind them.
pub fn settle_rw(ctx: Ctx, lock: &LockKey) -> bool {
    if waiting_clients() == 0 {
        return false;
    }
    let db = ctx.selected_db();
    let key = lock.name().as_bytes();
    if !queues(|q| q.has_waiters(db, key)) {
        return false;
    }
    grant_next(ctx, lock, db);
    queues(|q| q.has_waiters(db, key))
}

/// Carries out a read-write lock decision for `owner`, the one way every
/// read-write command and hand-off does it: apply and replicate its
/// effects (`rwlock_key.rs`), re-aim the queue's timer at a new deadline,
/// count it, notify, and when holders left, serve the queue or, when
/// nobody holds it any more and nobody waits, publish the unlock message.
pub fn carry_out_rw<R>(ctx: Ctx, lock: &LockKey, owner: RStr, decision: RwDecision<R>) -> R {
    let rw = RwLockKey::of(lock);
    rw.apply(owner, &decision.effects);
    lease_changed(ctx, lock, decision.deadline());
    decision.tally.count();
    match decision.event {
        Some(RwEvent::Acquired) => {
            events::notify(ctx, lock.name(), Event::Acquired);
        }
        Some(RwEvent::Released { message, freed }) => {
            if freed {
                events::notify(ctx, lock.name(), Event::Released);
            }
            let handed = grant_next(ctx, lock, ctx.selected_db());
            if decision.publishes() == Publish::UnlessServed && !handed {
                events::publish_rw_unlock(ctx, lock.name(), message == Mode::Write);
            }
        }
        Some(RwEvent::Forced { .. }) => {
            events::notify(ctx, lock.name(), Event::Forced);
            if !grant_next(ctx, lock, ctx.selected_db()) {
                let message = decision.unlock_message();
                events::publish_rw_unlock(ctx, lock.name(), message == Some(Mode::Write));
            }
        }
        None => {}
    }
    decision.reply
}
