//! What happens when a count-down latch opens or expires: the latches'
//! side of the one queue.
//!
//! * `LOCK.COUNTDOWN` to zero deletes the latch, publishes `0` and answers
//!   every waiter `1`, **in that same event** ([`Opened`]).
//! * A latch deleted behind the module's back (`DEL`, Redisson's `delete`;
//!   Redisson's `countDown` deletes it at zero too) is noticed through
//!   keyspace notifications and opens the same way, from the queue's timer.
//! * A latch set with an expiry (`LOCK.LATCHSET ... PX`) is watched: the
//!   queue's one timer is due just after its deadline, even while nobody
//!   waits. When it finds the latch gone past its deadline, it publishes
//!   `0` (a Redisson waiter then finds it open and stops waiting) and
//!   answers every waiter `-1`: expired, not opened. Redisson's latch cannot
//!   do this: "there is no way in Redis to schedule a publish".
//!
//! The expiry known is the one `LOCK.LATCHSET` gave, or that a waiter or a
//! command found on the key; an expiry set later by `PEXPIRE` behind the
//! module's back is seen as a delete (the latch opens). After a restart or
//! failover, a latch nobody touches expires without the message.

use super::{queues, queues_then_stop_timers, wait_in_queue, watch_until, Wants};
use crate::events;
use crate::ffi::blocking::{self, Wake};
use crate::ffi::key::OpenMode;
use crate::ffi::{Ctx, OwnedStr};
use crate::grant_policy::{Ask, Kind, Opened};
use crate::latch::{self, LatchDecision, LatchWrite, NEW_COUNT_MESSAGE, ZERO_MESSAGE};
use crate::stats::{self, Tally};
use crate::value_key::ValueKey;
use crate::wait_queue::Watch;

/// What a waiter hears when the latch opens.
const OPENED: i64 = 1;
/// What a waiter hears when the latch expired first.
const EXPIRED: i64 = -1;

/// Carries out a latch decision, the one way every latch command does it:
/// apply and replicate its write (`value_key.rs`), announce it, and when
/// the latch opens, answer every waiter.
pub fn carry_out_latch<R>(ctx: Ctx, latch: &ValueKey, decision: LatchDecision<R>) -> R {
    match decision.write {
        LatchWrite::None => {}
        LatchWrite::Set { count, expire_at } => {
            latch.set_with_expiry(count, expire_at);
            events::publish_latch(ctx, latch.name(), NEW_COUNT_MESSAGE);
            watch(ctx, latch);
        }
        LatchWrite::Keep(count) => latch.set_keep_ttl(count),
        LatchWrite::Open => {
            latch.delete();
            opened(ctx, latch.name().as_bytes(), OPENED);
        }
    }
    decision.reply
}

/// The latch `key` is gone: publish `0`, answer every waiter `reply`, and
/// stop watching it.
fn opened(ctx: Ctx, key: &[u8], reply: i64) {
    let tally = if reply == EXPIRED {
        Tally::LatchExpired
    } else {
        Tally::LatchOpened
    };
    tally.count();
    let name = OwnedStr::new(key);
    events::publish_latch(ctx, name.borrow(), ZERO_MESSAGE);
    let (db, now) = (ctx.selected_db(), ctx.live_now_ms());
    let waiters = queues_then_stop_timers(ctx, |q| {
        let run = q.pop_run::<Opened>(db, key, true, now, |w| w.ask.opening());
        q.unwatch(db, key);
        run
    });
    for waiter in waiters {
        stats::WAITS_GRANTED.incr();
        blocking::unblock(waiter.client, Some(Wake::Integer(reply)));
    }
}

/// Before a command decides on `latch`: a latch that expired or was
/// deleted while clients waited or it was watched is carried out first
/// (its waiters answered, `0` published).
pub fn settle(ctx: Ctx, latch: &ValueKey) {
    let (db, key) = (ctx.selected_db(), latch.name().as_bytes());
    let Some(watched) = queues(|q| q.kind(db, key).map(|_| q.watched(db, key))) else {
        return; // nobody waits, nothing watched
    };
    match latch.get(latch::parse_count) {
        Ok(count) if latch::is_open(count) => {
            // Gone at or after its deadline: expired. Redis expires a key
            // once its clock (maybe the cached one) reaches the deadline
            // (Redis 8.2 does at the deadline's own millisecond, 7.0 one
            // later); the live clock is never behind it. (A DEL in the last
            // moment before the deadline, seen only after it, also reads as
            // expired.)
            let expired = !latch.exists()
                && watched
                    .and_then(|w| w.deadline)
                    .is_some_and(|at| ctx.live_now_ms() >= at);
            opened(ctx, key, if expired { EXPIRED } else { OPENED });
        }
        Ok(_) => watch(ctx, latch),
        Err(_) => {} // not an integer: waiters wait (and time out)
    }
}

/// Blocks the calling client until `latch` opens, expires, or `timeout_ms`
/// passes.
pub fn wait(ctx: Ctx, latch: &ValueKey, timeout_ms: i64) {
    let wants = Wants::ownerless(Ask::Latch, 0, timeout_ms);
    wait_in_queue(ctx, latch.name().as_bytes(), wants);
    watch(ctx, latch);
}

/// Watches `latch`'s expiry, if it has one: the queue's timer is due just
/// after it, and the queue is kept for it while nobody waits.
fn watch(ctx: Ctx, latch: &ValueKey) {
    let (db, key) = (ctx.selected_db(), latch.name().as_bytes());
    let watch = |at| {
        let watch = Watch {
            kind: Kind::Latch,
            deadline: Some(at),
        };
        (watch, at)
    };
    watch_until(ctx, db, key, latch.deadline_ms().map(watch));
}

/// The queue's timer fired for the latch `key` of the selected database
/// (writes are not held back): carries out what happened to it.
pub(super) fn look(ctx: Ctx, key: &[u8]) {
    let name = OwnedStr::new(key);
    let opened_as_latch = match ValueKey::open(ctx, name.borrow(), OpenMode::Write) {
        Ok(latch) => {
            settle(ctx, &latch);
            true
        }
        Err(_) => false,
    };
    if !opened_as_latch {
        // Another type now: the latch is gone (deleted, then reused).
        opened(ctx, key, OPENED);
    }
}
