//! Blocked clients: how a client starts waiting, and what it hears when it
//! is granted, times out, disconnects, or the server is demoted. One
//! handler serves every blocked client of the module, whatever it waits
//! for: a waiter in a queue, or a grant waiting for replicas.
//!
//! Every blocked client is unblocked exactly once by us (grant, timeout,
//! disconnect or demotion), which is what frees Redis's handle for it.

use super::queue::{self, aim_timer, Aim, KindRef, Waiter, Wants};
use super::synced;
use crate::ffi::blocking::{self, BlockedClient, WaitHandler, Wake};
use crate::ffi::Ctx;
use crate::{errors, replica_sync, replies, stats};

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
            Wake::Demoted => ctx.reply_error(errors::WAIT_ABORTED_DEMOTED.text()),
            Wake::Refused(refusal) => ctx.reply_error(refusal.text()),
        }
    }

    /// The WAIT timeout passed: leave the queue, and the kind replies as
    /// its command does when it cannot have what it asks for.
    fn timed_out(ctx: Ctx, client: BlockedClient, woken: Option<&Wake>) {
        if let Some(grant) = synced::take_grant(client) {
            // Granted, but the WAIT timeout came before the replicas did.
            let refusal = replica_sync::nosync(grant.spec, 0, "the WAIT timeout came first");
            synced::undo(ctx, grant);
            ctx.reply_error(refusal.text());
            blocking::unblock(client, None);
            return;
        }
        let Some((key, waiter)) = queue::queues_then_stop_timers(ctx, |q| q.remove_client(client))
        else {
            // Woken just before the timeout fired (granted, say): answer that.
            if let Some(wake) = woken {
                Self::reply(ctx, wake);
            }
            return;
        };
        stats::WAITS_TIMED_OUT.incr();
        queue::wait_ended(ctx, &key, &waiter, false);
        left(ctx, &key, &waiter);
        waiter.kind.timed_out(ctx, &key, &waiter);
        blocking::unblock(client, None);
    }

    /// The waiting client went away (QUIT, CLIENT KILL, network): leave the
    /// queue; a grant it was still to be told about is undone.
    fn disconnected(ctx: Ctx, client: BlockedClient) {
        if let Some(grant) = synced::take_grant(client) {
            synced::undo_soon(ctx, grant);
            blocking::unblock(client, None);
        } else if let Some((key, waiter)) =
            queue::queues_then_stop_timers(ctx, |q| q.remove_client(client))
        {
            left(ctx, &key, &waiter);
            blocking::unblock(client, None);
        }
    }
}

/// `waiter` left its queue: when that may let those behind it be served,
/// the queue's timer looks at the object at once.
fn left(ctx: Ctx, key: &[u8], waiter: &Waiter) {
    if waiter.kind.serves_when_one_leaves() {
        aim_timer(ctx, ctx.selected_db(), key, Aim::Now);
    }
}
