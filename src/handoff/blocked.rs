//! Blocked clients: what a waiter hears when it is granted, times out,
//! disconnects, or the server is demoted; and a grant waiting for replicas
//! whose client times out or leaves.

use super::queues_then_stop_timers;
use super::synced::{self, syncs};
use super::timers::look_at;
use crate::errors;
use crate::ffi::blocking::{self, BlockedClient, WaitHandler, Wake};
use crate::ffi::{Ctx, OwnedStr};
use crate::grant_policy::Ask;
use crate::lock_key::LockKey;
use crate::wait_queue::Waiter;
use crate::{replica_sync, replies, stats};

/// What happens to a blocked waiter.
pub(super) struct Waiting;

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

    /// The WAIT timeout passed: leave the queue and reply as the command
    /// replies when it cannot have what it asks for: for a lock, the
    /// holder's remaining lease (with `TOKEN`, as the pair `[ttl, -1]`);
    /// for permits `0` (leased: nil); for a latch `0`.
    fn timed_out(ctx: Ctx, client: BlockedClient, woken: Option<&Wake>) {
        if let Some(grant) = syncs(|t| t.remove_client(client)) {
            // Granted, but the WAIT timeout came before the replicas did.
            let refusal = replica_sync::nosync(grant.spec, 0, "the WAIT timeout came first");
            stats::GRANTS_UNDONE.incr();
            synced::undo(ctx, grant);
            ctx.reply_error(refusal.text());
            blocking::unblock(client, None);
            return;
        }
        let Some((key, waiter)) = queues_then_stop_timers(ctx, |q| q.remove_client(client)) else {
            // Woken just before the timeout fired (granted, say): answer that.
            if let Some(wake) = woken {
                Self::reply(ctx, wake);
            }
            return;
        };
        stats::WAITS_TIMED_OUT.incr();
        head_left(ctx, &key, &waiter);
        match waiter.ask {
            Ask::Permits { leased: true, .. } => ctx.reply_null(),
            Ask::Permits { leased: false, .. } | Ask::Latch => ctx.reply_integer(0),
            Ask::Lock | Ask::Rw(_) => {
                let key = OwnedStr::new(&key);
                let ttl = LockKey::open_read(ctx, key.borrow()).map_or(-2, |lock| lock.ttl_ms());
                replies::busy(ctx, ttl, waiter.token);
            }
        }
        blocking::unblock(client, None);
    }

    /// The waiting client went away (QUIT, CLIENT KILL, network): leave the
    /// queue; a grant it was still to be told about is undone.
    fn disconnected(ctx: Ctx, client: BlockedClient) {
        if let Some(grant) = syncs(|t| t.remove_client(client)) {
            stats::GRANTS_UNDONE.incr();
            synced::undo_soon(ctx, grant);
            blocking::unblock(client, None);
        } else if let Some((key, waiter)) =
            queues_then_stop_timers(ctx, |q| q.remove_client(client))
        {
            head_left(ctx, &key, &waiter);
            blocking::unblock(client, None);
        }
    }
}

/// A read-write lock's or a semaphore's waiter left its queue: those behind
/// it may be grantable now (readers behind a writer that gave up, a small
/// request behind a large one), so the queue's timer looks at the object at
/// once. (A lock's waiter leaving changes nothing for the others: the lock
/// is still held.)
fn head_left(ctx: Ctx, key: &[u8], waiter: &Waiter<BlockedClient>) {
    if waiter.ask != Ask::Lock {
        look_at(ctx, ctx.selected_db(), key, ctx.now_ms());
    }
}
