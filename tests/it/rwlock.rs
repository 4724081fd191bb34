//! The read-write lock: `LOCK.RACQUIRE`, `LOCK.WACQUIRE`, `LOCK.RRELEASE`,
//! `LOCK.WRELEASE`, `LOCK.RWRENEW` (and `LOCK.FORCE`, `LOCK.INFO`) on
//! Redisson `RReadWriteLock`'s layout, against real servers: sharing,
//! exclusion, the fair queue and its reader batches, downgrade, the refused
//! upgrade, holds that end on their own deadlines, Redisson's scripts both
//! ways, replication and restarts.

use std::time::{Duration, Instant};

use redis::{Connection, Value};
use redis_lock_test_support::raw::{RawClient, Resp};
use redis_lock_test_support::*;

const READ_LOCK: &str = include_str!("../../redisson/rw-read-lock.lua");
const READ_UNLOCK: &str = include_str!("../../redisson/rw-read-unlock.lua");
const READ_RENEW: &str = include_str!("../../redisson/rw-read-renew.lua");
const WRITE_LOCK: &str = include_str!("../../redisson/rw-write-lock.lua");
const WRITE_UNLOCK: &str = include_str!("../../redisson/rw-write-unlock.lua");

/// A command's reply; a server error is returned as `Err(text)`.
fn call(con: &mut Connection, args: &[&str]) -> Result<Value, String> {
    command(args).query(con).map_err(|e| err_text(&e))
}

fn racquire(con: &mut Connection, key: &str, owner: &str, lease_ms: u64) -> Value {
    run(con, &["LOCK.RACQUIRE", key, owner, &lease_ms.to_string()])
}

fn wacquire(con: &mut Connection, key: &str, owner: &str, lease_ms: u64) -> Value {
    run(con, &["LOCK.WACQUIRE", key, owner, &lease_ms.to_string()])
}

fn rrelease(con: &mut Connection, key: &str, owner: &str) -> Value {
    run(con, &["LOCK.RRELEASE", key, owner])
}

fn wrelease(con: &mut Connection, key: &str, owner: &str) -> Value {
    run(con, &["LOCK.WRELEASE", key, owner])
}

/// Sends `LOCK.{R,W}ACQUIRE key owner lease WAIT timeout` from its own
/// connection and returns once the server shows it queued.
fn queue_rw(server: &Server, cmd: &str, key: &str, owner: &str, timeout_ms: u64) -> RawClient {
    let before = rw_waiters(server, key).len();
    let mut waiter = RawClient::connect(server.port);
    waiter.send(&[cmd, key, owner, "30000", "WAIT", &timeout_ms.to_string()]);
    poll_until(Duration::from_secs(5), "the waiter is queued", || {
        rw_waiters(server, key).len() > before
    });
    waiter
}

/// `LOCK.INFO key` as (field name, value) pairs.
fn info(con: &mut Connection, key: &str) -> Vec<(String, Value)> {
    map_pairs(&run(con, &["LOCK.INFO", key]))
        .into_iter()
        .map(|(k, v)| (as_string(&k).expect("field name"), v))
        .collect()
}

fn info_field(con: &mut Connection, key: &str, name: &str) -> Value {
    field_of(&run(con, &["LOCK.INFO", key]), name)
}

/// The queue, as `(owner, wants)`.
fn rw_waiters(server: &Server, key: &str) -> Vec<(String, String)> {
    let waiters = info_field(&mut server.connection(), key, "waiters");
    let Value::Array(waiters) = waiters else {
        panic!("waiters: {waiters:?}");
    };
    waiters
        .iter()
        .map(|w| {
            let get = |name: &str| {
                find_field(w, name)
                    .and_then(|v| as_string(&v))
                    .unwrap_or_default()
            };
            (get("owner"), get("wants"))
        })
        .collect()
}

fn hold_key(key: &str, owner: &str, n: u32) -> String {
    format!("{{{key}}}:{owner}:rwlock_timeout:{n}")
}

fn text_pairs(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(String, String)> {
    pairs
        .into_iter()
        .map(|(k, v)| {
            (
                String::from_utf8_lossy(&k).into_owned(),
                String::from_utf8_lossy(&v).into_owned(),
            )
        })
        .collect()
}

fn fields(con: &mut Connection, key: &str) -> Vec<(String, String)> {
    text_pairs(hgetall(con, key))
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn eval(con: &mut Connection, script: &str, keys: &[&str], args: &[&str]) -> Value {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(keys.len()).arg(keys).arg(args);
    cmd.query(con).expect("Redisson's script runs")
}

/// Redisson's read lock for `owner` (`<uuid>:<thread>`).
fn redisson_read(con: &mut Connection, key: &str, owner: &str, lease_ms: u64) -> Value {
    let prefix = format!("{{{key}}}:{owner}:rwlock_timeout");
    let write = format!("{owner}:write");
    eval(
        con,
        READ_LOCK,
        &[key, &prefix],
        &[&lease_ms.to_string(), owner, &write],
    )
}

fn redisson_read_unlock(con: &mut Connection, key: &str, owner: &str) -> Value {
    let prefix = format!("{{{key}}}:{owner}:rwlock_timeout");
    let channel = format!("redisson_rwlock:{{{key}}}");
    let tag = format!("{{{key}}}");
    eval(
        con,
        READ_UNLOCK,
        &[key, &channel, &prefix, &tag],
        &["0", owner],
    )
}

fn redisson_read_renew(con: &mut Connection, key: &str, owner: &str, lease_ms: u64) -> Value {
    let tag = format!("{{{key}}}");
    eval(
        con,
        READ_RENEW,
        &[key, &tag],
        &[&lease_ms.to_string(), owner],
    )
}

fn redisson_write(con: &mut Connection, key: &str, owner: &str, lease_ms: u64) -> Value {
    let write = format!("{owner}:write");
    eval(con, WRITE_LOCK, &[key], &[&lease_ms.to_string(), &write])
}

fn redisson_write_unlock(con: &mut Connection, key: &str, owner: &str) -> Value {
    let write = format!("{owner}:write");
    let channel = format!("redisson_rwlock:{{{key}}}");
    eval(con, WRITE_UNLOCK, &[key, &channel], &["1", "30000", &write])
}

fn is_busy(v: &Value) -> bool {
    matches!(v, Value::Int(ttl) if *ttl > 0)
}

#[test]
fn readers_share_a_writer_excludes_and_the_keys_are_redissons() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(racquire(&mut con, "doc", "a:1", 30_000), Value::Nil);
    assert_eq!(racquire(&mut con, "doc", "b:1", 10_000), Value::Nil);
    assert_eq!(
        racquire(&mut con, "doc", "a:1", 5_000),
        Value::Nil,
        "re-entry"
    );
    assert_eq!(
        fields(&mut con, "doc"),
        pairs(&[("a:1", "2"), ("b:1", "1"), ("mode", "read")])
    );
    for (owner, n, lease) in [("a:1", 1, 30_000), ("a:1", 2, 5_000), ("b:1", 1, 10_000)] {
        let hold = hold_key("doc", owner, n);
        assert_lease_just_set(&mut con, hold, lease, &format!("{owner} #{n}"));
    }
    let ttl = pttl(&mut con, "doc");
    assert!(
        ttl > 29_000,
        "the hash lives as long as its longest hold: {ttl}"
    );
    assert!(is_busy(&wacquire(&mut con, "doc", "w:1", 1_000)));

    // The last reader's release deletes the lock and its hold keys.
    assert_eq!(rrelease(&mut con, "doc", "a:1"), Value::Int(0));
    assert_eq!(rrelease(&mut con, "doc", "a:1"), Value::Int(1));
    assert_eq!(
        rrelease(&mut con, "doc", "a:1"),
        Value::Nil,
        "holds nothing"
    );
    assert_eq!(rrelease(&mut con, "doc", "b:1"), Value::Int(1));
    let keys: Vec<String> = command(&["KEYS", "*"]).query(&mut con).unwrap();
    assert!(keys.is_empty(), "{keys:?}");

    assert_eq!(wacquire(&mut con, "doc", "w:1", 30_000), Value::Nil);
    assert_eq!(
        fields(&mut con, "doc"),
        pairs(&[("mode", "write"), ("w:1:write", "1")])
    );
    assert!(is_busy(&racquire(&mut con, "doc", "r:1", 1_000)));
    assert!(is_busy(&wacquire(&mut con, "doc", "x:1", 1_000)));
    assert_eq!(wrelease(&mut con, "doc", "x:1"), Value::Nil);
    assert_eq!(wrelease(&mut con, "doc", "w:1"), Value::Int(1));
    assert!(!exists(&mut con, "doc"));
}

#[test]
fn a_writer_may_read_but_a_reader_may_not_write() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(wacquire(&mut con, "doc", "w:1", 30_000), Value::Nil);
    assert_eq!(
        racquire(&mut con, "doc", "w:1", 30_000),
        Value::Nil,
        "downgrade"
    );
    assert_eq!(wrelease(&mut con, "doc", "w:1"), Value::Int(1));
    assert_eq!(
        fields(&mut con, "doc"),
        pairs(&[("mode", "read"), ("w:1", "1")]),
        "the write release leaves the writer's read hold, in read mode"
    );
    assert_eq!(racquire(&mut con, "doc", "r:1", 30_000), Value::Nil);

    let before = fields(&mut con, "doc");
    let refused = call(&mut con, &["LOCK.WACQUIRE", "doc", "r:1", "1000"]).unwrap_err();
    assert!(
        refused.starts_with("ERR the owner holds this read-write lock for reading"),
        "{refused}"
    );
    let refused = call(
        &mut con,
        &["LOCK.WACQUIRE", "doc", "r:1", "1000", "WAIT", "0"],
    )
    .unwrap_err();
    assert!(
        refused.contains("release its read holds"),
        "never waits for itself"
    );
    assert_eq!(fields(&mut con, "doc"), before, "nothing changed");
}

#[test]
fn a_write_release_grants_the_readers_at_the_head_in_one_pass_and_stops_at_the_next_writer() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(wacquire(&mut con, "doc", "w1", 30_000), Value::Nil);
    let mut r1 = queue_rw(&server, "LOCK.RACQUIRE", "doc", "r1", 0);
    let mut r2 = queue_rw(&server, "LOCK.RACQUIRE", "doc", "r2", 0);
    let mut w2 = queue_rw(&server, "LOCK.WACQUIRE", "doc", "w2", 0);
    let mut r3 = queue_rw(&server, "LOCK.RACQUIRE", "doc", "r3", 0);
    assert_eq!(
        rw_waiters(&server, "doc"),
        pairs(&[
            ("r1", "read"),
            ("r2", "read"),
            ("w2", "write"),
            ("r3", "read")
        ])
    );

    assert_eq!(wrelease(&mut con, "doc", "w1"), Value::Int(1));
    assert_eq!(r1.read(), Resp::Nil);
    assert_eq!(r2.read(), Resp::Nil);
    assert_eq!(
        fields(&mut con, "doc"),
        pairs(&[("mode", "read"), ("r1", "1"), ("r2", "1")]),
        "both readers hold, in the same event"
    );
    assert_eq!(
        rw_waiters(&server, "doc"),
        pairs(&[("w2", "write"), ("r3", "read")]),
        "r3 stays behind the writer ahead of it"
    );
    // A newcomer does not overtake the waiting writer either.
    assert!(is_busy(&racquire(&mut con, "doc", "r4", 1_000)));

    assert_eq!(rrelease(&mut con, "doc", "r1"), Value::Int(1));
    assert_eq!(
        rw_waiters(&server, "doc"),
        pairs(&[("w2", "write"), ("r3", "read")]),
        "r2 still reads"
    );
    assert_eq!(rrelease(&mut con, "doc", "r2"), Value::Int(1));
    assert_eq!(w2.read(), Resp::Nil);
    assert_eq!(
        fields(&mut con, "doc"),
        pairs(&[("mode", "write"), ("w2:write", "1")])
    );
    assert_eq!(wrelease(&mut con, "doc", "w2"), Value::Int(1));
    assert_eq!(r3.read(), Resp::Nil);
    assert_eq!(
        fields(&mut con, "doc"),
        pairs(&[("mode", "read"), ("r3", "1")])
    );
    let stats = server.lock_stats();
    assert_eq!(stats["lock_rw_reads_granted"], 3);
    assert_eq!(stats["lock_rw_writes_granted"], 2);
}

#[test]
fn readers_behind_a_writer_that_gives_up_are_let_in_at_once() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(racquire(&mut con, "doc", "r1", 30_000), Value::Nil);
    let mut w = queue_rw(&server, "LOCK.WACQUIRE", "doc", "w", 200);
    let mut r2 = queue_rw(&server, "LOCK.RACQUIRE", "doc", "r2", 0);
    let started = Instant::now();
    assert!(
        matches!(w.read(), Resp::Int(ttl) if ttl > 0),
        "the writer times out"
    );
    assert_eq!(r2.read(), Resp::Nil, "then the reader behind it joins r1");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        fields(&mut con, "doc"),
        pairs(&[("mode", "read"), ("r1", "1"), ("r2", "1")])
    );

    // A writer at the head that disconnects does the same.
    let w = queue_rw(&server, "LOCK.WACQUIRE", "doc", "w", 0);
    let mut r3 = queue_rw(&server, "LOCK.RACQUIRE", "doc", "r3", 0);
    drop(w);
    assert_eq!(r3.read(), Resp::Nil);
}

/// Redisson's downgrade: its writer takes the read lock, then releases the
/// write lock with Redisson's own script, which turns the hash to read
/// (`HSET mode read`) without deleting it. A module reader queued behind
/// the writer is let in by that same script, as by `LOCK.WRELEASE`, not at
/// the writer's lease deadline 30 s later.
#[test]
fn a_redisson_downgrade_lets_the_queued_readers_in_at_once() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(redisson_write(&mut con, "doc", "rs:1", 30_000), Value::Nil);
    let mut reader = queue_rw(&server, "LOCK.RACQUIRE", "doc", "r:1", 0);
    assert_eq!(
        redisson_read(&mut con, "doc", "rs:1", 30_000),
        Value::Nil,
        "Redisson's writer reads too"
    );
    assert_eq!(rw_waiters(&server, "doc"), pairs(&[("r:1", "read")]));
    let downgraded = now_ms();
    assert_eq!(
        redisson_write_unlock(&mut con, "doc", "rs:1"),
        Value::Int(1)
    );
    poll_until(Duration::from_secs(2), "the reader is let in", || {
        rw_waiters(&server, "doc").is_empty()
    });
    assert_eq!(reader.read(), Resp::Nil);
    // The reader's hold was written at its grant, with its 30 s lease.
    let late = pexpiretime(&mut con, hold_key("doc", "r:1", 1)) - 30_000 - downgraded;
    assert!(
        (0..=20).contains(&late),
        "granted {late} ms after the downgrade"
    );
    assert_eq!(
        fields(&mut con, "doc"),
        pairs(&[("mode", "read"), ("r:1", "1"), ("rs:1", "1")])
    );
    eprintln!("reader let in {late} ms after Redisson's downgrade");
}

#[test]
fn a_dead_readers_hold_ends_on_its_own_deadline_and_the_writer_follows_within_20_ms() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    // The dead reader: a short lease, never renewed.
    assert_eq!(racquire(&mut con, "doc", "dead", 400), Value::Nil);
    let deadline = pexpiretime(&mut con, hold_key("doc", "dead", 1));
    // A live reader, renewing its own holds.
    assert_eq!(racquire(&mut con, "doc", "live", 1_000), Value::Nil);
    let mut writer = queue_rw(&server, "LOCK.WACQUIRE", "doc", "w", 0);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        run(&mut con, &["LOCK.RWRENEW", "doc", "live", "1000"]),
        Value::Int(1)
    );
    assert_eq!(rrelease(&mut con, "doc", "live"), Value::Int(1));
    assert_eq!(
        rw_waiters(&server, "doc"),
        pairs(&[("w", "write")]),
        "the dead reader's hold still counts"
    );
    let (reply, at) = reply_at(&mut writer);
    assert_eq!(reply, Resp::Nil);
    let late = at - deadline;
    assert!(
        (0..=20).contains(&late),
        "granted {late} ms after the last read hold's deadline"
    );
    eprintln!("writer granted {late} ms after the dead reader's hold ended");
}

#[test]
fn a_reader_whose_holds_all_ended_is_not_renewed_back_to_life() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(racquire(&mut con, "doc", "slow", 200), Value::Nil);
    assert_eq!(racquire(&mut con, "doc", "live", 30_000), Value::Nil);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        run(&mut con, &["LOCK.RWRENEW", "doc", "slow", "30000"]),
        Value::Int(0),
        "its hold ended, though its field is still in the hash"
    );
    assert_eq!(
        run(&mut con, &["LOCK.RWRENEW", "doc", "live", "30000"]),
        Value::Int(1)
    );
    assert_eq!(rrelease(&mut con, "doc", "live"), Value::Int(1));
    assert!(!exists(&mut con, "doc"), "nothing live kept it");
}

/// The same story with Redisson's scripts: the live reader's renewal renews
/// every reader's holds, the dead one's too, so its hold outlives it and the
/// writer waits on, long after the live reader released.
#[test]
fn with_redissons_renewal_a_dead_readers_hold_lives_on() {
    let server = Server::start();
    let mut con = server.connection();
    // The dead reader's 1.5 s lease must outlast the three commands before
    // the renewal (a loaded machine has taken 400 ms over them).
    assert_eq!(redisson_read(&mut con, "doc", "dead:1", 1_500), Value::Nil);
    assert_eq!(redisson_read(&mut con, "doc", "live:1", 30_000), Value::Nil);
    assert_eq!(
        redisson_read_renew(&mut con, "doc", "live:1", 30_000),
        Value::Int(1)
    );
    assert_eq!(
        redisson_read_unlock(&mut con, "doc", "live:1"),
        Value::Int(0)
    );
    std::thread::sleep(Duration::from_millis(1_700));
    let dead_hold = pttl(&mut con, hold_key("doc", "dead:1", 1));
    assert!(
        dead_hold > 20_000,
        "the dead reader's hold was renewed: {dead_hold}"
    );
    assert!(
        is_busy(&redisson_write(&mut con, "doc", "w:1", 1_000)),
        "and keeps the writer out"
    );
}

#[test]
fn redissons_scripts_and_the_commands_share_one_lock_both_ways() {
    let server = Server::start();
    let mut con = server.connection();
    // Redisson reads, the module reads alongside and cannot write.
    assert_eq!(redisson_read(&mut con, "doc", "j:1", 30_000), Value::Nil);
    assert_eq!(racquire(&mut con, "doc", "m:1", 30_000), Value::Nil);
    assert!(is_busy(&wacquire(&mut con, "doc", "m:2", 1_000)));
    // Each side releases its own holds; Redisson's scan sees the module's.
    assert_eq!(redisson_read_unlock(&mut con, "doc", "j:1"), Value::Int(0));
    assert!(exists(&mut con, "doc"), "the module's hold keeps it");
    assert_eq!(rrelease(&mut con, "doc", "m:1"), Value::Int(1));
    assert!(!exists(&mut con, "doc"));

    // The module writes; Redisson can neither read nor write.
    assert_eq!(wacquire(&mut con, "doc", "m:1", 30_000), Value::Nil);
    assert!(is_busy(&redisson_read(&mut con, "doc", "j:1", 1_000)));
    assert!(is_busy(&redisson_write(&mut con, "doc", "j:1", 1_000)));
    // Redisson's own write unlock releases the module's write (same owner).
    assert_eq!(redisson_write_unlock(&mut con, "doc", "m:1"), Value::Int(1));
    assert!(!exists(&mut con, "doc"));

    // Redisson writes, re-enters, downgrades; the module releases it all.
    assert_eq!(redisson_write(&mut con, "doc", "j:1", 30_000), Value::Nil);
    assert!(is_busy(&racquire(&mut con, "doc", "m:1", 1_000)));
    assert_eq!(
        racquire(&mut con, "doc", "j:1", 30_000),
        Value::Nil,
        "downgrade"
    );
    assert_eq!(wrelease(&mut con, "doc", "j:1"), Value::Int(1));
    assert_eq!(redisson_read_unlock(&mut con, "doc", "j:1"), Value::Int(1));
    assert!(!exists(&mut con, "doc"));
}

#[test]
fn unlock_messages_are_redissons() {
    let server = Server::start();
    let mut con = server.connection();
    let mut sub = Subscriber::new(&server, &[b"redisson_rwlock:{doc}"]);
    assert_eq!(racquire(&mut con, "doc", "r", 30_000), Value::Nil);
    assert_eq!(rrelease(&mut con, "doc", "r"), Value::Int(1));
    assert_eq!(wacquire(&mut con, "doc", "w", 30_000), Value::Nil);
    assert_eq!(wrelease(&mut con, "doc", "w"), Value::Int(1));
    assert_eq!(wacquire(&mut con, "doc", "w", 30_000), Value::Nil);
    assert_eq!(run(&mut con, &["LOCK.FORCE", "doc"]), Value::Int(1));
    assert_eq!(
        show(&sub.drain(&mut con)),
        pairs(&[
            ("redisson_rwlock:{doc}", "0"),
            ("redisson_rwlock:{doc}", "1"),
            ("redisson_rwlock:{doc}", "1"),
        ])
    );
}

#[test]
fn force_deletes_the_hash_and_every_hold_key_and_hands_on() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(racquire(&mut con, "doc", "a", 30_000), Value::Nil);
    assert_eq!(racquire(&mut con, "doc", "a", 30_000), Value::Nil);
    assert_eq!(racquire(&mut con, "doc", "b", 30_000), Value::Nil);
    let mut w = queue_rw(&server, "LOCK.WACQUIRE", "doc", "w", 0);
    assert_eq!(run(&mut con, &["LOCK.FORCE", "doc"]), Value::Int(1));
    assert_eq!(w.read(), Resp::Nil);
    let keys: Vec<String> = command(&["KEYS", "*"]).query(&mut con).unwrap();
    assert_eq!(
        keys,
        vec!["doc".to_string()],
        "hold keys gone, w's hash only"
    );
}

#[test]
fn info_shows_mode_readers_with_deadlines_writer_and_queue() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(wacquire(&mut con, "doc", "w", 30_000), Value::Nil);
    assert_eq!(racquire(&mut con, "doc", "w", 20_000), Value::Nil);
    let _r = queue_rw(&server, "LOCK.RACQUIRE", "doc", "r", 0);
    let fields: Vec<String> = info(&mut con, "doc").into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        fields,
        [
            "state",
            "owners",
            "ttl_ms",
            "deadline_ms",
            "waiters",
            "token",
            "kept",
            "mode",
            "readers",
            "writer"
        ]
    );
    assert_eq!(
        as_string(&info_field(&mut con, "doc", "mode")).unwrap(),
        "write"
    );
    let writer = info_field(&mut con, "doc", "writer");
    assert_eq!(
        writer,
        Value::Array(vec![Value::BulkString(b"w".to_vec()), Value::Int(1)])
    );
    let readers = map_pairs(&info_field(&mut con, "doc", "readers"));
    assert_eq!(readers.len(), 1);
    let Value::Array(deadlines) = &readers[0].1 else {
        panic!("{readers:?}");
    };
    let hold = pexpiretime(&mut con, hold_key("doc", "w", 1));
    assert_eq!(deadlines, &vec![Value::Int(hold)]);
    assert_eq!(rw_waiters(&server, "doc"), pairs(&[("r", "read")]));
}

#[test]
fn a_fenced_write_gets_a_token_per_grant() {
    let server = Server::start();
    let mut con = server.connection();
    let first = run(&mut con, &["LOCK.WACQUIRE", "doc", "w", "30000", "TOKEN"]);
    let Value::Array(first) = first else {
        panic!("{first:?}")
    };
    assert_eq!(first[0], Value::Int(-1));
    let Value::Int(t1) = first[1] else { panic!() };
    assert_eq!(wrelease(&mut con, "doc", "w"), Value::Int(1));
    let second = run(&mut con, &["LOCK.WACQUIRE", "doc", "w", "30000", "TOKEN"]);
    let Value::Array(second) = second else {
        panic!("{second:?}")
    };
    let Value::Int(t2) = second[1] else { panic!() };
    assert!(t2 > t1, "{t2} > {t1}");
    let busy = run(&mut con, &["LOCK.WACQUIRE", "doc", "x", "30000", "TOKEN"]);
    assert!(
        matches!(&busy, Value::Array(v) if v[1] == Value::Int(-1)),
        "{busy:?}"
    );
}

#[test]
fn bad_input_is_refused_naming_the_argument_and_changes_nothing() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(racquire(&mut con, "doc", "r", 30_000), Value::Nil);
    run(&mut con, &["SET", "str", "x"]);
    let before = fields(&mut con, "doc");
    let cases: &[(&[&str], &str)] = &[
        (&["LOCK.RACQUIRE", "doc", "r"], "'lock.racquire'"),
        (&["LOCK.WACQUIRE", "doc", "r", "0"], "lease-ms"),
        (&["LOCK.RACQUIRE", "doc", "", "10"], "owner"),
        (
            &["LOCK.RACQUIRE", "doc", "r", "10", "TOKEN"],
            "syntax error",
        ),
        (&["LOCK.RACQUIRE", "doc", "r", "10", "WAIT", "x"], "WAIT"),
        (
            &["LOCK.WACQUIRE", "doc", "r", "99999999999999999999"],
            "lease-ms",
        ),
        (&["LOCK.RRELEASE", "doc", "r", "5"], "'lock.rrelease'"),
        (&["LOCK.WRELEASE", "doc", "r", "-5"], "lease-ms"),
        (&["LOCK.RWRENEW", "doc", "r"], "'lock.rwrenew'"),
        (&["LOCK.RACQUIRE", "str", "r", "10"], "WRONGTYPE"),
        (&["LOCK.RRELEASE", "str", "r"], "WRONGTYPE"),
        (
            &["LOCK.RACQUIRE", "a{b", "r", "10"],
            "read holds need their keys in the lock's cluster slot",
        ),
    ];
    for (args, needle) in cases {
        let err = call(&mut con, args).unwrap_err();
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert_eq!(fields(&mut con, "doc"), before);
    assert!(!exists(&mut con, "a{b"));
    // A reader's count that someone overwrote.
    run(&mut con, &["HSET", "doc", "r", "x"]);
    let err = call(&mut con, &["LOCK.RACQUIRE", "doc", "r", "10"]).unwrap_err();
    assert!(err.contains("not an integer"), "{err}");
}

#[test]
fn effects_replicate_with_absolute_deadlines_and_survive_an_aof_restart() {
    let mut trio = ReplicaTrio::start();
    let mut con = trio.master.connection();
    assert_eq!(racquire(&mut con, "doc", "a", 30_000), Value::Nil);
    assert_eq!(racquire(&mut con, "doc", "b", 20_000), Value::Nil);
    assert_eq!(racquire(&mut con, "doc", "a", 10_000), Value::Nil);
    assert_eq!(rrelease(&mut con, "doc", "b"), Value::Int(1));
    assert_eq!(
        run(&mut con, &["LOCK.RWRENEW", "doc", "a", "40000"]),
        Value::Int(1)
    );
    assert_eq!(wacquire(&mut con, "w2", "w", 30_000), Value::Nil);
    assert_eq!(racquire(&mut con, "w2", "w", 30_000), Value::Nil);
    assert_eq!(wrelease(&mut con, "w2", "w"), Value::Int(1));
    let keys = [
        "doc".to_string(),
        "w2".to_string(),
        hold_key("doc", "a", 1),
        hold_key("doc", "a", 2),
        hold_key("doc", "b", 1),
        hold_key("w2", "w", 1),
    ];
    let state = |server: &Server| {
        let mut con = server.connection();
        keys.iter()
            .map(|k| {
                let kind: String = command(&["TYPE", k.as_str()]).query(&mut con).unwrap();
                let value = match kind.as_str() {
                    "hash" => format!("{:?}", fields(&mut con, k)),
                    "string" => format!("{:?}", run(&mut con, &["GET", k])),
                    _ => String::new(),
                };
                (k.clone(), kind, value, pexpiretime(&mut con, k))
            })
            .collect::<Vec<_>>()
    };
    let expected = trio.assert_replicated(state);
    assert_eq!(expected[4].1, "none", "b's hold went with its release");
}

#[test]
fn acl_key_patterns_apply_to_the_lock_key() {
    let server = Server::start();
    let mut admin = server.connection();
    let mut app = server.connection_as("app", &["~app:*", "+lock.racquire", "+lock.rrelease"]);
    assert_eq!(racquire(&mut app, "app:doc", "o", 5_000), Value::Nil);
    assert_eq!(rrelease(&mut app, "app:doc", "o"), Value::Int(1));
    assert_refused(
        &mut app,
        &[
            (&["LOCK.RACQUIRE", "other:doc", "o", "5000"], "NOPERM"),
            (&["LOCK.WACQUIRE", "app:doc", "o", "5000"], "NOPERM"),
        ],
    );
    assert!(!exists(&mut admin, "other:doc"));
}

/// A write lease ending while writes are paused hands nothing on until the
/// pause ends, then grants the readers waiting at the head together (the
/// one hand-off path of every kind of lock: see failover.rs for the lock).
#[test]
fn a_write_lease_ending_during_a_pause_is_handed_on_after_it() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(wacquire(&mut con, "doc", "w", 30_000), Value::Nil);
    let mut r1 = queue_rw(&server, "LOCK.RACQUIRE", "doc", "r1", 0);
    let mut r2 = queue_rw(&server, "LOCK.RACQUIRE", "doc", "r2", 0);
    assert_eq!(
        run(&mut con, &["LOCK.RWRENEW", "doc", "w", "300"]),
        Value::Int(1)
    );
    let deadline = pexpiretime(&mut con, "doc");
    let past_the_deadline = Duration::from_millis((deadline - now_ms()).max(0) as u64 + 300);
    let unpaused_at = while_writes_paused(&server, past_the_deadline, &mut r1, || {
        assert_eq!(
            rw_waiters(&server, "doc"),
            pairs(&[("r1", "read"), ("r2", "read")])
        )
    });
    let (reply, at) = reply_at(&mut r1);
    assert_eq!(reply, Resp::Nil);
    assert_eq!(r2.read(), Resp::Nil);
    let late = at - unpaused_at;
    assert!(late <= 200, "handed on {late} ms after the pause ended");
    assert_eq!(
        fields(&mut con, "doc"),
        pairs(&[("mode", "read"), ("r1", "1"), ("r2", "1")])
    );
}
