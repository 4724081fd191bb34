//! The one carry-out: how every decision of every kind is carried out, by
//! a command or by the queue handing something on.
//!
//! The steps and their order are the same for every kind; what differs is
//! data on the decision (`decision.rs`: what it counts, whether it serves
//! the queue, whether it publishes always or only when nobody was served)
//! and the kind's own keys ([`Target`]). Keeping one skeleton is what
//! keeps the kinds alike: a write is always replicated before anyone hears
//! of it, the timer is always aimed at a new deadline, a waiter is always
//! served before a message invites the world to race for what it got.

use super::queue::{self, aim_timer, Aim};
use crate::decision::{Decision, Publish};
use crate::ffi::{Ctx, RStr};
use crate::{events, resets, timings};

/// What a decision is carried out on: one kind's keys, open for the
/// change. Each kind's room implements it for its decision type.
pub trait Target<D: Decision> {
    /// The object's key: its queue's, its notifications'.
    fn name(&self) -> RStr<'_>;

    /// Writes `decision` to the keys and replicates every effect, with
    /// absolute values, so replicas and the AOF never re-run a decision.
    fn apply(&self, decision: &D);

    /// Where the queue's timer goes after it (read once it is applied).
    fn aim(&self, decision: &D) -> Aim;

    /// Serves the object's queue from its head, as far as the kind's grant
    /// policy allows. Whether anyone was granted.
    fn serve(&self, ctx: Ctx, decision: &D) -> bool;

    /// Publishes the kind's message on Redisson's channel, from the state
    /// as it is now.
    fn publish(&self, ctx: Ctx, decision: &D);
}

/// Carries out `decision` on `target`, the one way every command and every
/// hand-off does it:
/// 1. apply its writes to the keys and replicate them;
/// 2. aim the queue's timer at a deadline it set (or stop watching);
/// 3. count it (`INFO lock`), and time the holds it starts or ends;
/// 4. emit its keyspace notification;
/// 5. when it freed something, serve the queue;
/// 6. publish the kind's message, always or only when nobody was served.
///
/// Returns the decision's reply, for the caller to answer.
pub fn carry_out<D: Decision, T: Target<D>>(ctx: Ctx, target: &T, decision: D) -> D::Reply {
    target.apply(&decision);
    let name = target.name();
    match target.aim(&decision) {
        Aim::Keep => {}
        // Nobody waits anywhere and nothing is watched (the usual case):
        // no call into Redis for the key's name or database at all.
        Aim::After(_) if queue::nothing_waits() => {}
        aim => aim_timer(ctx, ctx.selected_db(), name.as_bytes(), aim),
    }
    let tally = decision.tally();
    tally.count();
    if let Some(event) = decision.event() {
        if timings::lock_event(
            ctx.selected_db(),
            name.as_bytes(),
            !event.frees_lock(),
            tally,
        ) {
            resets::mark_soon(ctx);
        }
        events::notify(ctx, name, event);
    }
    let served = decision.serves() && target.serve(ctx, &decision);
    let publish = match decision.publishes() {
        Publish::Never => false,
        Publish::Always => true,
        Publish::UnlessServed => !served,
    };
    if publish {
        target.publish(ctx, &decision);
    }
    decision.into_reply()
}
