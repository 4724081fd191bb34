//! What the queues hear from Redis: keyspace notifications (a lock deleted
//! or expired behind their back) and server events (flush, role change,
//! a replica's asynchronous load).

use super::queue::{aim_timer, queues, queues_then_stop_timers, Aim};
use super::synced;
use crate::ffi::blocking::{self, Wake};
use crate::ffi::context::NotifyClass;
use crate::ffi::events::{KeyspaceListener, ServerEvent, ServerEventKind, ServerEventListener};
use crate::ffi::{Ctx, RStr};
use crate::stats;
use crate::{counter_key, semaphore_key};

/// Hears what others do to keys and to the server.
struct Listener;

impl KeyspaceListener for Listener {
    /// Generic, expired, evicted and string events on any key: a lock
    /// with waiters may have been deleted by someone else, a semaphore
    /// given permits.
    fn notified(ctx: Ctx, event: &[u8], key: RStr) {
        if queues(|q| q.is_empty()) || event.starts_with(b"lock.") {
            return; // nobody waits, nothing watched, or our own announcement
        }
        // Look at it on the next turn of the event loop (a no-op when nobody
        // waits for this key and it is not watched). A change to a
        // semaphore's leased-permit set (Redisson's scripts lease, renew and
        // release there) is a change to the semaphore.
        let db = ctx.selected_db();
        aim_timer(ctx, db, key.as_bytes(), Aim::Now);
        for semaphore in semaphore_key::semaphores_of_permits_key(key.as_bytes()) {
            aim_timer(ctx, db, semaphore, Aim::Now);
        }
    }
}

impl ServerEventListener for Listener {
    fn on_server_event(ctx: Ctx, event: ServerEvent) {
        match event {
            // FLUSHDB / FLUSHALL: every lock with waiters in the flushed db(s) is free.
            ServerEvent::Flushed { db } => {
                for (db, key) in queues(|q| q.keys(db)) {
                    aim_timer(ctx, db, &key, Aim::Now);
                }
            }
            // The server became a replica: it must not hand out locks any more.
            ServerEvent::BecameReplica => {
                counter_key::forget_node_id();
                for waiter in queues_then_stop_timers(ctx, |q| q.drain_all()) {
                    blocking::unblock(waiter.client, Some(Wake::Demoted));
                }
                // Grants not acknowledged yet: the new master's data decides.
                synced::server_demoted();
            }
            // A replica swapped in a dataset loaded on the side. A replica
            // has no waiters (it never blocks clients and drains them when
            // demoted), but should one ever be queued, its lock is looked at
            // again in the new data rather than trusted from the old.
            ServerEvent::SwappedIn => {
                stats::SWAPDB_LOADS.incr();
                for (db, key) in queues(|q| q.keys(None)) {
                    aim_timer(ctx, db, &key, Aim::Now);
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
    // Redisson script's INCRBY, a SET) may serve its waiters; ZSET: leases
    // taken, renewed or given back by someone else move its timer.
    let classes = NotifyClass::GENERIC
        .or(NotifyClass::EXPIRED)
        .or(NotifyClass::EVICTED)
        .or(NotifyClass::STRING)
        .or(NotifyClass::ZSET);
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
