//! Kept places (`docs/waiting.md`): a waiter that leaves by its timeout or
//! its connection closing keeps its place for a grace, passed over by every
//! grant meanwhile; the same identity asking again takes it back, or takes
//! over its own earlier request still waiting; at the end of the grace the
//! place is dropped. Through pauses, a failover, `SWAPDB` and `FLUSHALL`.
//! (Cancels are in `cancel.rs`.)

use std::time::Duration;

use redis::Connection;
use redis_lock_test_support::raw::{RawClient, Resp};
use redis_lock_test_support::*;

/// A raw client queued for `args` (an acquire with `WAIT`), with its
/// `CLIENT ID`; returns once the server shows one more waiter on `key`.
fn waiting(server: &Server, key: &str, args: &[&str]) -> (RawClient, i64) {
    let before = owners_in(server, key, "waiters").len();
    let mut client = RawClient::connect(server.port);
    client.send(&["CLIENT", "ID"]);
    let Resp::Int(id) = client.read() else {
        panic!("CLIENT ID")
    };
    client.send(args);
    poll_until(Duration::from_secs(5), "the waiter is queued", || {
        owners_in(server, key, "waiters").len() > before
    });
    (client, id)
}

/// `owner` waits for the lock `key` with `KEEP keep_ms`.
fn lock_waiter(server: &Server, key: &str, owner: &str, keep_ms: u64) -> (RawClient, i64) {
    let keep = keep_ms.to_string();
    let args = [
        "LOCK.ACQUIRE",
        key,
        owner,
        "60000",
        "WAIT",
        "0",
        "KEEP",
        &keep,
    ];
    waiting(server, key, &args)
}

fn kill(con: &mut Connection, id: i64) {
    run(con, &["CLIENT", "KILL", "ID", &id.to_string()]);
}

/// The owners of `key`'s waiters (`list` = `waiters`) or kept places
/// (`kept`), per `LOCK.INFO` (of a lock or a read-write lock).
fn owners_in(server: &Server, key: &str, list: &str) -> Vec<String> {
    let info = run(&mut server.connection(), &["LOCK.INFO", key]);
    let Some(redis::Value::Array(entries)) = find_field(&info, list) else {
        panic!("LOCK.INFO {list}: {info:?}")
    };
    entries.iter().map(|e| field_text(e, "owner")).collect()
}

/// Waits until `key`'s queue is `waiters` and its kept places `kept`.
fn queue_is(server: &Server, key: &str, waiters: &[&str], kept: &[&str]) {
    let what = format!("{key}: waiters {waiters:?}, kept {kept:?}");
    poll_until(Duration::from_secs(5), &what, || {
        owners_in(server, key, "waiters") == waiters && owners_in(server, key, "kept") == kept
    });
}

#[test]
fn a_killed_waiter_back_within_the_grace_takes_its_old_place_and_after_it_the_back() {
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "L", "h", 60_000);
    let (_a, a_id) = lock_waiter(&server, "L", "a", 400);
    let _b = lock_waiter(&server, "L", "b", 400);
    let _c = lock_waiter(&server, "L", "c", 400);
    kill(&mut con, a_id);
    queue_is(&server, "L", &["b", "c"], &["a"]);
    let place = lock_info(&mut con, "L").kept[0].clone();
    let until =
        find_field(&place, "kept_until_ms").and_then(|v| redis::from_redis_value::<i64>(v).ok());
    let left_in = until.expect("kept_until_ms") - server_now_ms(&mut con);
    assert!((0..=400).contains(&left_in), "kept 400 ms: {left_in} left");
    assert_eq!(stat(&server, "lock_places_kept"), 1);
    assert_eq!(stat(&server, "lock_kept_places"), 1);

    // Back within the grace, on a new connection: its old place.
    let (_a, a_id) = lock_waiter(&server, "L", "a", 400);
    queue_is(&server, "L", &["a", "b", "c"], &[]);
    assert_eq!(stat(&server, "lock_places_rejoined"), 1);

    // Gone longer than the grace: the back.
    kill(&mut con, a_id);
    queue_is(&server, "L", &["b", "c"], &["a"]);
    queue_is(&server, "L", &["b", "c"], &[]); // dropped by the queue's timer
    assert_eq!(stat(&server, "lock_places_dropped"), 1);
    let _a = lock_waiter(&server, "L", "a", 400);
    queue_is(&server, "L", &["b", "c", "a"], &[]);
}

#[test]
fn a_waiter_whose_timeout_passed_keeps_its_place_and_keep_0_keeps_nothing() {
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "L", "h", 60_000);
    let _b = lock_waiter(&server, "L", "b", 5000);
    // The default grace (lock.keep-place-ms, 5000).
    let mut a = RawClient::connect(server.port);
    a.send(&["LOCK.ACQUIRE", "L", "a", "60000", "WAIT", "50"]);
    assert!(matches!(a.read(), Resp::Int(_)), "timed out with the lease");
    queue_is(&server, "L", &["b"], &["a"]);
    a.send(&["LOCK.ACQUIRE", "L", "a", "60000", "WAIT", "0", "KEEP", "0"]);
    queue_is(&server, "L", &["b", "a"], &[]);
    assert_eq!(
        stat(&server, "lock_places_rejoined"),
        0,
        "KEEP 0 takes nothing back"
    );
    let _b2 = waiting(
        &server,
        "L",
        &["LOCK.ACQUIRE", "L", "b", "60000", "WAIT", "0", "KEEP", "0"],
    );
    queue_is(&server, "L", &["b", "a", "b"], &[]);
    assert_eq!(
        stat(&server, "lock_waits_continued"),
        0,
        "KEEP 0 takes nothing over"
    );
    config_set(&mut con, "lock.keep-place-ms", 0);
    let mut c = RawClient::connect(server.port);
    c.send(&["LOCK.ACQUIRE", "L", "c", "60000", "WAIT", "20"]);
    assert!(matches!(c.read(), Resp::Int(_)));
    assert!(
        lock_info(&mut con, "L").kept.is_empty(),
        "lock.keep-place-ms 0"
    );
}

/// A kept place is passed over in the very event that frees the object:
/// the release itself hands the lock to the waiter behind it, so the place
/// delays nobody by any time at all.
#[test]
fn a_kept_place_is_passed_over_in_the_event_that_frees_the_lock() {
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "L", "h", 60_000);
    let (_a, a_id) = lock_waiter(&server, "L", "a", 5000);
    let (mut b, _) = lock_waiter(&server, "L", "b", 5000);
    kill(&mut con, a_id);
    queue_is(&server, "L", &["b"], &["a"]);
    let (release, info): (i64, redis::Value) = redis::pipe()
        .cmd("LOCK.RELEASE")
        .arg("L")
        .arg("h")
        .cmd("LOCK.INFO")
        .arg("L")
        .query(&mut con)
        .expect("release, then look");
    assert_eq!(release, 1);
    assert_eq!(
        LockInfo::parse(&info).count_of(b"b"),
        Some(1),
        "b's in that event"
    );
    assert_eq!(b.read(), Resp::Nil, "b is told");
    assert_eq!(
        lock_info(&mut con, "L").kept_owners(),
        ["a"],
        "a's place stays"
    );

    // A lease that ends: the queue's timer hands it on as promptly as ever.
    release_all(&mut con, "L", "b");
    acquire(&mut con, "L", "h", 60_000);
    let (mut c, _) = lock_waiter(&server, "L", "c", 5000);
    queue_is(&server, "L", &["c"], &["a"]);
    assert_eq!(renew(&mut con, "L", "h", 100), 1);
    let deadline = pexpiretime(&mut con, "L");
    assert_eq!(c.read(), Resp::Nil);
    assert_handed_on_in_time(&mut con, "L", 60_000, deadline, "past a kept place");
}

fn release_all(con: &mut Connection, key: &str, owner: &str) {
    while release(con, key, owner, None) == Some(0) {}
}

#[test]
fn a_kept_reader_keeps_its_place_in_the_reader_run() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(
        run(&mut con, &["LOCK.WACQUIRE", "RW", "w", "60000"]),
        redis::Value::Nil
    );
    let rw_waiter =
        |cmd: &str, owner: &str| waiting(&server, "RW", &[cmd, "RW", owner, "60000", "WAIT", "0"]);
    let (_r1, r1_id) = rw_waiter("LOCK.RACQUIRE", "r1");
    let (mut r2, _) = rw_waiter("LOCK.RACQUIRE", "r2");
    let (mut w2, _) = rw_waiter("LOCK.WACQUIRE", "w2");
    kill(&mut con, r1_id);
    queue_is(&server, "RW", &["r2", "w2"], &["r1"]);
    assert_eq!(run_int(&mut con, &["LOCK.WRELEASE", "RW", "w"]), 1);
    assert_eq!(r2.read(), Resp::Nil, "the reader present is let in");
    assert!(
        w2.nothing_within(Duration::from_millis(50)),
        "the writer waits"
    );
    // r1 comes back: ahead of the writer, in the reader run, so it reads.
    let mut r1 = RawClient::connect(server.port);
    r1.send(&["LOCK.RACQUIRE", "RW", "r1", "60000", "WAIT", "0"]);
    assert_eq!(r1.read(), Resp::Nil, "r1 reads with r2");
    assert!(w2.nothing_within(Duration::from_millis(50)));
    assert_eq!(owners_in(&server, "RW", "waiters"), ["w2"]);
}

#[test]
fn a_kept_semaphore_waiter_keeps_its_permit_count_and_holds_nobody_back() {
    let server = Server::start();
    let mut con = server.connection();
    run(&mut con, &["LOCK.SEMSET", "S", "0"]);
    let sem_waiter = |n: &str, who: &str| {
        let before = sem_waiters(&server, "S");
        let mut client = RawClient::connect(server.port);
        client.send(&["CLIENT", "ID"]);
        let Resp::Int(id) = client.read() else {
            panic!("CLIENT ID")
        };
        client.send(&["LOCK.SEMACQUIRE", "S", n, "WAIT", "0", "WAITER", who]);
        poll_until(Duration::from_secs(5), "queued", || {
            sem_waiters(&server, "S") > before
        });
        (client, id)
    };
    let (_big, big_id) = sem_waiter("3", "big");
    let (mut small, _) = sem_waiter("1", "small");
    kill(&mut con, big_id);
    poll_until(Duration::from_secs(5), "big's place kept", || {
        sem_waiters(&server, "S") == 1
    });
    let info = query_value(&mut con, &["LOCK.SEMINFO", "S"]);
    let kept = find_field(&info, "kept").expect("kept");
    let place = &kept_list(&kept)[0];
    assert_eq!(field_text(place, "waiter"), "big");
    assert_eq!(find_field(place, "permits"), Some(redis::Value::Int(3)));
    assert_eq!(run_int(&mut con, &["LOCK.SEMRELEASE", "S", "1"]), 1);
    assert_eq!(
        small.read(),
        Resp::Int(1),
        "not held back by the absent head"
    );
    // big comes back to its place at the head: the next permits are its.
    let (mut big, _) = sem_waiter("3", "big");
    let (mut late, _) = sem_waiter("1", "late");
    assert_eq!(run_int(&mut con, &["LOCK.SEMRELEASE", "S", "3"]), 3);
    assert_eq!(big.read(), Resp::Int(1));
    assert!(late.nothing_within(Duration::from_millis(50)));
}

fn query_value(con: &mut Connection, args: &[&str]) -> redis::Value {
    run(con, args)
}

fn kept_list(v: &redis::Value) -> Vec<redis::Value> {
    match v {
        redis::Value::Array(items) => items.clone(),
        other => panic!("kept: {other:?}"),
    }
}

fn field_text(v: &redis::Value, name: &str) -> String {
    as_string(&find_field(v, name).expect(name)).expect(name)
}

/// The next piece of a sliced wait, sent while the last still waits, takes
/// its place; the last is answered as timed out.
#[test]
fn asking_again_while_still_waiting_takes_the_earlier_requests_place() {
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "L", "h", 60_000);
    let (mut first, _) = lock_waiter(&server, "L", "a", 5000);
    let _b = lock_waiter(&server, "L", "b", 5000);
    let mut second = RawClient::connect(server.port);
    second.send(&["LOCK.ACQUIRE", "L", "a", "60000", "WAIT", "0"]);
    let Resp::Int(ttl) = first.read() else {
        panic!("the first piece is answered as timed out")
    };
    assert!(ttl > 0);
    queue_is(&server, "L", &["a", "b"], &[]);
    assert_eq!(stat(&server, "lock_waits_continued"), 1);
    assert_eq!(release(&mut con, "L", "h", None), Some(1));
    assert_eq!(second.read(), Resp::Nil, "the second piece is granted");

    // Permits: the earlier piece answered nil, the ids go to the next.
    run(&mut con, &["LOCK.SEMSET", "P", "0"]);
    let piece = ["LOCK.PERMITACQUIRE", "P", "2", "WAIT", "0", "WAITER", "p"];
    let mut first = RawClient::connect(server.port);
    first.send(&piece);
    poll_until(Duration::from_secs(5), "queued", || {
        sem_waiters(&server, "P") == 1
    });
    let mut second = RawClient::connect(server.port);
    second.send(&piece);
    assert_eq!(first.read(), Resp::Nil);
    run(&mut con, &["LOCK.SEMADD", "P", "2"]);
    let ids = second.read().array();
    assert_eq!(ids.len(), 2);
    // Asked again with the same id (a piece crossing its grant): the same
    // ids, and nothing more taken.
    second.send(&piece);
    assert_eq!(second.read().array(), ids);
    assert_eq!(run_int(&mut con, &["LOCK.SEMAVAILABLE", "P"]), 0);
    assert_eq!(permits_taken(&mut con, "P"), 2);
}

/// Redis 7.0 drops the reply of a waiter woken in the event-loop turn in
/// which its own timeout fires (`ffi/blocking.rs`): a piece taken over by
/// the same owner's next piece just as its `WAIT` ends got no reply at all,
/// about 1 round in 30 of this sweep before the module kept such wakes for
/// the timeout to deliver. The next piece's arrival is swept across the
/// first one's deadline; every piece must be answered.
#[test]
fn a_piece_taken_over_as_its_timeout_fires_is_still_answered() {
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "L", "h", 600_000);
    let piece = ["LOCK.ACQUIRE", "L", "x", "30000", "WAIT", "200"];
    let mut unanswered = Vec::new();
    for round in 0..28u64 {
        let after = Duration::from_micros(199_500 + round % 7 * 500);
        let mut first = RawClient::connect(server.port);
        let mut second = RawClient::connect(server.port);
        first.send(&piece);
        std::thread::sleep(after);
        second.send(&piece);
        if first.nothing_within(Duration::from_secs(2)) {
            unanswered.push(after);
        } else {
            let reply = first.read();
            assert!(matches!(reply, Resp::Int(_)), "{reply:?}");
        }
        // The second piece ends now (its place dropped) rather than in 200 ms.
        run(&mut con, &["LOCK.CANCEL", "L", "x"]);
        assert!(matches!(second.read(), Resp::Error(_) | Resp::Int(_)));
    }
    assert!(
        unanswered.is_empty(),
        "pieces never answered, taken over after {unanswered:?}"
    );
}

#[test]
fn a_latch_that_expires_while_its_waiter_is_away_says_so_when_it_comes_back() {
    let server = Server::start();
    let mut con = server.connection();
    run(&mut con, &["LOCK.LATCHSET", "D", "1", "PX", "300"]);
    let mut w = RawClient::connect(server.port);
    w.send(&["CLIENT", "ID"]);
    let Resp::Int(id) = w.read() else {
        panic!("CLIENT ID")
    };
    w.send(&["LOCK.AWAIT", "D", "0", "WAITER", "w", "KEEP", "5000"]);
    poll_until(Duration::from_secs(5), "queued", || {
        latch_waiters(&server, "D") == 1
    });
    kill(&mut con, id);
    poll_until(Duration::from_secs(5), "expired", || !exists(&mut con, "D"));
    std::thread::sleep(Duration::from_millis(50));
    let again = run_int(&mut con, &["LOCK.AWAIT", "D", "0", "WAITER", "w"]);
    assert_eq!(again, -1, "expired, not opened");
    assert_eq!(
        run_int(&mut con, &["LOCK.AWAIT", "D", "0", "WAITER", "x"]),
        1
    );
}

#[test]
fn at_the_cap_nothing_more_is_kept() {
    let server = Server::with(Options::new().module_args(&["keep-places-max", "1"]));
    let mut con = server.connection();
    acquire(&mut con, "L", "h", 60_000);
    let (_a, a) = lock_waiter(&server, "L", "a", 5000);
    let (_b, b) = lock_waiter(&server, "L", "b", 5000);
    kill(&mut con, a);
    kill(&mut con, b);
    queue_is(&server, "L", &[], &["a"]);
    assert_eq!(stat(&server, "lock_places_over_cap"), 1);
}

/// Writes paused longer than the grace: no place is dropped meanwhile
/// (its owner could not come back), nothing is written, the owner's acquire
/// held by the pause takes its old place after it, and a place kept during
/// the pause has its whole grace after it.
#[test]
fn a_pause_keeps_the_places_and_writes_nothing() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    let mut admin = server.connection();
    acquire(&mut con, "L", "h", 60_000);
    let (_a, a_id) = lock_waiter(&server, "L", "a", 150);
    let _b = lock_waiter(&server, "L", "b", 5000);
    let (_c, c_id) = lock_waiter(&server, "L", "c", 1000);
    run(&mut admin, &["CLIENT", "PAUSE", "20000", "WRITE"]);
    let offset = server.info("replication", "master_repl_offset");
    kill(&mut con, a_id);
    kill(&mut con, c_id);
    queue_is(&server, "L", &["b"], &["a", "c"]);
    let mut a = RawClient::connect(server.port);
    a.send(&[
        "LOCK.ACQUIRE",
        "L",
        "a",
        "60000",
        "WAIT",
        "0",
        "KEEP",
        "150",
    ]);
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(
        lock_info(&mut con, "L").kept_owners(),
        ["a", "c"],
        "kept through the pause"
    );
    assert_eq!(server.info("replication", "master_repl_offset"), offset);
    let unpaused_at = server_now_ms(&mut con);
    run(&mut admin, &["CLIENT", "UNPAUSE"]);
    poll_until(
        Duration::from_secs(5),
        "c's whole grace after the pause",
        || {
            let info = lock_info(&mut con, "L");
            let c = info.kept.iter().find(|k| field_text(k, "owner") == "c");
            let until = c.and_then(|c| find_field(c, "kept_until_ms"));
            let until = until.and_then(|v| redis::from_redis_value::<i64>(v).ok());
            until.expect("c's place is kept") >= unpaused_at + 1000
        },
    );
    queue_is(&server, "L", &["a", "b"], &[]);
    assert!(a.nothing_within(Duration::from_millis(10)));
}

/// Kept places are this master's memory: not replicated. A new master
/// starts with none, and the old one, now a replica, drops its own.
#[test]
fn a_failover_leaves_no_kept_place_on_either_side() {
    let master = Server::start();
    let replica = Server::start();
    replica.replicaof(&master);
    let mut mc = master.connection();
    acquire(&mut mc, "L", "h", 60_000);
    let (_a, a_id) = lock_waiter(&master, "L", "a", 60_000);
    kill(&mut mc, a_id);
    queue_is(&master, "L", &[], &["a"]);
    wait_for_replicas(&master, &[&replica]);
    let mut rc = replica.connection();
    assert!(lock_info(&mut rc, "L").kept.is_empty(), "not replicated");
    run(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    master.replicaof(&replica);
    assert_eq!(stat(&master, "lock_kept_places"), 0, "a replica keeps none");
    assert_eq!(stat(&master, "lock_places_dropped"), 1);
    assert!(
        holder_is(&mut rc, "L", "h"),
        "the lock itself was replicated"
    );
    let _b = lock_waiter(&replica, "L", "b", 5000);
    let _a = lock_waiter(&replica, "L", "a", 5000);
    queue_is(&replica, "L", &["b", "a"], &[]);
}

/// `SWAPDB` leaves the queues with their database number, and the kept
/// places with them; `FLUSHDB` and `FLUSHALL` drop those of the flushed data.
#[test]
fn swapdb_leaves_kept_places_with_their_queue_and_flushes_drop_them() {
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "L", "h", 60_000);
    let (_a, a_id) = lock_waiter(&server, "L", "a", 60_000);
    let _b = lock_waiter(&server, "L", "b", 60_000);
    kill(&mut con, a_id);
    queue_is(&server, "L", &["b"], &["a"]);
    run(&mut con, &["SWAPDB", "0", "1"]);
    let mut db1 = server.connection_db(1);
    assert!(lock_info(&mut db1, "L").kept.is_empty());
    assert!(holder_is(&mut db1, "L", "h"), "the data moved");
    queue_is(&server, "L", &["b"], &["a"]);
    assert_eq!(
        run(&mut db1, &["LOCK.CANCEL", "L", "a"]),
        cancel_reply("none")
    );
    run(&mut con, &["SWAPDB", "0", "1"]);

    let mut db3 = server.connection_db(3);
    acquire(&mut db3, "M", "h", 60_000);
    let mut m = RawClient::connect(server.port);
    m.send(&["SELECT", "3"]);
    assert_eq!(m.read().text(), "OK");
    m.send(&["LOCK.ACQUIRE", "M", "m", "60000", "WAIT", "10"]);
    assert!(matches!(m.read(), Resp::Int(_)));
    assert_eq!(stat(&server, "lock_kept_places"), 2);
    run(&mut con, &["FLUSHDB"]);
    queue_is(&server, "L", &[], &[]); // the lock went too: b has it
    assert_eq!(stat(&server, "lock_kept_places"), 1, "db 3's stays");
    run(&mut con, &["FLUSHALL"]);
    assert_eq!(stat(&server, "lock_kept_places"), 0);
    assert_eq!(stat(&server, "lock_places_dropped"), 2);
}

fn cancel_reply(word: &str) -> redis::Value {
    redis::Value::Array(vec![redis::Value::SimpleString(word.to_string())])
}
