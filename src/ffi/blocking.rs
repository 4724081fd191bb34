//! Blocked clients: `LOCK.ACQUIRE ... WAIT` parks its client here until the
//! wait queues (`waiting/`) grant it the lock, its timeout passes, it
//! disconnects, or the server stops being a master.
//!
//! **Redis 7.0 loses a wake at a timeout.** When the module unblocks a
//! waiter (a grant, a cancel, a piece taken over) in the event-loop turn in
//! which the waiter's own timeout fires, Redis 7.0 handles the timeout first,
//! skips the module's timeout callback (the client is already being
//! unblocked), and detaches the client from its handle; the reply callback
//! then runs for no client, and the connection waits for ever with no reply
//! (measured: 11 of 120 pieces taken over at their timeout; none on Redis
//! 8.2 or Valkey 9.1). So on such a server (`server_version.rs` says which)
//! a wake that comes within [`TIMEOUT_MARGIN_MS`] of the waiter's deadline is
//! not handed to `UnblockClient`: it is kept here, the client stays blocked,
//! and Redis's own timeout delivers it: the timeout callback replies the
//! kept wake instead of a timeout. Such a reply comes at the deadline, at
//! most the margin (plus the server's timeout resolution) later than it
//! would have; nothing else changes.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::ptr::NonNull;

use super::{api, in_callback, raw, Ctx, OK};
use crate::errors::Refusal;

/// A blocked client's handle: valid from [`block`] until it is unblocked
/// (exactly once, by [`unblock`]); hashable, so queues can find it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockedClient(NonNull<raw::RedisModuleBlockedClient>);

/// Why we woke a waiter: what its reply callback answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wake {
    /// It was handed the lock (with a fencing token if it asked for one).
    Granted { token: Option<i64> },
    /// Reply this integer (a semaphore's permits granted: 1; a latch
    /// opened: 1, expired: -1).
    Integer(i64),
    /// Reply this array of strings (leased permits' ids).
    Strings(Vec<Vec<u8>>),
    /// Reply nil (leased permits not granted).
    Null,
    /// The lock is someone else's: reply its remaining lease (with `TOKEN`,
    /// the pair `[ttl, -1]`), as an acquire that was not granted.
    Busy { ttl: i64, token: bool },
    /// `LOCK.CANCEL` ended the wait: reply the `CANCELLED` error.
    Cancelled,
    /// The server became a replica: reply an error.
    Demoted,
    /// It cannot be granted the lock: reply this error.
    Refused(Refusal),
}

/// What happens to a blocked client, implemented by the wait queues.
pub trait WaitHandler {
    /// We woke the client with `wake`: reply to it.
    fn reply(ctx: Ctx, wake: &Wake);
    /// Its timeout passed: reply, and unblock it if it is still waiting.
    /// `woken` is what it was woken with, if we did wake it just before.
    fn timed_out(ctx: Ctx, client: BlockedClient, woken: Option<&Wake>);
    /// It went away (QUIT, CLIENT KILL, network): forget it, unblocking it if
    /// it is still waiting.
    fn disconnected(ctx: Ctx, client: BlockedClient);
}

/// How close to a waiter's deadline a wake is kept for its timeout to
/// deliver, on a server that loses wakes at timeouts: longer than one
/// event-loop turn takes, even a busy one.
pub const TIMEOUT_MARGIN_MS: i64 = 25;

thread_local! {
    /// Whether this server loses wakes at timeouts (set once, at load).
    static DEFER_NEAR_TIMEOUTS: Cell<bool> = const { Cell::new(false) };
    /// The deadline of each blocked client with a timeout, on such a server
    /// (our clock, read before Redis reads its own: never later than Redis's).
    static DEADLINES: RefCell<HashMap<BlockedClient, i64>> = RefCell::new(HashMap::new());
    /// Wakes kept for the timeout to deliver.
    static KEPT_WAKES: RefCell<HashMap<BlockedClient, Wake>> = RefCell::new(HashMap::new());
}

/// Says whether the server loses wakes at timeouts (see the module's doc).
pub fn defer_wakes_near_timeouts(on: bool) {
    DEFER_NEAR_TIMEOUTS.with(|defer| defer.set(on));
}

/// The live clock in unix ms, as Redis reads it for blocked clients' timeouts.
fn live_ms() -> i64 {
    // SAFETY: a function of the table, taking no arguments.
    unsafe { api!(RedisModule_Milliseconds)() }
}

/// Blocks the calling client for up to `timeout_ms` (0 = forever).
pub fn block<H: WaitHandler>(ctx: Ctx, timeout_ms: i64) -> BlockedClient {
    let deadline = (timeout_ms > 0 && DEFER_NEAR_TIMEOUTS.with(Cell::get))
        .then(|| live_ms().saturating_add(timeout_ms));
    // SAFETY: a command context; the callbacks are ours below.
    let bc = unsafe {
        api!(RedisModule_BlockClient)(
            ctx.as_ptr(),
            Some(on_reply::<H>),
            Some(on_timeout::<H>),
            Some(free_wake),
            timeout_ms,
        )
    };
    let bc = NonNull::new(bc).expect("RedisModule_BlockClient returned a handle");
    // SAFETY: the handle BlockClient just returned, not unblocked yet; the
    // callback is a plain function of ours, valid as long as the module.
    unsafe { api!(RedisModule_SetDisconnectCallback)(bc.as_ptr(), Some(on_disconnect::<H>)) };
    let client = BlockedClient(bc);
    if let Some(deadline) = deadline {
        DEADLINES.with(|deadlines| deadlines.borrow_mut().insert(client, deadline));
    }
    client
}

/// Unblocks `client`: with `Some(wake)` its reply callback answers for it;
/// with `None` (after a timeout or disconnect) nothing more is sent.
pub fn unblock(client: BlockedClient, wake: Option<Wake>) {
    let deadline = DEADLINES.with(|deadlines| deadlines.borrow_mut().remove(&client));
    match (wake, deadline) {
        // Too close to its timeout: the timeout delivers it (see above).
        (Some(wake), Some(deadline)) if live_ms() >= deadline.saturating_sub(TIMEOUT_MARGIN_MS) => {
            KEPT_WAKES.with(|kept| kept.borrow_mut().insert(client, wake));
        }
        (wake, _) => release(client, wake),
    }
}

/// `UnblockClient` with the wake as its privdata (or none).
fn release(client: BlockedClient, wake: Option<Wake>) {
    // The wake travels as UnblockClient's privdata, a box that Redis hands
    // to the reply callback and then to `free_wake` (also when the client
    // is gone and no reply is made).
    let privdata = wake.map_or(std::ptr::null_mut(), |wake| {
        Box::into_raw(Box::new(wake)).cast::<c_void>()
    });
    // SAFETY: a handle not unblocked yet (the queues unblock each once).
    unsafe { api!(RedisModule_UnblockClient)(client.0.as_ptr(), privdata) };
}

/// The wake of the blocked client `ctx` runs for, if we woke it.
///
/// # Safety
/// `ctx` is a reply or timeout callback's context, whose privdata is NULL
/// or a box made by [`unblock`] and not freed yet.
unsafe fn woken<'a>(ctx: &Ctx<'a>) -> Option<&'a Wake> {
    // SAFETY: `ctx` is a blocked client's callback context (the caller's
    // contract); Redis returns its privdata, NULL if none was given.
    let privdata = unsafe { api!(RedisModule_GetBlockedClientPrivateData)(ctx.as_ptr()) };
    // SAFETY: NULL or a live Box<Wake> from `unblock` (the caller's
    // contract), which Redis frees (free_wake) only after the callback that
    // borrows it returns.
    unsafe { privdata.cast::<Wake>().as_ref() }
}

extern "C" fn free_wake(_ctx: *mut raw::RedisModuleCtx, privdata: *mut c_void) {
    if !privdata.is_null() {
        // SAFETY: made by `unblock` with Box::into_raw; Redis frees it once.
        drop(unsafe { Box::from_raw(privdata.cast::<Wake>()) });
    }
}

extern "C" fn on_reply<H: WaitHandler>(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // SAFETY: Redis passes the reply callback's context.
    in_callback(unsafe { Ctx::from_raw(ctx) }, "a wait reply", |ctx| {
        // SAFETY: the reply callback's context; the box is freed after it.
        if let Some(wake) = unsafe { woken(&ctx) } {
            H::reply(ctx, wake);
        }
    });
    OK
}

extern "C" fn on_timeout<H: WaitHandler>(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // SAFETY: Redis passes the timeout callback's context.
    in_callback(unsafe { Ctx::from_raw(ctx) }, "a wait timeout", |ctx| {
        // SAFETY: the timeout callback's valid context; Redis returns the
        // blocked client's handle (or NULL), which is only compared and
        // passed back to Redis, never dereferenced here.
        let handle = unsafe { api!(RedisModule_GetBlockedClientHandle)(ctx.as_ptr()) };
        let Some(client) = NonNull::new(handle).map(BlockedClient) else {
            return;
        };
        DEADLINES.with(|deadlines| deadlines.borrow_mut().remove(&client));
        if let Some(wake) = KEPT_WAKES.with(|kept| kept.borrow_mut().remove(&client)) {
            // Woken near its timeout, on a server that would have lost the
            // wake: the decision was made and only the reply is due.
            H::reply(ctx, &wake);
            release(client, None);
            return;
        }
        // SAFETY: the timeout callback's context.
        let wake = unsafe { woken(&ctx) };
        H::timed_out(ctx, client, wake);
    });
    OK
}

extern "C" fn on_disconnect<H: WaitHandler>(
    ctx: *mut raw::RedisModuleCtx,
    bc: *mut raw::RedisModuleBlockedClient,
) {
    // SAFETY: Redis passes a context and the disconnecting client's handle.
    let ctx = unsafe { Ctx::from_raw(ctx) };
    in_callback(ctx, "a waiter disconnect", |ctx| {
        if let Some(client) = NonNull::new(bc).map(BlockedClient) {
            DEADLINES.with(|deadlines| deadlines.borrow_mut().remove(&client));
            if KEPT_WAKES
                .with(|kept| kept.borrow_mut().remove(&client))
                .is_some()
            {
                // Gone before its kept wake was delivered: as a reply lost
                // with its connection.
                release(client, None);
                return;
            }
            H::disconnected(ctx, client);
        }
    });
}
