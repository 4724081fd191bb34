//! Blocked clients: `LOCK.ACQUIRE ... WAIT` parks its client here until the
//! wait queues (`handoff.rs`) grant it the lock, its timeout passes, it
//! disconnects, or the server stops being a master.

use std::os::raw::{c_int, c_void};
use std::ptr::NonNull;

use super::{api, guarded, raw, Ctx, RStr, OK};

/// A blocked client's handle: valid from [`block`] until it is unblocked
/// (exactly once, by [`unblock`]); hashable, so queues can find it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockedClient(NonNull<raw::RedisModuleBlockedClient>);

/// Why we woke a waiter: what its reply callback answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// It was handed the lock: reply nil.
    Granted,
    /// The server became a replica: reply an error.
    Demoted,
}

/// What happens to a blocked client, implemented by the wait queues.
pub trait WaitHandler {
    /// We woke the client with `wake`: reply to it.
    fn reply(ctx: Ctx, wake: Wake);
    /// Its timeout passed (`argv` is its command): reply, and unblock it if
    /// it is still waiting.
    fn timed_out(ctx: Ctx, client: BlockedClient, argv: &[RStr]);
    /// It went away (QUIT, CLIENT KILL, network): forget it, unblocking it if
    /// it is still waiting.
    fn disconnected(ctx: Ctx, client: BlockedClient);
}

/// Blocks the calling client for up to `timeout_ms` (0 = forever).
pub fn block<H: WaitHandler>(ctx: Ctx, timeout_ms: i64) -> BlockedClient {
    // SAFETY: a command context; the callbacks are ours below.
    let bc = unsafe {
        api!(RedisModule_BlockClient)(
            ctx.as_ptr(),
            Some(on_reply::<H>),
            Some(on_timeout::<H>),
            None,
            timeout_ms,
        )
    };
    let bc = NonNull::new(bc).expect("RedisModule_BlockClient returned a handle");
    unsafe { api!(RedisModule_SetDisconnectCallback)(bc.as_ptr(), Some(on_disconnect::<H>)) };
    BlockedClient(bc)
}

/// Unblocks `client`: with `Some(wake)` its reply callback answers for it;
/// with `None` (after a timeout or disconnect) nothing more is sent.
pub fn unblock(client: BlockedClient, wake: Option<Wake>) {
    let privdata = match wake {
        None => std::ptr::null_mut(),
        Some(Wake::Granted) => tag(&GRANTED),
        Some(Wake::Demoted) => tag(&DEMOTED),
    };
    // SAFETY: a handle not unblocked yet (the queues unblock each once).
    unsafe { api!(RedisModule_UnblockClient)(client.0.as_ptr(), privdata) };
}

/// Why the waiter was woken, passed as `UnblockClient`'s privdata: the
/// address of one of these (Redis never dereferences privdata; we compare).
static GRANTED: u8 = 0;
static DEMOTED: u8 = 0;

fn tag(marker: &'static u8) -> *mut c_void {
    (marker as *const u8).cast_mut().cast::<c_void>()
}

extern "C" fn on_reply<H: WaitHandler>(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // SAFETY: Redis passes the reply callback's context.
    if let Some(ctx) = unsafe { Ctx::from_raw(ctx) } {
        guarded(&ctx, "a wait reply", || {
            let why = unsafe { api!(RedisModule_GetBlockedClientPrivateData)(ctx.as_ptr()) };
            H::reply(
                ctx,
                if why == tag(&DEMOTED) {
                    Wake::Demoted
                } else {
                    Wake::Granted
                },
            );
        });
    }
    OK
}

extern "C" fn on_timeout<H: WaitHandler>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    // SAFETY: Redis passes the timeout callback's context and the command's argv.
    if let Some(ctx) = unsafe { Ctx::from_raw(ctx) } {
        guarded(&ctx, "a wait timeout", || {
            let handle = unsafe { api!(RedisModule_GetBlockedClientHandle)(ctx.as_ptr()) };
            let Some(client) = NonNull::new(handle).map(BlockedClient) else {
                return;
            };
            let args = unsafe { super::command::args(argv, argc) };
            H::timed_out(ctx, client, args);
        });
    }
    OK
}

extern "C" fn on_disconnect<H: WaitHandler>(
    ctx: *mut raw::RedisModuleCtx,
    bc: *mut raw::RedisModuleBlockedClient,
) {
    // SAFETY: Redis passes a context and the disconnecting client's handle.
    if let Some(ctx) = unsafe { Ctx::from_raw(ctx) } {
        guarded(&ctx, "a waiter disconnect", || {
            if let Some(client) = NonNull::new(bc).map(BlockedClient) {
                H::disconnected(ctx, client);
            }
        });
    }
}
