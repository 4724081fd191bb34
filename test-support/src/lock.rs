//! `LOCK.*` commands, typed: one call per command and reply shape, the
//! `LOCK.INFO` decoder (a strict oracle of the reply), the wait queue as
//! `LOCK.INFO` shows it, and the module's `INFO lock_stats` counters.

use std::time::Duration;

use redis::{ConnectionLike, ToRedisArgs, Value};

use crate::commands::{cmd1, query};
use crate::reply::{as_bytes, as_string, find_field, map_pairs};
use crate::server::Server;
use crate::timing::eventually;

/// `LOCK.INFO`, decoded from either protocol.
#[derive(Debug, Clone, PartialEq)]
pub struct LockInfo {
    pub state: String,
    /// owner -> count reply (Int normally; bulk bytes for a foreign value).
    pub owners: Vec<(Vec<u8>, Value)>,
    pub ttl_ms: i64,
    pub deadline_ms: i64,
    pub waiters: Vec<Value>,
    /// The last fencing token (`None`: nil).
    pub token: Option<i64>,
    /// The places kept for waiters that left, in queue order.
    pub kept: Vec<Value>,
}

impl LockInfo {
    pub fn parse(v: &Value) -> LockInfo {
        let pairs = map_pairs(v);
        let fields: Vec<String> = pairs
            .iter()
            .map(|(k, _)| as_string(k).expect("LOCK.INFO field name"))
            .collect();
        assert_eq!(
            fields,
            [
                "state",
                "owners",
                "ttl_ms",
                "deadline_ms",
                "waiters",
                "token",
                "kept"
            ],
            "LOCK.INFO fields: {v:?}"
        );
        let get = |name: &str| {
            &pairs[fields
                .iter()
                .position(|f| f == name)
                .expect("field present")]
            .1
        };
        let int = |name: &str| match get(name) {
            Value::Int(i) => *i,
            other => panic!("LOCK.INFO {name} should be an integer: {other:?}"),
        };
        LockInfo {
            state: as_string(get("state")).expect("state is a string"),
            owners: map_pairs(get("owners"))
                .into_iter()
                .map(|(k, v)| (as_bytes(&k).expect("owner id is a string"), v))
                .collect(),
            ttl_ms: int("ttl_ms"),
            deadline_ms: int("deadline_ms"),
            waiters: match get("waiters") {
                Value::Array(w) | Value::Set(w) => w.clone(),
                other => panic!("LOCK.INFO waiters should be an array: {other:?}"),
            },
            token: match get("token") {
                Value::Nil => None,
                Value::Int(token) => Some(*token),
                other => panic!("LOCK.INFO token should be an integer or nil: {other:?}"),
            },
            kept: match get("kept") {
                Value::Array(k) | Value::Set(k) => k.clone(),
                other => panic!("LOCK.INFO kept should be an array: {other:?}"),
            },
        }
    }

    /// The owners whose places are kept, in queue order.
    pub fn kept_owners(&self) -> Vec<String> {
        let owner = |place: &Value| {
            let owner = find_field(place, "owner").expect("a kept place's owner");
            as_string(&owner).expect("owner")
        };
        self.kept.iter().map(owner).collect()
    }

    /// Field `name` (`owner`, `waited_ms`, `timeout_ms`...) of the `i`th waiter.
    pub fn waiter_field(&self, i: usize, name: &str) -> Value {
        find_field(&self.waiters[i], name)
            .unwrap_or_else(|| panic!("waiter {i} has no {name}: {:?}", self.waiters[i]))
    }

    pub fn count_of(&self, owner: &[u8]) -> Option<i64> {
        self.owners
            .iter()
            .find(|(o, _)| o == owner)
            .map(|(_, v)| match v {
                Value::Int(i) => *i,
                other => panic!(
                    "count of {:?} is not an integer: {other:?}",
                    String::from_utf8_lossy(owner)
                ),
            })
    }
}

pub fn lock_info(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> LockInfo {
    LockInfo::parse(&query(con, &cmd1("LOCK.INFO", key)))
}

fn lock_command(
    name: &str,
    key: impl ToRedisArgs,
    owner: impl ToRedisArgs,
    lease_ms: Option<i64>,
) -> redis::Cmd {
    let mut cmd = cmd1(name, key);
    cmd.arg(owner).arg(lease_ms);
    cmd
}

/// `LOCK.ACQUIRE`: `None` = granted (nil), `Some(ttl)` = busy.
pub fn acquire(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    owner: impl ToRedisArgs,
    lease_ms: i64,
) -> Option<i64> {
    query(
        con,
        &lock_command("LOCK.ACQUIRE", key, owner, Some(lease_ms)),
    )
}

/// `LOCK.ACQUIRE ... TOKEN`: Redisson RFencedLock's pair, `(-1, token)` =
/// granted, `(ttl, -1)` = busy.
pub fn acquire_token(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    owner: impl ToRedisArgs,
    lease_ms: i64,
) -> (i64, i64) {
    let mut cmd = lock_command("LOCK.ACQUIRE", key, owner, Some(lease_ms));
    cmd.arg("TOKEN");
    query(con, &cmd)
}

/// `acquire_token` for a grant: the token.
pub fn token_of(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    owner: impl ToRedisArgs,
    lease_ms: i64,
) -> i64 {
    match acquire_token(con, key, owner, lease_ms) {
        (-1, token) if token > 0 => token,
        other => panic!("expected a grant with a token, got {other:?}"),
    }
}

/// The lock's token counter, per `GET redisson_lock_token:{key}`.
pub fn counter(con: &mut impl ConnectionLike, key: &str) -> Option<i64> {
    query(con, &cmd1("GET", format!("redisson_lock_token:{{{key}}}")))
}

/// `LOCK.RENEW`: 1 = renewed, 0 = not held by `owner`.
pub fn renew(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    owner: impl ToRedisArgs,
    lease_ms: i64,
) -> i64 {
    query(con, &lock_command("LOCK.RENEW", key, owner, Some(lease_ms)))
}

/// `LOCK.RELEASE`, with or without a lease: `None` = not held (nil),
/// `Some(0)` = still held, `Some(1)` = freed.
pub fn release(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    owner: impl ToRedisArgs,
    lease_ms: Option<i64>,
) -> Option<i64> {
    query(con, &lock_command("LOCK.RELEASE", key, owner, lease_ms))
}

/// `LOCK.FORCE`: 1 = deleted, 0 = no lock.
pub fn force(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> i64 {
    query(con, &cmd1("LOCK.FORCE", key))
}

/// `LOCK.FENCE`: the token the fence `key` now holds, or the server's error
/// (`STALE` for a token older than one it has seen).
pub fn fence(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    token: i64,
) -> redis::RedisResult<i64> {
    let mut cmd = cmd1("LOCK.FENCE", key);
    cmd.arg(token);
    cmd.query(con)
}

/// The owners in the lock's wait queue, in order, per `LOCK.INFO`.
pub fn waiter_owners(server: &Server, key: &str) -> Vec<String> {
    let info = lock_info(&mut server.connection(), key);
    (0..info.waiters.len())
        .map(|i| as_string(&info.waiter_field(i, "owner")).expect("a waiter's owner is a string"))
        .collect()
}

/// Waits (up to 5 s) until the waiters queued on `key` are exactly `owners`,
/// in order: a wait has reached the server, or left it.
pub async fn queue_becomes(server: &Server, key: &str, owners: &[&str]) {
    let what = format!("the queue of {key} is {owners:?}");
    eventually(Duration::from_secs(5), &what, || {
        waiter_owners(server, key) == owners
    })
    .await;
}

pub fn stat(server: &Server, name: &str) -> u64 {
    server
        .lock_stats()
        .get(name)
        .copied()
        .unwrap_or_else(|| panic!("INFO lock_stats has {name}"))
}

/// How many times `command` (lower case, e.g. `lock.acquire`) ran, per
/// `INFO commandstats`; 0 when it never did.
pub fn calls(server: &Server, command: &str) -> u64 {
    server.command_stats().get(command).copied().unwrap_or(0)
}
