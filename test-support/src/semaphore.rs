//! Semaphores, permits and count-down latches (issue 18): their keys,
//! `LOCK.SEMINFO` and `LOCK.LATCHINFO` decoded, and waiting until a wait
//! queue has a given length.

use std::time::Duration;

use redis::{ConnectionLike, Value};

use crate::commands::{cmd1, query};
use crate::reply::{as_string, map_pairs};
use crate::server::Server;
use crate::timing::eventually;

/// The sorted set of a permit semaphore's leased permits: Redisson's
/// `suffixName(name, "timeout")`.
pub fn timeout_key(name: &str) -> String {
    if name.contains('{') {
        format!("{name}:timeout")
    } else {
        format!("{{{name}}}:timeout")
    }
}

/// `LOCK.SEMINFO`, decoded; None for nil (no key, nobody waiting).
#[derive(Debug, Clone, PartialEq)]
pub struct SemInfo {
    pub available: i64,
    /// (id, deadline in unix ms, -1 = never).
    pub permits: Vec<(String, i64)>,
    /// Each waiter's `[wants, permits, waited-ms, timeout-ms]`.
    pub waiters: Vec<Vec<Value>>,
}

fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(items) | Value::Set(items) => items.clone(),
        other => panic!("expected an array: {other:?}"),
    }
}

pub fn sem_info(con: &mut impl ConnectionLike, name: &str) -> Option<SemInfo> {
    let reply: Value = query(con, &cmd1("LOCK.SEMINFO", name));
    if reply == Value::Nil {
        return None;
    }
    let mut info = SemInfo {
        available: 0,
        permits: Vec::new(),
        waiters: Vec::new(),
    };
    for (k, v) in map_pairs(&reply) {
        match as_string(&k).as_deref() {
            Some("available") => info.available = redis::from_redis_value(v).expect("an integer"),
            Some("permits") => {
                info.permits = list(&v)
                    .iter()
                    .map(|p| redis::from_redis_value(p.clone()).expect("[id, deadline]"))
                    .collect()
            }
            Some("waiters") => info.waiters = list(&v).iter().map(list).collect(),
            _ => {}
        }
    }
    Some(info)
}

/// How many wait in the semaphore's queue (0 when `LOCK.SEMINFO` is nil).
pub fn sem_waiters(server: &Server, name: &str) -> usize {
    sem_info(&mut server.connection(), name).map_or(0, |i| i.waiters.len())
}

/// Waits (up to 5 s) until `n` wait in the semaphore's queue.
pub async fn sem_queue_becomes(server: &Server, name: &str, n: usize) {
    let what = format!("{n} waiting on semaphore {name}");
    eventually(Duration::from_secs(5), &what, || {
        sem_waiters(server, name) == n
    })
    .await;
}

/// How many wait on the latch (`LOCK.LATCHINFO`'s `waiters`).
pub fn latch_waiters(server: &Server, name: &str) -> usize {
    let reply: Value = query(&mut server.connection(), &cmd1("LOCK.LATCHINFO", name));
    map_pairs(&reply)
        .into_iter()
        .find(|(k, _)| as_string(k).as_deref() == Some("waiters"))
        .map_or(0, |(_, v)| list(&v).len())
}

/// Waits (up to 5 s) until `n` wait on the latch.
pub async fn latch_queue_becomes(server: &Server, name: &str, n: usize) {
    let what = format!("{n} waiting on latch {name}");
    eventually(Duration::from_secs(5), &what, || {
        latch_waiters(server, name) == n
    })
    .await;
}
