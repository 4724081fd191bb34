//! What the queues hear from Redis: keyspace notifications (a lock deleted
//! or expired behind their back) and server events (flush, role change,
//! a replica's asynchronous load).

use super::synced::{syncs, UNDO};
use super::timers::look_at;
use super::{queues, queues_then_stop_timers, waiting_clients};
use crate::counter_key;
use crate::ffi::blocking::{self, Wake};
use crate::ffi::context::NotifyClass;
use crate::ffi::events::{KeyspaceListener, ServerEvent, ServerEventKind, ServerEventListener};
use crate::ffi::{Ctx, RStr};
use crate::{replica_sync, stats};

/// Hears what others do to keys and to the server.
struct Listener;

impl KeyspaceListener for Listener {
    /// Generic, expired, evicted and string events on any key: a lock
    /// with waiters may have been deleted by someone else, a semaphore
    /// given permits.
    fn notified(ctx: Ctx, event: &[u8], key: RStr) {
        if waiting_clients() == 0 || event.starts_with(b"lock.") {
            return; // nobody waits, or our own announcement
        }
        // Look at it on the next turn of the event loop (a no-op when nobody
        // waits for this key).
        look_at(ctx, ctx.selected_db(), key.as_bytes(), ctx.now_ms());
    }
}

impl ServerEventListener for Listener {
    fn on_server_event(ctx: Ctx, event: ServerEvent) {
        match event {
            // FLUSHDB / FLUSHALL: every lock with waiters in the flushed db(s) is free.
            ServerEvent::Flushed { db } => {
                let now = ctx.now_ms();
                for (db, key) in queues(|q| q.keys(db)) {
                    look_at(ctx, db, &key, now);
                }
            }
            // The server became a replica: it must not hand out locks any more.
            ServerEvent::BecameReplica => {
                counter_key::forget_node_id();
                for waiter in queues_then_stop_timers(ctx, |q| q.drain_all()) {
                    blocking::unblock(waiter.client, Some(Wake::Demoted));
                }
                // Grants not acknowledged yet: the new master's data decides.
                UNDO.with(|undo| undo.borrow_mut().clear());
                for grant in syncs(|t| t.drain_all()) {
                    stats::GRANTS_UNDONE.incr();
                    let message =
                        replica_sync::nosync(grant.spec, 0, "this server became a replica");
                    blocking::unblock(grant.client, Some(Wake::Refused(message)));
                }
            }
            // A replica swapped in a dataset loaded on the side. A replica
            // has no waiters (it never blocks clients and drains them when
            // demoted), but should one ever be queued, its lock is looked at
            // again in the new data rather than trusted from the old.
            ServerEvent::SwappedIn => {
                stats::SWAPDB_LOADS.incr();
                let now = ctx.now_ms();
                for (db, key) in queues(|q| q.keys(None)) {
                    look_at(ctx, db, &key, now);
                }
            }
            ServerEvent::BecameMaster => counter_key::forget_node_id(),
            ServerEvent::ConfigChanged { .. } => {}
        }
    }
}

/// Subscribes to the notifications and server events above.
pub fn subscribe(ctx: Ctx) -> Result<(), String> {
    // STRING: a semaphore's permits given back by someone else (a
    // Redisson script's INCRBY, a SET) may serve its waiters.
    let classes = NotifyClass::GENERIC
        .or(NotifyClass::EXPIRED)
        .or(NotifyClass::EVICTED)
        .or(NotifyClass::STRING);
    crate::ffi::events::subscribe_keyspace::<Listener>(ctx, classes)?;
    for kind in [
        ServerEventKind::Flush,
        ServerEventKind::RoleChange,
        ServerEventKind::AsyncLoad,
    ] {
        crate::ffi::events::subscribe_server_event::<Listener>(ctx, kind)?;
    }
    Ok(())
}
