//! Redisson 3.14.1 RLock's Lua scripts (the one copy, in `redisson/*.lua`:
//! see its README), the compatibility contract the module is tested against;
//! and the calls Redisson makes with them (keys, arguments, channel,
//! message), the one copy every test uses.

use redis::{ConnectionLike, ToRedisArgs, Value};

use crate::pubsub::unlock_channel;

/// Redisson's `LockPubSub.UNLOCK_MESSAGE`.
pub const UNLOCK_MESSAGE: &str = "0";

/// `tryLockInnerAsync`, HINCRBY variant (later Redisson versions; same layout).
pub const ACQUIRE_HINCRBY: &str = include_str!("../../redisson/try-lock-hincrby.lua");

/// `tryLockInnerAsync`, HSET variant (Redisson 3.14.1).
pub const ACQUIRE_HSET: &str = include_str!("../../redisson/try-lock-hset.lua");

/// `unlockInnerAsync` (Redisson 3.14.1).
pub const UNLOCK: &str = include_str!("../../redisson/unlock.lua");

/// `renewExpirationAsync` (Redisson 3.14.1).
pub const RENEW: &str = include_str!("../../redisson/renew-expiration.lua");

/// `forceUnlockAsync` (Redisson 3.14.1).
pub const FORCE_UNLOCK: &str = include_str!("../../redisson/force-unlock.lua");

/// A model of Redisson `RFencedLock`'s acquire-with-token script (3.19+,
/// same hash layout as RLock): grant or re-enter, `INCR` the counter
/// `KEYS[2]` and reply `{-1, token}`; else `{pttl, -1}`.
pub const FENCED_ACQUIRE: &str = include_str!("../../redisson/fenced-acquire.lua");

/// `FENCED_ACQUIRE` on `key` (whose name has no braces), with Redisson's
/// counter key `redisson_lock_token:{key}`.
pub fn script_fenced_acquire(
    con: &mut impl ConnectionLike,
    key: &str,
    owner: impl ToRedisArgs,
    lease_ms: i64,
) -> (i64, i64) {
    let keys = [
        key.as_bytes().to_vec(),
        format!("redisson_lock_token:{{{key}}}").into_bytes(),
    ];
    let reply = eval(con, FENCED_ACQUIRE, &keys, (lease_ms, owner));
    redis::from_redis_value(reply).expect("a pair of integers")
}

/// Runs an acquire script (`ACQUIRE_HINCRBY` or `ACQUIRE_HSET`) as
/// `tryLockInnerAsync` does: nil = granted, the holder's PTTL = busy.
pub fn script_acquire(
    con: &mut impl ConnectionLike,
    script: &str,
    key: &[u8],
    owner: impl ToRedisArgs,
    lease_ms: i64,
) -> Value {
    eval(con, script, &[key.to_vec()], (lease_ms, owner))
}

/// `unlockInnerAsync`: nil = not held, 0 = still held, 1 = freed and published.
pub fn script_unlock(
    con: &mut impl ConnectionLike,
    key: &[u8],
    owner: impl ToRedisArgs,
    lease_ms: i64,
) -> Value {
    let keys = [key.to_vec(), unlock_channel(key)];
    eval(con, UNLOCK, &keys, (UNLOCK_MESSAGE, lease_ms, owner))
}

/// `renewExpirationAsync`: 1 = renewed, 0 = not held.
pub fn script_renew(
    con: &mut impl ConnectionLike,
    key: &[u8],
    owner: impl ToRedisArgs,
    lease_ms: i64,
) -> Value {
    eval(con, RENEW, &[key.to_vec()], (lease_ms, owner))
}

/// `forceUnlockAsync`: 1 = deleted and published, 0 = no lock.
pub fn script_force(con: &mut impl ConnectionLike, key: &[u8]) -> Value {
    let keys = [key.to_vec(), unlock_channel(key)];
    eval(con, FORCE_UNLOCK, &keys, UNLOCK_MESSAGE)
}

fn eval(
    con: &mut impl ConnectionLike,
    script: &str,
    keys: &[Vec<u8>],
    argv: impl ToRedisArgs,
) -> Value {
    redis::cmd("EVAL")
        .arg(script)
        .arg(keys.len())
        .arg(keys)
        .arg(argv)
        .query(con)
        .unwrap_or_else(|e| {
            let key = String::from_utf8_lossy(&keys[0]);
            panic!("EVAL of a Redisson script on {key:?}: {e}")
        })
}
