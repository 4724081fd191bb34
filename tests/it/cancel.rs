//! `LOCK.CANCEL` (`docs/waiting.md`): any connection ends a wait of any
//! kind by its owner or waiter id; the waiter hears `CANCELLED`, distinct
//! from a timeout; a grant that came first is answered `granted`, with what
//! was granted, so the caller can give it back; a cancel racing a grant has
//! exactly one outcome, checked against the keys, a thousand times.

use std::time::Duration;

use rand::Rng;
use redis::{Connection, Value};
use redis_lock_test_support::raw::{RawClient, Resp};
use redis_lock_test_support::*;

const CANCELLED: &str = "CANCELLED the wait was cancelled (LOCK.CANCEL)";

fn cancel(con: &mut Connection, key: &str, who: &str) -> Vec<Value> {
    match run(con, &["LOCK.CANCEL", key, who]) {
        Value::Array(items) => items,
        other => panic!("LOCK.CANCEL: {other:?}"),
    }
}

fn word(reply: &[Value]) -> String {
    as_string(&reply[0]).expect("the outcome")
}

/// A raw client whose blocking `args` the server shows queued, per `count`
/// (how many wait on the key) growing.
fn blocked(server: &Server, args: &[&str], count: impl Fn() -> usize) -> RawClient {
    let before = count();
    let mut client = RawClient::connect(server.port);
    client.send(args);
    poll_until(Duration::from_secs(5), "the waiter is queued", || {
        count() > before
    });
    client
}

fn cancelled(client: &mut RawClient) {
    assert_eq!(client.read(), Resp::Error(CANCELLED.to_string()));
}

#[test]
fn a_lock_waiter_is_cancelled_from_another_connection_and_nothing_is_kept() {
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "L", "h", 60_000);
    let lock_waiters = || waiter_owners(&server, "L").len();
    let mut a = blocked(
        &server,
        &["LOCK.ACQUIRE", "L", "a", "60000", "WAIT", "0"],
        lock_waiters,
    );
    let _b = blocked(
        &server,
        &["LOCK.ACQUIRE", "L", "b", "60000", "WAIT", "0"],
        lock_waiters,
    );
    assert_eq!(word(&cancel(&mut con, "L", "a")), "cancelled");
    cancelled(&mut a);
    let info = lock_info(&mut con, "L");
    assert_eq!(waiter_owners(&server, "L"), ["b"]);
    assert!(info.kept.is_empty(), "a cancelled waiter keeps no place");
    assert_eq!(word(&cancel(&mut con, "L", "a")), "none");
    // The connection is in order: it asks again, and is answered.
    a.send(&["LOCK.ACQUIRE", "L", "a", "60000"]);
    assert!(matches!(a.read(), Resp::Int(_)));

    // A kept place is dropped by a cancel.
    a.send(&["LOCK.ACQUIRE", "L", "a", "60000", "WAIT", "20"]);
    assert!(matches!(a.read(), Resp::Int(_)), "timed out");
    assert_eq!(lock_info(&mut con, "L").kept_owners(), ["a"]);
    assert_eq!(word(&cancel(&mut con, "L", "a")), "cancelled");
    assert!(lock_info(&mut con, "L").kept.is_empty());

    // Granted first: the cancel says so (the owner holds the lock), and the
    // caller gives it back.
    assert_eq!(release(&mut con, "L", "h", None), Some(1));
    assert_eq!(word(&cancel(&mut con, "L", "b")), "granted");
    assert_eq!(
        cancel(&mut con, "L", "b").len(),
        1,
        "a lock's grant: the word alone"
    );
    assert_eq!(stat(&server, "lock_waits_cancelled"), 2);
    assert_eq!(stat(&server, "lock_cancels_after_grant"), 2);
}

#[test]
fn read_and_write_waiters_are_cancelled_and_the_readers_behind_a_writer_let_in() {
    let server = Server::start();
    let mut con = server.connection();
    run(&mut con, &["LOCK.RACQUIRE", "RW", "r0", "60000"]);
    let count = || {
        let info = run(&mut server.connection(), &["LOCK.INFO", "RW"]);
        match find_field(&info, "waiters") {
            Some(Value::Array(w)) => w.len(),
            _ => 0,
        }
    };
    let mut w = blocked(
        &server,
        &["LOCK.WACQUIRE", "RW", "w", "60000", "WAIT", "0"],
        count,
    );
    let mut r = blocked(
        &server,
        &["LOCK.RACQUIRE", "RW", "r", "60000", "WAIT", "0"],
        count,
    );
    assert_eq!(word(&cancel(&mut con, "RW", "w")), "cancelled");
    cancelled(&mut w);
    assert_eq!(
        r.read(),
        Resp::Nil,
        "the reader behind the writer reads now"
    );
    assert_eq!(word(&cancel(&mut con, "RW", "r")), "granted");
    assert_eq!(
        run_int(&mut con, &["LOCK.RRELEASE", "RW", "r"]),
        1,
        "r held it"
    );
}

#[test]
fn semaphore_permit_and_latch_waiters_are_cancelled_by_waiter_id() {
    let server = Server::start();
    let mut con = server.connection();
    run(&mut con, &["LOCK.SEMSET", "S", "0"]);
    let sem = || sem_waiters(&server, "S");
    let mut s = blocked(
        &server,
        &["LOCK.SEMACQUIRE", "S", "2", "WAIT", "0", "WAITER", "s1"],
        sem,
    );
    assert_eq!(word(&cancel(&mut con, "S", "s1")), "cancelled");
    cancelled(&mut s);
    assert_eq!(sem_waiters(&server, "S"), 0);
    // Granted first: the cancel gives the count, once.
    s.send(&["LOCK.SEMACQUIRE", "S", "2", "WAIT", "0", "WAITER", "s2"]);
    poll_until(Duration::from_secs(5), "queued", || sem() == 1);
    run(&mut con, &["LOCK.SEMADD", "S", "2"]);
    assert_eq!(s.read(), Resp::Int(1));
    assert_eq!(
        cancel(&mut con, "S", "s2"),
        [simple("granted"), Value::Int(2)]
    );
    assert_eq!(word(&cancel(&mut con, "S", "s2")), "none", "told once");
    // Without a waiter id there is nothing to name: no place kept either.
    s.send(&["LOCK.SEMACQUIRE", "S", "1", "WAIT", "20"]);
    assert_eq!(s.read(), Resp::Int(0));
    let info = run(&mut con, &["LOCK.SEMINFO", "S"]);
    assert_eq!(find_field(&info, "kept"), Some(Value::Array(vec![])));

    // Leased permits: the ids the waiter was given.
    run(&mut con, &["LOCK.SEMSET", "P", "0"]);
    let mut p = blocked(
        &server,
        &[
            "LOCK.PERMITACQUIRE",
            "P",
            "2",
            "LEASE",
            "60000",
            "WAIT",
            "0",
            "WAITER",
            "p1",
        ],
        || sem_waiters(&server, "P"),
    );
    run(&mut con, &["LOCK.SEMADD", "P", "2"]);
    let ids: Vec<Value> = p
        .read()
        .array()
        .into_iter()
        .map(|id| Value::BulkString(id.text().into_bytes()))
        .collect();
    let mut granted = vec![simple("granted")];
    granted.extend(ids);
    assert_eq!(cancel(&mut con, "P", "p1"), granted);

    // A latch.
    run(&mut con, &["LOCK.LATCHSET", "D", "1"]);
    let mut d = blocked(&server, &["LOCK.AWAIT", "D", "0", "WAITER", "d1"], || {
        latch_waiters(&server, "D")
    });
    assert_eq!(word(&cancel(&mut con, "D", "d1")), "cancelled");
    cancelled(&mut d);
    d.send(&["LOCK.AWAIT", "D", "0", "WAITER", "d2"]);
    poll_until(Duration::from_secs(5), "queued", || {
        latch_waiters(&server, "D") == 1
    });
    run(&mut con, &["LOCK.COUNTDOWN", "D"]);
    assert_eq!(d.read(), Resp::Int(1));
    assert_eq!(
        cancel(&mut con, "D", "d2"),
        [simple("granted"), Value::Int(1)]
    );
}

fn simple(word: &str) -> Value {
    Value::SimpleString(word.to_string())
}

/// One round of a race: the holder's release (or a semaphore's permit given
/// back) and a cancel of the waiter, sent on two connections in one
/// instant, in a random order. Returns the waiter's reply and the cancel's.
fn race(
    releaser: &mut RawClient,
    release: &[&str],
    canceller: &mut RawClient,
    cancel: &[&str],
    waiter: &mut RawClient,
) -> (Resp, Vec<Resp>) {
    if rand::thread_rng().gen_bool(0.5) {
        releaser.send(release);
        canceller.send(cancel);
    } else {
        canceller.send(cancel);
        releaser.send(release);
    }
    let _ = releaser.read();
    let told = canceller.read().array();
    (waiter.read(), told)
}

/// A thousand cancels racing a release: each race ends in exactly one of
/// "granted, the waiter told, the cancel says granted, the lock is the
/// waiter's" and "cancelled, the waiter told, the lock free".
#[test]
fn a_cancel_racing_a_release_has_exactly_one_outcome_a_thousand_times() {
    let server = Server::start();
    let mut con = server.connection();
    let mut waiter = RawClient::connect(server.port);
    let mut releaser = RawClient::connect(server.port);
    let mut canceller = RawClient::connect(server.port);
    let (mut granted, mut cancelled) = (0, 0);
    for round in 0..1000 {
        acquire(&mut con, "L", "h", 60_000);
        waiter.send(&["LOCK.ACQUIRE", "L", "w", "60000", "WAIT", "0"]);
        poll_until(Duration::from_secs(5), "queued", || {
            lock_info(&mut con, "L").waiters.len() == 1
        });
        let (told, cancel) = race(
            &mut releaser,
            &["LOCK.RELEASE", "L", "h"],
            &mut canceller,
            &["LOCK.CANCEL", "L", "w"],
            &mut waiter,
        );
        let info = lock_info(&mut con, "L");
        match (&told, cancel[0].text().as_str()) {
            (Resp::Nil, "granted") => {
                assert_eq!(info.count_of(b"w"), Some(1), "round {round}: w holds it");
                assert_eq!(release(&mut con, "L", "w", None), Some(1));
                granted += 1;
            }
            (Resp::Error(e), "cancelled") if e == CANCELLED => {
                assert_eq!(info.state, "free", "round {round}: nobody was granted");
                cancelled += 1;
            }
            other => panic!("round {round}: two outcomes or none: {other:?}, {info:?}"),
        }
        assert!(info.waiters.is_empty() && info.kept.is_empty(), "{info:?}");
    }
    eprintln!("granted {granted}, cancelled {cancelled}");
    assert!(granted > 0 && cancelled > 0, "both orders were raced");
}

/// The same for a semaphore's permit and a waiter id: the grant the module
/// remembered for the id is what the cancel answers.
#[test]
fn a_cancel_racing_a_semaphore_release_has_exactly_one_outcome_a_thousand_times() {
    let server = Server::start();
    let mut con = server.connection();
    // Every id's tombstone must outlive the thousand rounds, however slow a
    // loaded machine makes them (the default grace, 5 s, is about what they
    // take on a busy two-core machine): the count at the end is of them all.
    config_set(&mut con, "lock.keep-place-ms", 600_000);
    run(&mut con, &["LOCK.SEMSET", "S", "0"]);
    let mut waiter = RawClient::connect(server.port);
    let mut releaser = RawClient::connect(server.port);
    let mut canceller = RawClient::connect(server.port);
    let (mut granted, mut cancelled) = (0, 0);
    for round in 0..1000 {
        let id = format!("w{round}");
        waiter.send(&["LOCK.SEMACQUIRE", "S", "1", "WAIT", "0", "WAITER", &id]);
        poll_until(Duration::from_secs(5), "queued", || {
            queued(&mut con, "LOCK.SEMINFO", "S").len() == 1
        });
        let (told, cancel) = race(
            &mut releaser,
            &["LOCK.SEMRELEASE", "S", "1"],
            &mut canceller,
            &["LOCK.CANCEL", "S", &id],
            &mut waiter,
        );
        let left: i64 = redis::cmd("GET").arg("S").query(&mut con).expect("GET S");
        match (&told, cancel[0].text().as_str()) {
            (Resp::Int(1), "granted") => {
                assert_eq!(cancel[1], Resp::Int(1), "round {round}: one permit");
                assert_eq!(left, 0, "round {round}: the waiter has it");
                granted += 1;
            }
            (Resp::Error(e), "cancelled") if e == CANCELLED => {
                assert_eq!(left, 1, "round {round}: nobody took it");
                run(&mut con, &["LOCK.SEMADD", "S", "-1"]);
                cancelled += 1;
            }
            other => panic!("round {round}: two outcomes or none: {other:?}, {left}"),
        }
    }
    eprintln!("granted {granted}, cancelled {cancelled}");
    assert!(granted > 0 && cancelled > 0, "both orders were raced");
    // Each cancelled id is remembered as such (the grants were taken by the
    // cancels): a piece of it still on its way is refused, not served.
    assert_eq!(stat(&server, "lock_remembered_grants"), 1000);
    let late = try_run(&mut con, &["LOCK.SEMACQUIRE", "S", "1", "WAITER", "w7"]);
    assert_eq!(late, Err(CANCELLED.to_string()));
}
