//! What the queues hear from Redis's server events: a flush, a role change,
//! a replica's asynchronous load. Keyspace events are heard by the queue
//! room, and only while something needs them (`hearing.rs`).

use super::queue::{aim_timer, queues, queues_then_stop_timers, Aim};
use super::synced;
use crate::counter_key;
use crate::ffi::blocking::{self, Wake};
use crate::ffi::events::{self, ServerEvent, ServerEventKind, ServerEventListener};
use crate::ffi::Ctx;
use crate::stats;

/// Hears what the server does to every key at once.
struct Listener;

impl ServerEventListener for Listener {
    fn on_server_event(ctx: Ctx, event: ServerEvent) {
        match event {
            // FLUSHDB / FLUSHALL: every lock with waiters in the flushed db(s)
            // is free, and the places kept and grants remembered there go
            // with the data.
            ServerEvent::Flushed { db } => {
                let dropped = queues_then_stop_timers(ctx, |q| q.forget_absent(db));
                stats::PLACES_DROPPED.add(dropped as u64);
                for (db, key) in queues(|q| q.keys(db)) {
                    aim_timer(ctx, db, &key, Aim::Now);
                }
            }
            // The server became a replica: it must not hand out locks any more.
            ServerEvent::BecameReplica => {
                counter_key::forget_node_id();
                // Kept places are this master's memory: a replica has none.
                let (kept, _) = queues(|q| q.absent_counts());
                stats::PLACES_DROPPED.add(kept as u64);
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

/// Subscribes to the server events above. Keyspace events are subscribed
/// to later, and only while something needs them (`hearing.rs`).
pub fn subscribe(ctx: Ctx) -> Result<(), String> {
    for kind in [
        ServerEventKind::Flush,
        ServerEventKind::RoleChange,
        ServerEventKind::AsyncLoad,
    ] {
        events::subscribe_server_event::<Listener>(ctx, kind)?;
    }
    Ok(())
}
