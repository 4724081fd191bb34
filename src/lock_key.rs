//! A lock's hash, opened through the module key API.
//!
//! This is the one place that reads and writes lock keys. Reads produce the
//! [`LockView`] the state machine decides on; [`LockKey::apply`] carries out its
//! [`Write`] on the key **and replicates it as plain commands**:
//!
//! | write                         | replicated as                              |
//! |-------------------------------|--------------------------------------------|
//! | `SetCount { count, Some(at) }`| `HSET key owner count` + `PEXPIREAT key at` |
//! | `SetCount { count, None }`    | `HSET key owner count`                     |
//! | `ExpireAt(at)`                | `PEXPIREAT key at`                         |
//! | `Delete`                      | `DEL key`                                  |
//!
//! Counts are absolute and deadlines are absolute unix milliseconds, so a
//! replica (with or without this module) or an AOF reload ends with exactly the
//! master's hash and deadline and never re-runs lock logic or re-bases a lease.
//! Redis wraps several propagated commands of one command call in MULTI/EXEC.
//!
//! The key API itself propagates nothing and fires no keyspace events, which is
//! why both are done explicitly here and in `events.rs`. Likewise the module
//! signals a key as modified itself, and only when it writes (see `apply`).

use std::os::raw::{c_int, c_longlong, c_void};
use std::ptr;

use crate::ffi::{api, bytes, raw, Ctx, RStr};
use crate::lock::{parse_hold_count, LockView, Write};

const KEYTYPE_EMPTY: c_int = raw::REDISMODULE_KEYTYPE_EMPTY as c_int;
const KEYTYPE_HASH: c_int = raw::REDISMODULE_KEYTYPE_HASH as c_int;

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// An open lock key; closed on drop.
pub struct LockKey {
    ctx: Ctx,
    name: RStr,
    key: *mut raw::RedisModuleKey,
}

impl LockKey {
    /// Opens `name` for writing. Refuses a key that exists and is not a hash.
    pub fn open_write(ctx: &Ctx, name: RStr) -> Result<LockKey, String> {
        Self::open(ctx, name, raw::REDISMODULE_READ | raw::REDISMODULE_WRITE)
    }

    /// Opens `name` for reading only.
    pub fn open_read(ctx: &Ctx, name: RStr) -> Result<LockKey, String> {
        Self::open(ctx, name, raw::REDISMODULE_READ)
    }

    fn open(ctx: &Ctx, name: RStr, mode: u32) -> Result<LockKey, String> {
        let key = unsafe { api!(RedisModule_OpenKey)(ctx.0, name, mode as c_int) };
        let lock = LockKey {
            ctx: *ctx,
            name,
            key,
        };
        match lock.key_type() {
            KEYTYPE_EMPTY | KEYTYPE_HASH => Ok(lock),
            _ => Err(WRONGTYPE.to_string()),
        }
    }

    fn key_type(&self) -> c_int {
        if self.key.is_null() {
            return KEYTYPE_EMPTY;
        }
        unsafe { api!(RedisModule_KeyType)(self.key) }
    }

    pub fn name(&self) -> RStr {
        self.name
    }

    /// Whether the lock hash exists (expired keys were already removed on open).
    pub fn exists(&self) -> bool {
        self.key_type() == KEYTYPE_HASH
    }

    /// Reads `owner`'s field, if there is one, through `read` (no copy).
    fn with_field<T>(&self, owner: RStr, read: impl FnOnce(&[u8]) -> T) -> Option<T> {
        if !self.exists() {
            return None;
        }
        let mut value: RStr = ptr::null_mut();
        let status = unsafe {
            api!(RedisModule_HashGet)(
                self.key,
                raw::REDISMODULE_HASH_NONE as c_int,
                owner,
                &mut value as *mut RStr,
                ptr::null_mut::<c_void>(),
            )
        };
        if status != raw::REDISMODULE_OK as c_int || value.is_null() {
            return None;
        }
        let result = read(bytes(value));
        self.ctx.free_string(value);
        Some(result)
    }

    /// Whether the lock is held, without looking at any owner (for `force`).
    pub fn presence(&self) -> LockView {
        if self.exists() {
            LockView::held(None)
        } else {
            LockView::FREE
        }
    }

    /// What the state machine needs to decide for `owner`.
    pub fn view(&self, owner: RStr) -> Result<LockView, String> {
        if !self.exists() {
            return Ok(LockView::FREE);
        }
        let hold_count = self
            .with_field(owner, parse_hold_count)
            .transpose()
            .map_err(|e| e.message().to_string())?;
        Ok(LockView::held(hold_count))
    }

    /// Remaining lease in ms, as `PTTL` answers: -1 without expiry, -2 if absent.
    pub fn ttl_ms(&self) -> i64 {
        if !self.exists() {
            return -2;
        }
        let ttl = unsafe { api!(RedisModule_GetExpire)(self.key) };
        if ttl == raw::REDISMODULE_NO_EXPIRE as i64 {
            -1
        } else {
            ttl.max(0)
        }
    }

    /// Absolute deadline in unix ms (what `PEXPIRETIME` answers), or `None`
    /// without expiry or lock.
    pub fn deadline_ms(&self) -> Option<i64> {
        if !self.exists() {
            return None;
        }
        let at = unsafe { api!(RedisModule_GetAbsExpire)(self.key) };
        (at != raw::REDISMODULE_NO_EXPIRE as i64).then_some(at)
    }

    /// All fields and values, in hash order (for `LOCK.INFO`).
    pub fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        if !self.exists() {
            return out;
        }
        extern "C" fn collect(
            _key: *mut raw::RedisModuleKey,
            field: RStr,
            value: RStr,
            privdata: *mut c_void,
        ) {
            // SAFETY: privdata is the `out` vector below, alive for the whole scan.
            let out = unsafe { &mut *(privdata as *mut Vec<(Vec<u8>, Vec<u8>)>) };
            out.push((bytes(field).to_vec(), bytes(value).to_vec()));
        }
        let cursor = unsafe { api!(RedisModule_ScanCursorCreate)() };
        loop {
            let more = unsafe {
                api!(RedisModule_ScanKey)(
                    self.key,
                    cursor,
                    Some(collect),
                    &mut out as *mut _ as *mut c_void,
                )
            };
            if more == 0 {
                break;
            }
        }
        unsafe { api!(RedisModule_ScanCursorDestroy)(cursor) };
        out
    }

    /// Carries out `write` for `owner` on the key and replicates its effect.
    ///
    /// Only a real write signals the key as modified (WATCH, client-side
    /// caching): the module opts out of Redis's implicit signal on closing a
    /// key opened for writing, so a refused acquire or a release by a
    /// non-holder leaves other clients' transactions alone.
    pub fn apply(&self, owner: RStr, write: Write) {
        let ctx = self.ctx;
        if write != Write::None {
            unsafe { api!(RedisModule_SignalModifiedKey)(ctx.0, self.name) };
        }
        match write {
            Write::None => {}
            Write::SetCount { count, expire_at } => {
                // A first acquire (count 1) is the common case: no string to make.
                let value = match count {
                    1 => one(),
                    _ => unsafe {
                        api!(RedisModule_CreateStringFromLongLong)(ctx.0, count as c_longlong)
                    },
                };
                unsafe {
                    api!(RedisModule_HashSet)(
                        self.key,
                        raw::REDISMODULE_HASH_NONE as c_int,
                        owner,
                        value,
                        ptr::null_mut::<c_void>(),
                    );
                }
                if value != one() {
                    ctx.free_string(value);
                }
                replicate(&ctx, c"HSET", c"ssl", |f, cmd, fmt| unsafe {
                    f(ctx.0, cmd, fmt, self.name, owner, count as c_longlong)
                });
                if let Some(at) = expire_at {
                    self.expire_at(at);
                }
            }
            Write::ExpireAt(at) => self.expire_at(at),
            Write::Delete => {
                unsafe { api!(RedisModule_DeleteKey)(self.key) };
                replicate(&ctx, c"DEL", c"s", |f, cmd, fmt| unsafe {
                    f(ctx.0, cmd, fmt, self.name)
                });
            }
        }
    }

    fn expire_at(&self, at: i64) {
        let ctx = self.ctx;
        // SetAbsExpire (7.0+) keeps master and replica on the very same deadline;
        // the relative fallback is only for servers that lack it.
        unsafe {
            match raw::RedisModule_SetAbsExpire {
                Some(set_abs) => set_abs(self.key, at),
                None => api!(RedisModule_SetExpire)(self.key, (at - ctx.now_ms()).max(1)),
            };
        }
        replicate(&ctx, c"PEXPIREAT", c"sl", |f, cmd, fmt| unsafe {
            f(ctx.0, cmd, fmt, self.name, at as c_longlong)
        });
    }
}

impl Drop for LockKey {
    fn drop(&mut self) {
        if !self.key.is_null() {
            unsafe { api!(RedisModule_CloseKey)(self.key) };
        }
    }
}

thread_local! {
    // Redis copies hash values on HashSet, so one string serves every call.
    static ONE: RStr = unsafe { api!(RedisModule_CreateStringFromLongLong)(ptr::null_mut(), 1) };
}

/// The shared hold count "1" (created on first use, kept for the module's life).
fn one() -> RStr {
    ONE.with(|one| *one)
}

type ReplicateFn = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *const std::os::raw::c_char,
    *const std::os::raw::c_char,
    ...
) -> c_int;

/// Propagates one command to replicas and the AOF. `RedisModule_Replicate` is
/// variadic, so the caller passes the arguments matching `fmt`.
fn replicate(
    ctx: &Ctx,
    command: &std::ffi::CStr,
    fmt: &std::ffi::CStr,
    call: impl FnOnce(ReplicateFn, *const std::os::raw::c_char, *const std::os::raw::c_char) -> c_int,
) {
    let status = call(api!(RedisModule_Replicate), command.as_ptr(), fmt.as_ptr());
    if status != raw::REDISMODULE_OK as c_int {
        ctx.log_warning("lock module: could not replicate a lock write");
    }
}
