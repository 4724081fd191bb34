//! Redisson 3.14.1 RLock's Lua scripts, and Redisson master's RSemaphore,
//! RPermitExpirableSemaphore and RCountDownLatch scripts (the one copy, in
//! `redisson/*.lua`: see its README), the compatibility contract the module is
//! tested against; and the calls Redisson makes with them (keys, arguments,
//! channel, message), the one copy every test uses.

use crate::permits::id_bytes;
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

// ---------------------------------------------------------------------------
// Semaphores, permits with a lease, the count-down latch (Redisson master
// 66863978; redisson/sem-*.lua, permit-*.lua, latch-*.lua)
// ---------------------------------------------------------------------------

/// `RSemaphore.trySetPermits(permits)`.
pub const SEM_TRY_SET_PERMITS: &str = include_str!("../../redisson/sem-try-set-permits.lua");
/// `RSemaphore.trySetPermits(permits, ttl)`.
pub const SEM_TRY_SET_PERMITS_PX: &str = include_str!("../../redisson/sem-try-set-permits-px.lua");
/// `RSemaphore.addPermits(delta)`.
pub const SEM_ADD_PERMITS: &str = include_str!("../../redisson/sem-add-permits.lua");
/// `RSemaphore.tryAcquire(permits)`, each try of `acquire`.
pub const SEM_TRY_ACQUIRE: &str = include_str!("../../redisson/sem-try-acquire.lua");
/// `RSemaphore.release(permits)`.
pub const SEM_RELEASE: &str = include_str!("../../redisson/sem-release.lua");
/// `RSemaphore.drainPermits()`.
pub const SEM_DRAIN: &str = include_str!("../../redisson/sem-drain.lua");
/// `RPermitExpirableSemaphore.tryAcquire` (with or without a lease): reclaims
/// expired permits, then takes.
pub const PERMIT_TRY_ACQUIRE: &str = include_str!("../../redisson/permit-try-acquire.lua");
/// `RPermitExpirableSemaphore.tryRelease(id)`.
pub const PERMIT_RELEASE: &str = include_str!("../../redisson/permit-release.lua");
/// `RPermitExpirableSemaphore.tryRelease(ids)`.
pub const PERMIT_RELEASE_MANY: &str = include_str!("../../redisson/permit-release-many.lua");
/// `RPermitExpirableSemaphore.updateLeaseTime(id, lease)`.
pub const PERMIT_UPDATE_LEASE: &str = include_str!("../../redisson/permit-update-lease.lua");
/// `RPermitExpirableSemaphore.availablePermits()`.
pub const PERMIT_AVAILABLE: &str = include_str!("../../redisson/permit-available.lua");
/// `RCountDownLatch.trySetCount(count)`.
pub const LATCH_TRY_SET_COUNT: &str = include_str!("../../redisson/latch-try-set-count.lua");
/// `RCountDownLatch.countDown()`.
pub const LATCH_COUNT_DOWN: &str = include_str!("../../redisson/latch-count-down.lua");
/// `RCountDownLatch.delete()`.
pub const LATCH_DELETE: &str = include_str!("../../redisson/latch-delete.lua");

/// The publish command Redisson passes as an argument
/// (`PublishSubscribeService.getPublishCommand()` without sharded pub/sub).
pub const PUBLISH_COMMAND: &str = "PUBLISH";
/// The score of a permit without a lease (`nonExpirableTimeout`).
pub const NON_EXPIRABLE: i64 = 922_337_203_685_477;
/// `CountDownLatchPubSub.ZERO_COUNT_MESSAGE`.
pub const LATCH_ZERO_MESSAGE: &str = "0";
/// `CountDownLatchPubSub.NEW_COUNT_MESSAGE`.
pub const LATCH_NEW_COUNT_MESSAGE: &str = "1";

/// Redisson's `prefixName(prefix, name)`: `prefix:{name}`, or `prefix:name`
/// when the name already has a `{`.
pub fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// Redisson's `suffixName(name, suffix)`: `{name}:suffix`, or `name:suffix`
/// when the name already has a `{`.
pub fn suffix_name(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// A semaphore's (and a permit semaphore's) channel: `redisson_sc:{name}`.
pub fn sem_channel(name: &str) -> String {
    prefix_name("redisson_sc", name)
}

/// A permit semaphore's leases: the sorted set `{name}:timeout`.
pub fn permit_timeouts(name: &str) -> String {
    suffix_name(name, "timeout")
}

/// A latch's channel: `redisson_countdownlatch__channel__{name}` (always
/// braced: `RedissonCountDownLatch.getChannelName` does not use `prefixName`).
pub fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// A permit id as Redisson shows it: 32 lowercase hex chars of 16 bytes.
pub fn hex_id(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new random permit id (hex), as `ServiceManager.generateId()` makes one.
pub fn new_permit_id() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let half = |salt: u64| {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(n ^ salt);
        h.write_u128(crate::timing::now_ms() as u128);
        h.finish()
    };
    let mut bytes = half(1).to_be_bytes().to_vec();
    bytes.extend_from_slice(&half(2).to_be_bytes());
    hex_id(&bytes)
}

fn sem_keys(name: &str) -> [Vec<u8>; 2] {
    [name.as_bytes().to_vec(), sem_channel(name).into_bytes()]
}

/// `trySetPermits`: 1 set (count published), 0 the key exists.
pub fn script_sem_try_set(con: &mut impl ConnectionLike, name: &str, permits: i64) -> i64 {
    let reply = eval(
        con,
        SEM_TRY_SET_PERMITS,
        &sem_keys(name),
        (permits, PUBLISH_COMMAND),
    );
    redis::from_redis_value(reply).expect("0 or 1")
}

/// `trySetPermits(permits, ttl)`: 1 set (count published), 0 the key exists.
pub fn script_sem_try_set_px(
    con: &mut impl ConnectionLike,
    name: &str,
    permits: i64,
    ttl_ms: i64,
) -> i64 {
    let argv = (permits, PUBLISH_COMMAND, ttl_ms);
    let reply = eval(con, SEM_TRY_SET_PERMITS_PX, &sem_keys(name), argv);
    redis::from_redis_value(reply).expect("0 or 1")
}

/// `addPermits(delta)`: publishes the new count (no reply).
pub fn script_sem_add(con: &mut impl ConnectionLike, name: &str, delta: i64) {
    eval(
        con,
        SEM_ADD_PERMITS,
        &sem_keys(name),
        (delta, PUBLISH_COMMAND),
    );
}

/// `tryAcquire(permits)`: true taken.
pub fn script_sem_try_acquire(con: &mut impl ConnectionLike, name: &str, permits: i64) -> bool {
    let reply = eval(con, SEM_TRY_ACQUIRE, &[name.as_bytes().to_vec()], permits);
    redis::from_redis_value::<i64>(reply).expect("0 or 1") == 1
}

/// `release(permits)`: publishes the new count (no reply).
pub fn script_sem_release(con: &mut impl ConnectionLike, name: &str, permits: i64) {
    eval(
        con,
        SEM_RELEASE,
        &sem_keys(name),
        (permits, PUBLISH_COMMAND),
    );
}

/// `drainPermits()`: how many it took.
pub fn script_sem_drain(con: &mut impl ConnectionLike, name: &str) -> i64 {
    let reply = eval(
        con,
        SEM_DRAIN,
        &[name.as_bytes().to_vec()],
        Vec::<Vec<u8>>::new(),
    );
    redis::from_redis_value(reply).expect("a count")
}

/// `RSemaphore.availablePermits()` and `RCountDownLatch.getCount()`: a plain
/// `GET` (None when the key is missing).
pub fn redisson_get_count(con: &mut impl ConnectionLike, name: &str) -> Option<i64> {
    redis::cmd("GET")
        .arg(name)
        .query(con)
        .unwrap_or_else(|e| panic!("GET {name:?}: {e}"))
}

fn permit_keys(name: &str) -> [Vec<u8>; 3] {
    [
        name.as_bytes().to_vec(),
        permit_timeouts(name).into_bytes(),
        sem_channel(name).into_bytes(),
    ]
}

/// Keys in `tryRelease`'s order: value, channel, leases.
fn permit_release_keys(name: &str) -> [Vec<u8>; 3] {
    [
        name.as_bytes().to_vec(),
        sem_channel(name).into_bytes(),
        permit_timeouts(name).into_bytes(),
    ]
}

/// What `RPermitExpirableSemaphore`'s acquire script answered.
#[derive(Debug, Clone, PartialEq)]
pub enum PermitTry {
    /// Taken: the new ids (hex).
    Taken(Vec<String>),
    /// Not taken; the nearest lease deadline (unix ms), `':' .. score`.
    Nearest(i64),
    /// Not taken, no expiring lease (nil).
    None,
}

/// `tryAcquire(permits, lease)` with `now` = this process's clock (`lease_ms`
/// None = no lease, the score 922337203685477).
pub fn script_permit_try_acquire(
    con: &mut impl ConnectionLike,
    name: &str,
    permits: usize,
    lease_ms: Option<i64>,
) -> PermitTry {
    script_permit_try_acquire_at(con, name, permits, lease_ms, crate::timing::now_ms())
}

/// [`script_permit_try_acquire`] with the client's clock reading `now`.
pub fn script_permit_try_acquire_at(
    con: &mut impl ConnectionLike,
    name: &str,
    permits: usize,
    lease_ms: Option<i64>,
    now: i64,
) -> PermitTry {
    let ids: Vec<String> = (0..permits).map(|_| new_permit_id()).collect();
    let deadline = lease_ms.map_or(NON_EXPIRABLE, |lease| now + lease);
    let mut argv: Vec<Vec<u8>> = [
        permits.to_string(),
        deadline.to_string(),
        now.to_string(),
        NON_EXPIRABLE.to_string(),
        PUBLISH_COMMAND.to_string(),
    ]
    .map(String::into_bytes)
    .to_vec();
    argv.extend(ids.iter().map(|id| id_bytes(id)));
    match eval(con, PERMIT_TRY_ACQUIRE, &permit_keys(name), argv) {
        Value::Nil => PermitTry::None,
        Value::Okay => PermitTry::Taken(ids),
        Value::SimpleString(s) if s == "OK" => PermitTry::Taken(ids),
        Value::BulkString(s) if s == b"OK" => PermitTry::Taken(ids),
        other => {
            let text: String = redis::from_redis_value(other.clone())
                .unwrap_or_else(|_| panic!("permit acquire script: {other:?}"));
            let score = text
                .strip_prefix(':')
                .unwrap_or_else(|| panic!("permit acquire script: {text:?}"));
            PermitTry::Nearest(
                score
                    .parse()
                    .unwrap_or_else(|_| panic!("a score: {text:?}")),
            )
        }
    }
}

/// `tryRelease(id)` at this process's clock: 1 released, 0 not held (or
/// held but expired: then released anyway).
pub fn script_permit_release(con: &mut impl ConnectionLike, name: &str, id: &str) -> i64 {
    let argv = (id_bytes(id), 1, crate::timing::now_ms(), PUBLISH_COMMAND);
    let reply = eval(con, PERMIT_RELEASE, &permit_release_keys(name), argv);
    redis::from_redis_value(reply).expect("0 or 1")
}

/// `tryRelease(ids)` at this process's clock: the number released, 0 if any
/// id is not held.
pub fn script_permit_release_many(con: &mut impl ConnectionLike, name: &str, ids: &[&str]) -> i64 {
    let mut argv: Vec<Vec<u8>> = vec![
        ids.len().to_string().into_bytes(),
        crate::timing::now_ms().to_string().into_bytes(),
        PUBLISH_COMMAND.as_bytes().to_vec(),
    ];
    argv.extend(ids.iter().map(|id| id_bytes(id)));
    let reply = eval(con, PERMIT_RELEASE_MANY, &permit_release_keys(name), argv);
    redis::from_redis_value(reply).expect("a count")
}

/// `updateLeaseTime(id, lease)` at this process's clock (`None` = -1, no
/// lease): 1 set, 0 not held.
pub fn script_permit_update_lease(
    con: &mut impl ConnectionLike,
    name: &str,
    id: &str,
    lease_ms: Option<i64>,
) -> i64 {
    let now = crate::timing::now_ms();
    let deadline = lease_ms.map_or(NON_EXPIRABLE, |lease| now + lease);
    let argv = (id_bytes(id), deadline, now, PUBLISH_COMMAND);
    let reply = eval(con, PERMIT_UPDATE_LEASE, &permit_keys(name), argv);
    redis::from_redis_value(reply).expect("0 or 1")
}

/// `RPermitExpirableSemaphore.availablePermits()` at this process's clock.
pub fn script_permit_available(con: &mut impl ConnectionLike, name: &str) -> i64 {
    let argv = (crate::timing::now_ms(), PUBLISH_COMMAND);
    let reply = eval(con, PERMIT_AVAILABLE, &permit_keys(name), argv);
    redis::from_redis_value(reply).expect("a count")
}

fn latch_keys(name: &str) -> [Vec<u8>; 2] {
    [name.as_bytes().to_vec(), latch_channel(name).into_bytes()]
}

/// `trySetCount(count)`: 1 set (`1` published), 0 the latch exists.
pub fn script_latch_try_set(con: &mut impl ConnectionLike, name: &str, count: i64) -> i64 {
    let argv = (LATCH_NEW_COUNT_MESSAGE, count, PUBLISH_COMMAND);
    let reply = eval(con, LATCH_TRY_SET_COUNT, &latch_keys(name), argv);
    redis::from_redis_value(reply).expect("0 or 1")
}

/// `countDown()`: at zero the key is deleted and `0` published (no reply).
pub fn script_latch_count_down(con: &mut impl ConnectionLike, name: &str) {
    let argv = (LATCH_ZERO_MESSAGE, PUBLISH_COMMAND);
    eval(con, LATCH_COUNT_DOWN, &latch_keys(name), argv);
}

/// `RCountDownLatch.delete()`: 1 deleted (`1` published), 0 no latch.
pub fn script_latch_delete(con: &mut impl ConnectionLike, name: &str) -> i64 {
    let argv = (LATCH_NEW_COUNT_MESSAGE, PUBLISH_COMMAND);
    let reply = eval(con, LATCH_DELETE, &latch_keys(name), argv);
    redis::from_redis_value(reply).expect("0 or 1")
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
