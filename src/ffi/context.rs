//! The module context and Redis strings: replies, the clock, flags, logging,
//! propagation and notifications for the call Redis is making into us.

use std::cell::RefCell;
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int, c_long, c_longlong};
use std::ptr::NonNull;

use super::{api, raw, OK};

/// A Redis module context, valid for the one call Redis made into us.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    ptr: NonNull<raw::RedisModuleCtx>,
    _call: PhantomData<&'a mut raw::RedisModuleCtx>,
}

/// A Redis string borrowed for the duration of a call (an argument, a value
/// Redis handed us). Transparent over the pointer, so Redis's argv array is
/// a `&[RStr]` as it is.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct RStr<'a> {
    ptr: NonNull<raw::RedisModuleString>,
    _call: PhantomData<&'a raw::RedisModuleString>,
}

impl<'a> RStr<'a> {
    /// # Safety
    /// `ptr` must be a valid Redis string that outlives `'a`.
    pub(crate) unsafe fn from_raw(ptr: *mut raw::RedisModuleString) -> Option<RStr<'a>> {
        NonNull::new(ptr).map(|ptr| RStr {
            ptr,
            _call: PhantomData,
        })
    }

    pub(crate) fn as_ptr(self) -> *mut raw::RedisModuleString {
        self.ptr.as_ptr()
    }

    /// The string's bytes, borrowed for as long as the string.
    pub fn as_bytes(self) -> &'a [u8] {
        let mut len = 0usize;
        // SAFETY: the string is valid for 'a (RStr's invariant).
        let ptr = unsafe { api!(RedisModule_StringPtrLen)(self.as_ptr(), &mut len) };
        if ptr.is_null() {
            return &[];
        }
        // SAFETY: Redis guarantees `len` readable bytes at `ptr` while the string lives.
        unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }
    }
}

impl<'a> crate::args::Arg<'a> for RStr<'a> {
    fn bytes(self) -> &'a [u8] {
        self.as_bytes()
    }
}

impl std::fmt::Debug for RStr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// A Redis string the module created; freed when dropped.
pub struct OwnedStr {
    ptr: NonNull<raw::RedisModuleString>,
}

impl OwnedStr {
    /// A new string holding `bytes` (not tied to any context: no automatic
    /// memory management is used).
    pub fn new(bytes: &[u8]) -> OwnedStr {
        // SAFETY: `bytes` is readable for its length; a NULL context is allowed.
        let ptr = unsafe {
            api!(RedisModule_CreateString)(
                std::ptr::null_mut(),
                bytes.as_ptr().cast::<c_char>(),
                bytes.len(),
            )
        };
        OwnedStr {
            ptr: NonNull::new(ptr).unwrap_or_else(|| out_of_memory()),
        }
    }

    /// A new string holding the decimal form of `value`.
    pub fn from_i64(value: i64) -> OwnedStr {
        // SAFETY: a NULL context is allowed.
        let ptr = unsafe {
            api!(RedisModule_CreateStringFromLongLong)(std::ptr::null_mut(), value as c_longlong)
        };
        OwnedStr {
            ptr: NonNull::new(ptr).unwrap_or_else(|| out_of_memory()),
        }
    }

    pub fn borrow(&self) -> RStr<'_> {
        RStr {
            ptr: self.ptr,
            _call: PhantomData,
        }
    }
}

impl Drop for OwnedStr {
    fn drop(&mut self) {
        // SAFETY: created by us with a NULL context, freed once.
        unsafe { api!(RedisModule_FreeString)(std::ptr::null_mut(), self.ptr.as_ptr()) };
    }
}

thread_local! {
    // Redis copies hash values on HashSet and RedisModule_Replicate only takes
    // a reference ('s'), so one "1" serves every first acquire. Redis runs
    // module code on its main thread only.
    static ONE: OwnedStr = OwnedStr::from_i64(1);

    // The last deadline replicated, as a string: every write in the same
    // millisecond with the same lease replicates the same PEXPIREAT argument,
    // so it is made once instead of formatted ('l') on every call. A replaced
    // string lives on while Redis still holds a reference to it.
    static LAST_DEADLINE: RefCell<Option<(i64, OwnedStr)>> = const { RefCell::new(None) };
    // The same for token counters' deadlines (another value than the lock's),
    // and the word PXAT.
    static LAST_COUNTER_DEADLINE: RefCell<Option<(i64, OwnedStr)>> = const { RefCell::new(None) };
    static PXAT: OwnedStr = OwnedStr::new(b"PXAT");
    // RESTORE's two flags, made once (one thread-local: one lookup).
    static REPLACE_ABSTTL: [OwnedStr; 2] = [OwnedStr::new(b"REPLACE"), OwnedStr::new(b"ABSTTL")];
}

/// Runs `f` with `value` as a Redis string, made only when `cache` holds
/// another value.
fn with_cached_decimal<T>(
    cache: &'static std::thread::LocalKey<RefCell<Option<(i64, OwnedStr)>>>,
    value: i64,
    f: impl FnOnce(RStr) -> T,
) -> T {
    cache.with(|last| {
        let mut last = last.borrow_mut();
        let string = match &mut *last {
            Some((cached, string)) if *cached == value => string,
            slot => &slot.insert((value, OwnedStr::from_i64(value))).1,
        };
        f(string.borrow())
    })
}

/// Runs `f` with the decimal form of `value` as a Redis string: the shared
/// "1", or a new string freed afterwards.
pub fn with_decimal<T>(value: i64, f: impl FnOnce(RStr) -> T) -> T {
    if value == 1 {
        ONE.with(|one| f(one.borrow()))
    } else {
        f(OwnedStr::from_i64(value).borrow())
    }
}

/// Redis's allocator aborts on OOM rather than return NULL; never reached.
#[cold]
fn out_of_memory() -> ! {
    panic!("Redis could not allocate a string")
}

/// A C string for a message of ours; an interior NUL (never expected) is cut.
pub(crate) fn c_text(value: &str) -> CString {
    let end = value.find('\0').unwrap_or(value.len());
    CString::new(&value[..end]).unwrap_or_default()
}

/// Classes of keyspace notification the module emits or listens to: a set
/// of Redis's class bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotifyClass(pub(crate) c_int);

impl NotifyClass {
    pub const GENERIC: NotifyClass = NotifyClass(raw::REDISMODULE_NOTIFY_GENERIC as c_int);
    pub const HASH: NotifyClass = NotifyClass(raw::REDISMODULE_NOTIFY_HASH as c_int);
    pub const STRING: NotifyClass = NotifyClass(raw::REDISMODULE_NOTIFY_STRING as c_int);
    pub const ZSET: NotifyClass = NotifyClass(raw::REDISMODULE_NOTIFY_ZSET as c_int);
    pub const EXPIRED: NotifyClass = NotifyClass(raw::REDISMODULE_NOTIFY_EXPIRED as c_int);
    pub const EVICTED: NotifyClass = NotifyClass(raw::REDISMODULE_NOTIFY_EVICTED as c_int);

    pub const NONE: NotifyClass = NotifyClass(0);

    /// Every class the module may listen to, one at a time, with the letter
    /// `notify-keyspace-events` gives it.
    pub const EACH: [(NotifyClass, char); 6] = [
        (NotifyClass::GENERIC, 'g'),
        (NotifyClass::STRING, '$'),
        (NotifyClass::HASH, 'h'),
        (NotifyClass::ZSET, 'z'),
        (NotifyClass::EXPIRED, 'x'),
        (NotifyClass::EVICTED, 'e'),
    ];

    pub const fn or(self, other: NotifyClass) -> NotifyClass {
        NotifyClass(self.0 | other.0)
    }

    /// The classes of `self` that are not in `other`.
    pub const fn without(self, other: NotifyClass) -> NotifyClass {
        NotifyClass(self.0 & !other.0)
    }

    pub const fn contains(self, other: NotifyClass) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The classes as `notify-keyspace-events` letters (`g$xe`).
    pub fn letters(self) -> String {
        NotifyClass::EACH
            .iter()
            .filter(|(class, _)| self.contains(*class))
            .map(|(_, letter)| *letter)
            .collect()
    }
}

impl<'a> Ctx<'a> {
    /// # Safety
    /// `ptr` must be the context Redis passed to the call being handled.
    pub(crate) unsafe fn from_raw(ptr: *mut raw::RedisModuleCtx) -> Option<Ctx<'a>> {
        NonNull::new(ptr).map(|ptr| Ctx {
            ptr,
            _call: PhantomData,
        })
    }

    /// Our context for the `redis-module` crate's one (module load, configs).
    pub fn of(ctx: &'a redis_module::Context) -> Option<Ctx<'a>> {
        // SAFETY: the crate's Context wraps the context of the current call.
        unsafe { Ctx::from_raw(ctx.ctx) }
    }

    pub(crate) fn as_ptr(self) -> *mut raw::RedisModuleCtx {
        self.ptr.as_ptr()
    }

    // ---- replies ----------------------------------------------------------

    pub fn reply_null(self) {
        // SAFETY: `self` is the context of the call Redis is making (Ctx's
        // invariant, bound to that call by 'a). Without a client to reply to
        // (a timer, a notification) Redis drops the reply.
        unsafe { api!(RedisModule_ReplyWithNull)(self.as_ptr()) };
    }

    pub fn reply_integer(self, value: i64) {
        // SAFETY: the call's valid context (Ctx's invariant); an integer by value.
        unsafe { api!(RedisModule_ReplyWithLongLong)(self.as_ptr(), value as c_longlong) };
    }

    pub fn reply_bulk(self, value: &[u8]) {
        // SAFETY: the call's valid context; `value` is readable for its
        // length during the call, and Redis copies it into the reply.
        unsafe {
            api!(RedisModule_ReplyWithStringBuffer)(
                self.as_ptr(),
                value.as_ptr().cast::<c_char>(),
                value.len(),
            )
        };
    }

    pub fn reply_simple(self, value: &CStr) {
        // SAFETY: the call's valid context; `value` is a NUL-terminated C
        // string that outlives the call, and Redis copies it.
        unsafe { api!(RedisModule_ReplyWithSimpleString)(self.as_ptr(), value.as_ptr()) };
    }

    /// An error reply; `message` starts with its code (`ERR ...`, `WRONGTYPE ...`).
    pub fn reply_error(self, message: &str) {
        let text = c_text(message);
        // SAFETY: the call's valid context; `text` is a NUL-terminated C
        // string alive until the end of this function, and Redis copies it.
        unsafe { api!(RedisModule_ReplyWithError)(self.as_ptr(), text.as_ptr()) };
    }

    /// A map of `pairs` entries: a RESP3 map, or a flat array of 2 x `pairs`
    /// under RESP2 (Redis does that translation).
    pub fn reply_map(self, pairs: usize) {
        // SAFETY: the call's valid context; a length by value.
        unsafe { api!(RedisModule_ReplyWithMap)(self.as_ptr(), pairs as c_long) };
    }

    pub fn reply_array(self, len: usize) {
        // SAFETY: the call's valid context; a length by value.
        unsafe { api!(RedisModule_ReplyWithArray)(self.as_ptr(), len as c_long) };
    }

    // ---- the clock, flags, databases ----------------------------------------

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
    pub fn now_ms(self) -> i64 {
        // SAFETY: reads an optional function pointer of the table
        // RedisModule_Init filled (NULL on servers without it); nothing
        // writes the table afterwards.
        match unsafe { raw::RedisModule_CachedMicroseconds } {
            // SAFETY: a function of the table, taking no arguments.
            Some(cached_us) => unsafe { cached_us() }.div_euclid(1000),
            // SAFETY: a function of the table, taking no arguments.
            None => unsafe { api!(RedisModule_Milliseconds)() },
        }
    }

    /// The live clock in unix ms, never behind the clock Redis expires keys
    /// by (which may be the cached one): a key found expired was expired at
    /// a time no later than this.
    pub fn live_now_ms(self) -> i64 {
        // SAFETY: a function of the table, taking no arguments.
        unsafe { api!(RedisModule_Milliseconds)() }
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
    pub fn writes_paused(self) -> bool {
        // SAFETY: a function of the table, taking no arguments.
        unsafe { api!(RedisModule_AvoidReplicaTraffic)() != 0 }
    }

    fn flags(self) -> u32 {
        // SAFETY: the call's valid context (Ctx's invariant); only read.
        unsafe { api!(RedisModule_GetContextFlags)(self.as_ptr()) as u32 }
    }

    /// Whether this server is a master (not a replica).
    pub fn is_master(self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_MASTER != 0
    }

    /// Whether the server runs in cluster mode.
    pub fn in_cluster(self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_CLUSTER != 0
    }

    /// Whether this call may block its client: not in MULTI, Lua, or anything
    /// else that denies blocking, and only on a master.
    pub fn can_block(self) -> bool {
        let denied = raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING
            | raw::REDISMODULE_CTX_FLAGS_MULTI
            | raw::REDISMODULE_CTX_FLAGS_LUA
            | raw::REDISMODULE_CTX_FLAGS_SLAVE;
        self.flags() & denied == 0
    }

    /// The database the calling client (or this callback) has selected.
    pub fn selected_db(self) -> i32 {
        // SAFETY: the call's valid context (Ctx's invariant); only read.
        unsafe { api!(RedisModule_GetSelectedDb)(self.as_ptr()) }
    }

    /// Selects `db` for the rest of this call (outside commands: timers).
    pub fn select_db(self, db: i32) -> bool {
        // SAFETY: the call's valid context; Redis refuses (ERR) a database
        // number out of range rather than reading past its array.
        unsafe { api!(RedisModule_SelectDb)(self.as_ptr(), db) == OK }
    }

    // ---- logging ----------------------------------------------------------

    pub fn log_warning(self, message: &str) {
        self.log(c"warning", message);
    }

    pub fn log_notice(self, message: &str) {
        self.log(c"notice", message);
    }

    fn log(self, level: &CStr, message: &str) {
        let text = c_text(message);
        // SAFETY: the call's valid context; `level` and `text` are
        // NUL-terminated C strings alive during the call, and the format
        // "%s" takes exactly the one string passed.
        unsafe {
            api!(RedisModule_Log)(self.as_ptr(), level.as_ptr(), c"%s".as_ptr(), text.as_ptr())
        };
    }

    // ---- effects: propagation, notifications, pub/sub ------------------------

    /// Propagates `HSET key field value` to replicas and the AOF.
    pub fn replicate_hset(self, key: RStr, field: RStr, value: RStr) {
        // SAFETY: the format "sss" matches the three strings, to which Redis
        // only takes references ('l' would format a new one on every call).
        let status = unsafe {
            api!(RedisModule_Replicate)(
                self.as_ptr(),
                c"HSET".as_ptr(),
                c"sss".as_ptr(),
                key.as_ptr(),
                field.as_ptr(),
                value.as_ptr(),
            )
        };
        self.replicated(status);
    }

    /// Propagates `SET key value PXAT at`, or `SET key value` (no expiry)
    /// when `at` is `None`: the whole state of a string key in one command.
    pub fn replicate_set(self, key: RStr, value: RStr, at: Option<i64>) {
        let status = match at {
            Some(at) => with_cached_decimal(&LAST_COUNTER_DEADLINE, at, |at| {
                PXAT.with(|pxat| {
                    // SAFETY: "ssss" matches the four strings, to which Redis
                    // only takes references.
                    unsafe {
                        api!(RedisModule_Replicate)(
                            self.as_ptr(),
                            c"SET".as_ptr(),
                            c"ssss".as_ptr(),
                            key.as_ptr(),
                            value.as_ptr(),
                            pxat.borrow().as_ptr(),
                            at.as_ptr(),
                        )
                    }
                })
            }),
            // SAFETY: "ss" matches the two strings.
            None => unsafe {
                api!(RedisModule_Replicate)(
                    self.as_ptr(),
                    c"SET".as_ptr(),
                    c"ss".as_ptr(),
                    key.as_ptr(),
                    value.as_ptr(),
                )
            },
        };
        self.replicated(status);
    }

    /// Propagates `PEXPIREAT key at`.
    pub fn replicate_pexpireat(self, key: RStr, at: i64) {
        let status = with_cached_decimal(&LAST_DEADLINE, at, |at| {
            // SAFETY: the format "ss" matches the two strings; the cached one
            // stays alive in LAST_DEADLINE (and Redis holds its own reference).
            unsafe {
                api!(RedisModule_Replicate)(
                    self.as_ptr(),
                    c"PEXPIREAT".as_ptr(),
                    c"ss".as_ptr(),
                    key.as_ptr(),
                    at.as_ptr(),
                )
            }
        });
        self.replicated(status);
    }

    /// Propagates `RESTORE key at payload REPLACE ABSTTL`: a key's whole
    /// value (`payload`, in `DUMP` format) with its absolute deadline, in
    /// one command.
    pub fn replicate_restore(self, key: RStr, at: i64, payload: &[u8]) {
        let status = with_cached_decimal(&LAST_DEADLINE, at, |at| {
            REPLACE_ABSTTL.with(|[replace, absttl]| {
                // SAFETY: "ssbss" matches two strings, a buffer with its
                // length (copied into a new string by Redis), then two
                // strings; Redis only takes references to the strings.
                unsafe {
                    api!(RedisModule_Replicate)(
                        self.as_ptr(),
                        c"RESTORE".as_ptr(),
                        c"ssbss".as_ptr(),
                        key.as_ptr(),
                        at.as_ptr(),
                        payload.as_ptr().cast::<c_char>(),
                        payload.len(),
                        replace.borrow().as_ptr(),
                        absttl.borrow().as_ptr(),
                    )
                }
            })
        });
        self.replicated(status);
    }

    /// Propagates `HSET key field value field value`.
    pub fn replicate_hset2(self, key: RStr, first: (RStr, RStr), second: (RStr, RStr)) {
        // SAFETY: the format "sssss" matches the five strings, to which Redis
        // only takes references.
        let status = unsafe {
            api!(RedisModule_Replicate)(
                self.as_ptr(),
                c"HSET".as_ptr(),
                c"sssss".as_ptr(),
                key.as_ptr(),
                first.0.as_ptr(),
                first.1.as_ptr(),
                second.0.as_ptr(),
                second.1.as_ptr(),
            )
        };
        self.replicated(status);
    }

    /// Propagates `HDEL key field`.
    pub fn replicate_hdel(self, key: RStr, field: RStr) {
        // SAFETY: the format "ss" matches the two strings, to which Redis
        // only takes references.
        let status = unsafe {
            api!(RedisModule_Replicate)(
                self.as_ptr(),
                c"HDEL".as_ptr(),
                c"ss".as_ptr(),
                key.as_ptr(),
                field.as_ptr(),
            )
        };
        self.replicated(status);
    }

    /// Propagates `DEL key`.
    pub fn replicate_del(self, key: RStr) {
        // SAFETY: the format "s" matches the one string.
        let status = unsafe {
            api!(RedisModule_Replicate)(self.as_ptr(), c"DEL".as_ptr(), c"s".as_ptr(), key.as_ptr())
        };
        self.replicated(status);
    }

    /// Propagates `cmd args...`: any command, for effects without a
    /// dedicated helper above (`ZADD`, `ZREM`, `SET ... KEEPTTL`).
    pub fn replicate_command(self, cmd: &CStr, args: &[RStr]) {
        let argv: Vec<*mut raw::RedisModuleString> = args.iter().map(|a| a.as_ptr()).collect();
        // SAFETY: the format "v" takes an array of strings and its length:
        // `argv` holds `argv.len()` valid strings, alive during the call, to
        // which Redis only takes references.
        let status = unsafe {
            api!(RedisModule_Replicate)(
                self.as_ptr(),
                cmd.as_ptr(),
                c"v".as_ptr(),
                argv.as_ptr(),
                argv.len(),
            )
        };
        self.replicated(status);
    }

    fn replicated(self, status: c_int) {
        if status != OK {
            self.log_warning("lock module: could not replicate a lock write");
        }
    }

    /// Tells Redis `key` changed (WATCH, client-side caching).
    pub fn signal_modified(self, key: RStr) {
        // SAFETY: the call's valid context and a valid string (both
        // invariants); Redis only reads the key name.
        unsafe { api!(RedisModule_SignalModifiedKey)(self.as_ptr(), key.as_ptr()) };
    }

    /// Emits the keyspace notification `event` of `class` on `key`.
    pub fn notify_keyspace(self, class: NotifyClass, event: &CStr, key: RStr) {
        // SAFETY: the call's valid context, a NUL-terminated event name and a
        // valid key string, all alive during the call; Redis copies what it
        // keeps (it takes its own reference to the key).
        unsafe {
            api!(RedisModule_NotifyKeyspaceEvent)(
                self.as_ptr(),
                class.0,
                event.as_ptr(),
                key.as_ptr(),
            )
        };
    }

    /// Publishes `message` on `channel`: sharded (`SSUBSCRIBE`) when asked and
    /// the server can, classic otherwise.
    pub fn publish(self, channel: &[u8], message: &[u8], sharded: bool) {
        let channel = OwnedStr::new(channel);
        let message = OwnedStr::new(message);
        // SAFETY: reads an optional function pointer of the table
        // RedisModule_Init filled (NULL on a server without it); nothing writes it.
        let shard = unsafe { raw::RedisModule_PublishMessageShard }.filter(|_| sharded);
        let (channel, message) = (channel.borrow().as_ptr(), message.borrow().as_ptr());
        // SAFETY: the call's valid context and two strings we own, alive
        // until the end of this function; Redis copies the message out to
        // subscribers before returning.
        unsafe {
            match shard {
                Some(publish_shard) => publish_shard(self.as_ptr(), channel, message),
                None => api!(RedisModule_PublishMessage)(self.as_ptr(), channel, message),
            }
        };
    }
}

/// Runs `body` for Redis: a panic is logged and swallowed instead of
/// unwinding into C (which would abort the server).
fn guarded(ctx: &Ctx, what: &str, body: impl FnOnce()) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).is_err() {
        ctx.log_warning(&format!("lock module: panic in {what}; ignored"));
    }
}

/// How each callback the module gives Redis (timers, notifications, server
/// events, waits) runs its `body`: with the context Redis passed (nothing
/// when it passed none), [`guarded`].
pub(crate) fn in_callback(ctx: Option<Ctx>, what: &str, body: impl FnOnce(Ctx)) {
    if let Some(ctx) = ctx {
        guarded(&ctx, what, || body(ctx));
    }
}
