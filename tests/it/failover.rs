//! Locks through the moments something goes wrong: write pauses
//! (`CLIENT PAUSE`, `FAILOVER`, `SHUTDOWN`), a demotion, a replica's
//! asynchronous full sync, shortened leases, many short waits, and the command
//! clock inside MULTI and scripts.
//!
//! The promise tested throughout: while Redis pauses writes the module writes
//! nothing (no hand-off, whatever frees the lock), Redis stays up, and when
//! the pause ends the queued hand-offs happen at once, in FIFO order, with
//! nobody barging.

use std::time::Duration;

use redis::{Connection, Value};
use redis_lock_test_support::raw::{RawClient, Resp};
use redis_lock_test_support::*;

/// Reads a waiter's reply, which must not arrive before `not_before` (unix
/// ms); returns it with how long after `not_before` it came.
fn reply_after(waiter: &mut RawClient, not_before: i64) -> (Resp, i64) {
    let (reply, at) = reply_at(waiter);
    (reply, at - not_before)
}

fn assert_nothing_handed_on(server: &Server, con: &mut Connection, key: &str, waiters: &[&str]) {
    assert!(
        holders(con, key).is_empty(),
        "{key}: nobody may be granted the lock during the pause"
    );
    assert_eq!(
        waiter_owners(server, key),
        waiters,
        "{key}: queue unchanged"
    );
}

// ---- CLIENT PAUSE --------------------------------------------------------

/// Found: a lease ending while writes were paused aborted Redis (`db.c:191
/// 'de != NULL'`): expiry is held back during a pause, the timer saw the key
/// as missing and wrote it as a new one.
#[test]
fn a_lease_ending_during_client_pause_write_waits_for_the_pause_and_redis_stays_up() {
    let _alone = alone();
    let mut server = Server::start();
    let mut con = server.connection();
    let mut admin = server.connection();
    acquire(&mut con, b"L", b"a", 30_000);
    let mut waiter = queue(&server, "L", "b", 30_000, 0);
    let mut impatient = queue(&server, "L", "c", 30_000, 200);
    // The lease ends soon after the pause starts (shortened only now, so a
    // slow machine cannot let it end before the waiters queue).
    assert_eq!(renew(&mut con, b"L", b"a", 300), 1);
    let deadline = pexpiretime(&mut con, "L");
    run(&mut admin, &["CLIENT", "PAUSE", "20000", "WRITE"]);

    // A WAIT timeout still fires on time during the pause.
    let paused_at = now_ms();
    let (reply, waited) = reply_after(&mut impatient, paused_at);
    assert!(matches!(reply, Resp::Int(_)), "timed out: {reply:?}");
    assert!(waited <= 400, "the timeout came {waited} ms into the pause");

    // Well past the deadline, still paused: nothing written, Redis up.
    std::thread::sleep(Duration::from_millis(
        (deadline - now_ms()).max(0) as u64 + 300,
    ));
    assert!(
        server.is_alive(),
        "Redis must survive a lease ending in a pause"
    );
    assert_nothing_handed_on(&server, &mut con, "L", &["b"]);
    assert!(waiter.nothing_within(Duration::from_millis(10)));
    assert_eq!(stat(&server, "lock_waits_granted"), 0);

    let unpaused_at = now_ms();
    run(&mut admin, &["CLIENT", "UNPAUSE"]);
    let (reply, late) = reply_after(&mut waiter, unpaused_at);
    assert_eq!(reply, Resp::Nil, "granted once the pause ends");
    assert!(late <= 200, "handed on {late} ms after the pause ended");
    assert_eq!(holders(&mut con, "L"), owned_by("b"));
    assert!(server.log().find("ASSERTION").is_none());
}

/// The same with `CLIENT PAUSE ALL`, which also holds back every command of
/// ours: the pause ends by itself.
#[test]
fn a_lease_ending_during_client_pause_all_is_handed_on_when_it_ends() {
    let _alone = alone();
    let mut server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, b"L", b"a", 30_000);
    let mut waiter = queue(&server, "L", "b", 30_000, 0);
    assert_eq!(renew(&mut con, b"L", b"a", 200), 1);
    let pause_ms = 1000;
    let paused_at = now_ms();
    run(&mut con, &["CLIENT", "PAUSE", &pause_ms.to_string(), "ALL"]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        server.is_alive(),
        "Redis must survive a lease ending in a pause"
    );
    let (reply, after_end) = reply_after(&mut waiter, paused_at + pause_ms);
    assert_eq!(reply, Resp::Nil);
    // Redis itself notices the end of a timed pause on its next cron tick.
    assert!(
        (0..=400).contains(&after_end),
        "handed on {after_end} ms after the pause's end"
    );
    assert_eq!(holders(&mut con, "L"), owned_by("b"));
}

/// Found: with a waiter queued, `DEL k` pipelined with `CLIENT PAUSE ...
/// WRITE` handed the lock on during the pause: a write a manual failover can
/// lose after the waiter was told the lock is his (two holders).
#[test]
fn a_delete_pipelined_with_a_write_pause_hands_nothing_on_until_it_ends() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, b"K", b"a", 30_000);
    acquire(&mut con, b"E", b"e", 30_000);
    let mut first = queue(&server, "K", "b", 30_000, 0);
    let mut second = queue(&server, "K", "c", 30_000, 0);
    let mut on_expiry = queue(&server, "E", "x", 30_000, 0);
    assert_eq!(
        renew(&mut con, b"E", b"e", 300),
        1,
        "E's lease ends in the pause"
    );

    let mut admin = RawClient::connect(server.port);
    admin.send_pipeline(&[&["DEL", "K"], &["CLIENT", "PAUSE", "20000", "WRITE"]]);
    assert_eq!(admin.read(), Resp::Int(1));
    assert_eq!(admin.read(), Resp::Text(b"OK".to_vec()));
    // A newcomer arrives during the pause: Redis holds its command back.
    let mut newcomer = RawClient::connect(server.port);
    newcomer.send(&["LOCK.ACQUIRE", "K", "z", "30000"]);

    std::thread::sleep(Duration::from_millis(500)); // E's lease ends meanwhile
    assert_nothing_handed_on(&server, &mut con, "K", &["b", "c"]);
    assert_nothing_handed_on(&server, &mut con, "E", &["x"]);
    assert_eq!(stat(&server, "lock_waits_granted"), 0);

    admin.send(&["CLIENT", "UNPAUSE"]);
    let unpaused_at = now_ms();
    assert_eq!(admin.read(), Resp::Text(b"OK".to_vec()));
    for (name, waiter) in [
        ("K's first waiter", &mut first),
        ("E's waiter", &mut on_expiry),
    ] {
        let (reply, late) = reply_after(waiter, unpaused_at);
        assert_eq!(reply, Resp::Nil, "{name} is granted");
        assert!(
            late <= 200,
            "{name} was handed the lock {late} ms after the pause"
        );
    }
    match newcomer.read() {
        Resp::Int(ttl) => assert!(ttl > 25_000, "the newcomer is told the lease: {ttl}"),
        other => panic!("the newcomer barged past the queue: {other:?}"),
    }
    assert_eq!(holders(&mut con, "K"), owned_by("b"));
    assert_eq!(holders(&mut con, "E"), owned_by("x"));
    assert_eq!(waiter_owners(&server, "K"), vec!["c"], "FIFO: c is next");
    assert!(second.nothing_within(Duration::from_millis(10)));
}

// ---- FAILOVER and SHUTDOWN with a lagging replica ---------------------------

/// A master whose replica is frozen (SIGSTOP) and lags behind by one write.
fn master_with_lagging_replica(master: Options) -> (Server, Server) {
    let master = Server::with(master);
    let replica = Server::start();
    replica.replicaof(&master);
    replica.signal("STOP");
    run(&mut master.connection(), &["SET", "lag", "1"]);
    (master, replica)
}

/// Found: `FAILOVER` pauses writes until the replica catches up; a lease
/// ending meanwhile aborted the old master, and the replica was never promoted.
#[test]
fn failover_waiting_for_a_lagging_replica_hands_nothing_on_and_redis_stays_up() {
    let _alone = alone();
    let (mut master, replica) = master_with_lagging_replica(Options::new());
    let mut con = master.connection();
    acquire(&mut con, b"L", b"a", 30_000);
    let mut waiter = queue(&master, "L", "b", 30_000, 0);
    assert_eq!(renew(&mut con, b"L", b"a", 300), 1);
    let timeout_ms = 1500;
    let started = now_ms();
    run(&mut con, &["FAILOVER", "TIMEOUT", &timeout_ms.to_string()]);

    std::thread::sleep(Duration::from_millis(800)); // the lease ends in the pause
    assert!(
        master.is_alive(),
        "Redis must survive a lease ending in FAILOVER"
    );
    assert_nothing_handed_on(&master, &mut con, "L", &["b"]);

    // The replica never caught up: the failover times out, writes resume,
    // and the lock is handed on.
    let (reply, after_timeout) = reply_after(&mut waiter, started + timeout_ms);
    assert_eq!(reply, Resp::Nil);
    assert!(after_timeout >= -50, "granted before the failover gave up");
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut con)
        .expect("INFO");
    assert_eq!(info_field(&info, "role").as_deref(), Some("master"));
    assert_eq!(holders(&mut con, "L"), owned_by("b"));

    replica.signal("CONT");
    wait_for_replicas(&master, &[&replica]);
    let mut rc = replica.connection();
    assert_eq!(holders(&mut rc, "L"), owned_by("b"));
    assert_eq!(pexpiretime(&mut rc, "L"), pexpiretime(&mut con, "L"));
}

// ---- min-replicas-to-write -------------------------------------------------

/// The good-replica count Redis compares with `min-replicas-to-write`.
fn good_replicas(server: &Server) -> i64 {
    server
        .info("replication", "min_slaves_good_slaves")
        .and_then(|good| good.parse().ok())
        .expect("min_slaves_good_slaves")
}

/// While Redis would refuse writes with NOREPLICAS (a replica frozen past
/// `min-replicas-max-lag`), a lease that ends hands nothing on, exactly as in
/// a pause; once the replica is good again the waiters get the lock in FIFO
/// order. (Before, the module handed the lock on regardless: a write Redis
/// refuses to clients, which a failover to that replica can lose after the
/// waiter was told "yours".)
#[test]
fn a_lease_ending_without_enough_good_replicas_is_handed_on_once_they_are_back() {
    let _alone = alone();
    let master = Server::with(
        Options::new()
            .config("min-replicas-to-write", &["1"])
            .config("min-replicas-max-lag", &["1"]),
    );
    let replica = Server::start();
    replica.replicaof(&master);
    wait_for_replicas(&master, &[&replica]);
    poll_until(STARTUP_TIMEOUT, "a good replica", || {
        good_replicas(&master) == 1
    });
    let mut con = master.connection();
    // Long enough for the replica to turn bad first (2-3 s after it stops
    // acknowledging): nobody can shorten a lease once writes are refused.
    acquire(&mut con, b"L", b"a", 5_000);
    let deadline = pexpiretime(&mut con, "L");
    let mut first = queue(&master, "L", "b", 30_000, 0);
    let mut second = queue(&master, "L", "c", 30_000, 0);

    replica.signal("STOP");
    poll_until(Duration::from_secs(10), "no good replica", || {
        good_replicas(&master) == 0
    });
    assert!(
        now_ms() < deadline,
        "the lease must end after the replica went bad"
    );
    let refused = redis::cmd("SET").arg(&["x", "1"]).query::<Value>(&mut con);
    expect_err(refused, "NOREPLICAS", "", "a write with no good replica");

    // Well past the deadline: nothing handed on, Redis up.
    std::thread::sleep(Duration::from_millis(
        (deadline - now_ms()).max(0) as u64 + 500,
    ));
    assert_eq!(good_replicas(&master), 0, "still no good replica");
    assert_nothing_handed_on(&master, &mut con, "L", &["b", "c"]);
    assert!(first.nothing_within(Duration::from_millis(10)));
    assert_eq!(stat(&master, "lock_waits_granted"), 0);

    let resumed_at = now_ms();
    replica.signal("CONT");
    let (reply, late) = reply_after(&mut first, resumed_at);
    assert_eq!(reply, Resp::Nil, "granted once a replica is good again");
    assert!(good_replicas(&master) >= 1);
    assert!(
        late <= 3_000,
        "handed on {late} ms after the replica came back"
    );
    assert_eq!(holders(&mut con, "L"), owned_by("b"));
    assert_eq!(waiter_owners(&master, "L"), vec!["c"], "FIFO: c is next");
    assert!(second.nothing_within(Duration::from_millis(10)));
    wait_for_replicas(&master, &[&replica]);
    let mut rc = replica.connection();
    assert_eq!(
        holders(&mut rc, "L"),
        owned_by("b"),
        "the replica has the grant"
    );
}

/// Found: `SHUTDOWN` waits for lagging replicas with writes paused; a lease
/// ending then aborted Redis and the final RDB save was lost.
#[test]
fn shutdown_waiting_for_a_lagging_replica_writes_nothing_and_saves() {
    let (mut master, replica) =
        master_with_lagging_replica(Options::new().config("shutdown-timeout", &["2"]));
    let mut con = master.connection();
    acquire(&mut con, b"L", b"a", 30_000);
    acquire(&mut con, b"kept", b"k", 600_000);
    let mut waiter = queue(&master, "L", "b", 30_000, 0);
    assert_eq!(
        renew(&mut con, b"L", b"a", 300),
        1,
        "it ends during SHUTDOWN"
    );
    let mut admin = RawClient::connect(master.port);
    admin.send(&["SHUTDOWN", "SAVE"]);

    let status = master
        .wait_exit(Duration::from_secs(10))
        .expect("the master shuts down within its shutdown-timeout");
    let log = master.log();
    assert!(
        status.success() && !log.contains("ASSERTION"),
        "clean exit ({status}), log:\n{log}"
    );
    assert!(log.contains("Waiting for replicas"), "it waited: {log}");
    assert!(
        log.contains("DB saved on disk"),
        "the final save happened: {log}"
    );
    assert_eq!(
        waiter.try_read(),
        None,
        "a waiter is granted nothing: its connection closes"
    );
    drop(replica);

    // The saved data has the locks as they were when writes stopped.
    let restarted = Server::with(Options::new().dir(master.dir()));
    let mut con = restarted.connection();
    assert_eq!(holders(&mut con, "kept"), owned_by("k"));
}

// ---- demotion ---------------------------------------------------------------

/// Every supported server force-unblocks blocked clients before a module
/// hears that it became a replica, so waiters get Redis's own error, and the
/// connection is closed after it. Nothing is granted.
#[test]
fn waiters_of_a_master_turned_replica_get_redis_unblocked_error() {
    let other = Server::start();
    let master = Server::start();
    let mut con = master.connection();
    acquire(&mut con, b"L", b"a", 30_000);
    let mut waiter = queue(&master, "L", "b", 30_000, 0);
    run(
        &mut con,
        &["REPLICAOF", "127.0.0.1", &other.port.to_string()],
    );
    match waiter.read() {
        Resp::Error(text) => assert_eq!(
            text,
            "UNBLOCKED force unblock from blocking operation, \
             instance state changed (master -> replica?)"
        ),
        other => panic!("expected an error, got {other:?}"),
    }
    assert_eq!(waiter.try_read(), None, "the connection is closed");
    assert_eq!(stat(&master, "lock_waiting_clients"), 0);
    assert_eq!(stat(&master, "lock_waits_granted"), 0);
}

// ---- shortened leases -----------------------------------------------------

/// Found: a lease made shorter while clients waited kept the hand-off timer
/// on the old deadline; the waiter waited for Redis's background expiry,
/// seconds late with many volatile keys. Every way a deadline is set counts.
#[test]
fn a_shortened_lease_is_handed_on_within_20_ms_of_its_new_deadline() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    // 100k volatile keys make Redis's own active expiry slow to find ours.
    let _: Value = redis::cmd("EVAL")
        .arg("for i = 1, 100000 do redis.call('SET', 'v' .. i, 'x', 'PX', 3600000) end")
        .arg(0)
        .query(&mut con)
        .expect("populate");
    type Shorten = fn(&mut Connection);
    let cases: [(&str, Shorten); 4] = [
        ("re-entry", |con| {
            assert_eq!(acquire(con, b"L", b"a", 300), None)
        }),
        ("LOCK.RENEW", |con| {
            assert_eq!(renew(con, b"L", b"a", 300), 1)
        }),
        ("LOCK.RELEASE with a lease", |con| {
            assert_eq!(release(con, b"L", b"a", Some(300)), Some(0))
        }),
        ("PEXPIRE by anyone", |con| {
            assert_eq!(run(con, &["PEXPIRE", "L", "300"]), Value::Int(1));
        }),
    ];
    for (how, shorten) in cases {
        acquire(&mut con, b"L", b"a", 60_000);
        acquire(&mut con, b"L", b"a", 60_000); // count 2, for the release case
        let mut waiter = queue(&server, "L", "b", 30_000, 0);
        shorten(&mut con);
        let deadline = pexpiretime(&mut con, "L");
        assert!(deadline - now_ms() <= 300, "{how} shortened the lease");
        assert_eq!(waiter.read(), Resp::Nil, "{how}");
        assert_eq!(holders(&mut con, "L"), owned_by("b"), "{how}");
        assert_handed_on_in_time(&mut con, "L", 30_000, deadline, how);
        force(&mut con, b"L");
    }
}

// ---- timers ---------------------------------------------------------------

/// Found: each time a queue went from empty to non-empty a timer was armed
/// (up to 1 h) and never cancelled: ~120 bytes per wait until the lease
/// ended, and `MODULE UNLOAD` refused while any was pending.
#[test]
fn timers_do_not_pile_up_and_the_module_unloads_once_nobody_waits_or_is_kept() {
    let _alone = alone();
    let server = Server::with(
        Options::new()
            .config("hz", &["100"])
            .config("enable-module-command", &["yes"]),
    );
    let mut con = server.connection();
    let keys = 50;
    for k in 0..keys {
        acquire(&mut con, format!("L{k}").as_bytes(), b"holder", 3_600_000);
    }
    // One client per key: every wait finds its queue empty and leaves it so.
    let waits = |per_key: usize| {
        let waiters = (0..keys).map(|k| (format!("L{k}"), "w".to_string()));
        waits_that_time_out(&server, waiters.collect(), per_key);
    };
    let settled = || {
        poll_until(Duration::from_secs(10), "every waiter has left", || {
            let clients: i64 = server
                .info("clients", "connected_clients")
                .and_then(|v| v.parse().ok())
                .expect("connected_clients");
            stat(&server, "lock_waiting_clients") == 0 && clients <= 2
        })
    };
    // One round: 100k waits on 1 h leases, then 1,000 waiters that hang up
    // instead of timing out, 50 at a time (as many as wait in the first
    // part: Redis 7.0 keeps a pool of reply clients as large as the most
    // clients ever blocked at once, ~20 KB each, and trims it lazily).
    let round = |con: &mut Connection| -> i64 {
        waits(2_000);
        for _ in 0..20 {
            let started = stat(&server, "lock_waits_started");
            let clients: Vec<RawClient> = (0..keys)
                .map(|k| {
                    let mut client = RawClient::connect(server.port);
                    let key = format!("L{k}");
                    client.send(&["LOCK.ACQUIRE", &key, "d", "1000", "WAIT", "0"]);
                    client
                })
                .collect();
            poll_until(Duration::from_secs(10), "the batch waits", || {
                stat(&server, "lock_waits_started") == started + keys as u64
            });
            drop(clients);
            settled();
        }
        used_memory(con)
    };
    let before = round(&mut con);
    let after = round(&mut con);
    assert_eq!(stat(&server, "lock_waits_started"), 2 * 101_000);
    // A timer left behind per wait (the bug) is ~120 bytes: 12 MB a round.
    assert!(
        after - before < 2 * 1024 * 1024,
        "memory grew by {} bytes over 101k waits",
        after - before
    );
    // The waiters' places are kept (one timer per queue, no more): once
    // they are dropped too, the module holds no timer.
    assert!(stat(&server, "lock_handoff_timers") <= keys as u64);
    let kept = stat(&server, "lock_kept_places");
    assert_eq!(kept, 2 * keys as u64, "w's and d's places on every key");
    for k in 0..keys {
        for owner in ["w", "d"] {
            let reply: Value = redis::cmd("LOCK.CANCEL")
                .arg(format!("L{k}"))
                .arg(owner)
                .query(&mut con)
                .expect("LOCK.CANCEL");
            assert_eq!(
                reply,
                Value::Array(vec![Value::SimpleString("cancelled".into())])
            );
        }
    }
    assert_eq!(stat(&server, "lock_kept_places"), 0);
    let unloaded: Value = redis::cmd("MODULE")
        .arg("UNLOAD")
        .arg("lock")
        .query(&mut con)
        .unwrap_or_else(|e| panic!("MODULE UNLOAD once nobody waits and no place is kept: {e}"));
    assert_eq!(unloaded, Value::Okay);
}

// ---- the command clock ----------------------------------------------------

/// Found: inside MULTI/EXEC and scripts Redis 7.2+ and Valkey freeze the
/// command clock while the module read a live one, so a contended acquire
/// right after a 30000 ms acquire sometimes answered 30001.
#[test]
fn remaining_leases_agree_with_pttl_inside_multi_and_scripts() {
    let server = Server::start();
    let mut con = server.connection();
    let version: String = server.info("server", "redis_version").expect("version");
    let frozen_clock = {
        let v: Vec<u32> = version.split('.').filter_map(|p| p.parse().ok()).collect();
        v.as_slice() >= [7, 2].as_slice()
    };
    for round in 0..3_000 {
        let (second, pttl, deadline, pexpire_at): (Option<i64>, i64, i64, i64) = if round % 2 == 0 {
            let replies: (Option<i64>, Option<i64>, i64, Value, i64) = redis::pipe()
                .atomic()
                .cmd("LOCK.ACQUIRE")
                .arg("K")
                .arg("a")
                .arg(30_000)
                .cmd("LOCK.ACQUIRE")
                .arg("K")
                .arg("b")
                .arg(30_000)
                .cmd("PTTL")
                .arg("K")
                .cmd("LOCK.INFO")
                .arg("K")
                .cmd("PEXPIRETIME")
                .arg("K")
                .query(&mut con)
                .expect("MULTI/EXEC");
            let info = LockInfo::parse(&replies.3);
            (replies.1, replies.2, info.deadline_ms, replies.4)
        } else {
            let replies: (Option<i64>, i64, i64) = redis::cmd("EVAL")
                .arg(
                    "redis.call('LOCK.ACQUIRE', KEYS[1], 'a', '30000') \
                     return {redis.call('LOCK.ACQUIRE', KEYS[1], 'b', '30000'), \
                     redis.call('PTTL', KEYS[1]), redis.call('PEXPIRETIME', KEYS[1])}",
                )
                .arg(1)
                .arg("K")
                .query(&mut con)
                .expect("EVAL");
            (replies.0, replies.1, replies.2, replies.2)
        };
        let second = second.expect("b is refused");
        assert!(
            second <= 30_000 && pttl <= second,
            "round {round}: remaining lease {second}, PTTL {pttl}"
        );
        if frozen_clock {
            assert_eq!(
                second, pttl,
                "round {round}: one clock for the whole transaction"
            );
        }
        assert_eq!(
            deadline, pexpire_at,
            "round {round}: LOCK.INFO's deadline is PEXPIRETIME"
        );
        let _: i64 = redis::cmd("DEL").arg("K").query(&mut con).expect("DEL");
    }
}

// ---- asynchronous replica loading ---------------------------------------------

/// Found: without declaring that it handles asynchronous replication loading,
/// the module made `repl-diskless-load swapdb` replicas fall back to a disk
/// sync (answering -LOADING instead of serving their old data) and log a line
/// per socket read. Redis loads asynchronously when a replica re-syncs the
/// same history (same replication id), e.g. after its link broke for longer
/// than the backlog covers: that is what this test makes happen.
#[test]
fn a_swapdb_diskless_resync_serves_old_data_meanwhile_and_brings_the_locks() {
    let _alone = alone();
    let master = Server::with(
        Options::new()
            .config("repl-diskless-sync", &["yes"])
            .config("repl-backlog-size", &["16384"]),
    );
    let mut mc = master.connection();
    run(&mut mc, &["SET", "old", "data"]);
    let replica = Server::with(
        Options::new()
            .config("repl-diskless-load", &["swapdb"])
            // Serve clients often while loading, not every 2 MB.
            .config("loading-process-events-interval-bytes", &["1024"]),
    );
    replica.replicaof(&master);
    let mut rc = replica.connection();
    assert_eq!(
        run(&mut rc, &["GET", "old"]),
        Value::BulkString(b"data".to_vec())
    );

    // The link breaks while the replica is frozen, and the master moves on
    // further than its backlog covers: locks taken, 20k other keys written.
    config_set(&mut rc, "key-load-delay", "100"); // ~2 s of loading
    let swaps_before = stat(&replica, "lock_swapdb_loads");
    replica.signal("STOP");
    run(&mut mc, &["CLIENT", "KILL", "TYPE", "replica"]);
    let _: Value = redis::cmd("EVAL")
        .arg("for i = 1, 20000 do redis.call('SET', 'key:' .. i, 'value') end")
        .arg(0)
        .query(&mut mc)
        .expect("populate");
    acquire(&mut mc, b"held", b"a", 600_000);
    acquire(&mut mc, b"held", b"a", 600_000);
    acquire(&mut mc, b"short", b"s", 600_000);
    let _waiter = queue(&master, "held", "w", 30_000, 0);
    replica.signal("CONT");

    // Until the module has seen the re-synced data swapped in (the old link
    // still looks up right after SIGCONT, so link status alone proves nothing).
    let mut saw_async_loading = false;
    poll_until(
        Duration::from_secs(30),
        "the re-synced data is swapped in",
        || {
            let info: String = redis::cmd("INFO").query(&mut rc).expect("INFO");
            if info_field(&info, "async_loading").as_deref() == Some("1") {
                saw_async_loading = true;
                // Meanwhile the old dataset is served, not -LOADING.
                let old: Option<String> = redis::cmd("GET").arg("old").query(&mut rc).expect("GET");
                assert_eq!(old.as_deref(), Some("data"));
            }
            stat(&replica, "lock_swapdb_loads") == swaps_before + 1
        },
    );
    config_set(&mut rc, "key-load-delay", "0");
    wait_for_replicas(&master, &[&replica]);
    let log = replica.log();
    assert!(
        !log.contains("Skipping diskless-load"),
        "replica log:\n{log}"
    );
    // Whether a poll lands inside the load depends on the machine; when one
    // did, the old data was served (asserted above).
    eprintln!("async loading observed while it ran: {saw_async_loading}");
    for key in ["held", "short"] {
        assert_eq!(
            hgetall(&mut rc, key.as_bytes()),
            hgetall(&mut mc, key.as_bytes()),
            "{key}"
        );
        assert_eq!(
            pexpiretime(&mut rc, key),
            pexpiretime(&mut mc, key),
            "{key}"
        );
    }
    assert_eq!(
        stat(&replica, "lock_waiting_clients"),
        0,
        "a replica has no queues"
    );

    // Promoted, the replica runs the swapped-in locks: a waiter there is
    // handed one when its (renewed, shorter) lease ends.
    run(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    let mut waiter = queue(&replica, "short", "t", 30_000, 0);
    assert_eq!(renew(&mut rc, b"short", b"s", 300), 1);
    let deadline = pexpiretime(&mut rc, "short");
    assert_eq!(waiter.read(), Resp::Nil);
    assert_handed_on_in_time(
        &mut rc,
        "short",
        30_000,
        deadline,
        "on the promoted replica",
    );
    assert_eq!(acquire(&mut rc, b"held", b"a", 1_000), None, "a re-enters");
}
