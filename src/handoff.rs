//! Server-side waiting and the fair hand-off: what happens when a lock frees.
//!
//! `LOCK.ACQUIRE ... WAIT` blocks the client (`RedisModule_BlockClient`) in the
//! key's FIFO queue (`wait_queue.rs`). Whenever the lock frees, the first
//! waiter is granted it **in that same event**: the hash and lease are written
//! and replicated as effects, then the waiter is unblocked with reply nil. No
//! other client can slip in between, so waiting is fair and nobody barges.
//!
//! How each way a lock can free reaches [`grant_or_announce`]:
//! * `LOCK.RELEASE` (last hold) and `LOCK.FORCE`: directly, in the command.
//! * Lease expiry: a module timer at the lock's deadline opens the key, which
//!   makes Redis expire it, and hands it on (Redis's own active expiry can
//!   notice 100+ ms late; the timer makes it a few ms).
//! * `DEL`/`UNLINK`/`HDEL` of the last field/`RENAME`/`MOVE`, eviction, expiry
//!   noticed by Redis, `FLUSHDB`/`FLUSHALL`: keyspace notifications and the
//!   flush server event mark the key and schedule an immediate timer. Writing
//!   keys inside a notification callback is unsafe on Redis 7.0, hence the
//!   timer. Until it runs, any `LOCK.ACQUIRE` of that key first hands the free
//!   lock to the queue ([`settle`]), so the gap cannot be used to barge.
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
use crate::lock;
use crate::lock_key::LockKey;
use crate::stats;
use crate::wait_queue::{WaitQueues, Waiter, WaiterInfo};

thread_local! {
    // Redis calls commands, callbacks, timers and notifications on its main
    // thread only. Borrows are never held across a call into Redis, since a
    // call (opening a key) can fire a notification that comes back here.
    static QUEUES: RefCell<WaitQueues> = RefCell::new(WaitQueues::default());
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
}

/// Keys whose lock may have been freed behind our back, to settle soon.
#[derive(Default)]
struct Pending {
    keys: Vec<(i32, Vec<u8>)>,
    timer_armed: bool,
}

fn queues<T>(f: impl FnOnce(&mut WaitQueues) -> T) -> T {
    QUEUES.with(|q| f(&mut q.borrow_mut()))
}

/// Privdata passed to `UnblockClient`: why the waiter was woken.
const GRANTED: *mut c_void = 1 as *mut c_void;
const DEMOTED: *mut c_void = 2 as *mut c_void;

/// Number of clients waiting, all locks together (`INFO lock`).
pub fn waiting_clients() -> usize {
    queues(|q| q.total())
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
        arm_expiry_timer(ctx, db, key, deadline);
    }
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
    let Some(waiter) = queues(|q| q.pop_next(db, key)) else {
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
    if queues(|q| q.has_waiters(db, key)) {
        arm_expiry_timer(ctx, db, key, expire_at);
    }
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
        if queues(|q| q.remove_client(bc as usize)).is_none() {
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
        if queues(|q| q.remove_client(bc as usize)).is_some() {
            unsafe { api!(RedisModule_UnblockClient)(bc, std::ptr::null_mut()) };
        }
    });
}

// ---- timers ---------------------------------------------------------------

/// What a timer is for: the expiry of one lock, or settling pending keys.
enum TimerJob {
    Expiry { db: i32, key: Vec<u8>, at: i64 },
    SettlePending,
}

fn start_timer(ctx: &Ctx, delay_ms: i64, job: TimerJob) {
    let data = Box::into_raw(Box::new(job)) as *mut c_void;
    let delay_ms = delay_ms.clamp(0, MAX_TIMER_DELAY_MS);
    unsafe { api!(RedisModule_CreateTimer)(ctx.0, delay_ms, Some(on_timer), data) };
}

/// The longest a timer is set for. A lease may end centuries from now, and
/// Redis computes a timer's due time as `now_us + period_ms * 1000`, which
/// overflows (undefined behaviour, a due time anywhere) for periods past
/// ~292 000 years. A timer that fires before the deadline finds the lock held
/// and sets the next one, so long leases just take a few hops.
const MAX_TIMER_DELAY_MS: i64 = 3_600_000;

/// Makes sure a timer runs just after `deadline`, when the lock of `key` expires.
fn arm_expiry_timer(ctx: &Ctx, db: i32, key: &[u8], deadline: i64) {
    // Redis considers a key expired once now > deadline, hence + 1.
    let at = deadline.saturating_add(1);
    if queues(|q| q.want_timer(db, key, at)) {
        start_timer(
            ctx,
            at - ctx.now_ms(),
            TimerJob::Expiry {
                db,
                key: key.to_vec(),
                at,
            },
        );
    }
}

extern "C" fn on_timer(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    // SAFETY: `data` is the box made by start_timer; each timer fires once.
    let job = unsafe { Box::from_raw(data as *mut TimerJob) };
    guarded(ctx, "a lock timer", || {
        let ctx = Ctx(ctx);
        match *job {
            TimerJob::Expiry { db, key, at } => {
                queues(|q| q.timer_fired(db, &key, at));
                settle_key(&ctx, db, &key);
            }
            TimerJob::SettlePending => {
                let keys = PENDING.with(|p| {
                    let mut p = p.borrow_mut();
                    p.timer_armed = false;
                    std::mem::take(&mut p.keys)
                });
                for (db, key) in keys {
                    settle_key(&ctx, db, &key);
                }
            }
        }
    });
}

/// Outside a command: opens `key` in `db` (expiring it if due), hands it to its
/// queue if it is free, and otherwise re-arms the expiry timer.
fn settle_key(ctx: &Ctx, db: i32, key: &[u8]) {
    if !queues(|q| q.has_waiters(db, key)) || !ctx.has_flag(raw::REDISMODULE_CTX_FLAGS_MASTER) {
        return;
    }
    if unsafe { api!(RedisModule_SelectDb)(ctx.0, db) } != raw::REDISMODULE_OK as c_int {
        return;
    }
    let name = ctx.create_string(key);
    if let Ok(lock) = LockKey::open_write(ctx, name) {
        if !settle(ctx, &lock) {
            if let Some(deadline) = lock.deadline_ms() {
                arm_expiry_timer(ctx, db, key, deadline);
            }
        }
    }
    ctx.free_string(name);
}

/// Queues a key to be settled by a timer that runs on the next event-loop turn.
fn mark_pending(ctx: &Ctx, db: i32, key: &[u8]) {
    let arm = PENDING.with(|p| {
        let mut p = p.borrow_mut();
        p.keys.push((db, key.to_vec()));
        !std::mem::replace(&mut p.timer_armed, true)
    });
    if arm {
        start_timer(ctx, 0, TimerJob::SettlePending);
    }
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
        let key = bytes(key);
        if queues(|q| q.has_waiters(db, key)) {
            mark_pending(&ctx, db, key);
        }
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
        for (db, key) in queues(|q| q.keys(db)) {
            mark_pending(&ctx, db, &key);
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
        for waiter in queues(|q| q.drain_all()) {
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
