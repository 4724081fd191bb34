//! Server-side waiting and the fair hand-off: what happens when a lock frees.
//!
//! `LOCK.ACQUIRE ... WAIT` blocks the client (`RedisModule_BlockClient`) in the
//! key's FIFO queue (`wait_queue.rs`). Whenever the lock frees, the first
//! waiter is granted it **in that same event**: the hash and lease are written
//! and replicated as effects, then the waiter is unblocked with reply nil. No
//! other client can slip in between, so waiting is fair and nobody barges.
//!
//! How each way a lock can free reaches [`grant_next`]:
//! * `LOCK.RELEASE` (last hold) and `LOCK.FORCE`: directly, in the command.
//! * Lease expiry: the queue's timer, due just after the lock's deadline,
//!   opens the key (which makes Redis expire it) and hands it on. Redis's own
//!   active expiry can notice 100+ ms late; the timer makes it a few ms.
//!   Every way a deadline is set re-aims the timer ([`lease_changed`]): a
//!   re-entry, renewal or release with a shorter lease, a `PEXPIRE` by anyone.
//! * `DEL`/`UNLINK`/`HDEL` of the last field/`RENAME`/`MOVE`, eviction, expiry
//!   noticed by Redis, `FLUSHDB`/`FLUSHALL`: keyspace notifications and the
//!   flush server event set the queue's timer to "now". Writing keys inside a
//!   notification callback is unsafe on Redis 7.0, hence the timer. Until it
//!   runs, any `LOCK.ACQUIRE` of that key first hands the free lock to the
//!   queue ([`settle`]), so the gap cannot be used to barge.
//!
//! Each queue has **at most one timer**, stopped as soon as its last waiter
//! leaves (see `wait_queue.rs`), so nothing piles up and `MODULE UNLOAD`
//! works as soon as nobody waits.
//!
//! **Nothing is written while writes are paused** (`CLIENT PAUSE`, `FAILOVER`,
//! `SHUTDOWN` waiting for replicas, `CLUSTER FAILOVER`). Redis promises
//! replicas that no write happens then, and it holds expired keys back, so a
//! write would either be lost by a failover after the waiter was told "yours"
//! (two holders) or abort the server. A timer that finds writes paused looks
//! again every [`PAUSE_POLL_MS`]; when the pause ends the hand-offs happen,
//! in FIFO order. Commands cannot barge meanwhile: Redis holds back every
//! write command during the pause, and afterwards `LOCK.ACQUIRE` settles the
//! queue first.
//!
//! Waiters that time out or disconnect (also `CLIENT KILL`) leave the queue at
//! once. Where blocking is not allowed (MULTI, Lua, a replica) WAIT acts as a
//! plain acquire; when the server becomes a replica, waiters get an error.
//!
//! Every blocked client is unblocked exactly once by us (grant, timeout,
//! disconnect or demotion), which is what frees Redis's handle for it.

use std::cell::RefCell;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::events;
use crate::ffi::{api, bytes, raw, Ctx, RStr};
use crate::lock::{self, Write};
use crate::lock_key::LockKey;
use crate::stats;
use crate::wait_queue::{QueueTimer, TimerPlan, WaitQueues, Waiter, WaiterInfo};

thread_local! {
    // Redis calls commands, callbacks, timers and notifications on its main
    // thread only. Borrows are never held across a call into Redis, since a
    // call (opening a key) can fire a notification that comes back here.
    static QUEUES: RefCell<WaitQueues> = RefCell::new(WaitQueues::default());
}

fn queues<T>(f: impl FnOnce(&mut WaitQueues) -> T) -> T {
    QUEUES.with(|q| f(&mut q.borrow_mut()))
}

/// Like [`queues`], for changes that may drop a queue: then stops the
/// dropped queues' timers, so none outlives its waiters.
fn queues_then_stop_timers<T>(ctx: &Ctx, f: impl FnOnce(&mut WaitQueues) -> T) -> T {
    let (result, orphaned) = queues(|q| {
        let result = f(q);
        (result, q.take_orphaned_timers())
    });
    for id in orphaned {
        stop_timer(ctx, id);
    }
    result
}

/// Privdata passed to `UnblockClient`: why the waiter was woken.
const GRANTED: *mut c_void = 1 as *mut c_void;
const DEMOTED: *mut c_void = 2 as *mut c_void;

/// Number of clients waiting, all locks together (`INFO lock`).
pub fn waiting_clients() -> usize {
    queues(|q| q.total())
}

/// Number of live hand-off timers (`INFO lock`): at most one per waited-for lock.
pub fn live_timers() -> usize {
    queues(|q| q.live_timers())
}

pub fn selected_db(ctx: &Ctx) -> i32 {
    unsafe { api!(RedisModule_GetSelectedDb)(ctx.0) }
}

/// The waiters of `key` in queue order, for `LOCK.INFO`.
pub fn snapshot(ctx: &Ctx, key: RStr) -> Vec<WaiterInfo> {
    let db = selected_db(ctx);
    let now = ctx.now_ms();
    queues(|q| q.snapshot(db, bytes(key), now))
}

/// Whether this call may block its client: not in MULTI, Lua, or anything else
/// that denies blocking, and only on a master.
pub fn can_block(ctx: &Ctx) -> bool {
    let flags = ctx.flags() as u32;
    let denied = raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING
        | raw::REDISMODULE_CTX_FLAGS_MULTI
        | raw::REDISMODULE_CTX_FLAGS_LUA
        | raw::REDISMODULE_CTX_FLAGS_SLAVE;
    flags & denied == 0
}

/// Blocks the calling client until it is granted `lock` or `timeout_ms` passes.
pub fn wait(ctx: &Ctx, lock: &LockKey, owner: &[u8], lease_ms: i64, timeout_ms: i64) {
    let bc = unsafe {
        api!(RedisModule_BlockClient)(ctx.0, Some(on_reply), Some(on_timeout), None, timeout_ms)
    };
    unsafe { api!(RedisModule_SetDisconnectCallback)(bc, Some(on_disconnect)) };
    let db = selected_db(ctx);
    let key = bytes(lock.name());
    let waiter = Waiter {
        client: bc as usize,
        owner: owner.to_vec(),
        lease_ms,
        since_ms: ctx.now_ms(),
        timeout_ms,
    };
    queues(|q| q.push(db, key, waiter));
    stats::WAITS_STARTED.incr();
    if let Some(deadline) = lock.deadline_ms() {
        look_at(ctx, db, key, after(deadline));
    }
}

/// A command just wrote `write` to `lock`: if it set a deadline and clients
/// wait for the lock, make sure the queue's timer is due by then. (A lease
/// made shorter by re-entry, renewal or release must still be handed on
/// when it ends, not when Redis's background expiry gets to it.)
pub fn lease_changed(ctx: &Ctx, lock: &LockKey, write: Write) {
    let deadline = match write {
        Write::SetCount {
            expire_at: Some(at),
            ..
        }
        | Write::ExpireAt(at) => at,
        _ => return,
    };
    if waiting_clients() == 0 {
        return;
    }
    look_at(ctx, selected_db(ctx), bytes(lock.name()), after(deadline));
}

/// The first moment a lock with `deadline` counts as expired: Redis expires
/// a key once now > deadline.
fn after(deadline: i64) -> i64 {
    deadline.saturating_add(1)
}

/// Before deciding on `lock`: if it is free but clients queue for it (it was
/// freed by DEL, expiry... and the hand-off timer has not run yet), hand it to
/// them first. Returns whether it did.
pub fn settle(ctx: &Ctx, lock: &LockKey) -> bool {
    // Nobody waits anywhere (the usual case): no call into Redis at all.
    if waiting_clients() == 0 || lock.exists() {
        return false;
    }
    let db = selected_db(ctx);
    if !queues(|q| q.has_waiters(db, bytes(lock.name()))) {
        return false;
    }
    grant_next(ctx, lock, db)
}

/// A lock was just left free by a command: grant it to the first waiter, or,
/// when nobody waits, publish the unlock message.
pub fn grant_or_announce(ctx: &Ctx, lock: &LockKey) {
    if !grant_next(ctx, lock, selected_db(ctx)) {
        events::publish_unlock(ctx, lock.name());
    }
}

/// Grants the free `lock` to the first waiter of its queue. False if none.
fn grant_next(ctx: &Ctx, lock: &LockKey, db: i32) -> bool {
    let key = bytes(lock.name());
    let Some(waiter) = queues_then_stop_timers(ctx, |q| q.pop_next(db, key)) else {
        return false;
    };
    let expire_at = ctx.now_ms().saturating_add(waiter.lease_ms);
    let decision = lock::hand_off(expire_at);
    let owner = ctx.create_string(&waiter.owner);
    lock.apply(owner, decision.write);
    ctx.free_string(owner);
    if let Some(event) = decision.event {
        events::notify(ctx, lock.name(), event);
    }
    unsafe {
        api!(RedisModule_UnblockClient)(
            waiter.client as *mut raw::RedisModuleBlockedClient,
            GRANTED,
        )
    };
    stats::ACQUIRED.incr();
    stats::HANDOFFS.incr();
    stats::WAITS_GRANTED.incr();
    look_at(ctx, db, key, after(expire_at));
    true
}

// ---- blocked-client callbacks -------------------------------------------

/// Runs a callback body, logging instead of unwinding into Redis on a panic.
fn guarded(ctx: *mut raw::RedisModuleCtx, what: &str, body: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(body)).is_err() {
        Ctx(ctx).log_warning(&format!("lock module: panic in {what}; ignored"));
    }
}

/// The waiter was woken by us: granted (reply nil) or demoted (error).
extern "C" fn on_reply(ctx: *mut raw::RedisModuleCtx, _argv: *mut RStr, _argc: c_int) -> c_int {
    guarded(ctx, "a wait reply", || {
        let ctx = Ctx(ctx);
        let why = unsafe { api!(RedisModule_GetBlockedClientPrivateData)(ctx.0) };
        if why == DEMOTED {
            ctx.reply_error("ERR lock wait aborted: this server became a replica");
        } else {
            ctx.reply_null();
        }
    });
    raw::REDISMODULE_OK as c_int
}

/// The WAIT timeout passed: leave the queue, reply the holder's remaining lease.
extern "C" fn on_timeout(ctx: *mut raw::RedisModuleCtx, argv: *mut RStr, argc: c_int) -> c_int {
    guarded(ctx, "a wait timeout", || {
        let ctx = Ctx(ctx);
        let bc = unsafe { api!(RedisModule_GetBlockedClientHandle)(ctx.0) };
        if queues_then_stop_timers(&ctx, |q| q.remove_client(bc as usize)).is_none() {
            // Granted just before the timeout fired: the lock is its.
            ctx.reply_null();
            return;
        }
        stats::WAITS_TIMED_OUT.incr();
        let ttl = if argc >= 2 && !argv.is_null() {
            let key = unsafe { *argv.add(1) };
            LockKey::open_read(&ctx, key)
                .map(|lock| lock.ttl_ms())
                .unwrap_or(-2)
        } else {
            -2
        };
        ctx.reply_integer(ttl);
        unsafe { api!(RedisModule_UnblockClient)(bc, std::ptr::null_mut()) };
    });
    raw::REDISMODULE_OK as c_int
}

/// The waiting client went away (QUIT, CLIENT KILL, network): leave the queue.
extern "C" fn on_disconnect(ctx: *mut raw::RedisModuleCtx, bc: *mut raw::RedisModuleBlockedClient) {
    guarded(ctx, "a waiter disconnect", || {
        if queues_then_stop_timers(&Ctx(ctx), |q| q.remove_client(bc as usize)).is_some() {
            unsafe { api!(RedisModule_UnblockClient)(bc, std::ptr::null_mut()) };
        }
    });
}

// ---- timers ---------------------------------------------------------------

/// How often a lock that must be handed on is looked at again while writes
/// are paused: the hand-off follows the end of a pause by at most this.
pub const PAUSE_POLL_MS: i64 = 5;

/// The longest a timer is set for. A lease may end centuries from now, and
/// Redis computes a timer's due time as `now_us + period_ms * 1000`, which
/// overflows (undefined behaviour, a due time anywhere) for periods past
/// ~292 000 years. A timer that fires before the deadline finds the lock held
/// and sets the next one, so long leases just take a few hops.
const MAX_TIMER_DELAY_MS: i64 = 3_600_000;

/// What a timer carries: which queue's lock to look at, and its sequence
/// number there (see [`QueueTimer`]).
struct TimerJob {
    db: i32,
    key: Vec<u8>,
    seq: u64,
}

thread_local! {
    static NEXT_TIMER_SEQ: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Makes sure the lock of `key` is looked at by `at` (unix ms), by the
/// queue's one timer; nothing if nobody waits for it.
fn look_at(ctx: &Ctx, db: i32, key: &[u8], at: i64) {
    let stop = match queues(|q| q.plan_timer(db, key, at)) {
        TimerPlan::NoQueue | TimerPlan::Keep => return,
        TimerPlan::Start { stop } => stop,
    };
    if let Some(id) = stop {
        stop_timer(ctx, id);
    }
    let seq = NEXT_TIMER_SEQ.with(|next| {
        next.set(next.get().wrapping_add(1));
        next.get()
    });
    let job = Box::new(TimerJob {
        db,
        key: key.to_vec(),
        seq,
    });
    let delay_ms = at.saturating_sub(ctx.now_ms()).clamp(0, MAX_TIMER_DELAY_MS);
    let id = ctx.start_timer(delay_ms, on_timer, Box::into_raw(job).cast());
    queues_then_stop_timers(ctx, |q| {
        q.timer_started(db, key, QueueTimer { id, seq, due: at })
    });
}

/// Stops a timer that has not fired and frees what it carried.
fn stop_timer(ctx: &Ctx, id: u64) {
    if let Some(data) = ctx.stop_timer(id) {
        // SAFETY: every timer is started by `look_at` with a boxed TimerJob,
        // and a stopped timer never fires, so the box is freed exactly once.
        drop(unsafe { Box::from_raw(data.cast::<TimerJob>()) });
    }
}

extern "C" fn on_timer(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    // SAFETY: `data` is the box made by `look_at`; a timer fires once, and a
    // stopped one never.
    let job = unsafe { Box::from_raw(data.cast::<TimerJob>()) };
    guarded(ctx, "a lock timer", || {
        let ctx = Ctx(ctx);
        if queues(|q| q.timer_fired(job.db, &job.key, job.seq)) {
            settle_key(&ctx, job.db, &job.key);
        }
    });
}

/// Outside a command: opens `key` in `db` (expiring it if due), hands it to
/// its queue if it is free, and otherwise sets the queue's timer for its
/// deadline. While writes are paused it opens nothing and looks again soon.
fn settle_key(ctx: &Ctx, db: i32, key: &[u8]) {
    if !queues(|q| q.has_waiters(db, key)) || !ctx.has_flag(raw::REDISMODULE_CTX_FLAGS_MASTER) {
        return;
    }
    if ctx.writes_paused() {
        look_at(ctx, db, key, ctx.now_ms().saturating_add(PAUSE_POLL_MS));
        return;
    }
    if unsafe { api!(RedisModule_SelectDb)(ctx.0, db) } != raw::REDISMODULE_OK as c_int {
        return;
    }
    let name = ctx.create_string(key);
    if let Ok(lock) = LockKey::open_write(ctx, name) {
        if !settle(ctx, &lock) {
            if let Some(deadline) = lock.deadline_ms() {
                look_at(ctx, db, key, after(deadline));
            }
        }
    }
    ctx.free_string(name);
}

// ---- notifications and server events ----------------------------------------

/// Keyspace notifications (generic, expired, evicted) for any key: a lock with
/// waiters may have been deleted by someone else.
pub extern "C" fn on_keyspace_event(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    event: *const c_char,
    key: RStr,
) -> c_int {
    guarded(ctx, "a keyspace notification", || {
        if waiting_clients() == 0 {
            return;
        }
        let event = unsafe { std::ffi::CStr::from_ptr(event) }.to_bytes();
        if event.starts_with(b"lock.") {
            return; // our own announcements
        }
        let ctx = Ctx(ctx);
        let db = selected_db(&ctx);
        // Someone else changed the key: look at it on the next turn of the
        // event loop (a no-op when nobody waits for it).
        look_at(&ctx, db, bytes(key), ctx.now_ms());
    });
    raw::REDISMODULE_OK as c_int
}

/// FLUSHDB / FLUSHALL: every lock with waiters in the flushed db(s) is free.
extern "C" fn on_flush(
    ctx: *mut raw::RedisModuleCtx,
    _e: raw::RedisModuleEvent,
    sub: u64,
    data: *mut c_void,
) {
    guarded(ctx, "a flush event", || {
        if sub != raw::REDISMODULE_SUBEVENT_FLUSHDB_END || data.is_null() {
            return;
        }
        let info = unsafe { &*(data as *const raw::RedisModuleFlushInfoV1) };
        let db = (info.dbnum >= 0).then_some(info.dbnum);
        let ctx = Ctx(ctx);
        let now = ctx.now_ms();
        for (db, key) in queues(|q| q.keys(db)) {
            look_at(&ctx, db, &key, now);
        }
    });
}

/// The server became a replica: it must not hand out locks any more.
extern "C" fn on_role_change(
    ctx: *mut raw::RedisModuleCtx,
    _e: raw::RedisModuleEvent,
    sub: u64,
    _d: *mut c_void,
) {
    guarded(ctx, "a role change", || {
        if sub != raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA {
            return;
        }
        let ctx = Ctx(ctx);
        for waiter in queues_then_stop_timers(&ctx, |q| q.drain_all()) {
            unsafe {
                api!(RedisModule_UnblockClient)(
                    waiter.client as *mut raw::RedisModuleBlockedClient,
                    DEMOTED,
                )
            };
        }
    });
}

/// Subscribes to the notifications and server events above.
pub fn subscribe(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    let types = (raw::REDISMODULE_NOTIFY_GENERIC
        | raw::REDISMODULE_NOTIFY_EXPIRED
        | raw::REDISMODULE_NOTIFY_EVICTED) as c_int;
    let ok = raw::REDISMODULE_OK as c_int;
    if unsafe { api!(RedisModule_SubscribeToKeyspaceEvents)(ctx, types, Some(on_keyspace_event)) }
        != ok
    {
        return Err("could not subscribe to keyspace events".to_string());
    }
    let events: [(u64, raw::RedisModuleEventCallback); 2] = [
        (raw::REDISMODULE_EVENT_FLUSHDB, Some(on_flush)),
        (
            raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
            Some(on_role_change),
        ),
    ];
    for (id, callback) in events {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        if unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx, event, callback) } != ok {
            return Err(format!("could not subscribe to server event {id}"));
        }
    }
    Ok(())
}
