//! The lock's and the read-write lock's side of the one queue: what their
//! waiters get when a lock frees, and how a freed lock reaches them.
//!
//! Whenever a lock frees, its first waiter is granted it **in that same
//! event**: the hash and lease are written and replicated as effects, then
//! the waiter is unblocked. No other client can slip in between, so
//! waiting is fair and nobody barges. (Redis's `BlockClientOnKeys` cannot
//! do this: a freed lock is a *deleted* hash, which never signals readiness,
//! and readiness wakes a waiter to retry later, when another client may
//! have taken the lock.)
//!
//! How each way a lock can free reaches [`serve`]:
//! * `LOCK.RELEASE` (last hold) and `LOCK.FORCE`: their decision serves the
//!   queue, in the command (`carry_out.rs`).
//! * Lease expiry: the queue's timer, due just after the lock's deadline,
//!   opens the key (which makes Redis expire it) and hands it on. Redis's
//!   own active expiry can notice 100+ ms late; the timer makes it a few
//!   ms. Every decision that sets a deadline re-aims the timer.
//! * `DEL`/`UNLINK`/`HDEL` of the last field/`RENAME`/`MOVE`, eviction,
//!   expiry noticed by Redis, `FLUSHDB`/`FLUSHALL`: keyspace notifications
//!   and the flush server event aim the queue's timer at "now"
//!   (`listeners.rs`). Writing keys inside a notification callback can
//!   corrupt Redis 7.0's state, hence the timer. Until it runs, any acquire
//!   of that key first hands the free lock to the queue ([`settle`]).
//!
//! A read-write lock's queue is also served when holders leave without
//! freeing it (a last read hold released, a writer that keeps reading):
//! readers at the head join the readers left.
//!
//! The plain lock pays only for itself: its waiters are of their own kind
//! ([`LOCK`]), and a free lock is served without looking at read-write
//! holders; the read-write code runs only for a queue with a reader or
//! writer in it.

use super::blocked::{self, wait_in_queue};
use super::carry_out::{carry_out, Target};
use super::hearing;
use super::queue::{
    self, aim_timer, has_waiters, take_run, waiting_clients, Aim, Kind, KindRef, Waiter, Wants,
};
use super::synced::hold_reply_for_replicas;
use crate::counter_key::{self, NextToken};
use crate::errors::{self, Refusal};
use crate::events;
use crate::ffi::blocking::Wake;
use crate::ffi::context::NotifyClass;
use crate::ffi::{Ctx, OwnedStr, RStr};
use crate::grant_policy::{Ask, Mode, ReadWrite, RwHolders};
use crate::lock::{self, LockDecision};
use crate::lock_key::LockKey;
use crate::replica_sync::SyncSpec;
use crate::rwlock::{self, Effect, RwAcquired, RwDecision};
use crate::rwlock_key::RwLockKey;

/// The lock and the read-write lock, as their queues see them: a queue is
/// the read-write lock's when its head waiter asks for a read or write
/// hold, the plain lock's when it asks for the lock.
struct LockKind {
    read_write: bool,
}

static LOCK: LockKind = LockKind { read_write: false };
static RWLOCK: LockKind = LockKind { read_write: true };

impl Kind for LockKind {
    fn due(&self, ctx: Ctx, key: &[u8]) {
        due(ctx, key, self.read_write);
    }

    /// What `LOCK.ACQUIRE` (or `LOCK.RACQUIRE`, `LOCK.WACQUIRE`) answers
    /// when the lock is someone else's: the holder's remaining lease (with
    /// `TOKEN`, the pair `[ttl, -1]`).
    fn not_granted(&self, ctx: Ctx, key: &[u8], waiter: &Waiter) -> Wake {
        let key = OwnedStr::new(key);
        let ttl = LockKey::open_read(ctx, key.borrow()).map_or(-2, |lock| lock.ttl_ms());
        Wake::Busy {
            ttl,
            token: waiter.token,
        }
    }

    /// The lock's hash names its owner: a cancel reads it there.
    fn remembers_grants(&self) -> bool {
        false
    }

    /// Readers behind a writer that gave up may join the readers holding;
    /// a plain lock's waiter leaving changes nothing for the others (the
    /// lock is still held).
    fn serves_when_one_leaves(&self) -> bool {
        self.read_write
    }

    /// A lock is freed behind the queue's back by a delete (Redisson's
    /// unlock and force-unlock scripts `DEL` it), an expiry or an eviction;
    /// a reader is also let in when a write-held hash turns to read without
    /// being deleted (Redisson's write unlock after its owner took read: a
    /// downgrade), a hash write.
    fn hears(&self, ask: Option<Ask>) -> NotifyClass {
        match ask {
            Some(Ask::Rw(Mode::Read)) => hearing::DELETED.or(NotifyClass::HASH),
            _ => hearing::DELETED,
        }
    }
}

/// The queue's timer fired for the lock `key`: a free lock goes to the
/// queue; a held one is looked at again just after its deadline. A lock
/// held for reading may first admit the readers at the head (the writer
/// ahead of them left): for a read-write lock's queue (`rw`), or a lock
/// waiter's queue with readers or writers behind it.
fn due(ctx: Ctx, key: &[u8], rw: bool) {
    let name = OwnedStr::new(key);
    let Ok(lock) = LockKey::open_write(ctx, name.borrow()) else {
        return;
    };
    let read_write = rw || queue::any_asks(ctx, key, |ask| ask != Ask::Lock);
    if read_write && lock.exists() {
        serve(ctx, &lock);
    }
    match next(lock.exists(), lock.deadline_ms()) {
        Next::HandOn => {
            serve(ctx, &lock);
        }
        Next::LookAfter(deadline) => aim_timer(ctx, ctx.selected_db(), key, Aim::After(deadline)),
        Next::Nothing => {}
    }
}

/// What the timer does for a lock it looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    /// It is free: hand it to the queue.
    HandOn,
    /// Held: look again just after this deadline.
    LookAfter(i64),
    /// Held without expiry: only a release or a delete frees it.
    Nothing,
}

fn next(exists: bool, deadline: Option<i64>) -> Next {
    match (exists, deadline) {
        (false, _) => Next::HandOn,
        (true, Some(deadline)) => Next::LookAfter(deadline),
        (true, None) => Next::Nothing,
    }
}

/// Blocks the calling client until it is granted `lock` (`wants.ask`: the
/// lock, or a read or write hold) or its timeout passes.
pub fn wait(ctx: Ctx, lock: &LockKey, wants: Wants) {
    let kind: KindRef = match wants.ask {
        Ask::Lock => &LOCK,
        _ => &RWLOCK,
    };
    let key = lock.name().as_bytes();
    wait_in_queue(ctx, key, kind, wants);
    if let Some(deadline) = lock.deadline_ms() {
        aim_timer(ctx, ctx.selected_db(), key, Aim::After(deadline));
    }
}

/// A command granted `lock` to its caller, who asked for `spec`: the reply
/// waits for the replicas (see `replica_sync.rs`). The caller is blocked
/// without a Redis timeout: the sync timer answers it by its deadline.
pub fn await_replicas(ctx: Ctx, lock: &LockKey, owner: &[u8], token: Option<i64>, spec: SyncSpec) {
    let client = blocked::block(ctx, 0);
    hold_reply_for_replicas(ctx, client, lock, owner, token, spec);
}

/// Before a command decides on the lock: a lock freed behind the queue's
/// back (by `DEL`, expiry..., before the timer ran) goes to the queue
/// first. Returns whether clients still queue for it (every kind's
/// `settle` answers this).
#[inline]
pub fn settle(ctx: Ctx, lock: &LockKey) -> Result<bool, Refusal> {
    if waiting_clients() == 0 {
        return Ok(false); // the usual case: no call into Redis at all
    }
    let key = lock.name().as_bytes();
    if !has_waiters(ctx, key) {
        return Ok(false);
    }
    if !lock.exists() {
        serve(ctx, lock);
    }
    Ok(has_waiters(ctx, key))
}

/// [`settle`] for a read-write lock: its queue is served as far as the
/// policy allows, also while it is held (it may have been left to readers
/// behind the queue's back, or the head just left), so that a newcomer
/// queues behind whoever still waits.
pub fn settle_rw(ctx: Ctx, lock: &LockKey) -> Result<bool, Refusal> {
    if waiting_clients() == 0 {
        return Ok(false);
    }
    let key = lock.name().as_bytes();
    if !has_waiters(ctx, key) {
        return Ok(false);
    }
    serve(ctx, lock);
    Ok(has_waiters(ctx, key))
}

/// The plain lock's decisions are written to its hash.
impl<R> Target<LockDecision<R, RStr<'_>>> for LockKey<'_> {
    fn name(&self) -> RStr<'_> {
        LockKey::name(self)
    }

    fn apply(&self, decision: &LockDecision<R, RStr>) {
        LockKey::apply(self, decision.write);
    }

    fn aim(&self, decision: &LockDecision<R, RStr>) -> Aim {
        decision.write.deadline().map_or(Aim::Keep, Aim::After)
    }

    fn serve(&self, ctx: Ctx, _: &LockDecision<R, RStr>) -> bool {
        serve(ctx, self)
    }

    fn publish(&self, ctx: Ctx, _: &LockDecision<R, RStr>) {
        events::publish_unlock(ctx, LockKey::name(self));
    }
}

/// A read-write lock as one caller changes it: its decisions' effects are
/// the caller's (its fields, its read holds).
pub struct RwCaller<'k, 'a> {
    pub lock: &'k LockKey<'a>,
    pub owner: RStr<'a>,
}

impl<R> Target<RwDecision<R>> for RwCaller<'_, '_> {
    fn name(&self) -> RStr<'_> {
        self.lock.name()
    }

    fn apply(&self, decision: &RwDecision<R>) {
        RwLockKey::of(self.lock).apply(self.owner, &decision.effects);
    }

    /// The last deadline its effects give the hash.
    fn aim(&self, decision: &RwDecision<R>) -> Aim {
        let deadline = decision.effects.iter().rev().find_map(|e| match e {
            Effect::ExpireAt(at) => Some(*at),
            _ => None,
        });
        deadline.map_or(Aim::Keep, Aim::After)
    }

    fn serve(&self, ctx: Ctx, _: &RwDecision<R>) -> bool {
        serve(ctx, self.lock)
    }

    fn publish(&self, ctx: Ctx, decision: &RwDecision<R>) {
        let after_write = decision.unlock_message() == Some(Mode::Write);
        events::publish_rw_unlock(ctx, self.lock.name(), after_write);
    }
}

/// Serves `lock`'s queue from its head, as far as the grant policy allows
/// (`grant_policy.rs`): a free lock to its first waiter; for a read-write
/// lock, the run of readers at the head (none while a writer holds) or one
/// writer when nobody holds. True if anyone was granted.
///
/// A free lock needs no look at its holders, so a plain lock's hand-off
/// runs no read-write code. A waiter that cannot be granted after all (its
/// token counter is broken, say) hears why, and the pass goes on.
fn serve(ctx: Ctx, lock: &LockKey) -> bool {
    let key = lock.name().as_bytes();
    let mut granted = false;
    loop {
        let holders = match lock.exists() {
            true => {
                let (readers, writer) = RwLockKey::of(lock).holders();
                RwHolders { readers, writer }
            }
            false => RwHolders::default(),
        };
        let run = take_run::<ReadWrite>(ctx, key, holders, |w| w.ask.mode());
        if run.is_empty() {
            return granted;
        }
        let mut refused = 0;
        for waiter in run {
            match grant(ctx, lock, waiter) {
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
/// it. False when it was refused instead.
fn grant(ctx: Ctx, lock: &LockKey, waiter: Waiter) -> bool {
    let counter = counter_key::wanted_counter(lock.name(), waiter.token);
    let next_token = counter
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|counter| NextToken::prepare_if(ctx, counter.as_ref()));
    let next_token = match next_token {
        Ok(next) => next,
        Err(e) => {
            queue::refused(waiter.client, e);
            return false;
        }
    };
    let now = ctx.now_ms();
    let expire_at = now.saturating_add(waiter.lease_ms);
    let owner = OwnedStr::new(&waiter.owner);
    match waiter.ask {
        Ask::Lock => {
            carry_out(ctx, lock, lock::hand_off(owner.borrow(), expire_at));
        }
        Ask::Rw(mode) => {
            let decision = RwLockKey::of(lock).view(owner.borrow()).and_then(|view| {
                rwlock::hand_off(mode, view, now, waiter.lease_ms).map_err(|e| e.refusal())
            });
            match decision {
                // The pass admitted it, so the state machine grants it; were
                // they ever to disagree, the waiter hears an error, never a
                // grant that was not made.
                Ok(decision) if matches!(decision.reply, RwAcquired::Busy(_)) => {
                    ctx.log_warning("lock module: a read-write waiter admitted but not grantable");
                    queue::refused(waiter.client, errors::INTERNAL);
                    return false;
                }
                Ok(decision) => {
                    let caller = RwCaller {
                        lock,
                        owner: owner.borrow(),
                    };
                    carry_out(ctx, &caller, decision);
                }
                Err(e) => {
                    queue::refused(waiter.client, e);
                    return false;
                }
            }
        }
        // Another kind's waiter in a lock's queue (the key changed type
        // while it waited): it can never be served here.
        _ => {
            queue::refused(waiter.client, errors::WRONGTYPE);
            return false;
        }
    }
    let token = next_token.map(|next| next.issue(expire_at));
    let key = lock.name().as_bytes();
    match waiter.sync {
        Some(spec) => {
            queue::granted(ctx, key, &waiter, None);
            hold_reply_for_replicas(ctx, waiter.client, lock, &waiter.owner, token, spec);
        }
        None => queue::granted(ctx, key, &waiter, Some(Wake::Granted { token })),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_lock_is_handed_on_and_a_held_one_waited_for() {
        assert_eq!(next(false, None), Next::HandOn);
        assert_eq!(next(false, Some(900)), Next::HandOn, "expired just now");
        assert_eq!(
            next(true, Some(5_000)),
            Next::LookAfter(5_000),
            "just after the deadline (Aim::After), when Redis counts the key expired"
        );
        assert_eq!(
            next(true, None),
            Next::Nothing,
            "without expiry, only a release or a delete frees it"
        );
    }
}
