//! What the client's semaphore and latch tests add to [`crate::permits`]:
//! `LOCK.SEMINFO` decoded (the free count and each leased permit's
//! deadline), and async waits until a wait queue has a given length.

use std::time::Duration;

use redis::{ConnectionLike, Value};

use crate::commands::{cmd1, query};
use crate::permits::queued;
use crate::reply::{as_string, map_pairs};
use crate::server::Server;
use crate::timing::eventually;

/// `LOCK.SEMINFO`, decoded; None for nil (no key, nobody waiting).
#[derive(Debug, Clone, PartialEq)]
pub struct SemInfo {
    pub available: i64,
    /// (id, deadline in unix ms, -1 = never).
    pub permits: Vec<(String, i64)>,
    /// How many wait.
    pub waiters: usize,
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
        waiters: 0,
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
            Some("waiters") => info.waiters = list(&v).len(),
            _ => {}
        }
    }
    Some(info)
}

/// How many wait in semaphore `name`'s queue.
pub fn sem_waiters(server: &Server, name: &str) -> usize {
    queued(&mut server.connection(), "LOCK.SEMINFO", name).len()
}

/// How many wait on latch `name`.
pub fn latch_waiters(server: &Server, name: &str) -> usize {
    queued(&mut server.connection(), "LOCK.LATCHINFO", name).len()
}

/// Waits (up to 5 s) until `n` wait in semaphore `name`'s queue.
pub async fn sem_queue_becomes(server: &Server, name: &str, n: usize) {
    let what = format!("{n} waiting on semaphore {name}");
    eventually(Duration::from_secs(5), &what, || {
        sem_waiters(server, name) == n
    })
    .await;
}

/// Waits (up to 5 s) until `n` wait on latch `name`.
pub async fn latch_queue_becomes(server: &Server, name: &str, n: usize) {
    let what = format!("{n} waiting on latch {name}");
    eventually(Duration::from_secs(5), &what, || {
        latch_waiters(server, name) == n
    })
    .await;
}
