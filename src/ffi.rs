//! The thin, unsafe edge between Redis and the rest of the module.
//!
//! Why not the `redis-module` crate's command wrappers? Three reasons:
//! * they decode every argument into an owned `RedisString` vector and build a
//!   `RedisValue` tree per reply; the hot path here allocates nothing;
//! * their hash helpers take `&str` fields (through `CString::new(..).unwrap()`),
//!   while owner ids are binary-safe and may even contain NUL bytes;
//! * a panic inside their generated handler aborts the server. Our trampoline
//!   catches it and answers an error instead.
//!
//! Everything else (`Ctx`, replies, strings) is a direct call of the module
//! API; the functions it calls exist on every server we support (Redis 7.0+,
//! Valkey), while optional ones are looked up as `Option`s where used.

use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_long, c_longlong};
use std::panic::{catch_unwind, AssertUnwindSafe};

pub use redis_module::raw;

/// A Redis string argument (owned by Redis for the duration of the call).
pub type RStr = *mut raw::RedisModuleString;

/// Calls a module API function that every supported server provides.
macro_rules! api {
    ($name:ident) => {
        // SAFETY: the function table is filled once by RedisModule_Init before any
        // command can run, and never changes afterwards.
        {
            #[allow(unused_unsafe)]
            let f = unsafe {
                $crate::ffi::raw::$name.expect(concat!(stringify!($name), " is missing"))
            };
            f
        }
    };
}
pub(crate) use api;

/// The bytes of a Redis string.
pub fn bytes<'a>(s: *const raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0usize;
    let ptr = unsafe { api!(RedisModule_StringPtrLen)(s, &mut len) };
    if ptr.is_null() {
        return &[];
    }
    // SAFETY: Redis guarantees `len` readable bytes at `ptr` while `s` lives.
    unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
}

/// A Redis module context: the calling client, its reply, its propagation.
#[derive(Clone, Copy)]
pub struct Ctx(pub *mut raw::RedisModuleCtx);

impl Ctx {
    pub fn reply_null(&self) {
        unsafe { api!(RedisModule_ReplyWithNull)(self.0) };
    }

    pub fn reply_integer(&self, value: i64) {
        unsafe { api!(RedisModule_ReplyWithLongLong)(self.0, value as c_longlong) };
    }

    pub fn reply_bulk(&self, value: &[u8]) {
        unsafe {
            api!(RedisModule_ReplyWithStringBuffer)(
                self.0,
                value.as_ptr().cast::<c_char>(),
                value.len(),
            )
        };
    }

    pub fn reply_simple(&self, value: &str) {
        let text = c_text(value);
        unsafe { api!(RedisModule_ReplyWithSimpleString)(self.0, text.as_ptr()) };
    }

    /// An error reply; `message` starts with its code (`ERR ...`, `WRONGTYPE ...`).
    pub fn reply_error(&self, message: &str) {
        let text = c_text(message);
        unsafe { api!(RedisModule_ReplyWithError)(self.0, text.as_ptr()) };
    }

    /// A map of `pairs` entries: a RESP3 map, or a flat array of 2 x `pairs`
    /// under RESP2 (Redis does that translation).
    pub fn reply_map(&self, pairs: usize) {
        unsafe { api!(RedisModule_ReplyWithMap)(self.0, pairs as c_long) };
    }

    pub fn reply_array(&self, len: usize) {
        unsafe { api!(RedisModule_ReplyWithArray)(self.0, len as c_long) };
    }

    /// The time of the running command in unix ms: the clock Redis itself
    /// reads for expiry, `PTTL` and `PEXPIRETIME` in the same command.
    ///
    /// Redis 7.2+ and Valkey freeze a command's time when it starts (a whole
    /// MULTI/EXEC or script runs at one instant) and expose that snapshot as
    /// the cached clock; module timers and callbacks get a fresh one. Reading
    /// a live clock there instead made a deadline set in a transaction lie
    /// ahead of the frozen clock, so a remaining lease could exceed the lease.
    /// Redis 7.0 has no cached clock for modules and itself reads the live
    /// clock for `PTTL` and the module key API, so the live clock is right there.
    pub fn now_ms(&self) -> i64 {
        // SAFETY: optional function looked up once by RedisModule_Init; no arguments.
        match unsafe { raw::RedisModule_CachedMicroseconds } {
            Some(cached_us) => unsafe { cached_us() }.div_euclid(1000),
            None => unsafe { api!(RedisModule_Milliseconds)() },
        }
    }

    /// Whether writes are paused right now: `CLIENT PAUSE` (WRITE or ALL),
    /// `FAILOVER`, `SHUTDOWN` waiting for replicas, a cluster manual failover.
    ///
    /// Redis promises that nothing is written then (a failover relies on the
    /// replica having every write), and it holds back key expiry: an expired
    /// key reads as missing but is still in the keyspace, so writing it as a
    /// new key aborts the server (`db.c` `de != NULL`). Whatever the module
    /// does on its own (timers, notifications) checks this first. Asking also
    /// lets Redis end a pause whose time is up.
    pub fn writes_paused(&self) -> bool {
        // SAFETY: present on every supported server (5.0+); no arguments.
        unsafe { api!(RedisModule_AvoidReplicaTraffic)() != 0 }
    }

    pub fn flags(&self) -> c_int {
        unsafe { api!(RedisModule_GetContextFlags)(self.0) }
    }

    pub fn has_flag(&self, flag: u32) -> bool {
        self.flags() & flag as c_int != 0
    }

    /// Creates a Redis string; the caller frees it with [`Ctx::free_string`].
    pub fn create_string(&self, value: &[u8]) -> RStr {
        unsafe {
            api!(RedisModule_CreateString)(self.0, value.as_ptr().cast::<c_char>(), value.len())
        }
    }

    pub fn free_string(&self, s: RStr) {
        unsafe { api!(RedisModule_FreeString)(self.0, s) };
    }

    pub fn log_warning(&self, message: &str) {
        let text = c_text(message);
        unsafe {
            api!(RedisModule_Log)(self.0, c"warning".as_ptr(), c"%s".as_ptr(), text.as_ptr())
        };
    }
}

/// A module timer's id, as Redis hands it out.
pub type TimerId = raw::RedisModuleTimerID;

/// The callback of a module timer: its context and the data it was started with.
pub type TimerCallback = extern "C" fn(*mut raw::RedisModuleCtx, *mut std::os::raw::c_void);

impl Ctx {
    /// Starts a timer that calls `callback` with `data` after `delay_ms`.
    pub fn start_timer(
        &self,
        delay_ms: i64,
        callback: TimerCallback,
        data: *mut std::os::raw::c_void,
    ) -> TimerId {
        // SAFETY: Redis keeps `data` opaque and hands it back to `callback`.
        unsafe { api!(RedisModule_CreateTimer)(self.0, delay_ms, Some(callback), data) }
    }

    /// Stops a timer that has not fired; returns the data it was started with
    /// (for the caller to free), or `None` if it already fired or is unknown.
    pub fn stop_timer(&self, id: TimerId) -> Option<*mut std::os::raw::c_void> {
        let mut data: *mut std::os::raw::c_void = std::ptr::null_mut();
        // SAFETY: `data` is a valid out-pointer for the call's duration.
        let status = unsafe { api!(RedisModule_StopTimer)(self.0, id, &mut data) };
        (status == raw::REDISMODULE_OK as c_int).then_some(data)
    }
}

/// A C string for a message of ours; an interior NUL (never expected) is cut.
fn c_text(value: &str) -> CString {
    let end = value.find('\0').unwrap_or(value.len());
    CString::new(&value[..end]).unwrap_or_default()
}

/// What a command handler returns: `Ok` once it has replied, or the error
/// message to reply with (in which case it has not replied and changed nothing).
pub type CommandResult = Result<(), String>;

/// A command handler: the context and the full argv (argv[0] is the name).
pub type Handler = fn(&Ctx, &[RStr]) -> CommandResult;

/// Runs a handler for Redis: replies its error, and turns a panic into an error
/// reply rather than letting it unwind into C (which would abort the server).
pub fn run_command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut RStr,
    argc: c_int,
    handler: Handler,
) -> c_int {
    let ctx = Ctx(ctx);
    let args: &[RStr] = if argv.is_null() || argc <= 0 {
        &[]
    } else {
        // SAFETY: Redis passes `argc` valid strings at `argv` for this call.
        unsafe { std::slice::from_raw_parts(argv, argc as usize) }
    };
    match catch_unwind(AssertUnwindSafe(|| handler(&ctx, args))) {
        Ok(Ok(())) => {}
        Ok(Err(message)) => ctx.reply_error(&message),
        Err(_) => {
            ctx.log_warning("lock module: a command handler panicked; replied with an error");
            ctx.reply_error("ERR internal error in the lock module (see the server log)");
        }
    }
    raw::REDISMODULE_OK as c_int
}

/// Defines the `extern "C"` entry point Redis calls for a command handler.
macro_rules! command_entry {
    ($entry:ident => $handler:path) => {
        extern "C" fn $entry(
            ctx: *mut $crate::ffi::raw::RedisModuleCtx,
            argv: *mut *mut $crate::ffi::raw::RedisModuleString,
            argc: std::os::raw::c_int,
        ) -> std::os::raw::c_int {
            $crate::ffi::run_command(ctx, argv, argc, $handler)
        }
    };
}
pub(crate) use command_entry;

/// Registers a command whose key is argument 1 (`first,last,step = 1,1,1`, from
/// which Redis 7 derives the key spec used by cluster routing and ACL key
/// patterns).
pub fn create_command(
    ctx: *mut raw::RedisModuleCtx,
    name: &str,
    entry: raw::RedisModuleCmdFunc,
    flags: &str,
) -> Result<*mut raw::RedisModuleCommand, String> {
    let c_name = c_text(name);
    let c_flags = c_text(flags);
    let status = unsafe {
        api!(RedisModule_CreateCommand)(ctx, c_name.as_ptr(), entry, c_flags.as_ptr(), 1, 1, 1)
    };
    if status != raw::REDISMODULE_OK as c_int {
        return Err(format!("could not create command {name}"));
    }
    Ok(unsafe { api!(RedisModule_GetCommand)(ctx, c_name.as_ptr()) })
}
