//! Blocked clients: how a client starts waiting, and what it hears when it
//! is granted, times out, disconnects, is cancelled (`LOCK.CANCEL`), or the
//! server is demoted. One handler serves every blocked client of the
//! module, whatever it waits for: a waiter in a queue, or a grant waiting
//! for replicas.
//!
//! A waiter that leaves by its timeout or its connection closing leaves a
//! kept place behind (`kept_places.rs`), whatever its kind; a cancel finds
//! any kind's waiter, kept place or remembered grant by identity.
//!
//! Every blocked client is unblocked exactly once by us (grant, timeout,
//! disconnect, cancel or demotion), which is what frees Redis's handle for
//! it.

use super::queue::{self, aim_timer, wake_for_deadlines, Aim, KindRef, Waiter, Wants};
use super::synced;
use crate::ffi::blocking::{self, BlockedClient, WaitHandler, Wake};
use crate::ffi::Ctx;
use crate::grant_policy::Ask;
use crate::kept_places::Answer;
use crate::wait_queue::{Cancel, Keeping, Left};
use crate::{config, errors, replica_sync, replies, stats};

/// Blocks the calling client for up to `timeout_ms` (0 = forever), with the
/// one handler below.
pub(super) fn block(ctx: Ctx, timeout_ms: i64) -> BlockedClient {
    blocking::block::<Waiting>(ctx, timeout_ms)
}

/// Blocks the calling client at the back of `key`'s queue, asking for
/// `wants` of an object of `kind`: it leaves when granted, timed out or
/// gone.
pub(super) fn wait_in_queue(ctx: Ctx, key: &[u8], kind: KindRef, wants: Wants) {
    let client = block(ctx, wants.timeout_ms);
    queue::enqueue(ctx, key, client, kind, wants);
}

/// What happens to a blocked client.
struct Waiting;

impl WaitHandler for Waiting {
    fn reply(ctx: Ctx, wake: &Wake) {
        match wake {
            Wake::Granted { token } => replies::granted(ctx, *token),
            Wake::Integer(value) => ctx.reply_integer(*value),
            Wake::Strings(values) => {
                ctx.reply_array(values.len());
                for value in values {
                    ctx.reply_bulk(value);
                }
            }
            Wake::Null => ctx.reply_null(),
            Wake::Busy { ttl, token } => replies::busy(ctx, *ttl, *token),
            Wake::Cancelled => ctx.reply_error(errors::CANCELLED.text()),
            Wake::Demoted => ctx.reply_error(errors::WAIT_ABORTED_DEMOTED.text()),
            Wake::Refused(refusal) => ctx.reply_error(refusal.text()),
        }
    }

    /// The WAIT timeout passed: leave the queue (its place kept), and the
    /// kind replies as its command does when it cannot have what it asks
    /// for.
    fn timed_out(ctx: Ctx, client: BlockedClient, woken: Option<&Wake>) {
        if let Some(grant) = synced::take_grant(client) {
            // Granted, but the WAIT timeout came before the replicas did.
            let refusal = replica_sync::nosync(grant.spec, 0, "the WAIT timeout came first");
            synced::undo(ctx, grant);
            ctx.reply_error(refusal.text());
            blocking::unblock(client, None);
            return;
        }
        let Some((db, key, waiter)) = leave(ctx, client) else {
            // Woken just before the timeout fired (granted, say): answer that.
            if let Some(wake) = woken {
                Self::reply(ctx, wake);
            }
            return;
        };
        stats::WAITS_TIMED_OUT.incr();
        let answer = waiter.kind.not_granted(ctx, &key, &waiter);
        Self::reply(ctx, &answer);
        left(ctx, db, &key, &waiter);
        blocking::unblock(client, None);
    }

    /// The waiting client went away (QUIT, CLIENT KILL, network): leave the
    /// queue (its place kept); a grant it was still to be told about is
    /// undone.
    fn disconnected(ctx: Ctx, client: BlockedClient) {
        if let Some(grant) = synced::take_grant(client) {
            synced::undo_soon(ctx, grant);
            blocking::unblock(client, None);
        } else if let Some((db, key, waiter)) = leave(ctx, client) {
            left(ctx, db, &key, &waiter);
            blocking::unblock(client, None);
        }
    }
}

/// Takes `client` out of its queue, keeping its place for its grace
/// (counted), with the database and key it waited on.
fn leave(ctx: Ctx, client: BlockedClient) -> Option<(i32, Vec<u8>, Waiter)> {
    let (now, cap) = (ctx.now_ms(), config::keep_places_max());
    let Left {
        db,
        key,
        waiter,
        keeping,
    } = queue::queues_then_stop_timers(ctx, |q| q.leave(client, now, cap))?;
    match keeping {
        Keeping::Kept => {
            stats::PLACES_KEPT.incr();
            queue::place_kept(ctx, now);
            wake_for_deadlines(ctx, db, &key);
        }
        Keeping::OverCap => stats::PLACES_OVER_CAP.incr(),
        Keeping::Nothing => {}
    }
    Some((db, key, waiter))
}

/// `waiter` left its queue ungranted: its time in the queue is counted
/// (`timings.rs`), and when that may let those behind it be served, the
/// queue's timer looks at the object at once.
fn left(ctx: Ctx, db: i32, key: &[u8], waiter: &Waiter) {
    queue::wait_ended(ctx, db, key, waiter, false);
    if waiter.kind.serves_when_one_leaves() {
        aim_timer(ctx, db, key, Aim::Now);
    }
}

/// What `LOCK.CANCEL` did ([`cancel`]).
#[derive(Debug)]
pub enum CancelReply {
    /// A waiter was answered `CANCELLED`, or a kept place dropped.
    Cancelled,
    /// The identity was granted since it last asked: with what a remembered
    /// grant asked for and answered (none for a lock, whose owner holds it).
    Granted(Option<(Ask, Answer)>),
    /// Nothing of that identity.
    Nothing,
}

/// `LOCK.CANCEL`: ends the wait of `identity` on `key` (selected database):
/// its blocked request hears `CANCELLED`; or, when it was granted since it
/// last asked (`holds`: the object says so; or a grant remembered), says
/// so; or drops its kept place. One command: a grant and a cancel never
/// both happen to one request. On a key that is not a lock's (`lock`
/// false), the identity is a waiter id, which names one acquisition: it is
/// remembered as cancelled for `lock.keep-place-ms`, so a piece of it still
/// on its way is refused rather than served after the cancel.
pub fn cancel(ctx: Ctx, key: &[u8], identity: &[u8], holds: bool, lock: bool) -> CancelReply {
    let (db, grace) = (ctx.selected_db(), config::keep_place_ms());
    let tombstone = (!lock && grace > 0).then(|| {
        (
            ctx.now_ms().saturating_add(grace),
            config::keep_places_max(),
        )
    });
    let found =
        queue::queues_then_stop_timers(ctx, |q| q.cancel(db, key, identity, holds, tombstone));
    if tombstone.is_some() {
        wake_for_deadlines(ctx, db, key);
    }
    match found {
        Cancel::Waiting(waiter) => {
            stats::WAITS_CANCELLED.incr();
            blocking::unblock(waiter.client, Some(Wake::Cancelled));
            left(ctx, db, key, &waiter);
            CancelReply::Cancelled
        }
        Cancel::Kept => {
            stats::WAITS_CANCELLED.incr();
            CancelReply::Cancelled
        }
        Cancel::Granted(grant) => {
            stats::CANCELS_AFTER_GRANT.incr();
            CancelReply::Granted(grant.map(|g| (g.ask, g.answer)))
        }
        Cancel::Nothing => CancelReply::Nothing,
    }
}

/// Answers a repeated ask of the waiter id `identity` for `ask` on `key`
/// (selected database) with the grant it already had, if remembered: true
/// when answered (the command is done, and takes nothing more).
pub fn answer_remembered(ctx: Ctx, key: &[u8], identity: Option<&[u8]>, ask: Ask) -> bool {
    let Some(wake) = identity.and_then(|id| queue::remembered(ctx, key, id, ask)) else {
        return false;
    };
    Waiting::reply(ctx, &wake);
    true
}
