//! The latches' side of the one queue: what happens when a count-down
//! latch opens or expires.
//!
//! * `LOCK.COUNTDOWN` to zero deletes the latch, publishes `0` and answers
//!   every waiter `1`, **in that same event**.
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

use super::blocked::wait_in_queue;
use super::carry_out::{carry_out, Target};
use super::hearing;
use super::queue::{
    self, aim_timer, has_waiters, take_run, watch_of, Aim, Keep, Kind, Waiter, Wants, Watch,
};
use crate::errors::Refusal;
use crate::events;
use crate::ffi::blocking::Wake;
use crate::ffi::context::NotifyClass;
use crate::ffi::key::OpenMode;
use crate::ffi::{Ctx, OwnedStr, RStr};
use crate::grant_policy::{Ask, Opened};
use crate::latch::{self, LatchDecision, LatchWrite, NEW_COUNT_MESSAGE, ZERO_MESSAGE};
use crate::value_key::ValueKey;

/// What a waiter hears when the latch opens.
const OPENED: i64 = 1;
/// What a waiter hears when the latch expired first.
const EXPIRED: i64 = -1;

/// The latch, as its queue sees it.
struct CountDownLatch;

static LATCH: CountDownLatch = CountDownLatch;

impl Kind for CountDownLatch {
    /// Carries out what happened to the latch.
    fn due(&self, ctx: Ctx, key: &[u8]) {
        let name = OwnedStr::new(key);
        match ValueKey::open(ctx, name.borrow(), OpenMode::Write) {
            Ok(latch) => {
                let _ = settle(ctx, &latch);
            }
            // Another type now: the latch is gone (deleted, then reused).
            Err(_) => {
                let gone = Latch {
                    name: name.borrow(),
                    key: None,
                };
                carry_out(ctx, &gone, latch::gone(false));
            }
        };
    }

    /// `LOCK.AWAIT`'s `0`.
    fn not_granted(&self, _: Ctx, _: &[u8], _: &Waiter) -> Wake {
        Wake::Integer(0)
    }

    /// A latch gone says nothing of whether it opened or expired.
    fn remembers_grants(&self) -> bool {
        true
    }

    fn serves_when_one_leaves(&self) -> bool {
        true
    }

    /// The latch deleted (Redisson's `countDown` deletes it at zero), its
    /// count set, its expiry.
    fn hears(&self, _: Option<Ask>) -> NotifyClass {
        hearing::DELETED.or(NotifyClass::STRING)
    }
}

/// Where the timer goes for `latch`'s expiry, if it has one: just after
/// it, with the queue kept for it while nobody waits.
fn watch_expiry(latch: &ValueKey) -> Aim {
    match latch.deadline_ms() {
        Some(at) => {
            let watch = Watch {
                kind: &LATCH,
                deadline: Some(at),
            };
            Aim::Watch(watch, at)
        }
        None => Aim::Unwatch,
    }
}

/// Before a command decides on `latch`: a latch that expired or was
/// deleted while clients waited or it was watched is carried out first
/// (its waiters answered, `0` published). Returns whether clients still
/// queue for it.
pub fn settle(ctx: Ctx, latch: &ValueKey) -> Result<bool, Refusal> {
    let key = latch.name().as_bytes();
    let Some(watched) = watch_of(ctx, key) else {
        return Ok(false); // nobody waits, nothing watched
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
            carry_out(ctx, &Latch::of(latch), latch::gone(expired));
        }
        Ok(_) => aim_timer(ctx, ctx.selected_db(), key, watch_expiry(latch)),
        Err(_) => {} // not an integer: waiters wait (and time out)
    }
    Ok(has_waiters(ctx, key))
}

/// Blocks the calling client until `latch` opens, expires, or `timeout_ms`
/// passes, its place kept as `keep` says.
pub fn wait(ctx: Ctx, latch: &ValueKey, timeout_ms: i64, keep: Keep) {
    let wants = Wants::ownerless(Ask::Latch, 0, timeout_ms, keep);
    let key = latch.name().as_bytes();
    wait_in_queue(ctx, key, &LATCH, wants);
    aim_timer(ctx, ctx.selected_db(), key, watch_expiry(latch));
}

/// A latch as its decisions are carried out: its name, and its key while
/// it is a latch (a key reused for another type is a latch gone).
pub struct Latch<'k, 'a> {
    name: RStr<'a>,
    key: Option<&'k ValueKey<'a>>,
}

impl<'k, 'a> Latch<'k, 'a> {
    pub fn of(key: &'k ValueKey<'a>) -> Latch<'k, 'a> {
        Latch {
            name: key.name(),
            key: Some(key),
        }
    }
}

impl<R> Target<LatchDecision<R>> for Latch<'_, '_> {
    fn name(&self) -> RStr<'_> {
        self.name
    }

    fn apply(&self, decision: &LatchDecision<R>) {
        let Some(latch) = self.key else {
            return;
        };
        match decision.write {
            LatchWrite::Set { count, expire_at } => latch.set_with_expiry(count, expire_at),
            LatchWrite::Keep(count) => latch.set_keep_ttl(count),
            LatchWrite::Open => latch.delete(),
            LatchWrite::None | LatchWrite::Gone { .. } => {}
        }
    }

    /// A count set watches the latch's expiry; a latch gone is watched no
    /// more.
    fn aim(&self, decision: &LatchDecision<R>) -> Aim {
        match (decision.write, self.key) {
            (LatchWrite::Set { .. }, Some(latch)) => watch_expiry(latch),
            (LatchWrite::Open | LatchWrite::Gone { .. }, _) => Aim::Unwatch,
            _ => Aim::Keep,
        }
    }

    /// Every waiter goes, hearing whether the latch opened or expired; a
    /// waiter whose place is kept hears it when it asks again.
    fn serve(&self, ctx: Ctx, decision: &LatchDecision<R>) -> bool {
        let reply = match decision.write {
            LatchWrite::Gone { expired: true } => EXPIRED,
            _ => OPENED,
        };
        let key = self.name.as_bytes();
        let run = take_run::<Opened>(ctx, key, true, |w| w.ask.opening());
        let served = !run.is_empty();
        for waiter in run {
            queue::granted(ctx, key, &waiter, Some(Wake::Integer(reply)));
        }
        queue::answer_absent(ctx, key, &Wake::Integer(reply));
        served
    }

    fn publish(&self, ctx: Ctx, decision: &LatchDecision<R>) {
        let message = match decision.write {
            LatchWrite::Set { .. } => NEW_COUNT_MESSAGE,
            _ => ZERO_MESSAGE,
        };
        events::publish_latch(ctx, self.name, message);
    }
}
