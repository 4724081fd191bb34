//! Semaphores and latches (`LOCK.SEM*`, `LOCK.PERMIT*`, `LOCK.LATCH*`,
//! `LOCK.AWAIT`): their keys, their inspection (`LOCK.SEMINFO` decoded),
//! and clients queued for them, waited for blocking or async.

use std::time::Duration;

use redis::{Connection, ConnectionLike, Value};

use crate::commands::{cmd1, command, query, run_int};
use crate::raw::RawClient;
use crate::reply::{as_string, find_field, map_pairs};
use crate::server::Server;
use crate::timing::{eventually, poll_until};

/// The leased-permit set of semaphore `name`: `{name}:timeout`.
pub fn permits_key(name: &str) -> String {
    if name.contains('{') {
        format!("{name}:timeout")
    } else {
        format!("{{{name}}}:timeout")
    }
}

/// A permit id (32 hex characters) as the 16 bytes stored in the set (and
/// sent by Redisson's scripts: `ByteBufUtil.decodeHexDump`).
pub fn id_bytes(id: &str) -> Vec<u8> {
    assert_eq!(id.len(), 32, "a permit id is 32 hex characters: {id}");
    (0..16)
        .map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// The ids of a `LOCK.PERMITACQUIRE` reply (empty for nil).
pub fn ids_of(reply: &Value) -> Vec<String> {
    match reply {
        Value::Nil => Vec::new(),
        Value::Array(items) => items.iter().map(|v| as_string(v).expect("an id")).collect(),
        other => panic!("not a PERMITACQUIRE reply: {other:?}"),
    }
}

/// The deadline (unix ms) of permit `id` of semaphore `name`, `None` when
/// it is not in the set.
pub fn permit_deadline(con: &mut impl ConnectionLike, name: &str, id: &str) -> Option<i64> {
    let score: Option<f64> = query(
        con,
        command("ZSCORE").arg(permits_key(name)).arg(id_bytes(id)),
    );
    score.map(|s| s as i64)
}

/// How many leased permits semaphore `name`'s set holds.
pub fn permits_taken(con: &mut impl ConnectionLike, name: &str) -> i64 {
    query(con, command("ZCARD").arg(permits_key(name)))
}

/// `LOCK.SEMINFO name`'s `waiters`, each as `(wants, permits)`; also
/// `LOCK.LATCHINFO`'s, as `("latch", 0)`.
pub fn queued(con: &mut impl ConnectionLike, command_name: &str, name: &str) -> Vec<(String, i64)> {
    let info: Value = query(con, &command(&[command_name, name]));
    let waiters = find_field(&info, "waiters").unwrap_or(Value::Array(Vec::new()));
    let Value::Array(waiters) = waiters else {
        panic!("waiters is not an array: {waiters:?}")
    };
    waiters
        .iter()
        .map(|w| {
            let field = |name: &str| find_field(w, name);
            let wants = field("wants")
                .and_then(|v| as_string(&v))
                .unwrap_or_else(|| "latch".into());
            let permits = match field("permits") {
                Some(Value::Int(n)) => n,
                _ => 0,
            };
            (wants, permits)
        })
        .collect()
}

/// Sends `args` (a blocking `LOCK.SEMACQUIRE`/`LOCK.PERMITACQUIRE ... WAIT`
/// or `LOCK.AWAIT`) from a new raw client and returns once the server shows
/// it queued, so the next one queues behind it.
pub fn queue_for(server: &Server, args: &[&str]) -> RawClient {
    let info = if args[0].eq_ignore_ascii_case("LOCK.AWAIT") {
        "LOCK.LATCHINFO"
    } else {
        "LOCK.SEMINFO"
    };
    let name = args[1];
    let mut con = server.connection();
    let before = queued(&mut con, info, name).len();
    let mut client = RawClient::connect(server.port);
    client.send(args);
    poll_until(Duration::from_secs(5), "the client is queued", || {
        queued(&mut con, info, name).len() > before
    });
    client
}

/// A new server on which `setup` (a command that makes a new semaphore or
/// latch, `LOCK.SEMSET`/`LOCK.LATCHSET`) answered 1, and a connection to it:
/// where most semaphore and latch tests start.
pub fn server_set_up_by(setup: &[&str]) -> (Server, Connection) {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(run_int(&mut con, setup), 1, "{setup:?} on a new server");
    (server, con)
}

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
