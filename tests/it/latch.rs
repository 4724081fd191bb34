//! The count-down latch against real servers: `LOCK.LATCHSET`,
//! `LOCK.COUNTDOWN`, `LOCK.LATCHCOUNT`, `LOCK.AWAIT`, `LOCK.LATCHINFO` on
//! Redisson `RCountDownLatch`'s layout: waiters let go at zero, a latch
//! deleted behind the module's back, a latch that expires with waiters
//! (what Redisson cannot do), replication, restarts and pauses.

use std::time::Duration;

use redis::{Connection, Value};
use redis_lock_test_support::raw::Resp;
use redis_lock_test_support::*;

const CHANNEL: &[u8] = b"redisson_countdownlatch__channel__{l}";

fn messages(sub: &mut Subscriber, con: &mut Connection) -> Vec<String> {
    show(&sub.drain(con)).into_iter().map(|(_, m)| m).collect()
}

#[test]
fn counting_down_to_zero_lets_every_waiter_go_and_deletes_the_latch() {
    let server = Server::start();
    let mut con = server.connection();
    let mut sub = Subscriber::new(&server, &[CHANNEL]);
    assert_eq!(
        run_int(&mut con, &["LOCK.AWAIT", "l", "100"]),
        1,
        "missing: open"
    );
    assert_eq!(run_int(&mut con, &["LOCK.LATCHSET", "l", "2"]), 1);
    assert_eq!(
        run_int(&mut con, &["LOCK.LATCHSET", "l", "5"]),
        0,
        "set once"
    );
    assert_eq!(
        as_string(&run(&mut con, &["GET", "l"])).as_deref(),
        Some("2")
    );
    let mut first = queue_for(&server, &["LOCK.AWAIT", "l", "0"]);
    let mut second = queue_for(&server, &["LOCK.AWAIT", "l", "5000"]);
    assert_eq!(queued(&mut con, "LOCK.LATCHINFO", "l").len(), 2);
    assert_eq!(run_int(&mut con, &["LOCK.COUNTDOWN", "l"]), 1);
    assert!(first.nothing_within(Duration::from_millis(30)));
    assert_eq!(run_int(&mut con, &["LOCK.LATCHCOUNT", "l"]), 1);
    assert_eq!(run_int(&mut con, &["LOCK.COUNTDOWN", "l"]), 0);
    assert_eq!(first.read(), Resp::Int(1));
    assert_eq!(second.read(), Resp::Int(1));
    assert!(!exists(&mut con, "l"), "deleted at zero, as Redisson's");
    assert_eq!(
        run_int(&mut con, &["LOCK.COUNTDOWN", "l"]),
        0,
        "already open"
    );
    assert_eq!(run_int(&mut con, &["LOCK.LATCHCOUNT", "l"]), 0);
    assert_eq!(messages(&mut sub, &mut con), ["1", "0"]);
    assert_eq!(server.lock_stats()["lock_latches_opened"], 1);
}

#[test]
fn an_await_times_out_with_zero_and_leaves_the_queue() {
    let (server, mut con) = server_set_up_by(&["LOCK.LATCHSET", "l", "1"]);
    let mut waiter = queue_for(&server, &["LOCK.AWAIT", "l", "100"]);
    assert_eq!(waiter.read(), Resp::Int(0));
    assert!(queued(&mut con, "LOCK.LATCHINFO", "l").is_empty());
    // Inside MULTI nothing blocks: the answer is now.
    run(&mut con, &["MULTI"]);
    run(&mut con, &["LOCK.AWAIT", "l", "0"]);
    assert_eq!(run(&mut con, &["EXEC"]), Value::Array(vec![Value::Int(0)]));
}

/// The latch is deleted behind the module's back (`DEL`, or Redisson's
/// `delete`, which is also how its latch opens): the waiters are let go.
#[test]
fn a_latch_deleted_by_someone_else_lets_its_waiters_go() {
    let (server, mut con) = server_set_up_by(&["LOCK.LATCHSET", "l", "3"]);
    let mut waiter = queue_for(&server, &["LOCK.AWAIT", "l", "0"]);
    run(&mut con, &["DEL", "l"]);
    assert_eq!(waiter.read(), Resp::Int(1));
}

/// A latch set with `PX` expires with its waiters: each hears -1 within 20
/// ms of the deadline, and `0` is published (so Redisson's waiters stop).
/// With nobody waiting, the message is published all the same.
#[test]
fn a_latch_that_expires_tells_its_waiters_and_publishes() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    let mut sub = Subscriber::new(&server, &[CHANNEL]);
    assert_eq!(
        run_int(&mut con, &["LOCK.LATCHSET", "l", "2", "PX", "300"]),
        1
    );
    let deadline = pexpiretime(&mut con, "l");
    let mut waiter = queue_for(&server, &["LOCK.AWAIT", "l", "0"]);
    let mut other = queue_for(&server, &["LOCK.AWAIT", "l", "10000"]);
    assert_eq!(run_int(&mut con, &["LOCK.COUNTDOWN", "l"]), 1);
    assert_eq!(
        pexpiretime(&mut con, "l"),
        deadline,
        "counting keeps the expiry"
    );
    let (reply, at) = reply_at(&mut waiter);
    assert_eq!(reply, Resp::Int(-1), "expired, not opened");
    assert_eq!(other.read(), Resp::Int(-1));
    let late = at - deadline;
    assert!(
        (0..=20).contains(&late),
        "told {late} ms after the deadline"
    );
    eprintln!("latch waiters told {late} ms after the expiry");
    assert_eq!(messages(&mut sub, &mut con), ["1", "0"]);
    // Nobody waiting: still announced at the deadline, by the queue's timer.
    assert_eq!(
        run_int(&mut con, &["LOCK.LATCHSET", "l", "1", "PX", "100"]),
        1
    );
    poll_until(Duration::from_secs(2), "the expiry is announced", || {
        server.lock_stats()["lock_latches_expired"] == 2
    });
    assert_eq!(messages(&mut sub, &mut con), ["1", "0"]);
    assert_eq!(server.lock_stats()["lock_handoff_timers"], 0);
}

#[test]
fn latchinfo_shows_count_expiry_and_waiters() {
    let (server, mut con) = server_set_up_by(&["LOCK.LATCHSET", "l", "4", "PX", "60000"]);
    let _waiter = queue_for(&server, &["LOCK.AWAIT", "l", "7000"]);
    let info = run(&mut con, &["LOCK.LATCHINFO", "l"]);
    let field = |name: &str| field_of(&info, name);
    assert_eq!(field("count"), Value::Int(4));
    let Value::Int(ttl) = field("ttl_ms") else {
        panic!("ttl")
    };
    assert!(ttl > 50_000);
    let Value::Array(waiters) = field("waiters") else {
        panic!("waiters")
    };
    assert_eq!(waiters.len(), 1);
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let (_server, mut con) = server_set_up_by(&["LOCK.LATCHSET", "l", "2"]);
    let cases: &[(&[&str], &str)] = &[
        (
            &["LOCK.LATCHSET", "n", "0"],
            "ERR count must be a positive integer",
        ),
        (&["LOCK.LATCHSET", "n", "1", "PX", "-5"], "ERR PX ttl-ms"),
        (&["LOCK.LATCHSET", "n", "1", "EX", "5"], "ERR syntax error"),
        (
            &["LOCK.AWAIT", "l", "-1"],
            "ERR timeout-ms must be a non-negative integer",
        ),
        (
            &["LOCK.COUNTDOWN", "l", "x"],
            "ERR wrong number of arguments",
        ),
    ];
    assert_refused(&mut con, cases);
    assert!(!exists(&mut con, "n"));
    assert_eq!(run_int(&mut con, &["LOCK.LATCHCOUNT", "l"]), 2);
    run(&mut con, &["HSET", "h", "f", "1"]);
    run(&mut con, &["SET", "junk", "x"]);
    assert_refused(
        &mut con,
        &[
            (&["LOCK.COUNTDOWN", "h"], "WRONGTYPE"),
            (
                &["LOCK.COUNTDOWN", "junk"],
                "ERR the latch's count is not an integer",
            ),
        ],
    );
}

#[test]
fn effects_replicate_as_plain_commands_and_survive_an_aof_restart() {
    let mut trio = ReplicaTrio::start();
    let mut con = trio.master.connection();
    assert_eq!(
        run_int(&mut con, &["LOCK.LATCHSET", "a", "3", "PX", "600000"]),
        1
    );
    assert_eq!(run_int(&mut con, &["LOCK.COUNTDOWN", "a"]), 2);
    assert_eq!(run_int(&mut con, &["LOCK.LATCHSET", "b", "1"]), 1);
    assert_eq!(run_int(&mut con, &["LOCK.COUNTDOWN", "b"]), 0);
    let expected = trio.assert_replicated(|server: &Server| {
        let mut con = server.connection();
        (
            as_string(&run(&mut con, &["GET", "a"])),
            pexpiretime(&mut con, "a"),
            exists(&mut con, "b"),
        )
    });
    assert_eq!(expected.0.as_deref(), Some("2"));
    assert!(!expected.2);
}

/// An expiry passing while writes are paused is announced when the pause
/// ends (nothing a failover could lose is told before).
#[test]
fn an_expiry_during_a_pause_is_told_after_it() {
    let _alone = alone();
    let (server, _con) = server_set_up_by(&["LOCK.LATCHSET", "l", "1", "PX", "200"]);
    let mut waiter = queue_for(&server, &["LOCK.AWAIT", "l", "0"]);
    while_writes_paused(&server, Duration::from_millis(400), &mut waiter, || {});
    assert_eq!(waiter.read(), Resp::Int(-1));
}
