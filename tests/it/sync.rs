//! Grants that wait for replicas (`LOCK.ACQUIRE ... SYNC n timeout-ms`,
//! `lock.sync-replicas`): answered only once `n` replicas acknowledged them,
//! undone with a `NOSYNC` error when they did not in time, for direct grants,
//! re-entries and hand-offs by a release or a lease's end; with replicas
//! with and without the module; where the client cannot block; when the
//! client leaves; and nothing of it in the AOF.

use std::time::{Duration, Instant};

use redis::Value;
use redis_lock_test_support::raw::{RawClient, Resp};
use redis_lock_test_support::*;

/// A master with `replicas` replicas (the first without the module when
/// `plain_first`), all caught up.
fn group(replicas: usize, plain_first: bool) -> (Server, Vec<Server>) {
    let master = Server::start();
    let replicas: Vec<Server> = (0..replicas)
        .map(|i| {
            let replica = if i == 0 && plain_first {
                Server::with(Options::new().without_module())
            } else {
                Server::start()
            };
            replica.replicaof(&master);
            replica
        })
        .collect();
    let refs: Vec<&Server> = replicas.iter().collect();
    wait_for_replicas(&master, &refs);
    // After a diskless full sync the master streams writes to a replica only
    // once it has acknowledged the sync (its first ACK comes within a
    // second): until then no grant can be acknowledged by it. Write once and
    // wait until every replica acknowledged that write.
    run(&mut master.connection(), &["SET", "warm-up", "1"]);
    let target = repl_offset(&master);
    poll_until(STARTUP_TIMEOUT, "every replica acknowledged", || {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut master.connection())
            .expect("INFO");
        (0..refs.len()).all(|i| {
            info_field(&info, &format!("slave{i}"))
                .and_then(|line| {
                    line.split(',')
                        .find_map(|p| p.strip_prefix("offset=").map(str::to_string))
                })
                .and_then(|offset| offset.parse::<i64>().ok())
                .is_some_and(|offset| offset >= target)
        })
    });
    (master, replicas)
}

/// Sends `args` on a fresh raw connection and reads the reply, with the
/// time it took.
fn timed(server: &Server, args: &[&str]) -> (Resp, Duration) {
    let mut client = RawClient::connect(server.port);
    let started = Instant::now();
    client.send(args);
    let reply = client.read();
    (reply, started.elapsed())
}

fn nosync(reply: &Resp, needle: &str) {
    match reply {
        Resp::Error(text) => assert!(
            text.starts_with("NOSYNC") && text.contains(needle),
            "{text}"
        ),
        other => panic!("expected a NOSYNC error, got {other:?}"),
    }
}

/// The hold count of `owner` on a replica: what a failover to it would keep.
fn count_on(server: &Server, key: &str, owner: &str) -> Option<i64> {
    redis::cmd("HGET")
        .arg(key)
        .arg(owner)
        .query(&mut server.connection())
        .expect("HGET")
}

#[test]
fn an_acknowledged_grant_is_on_the_replicas_when_it_is_answered() {
    let (master, replicas) = group(2, true);
    for (i, args) in [
        &["LOCK.ACQUIRE", "L", "a", "30000", "SYNC", "2", "2000"][..],
        &["LOCK.ACQUIRE", "L", "a", "30000", "SYNC", "1", "2000"],
    ]
    .iter()
    .enumerate()
    {
        let (reply, took) = timed(&master, args);
        assert_eq!(reply, Resp::Nil, "granted");
        assert!(
            took < Duration::from_millis(500),
            "acknowledged in {took:?}"
        );
        // Read straight after the reply: the replicas already have it.
        let count = i as i64 + 1;
        assert_eq!(
            count_on(&replicas[0], "L", "a"),
            Some(count),
            "plain replica"
        );
        if i == 0 {
            assert_eq!(
                count_on(&replicas[1], "L", "a"),
                Some(count),
                "module replica"
            );
        }
    }
    // With a token: the pair, and the counter is on the replica too.
    let (reply, _) = timed(
        &master,
        &[
            "LOCK.ACQUIRE",
            "T",
            "a",
            "30000",
            "TOKEN",
            "SYNC",
            "1",
            "2000",
        ],
    );
    let Resp::Array(pair) = reply else {
        panic!("a pair: {reply:?}")
    };
    let Resp::Int(token) = pair[1] else {
        panic!("a token: {pair:?}")
    };
    assert_eq!(pair[0], Resp::Int(-1));
    assert_eq!(counter(&mut replicas[0].connection(), "T"), Some(token));
    assert_eq!(stat(&master, "lock_grants_synced"), 3);
    assert_eq!(stat(&master, "lock_grants_undone"), 0);
    assert_eq!(stat(&master, "lock_grants_awaiting_replicas"), 0);
}

#[test]
fn an_unacknowledged_grant_is_undone_and_the_caller_told() {
    let _alone = alone();
    let (master, replicas) = group(1, false);
    let mut con = master.connection();
    replicas[0].signal("STOP");
    let (reply, took) = timed(
        &master,
        &[
            "LOCK.ACQUIRE",
            "L",
            "a",
            "30000",
            "TOKEN",
            "SYNC",
            "1",
            "200",
        ],
    );
    nosync(&reply, "0 of 1 replicas acknowledged it within 200 ms");
    assert!(
        // The server counts whole ms from its command's start.
        took >= Duration::from_millis(190) && took < Duration::from_millis(400),
        "answered after {took:?}"
    );
    assert!(!exists(&mut con, "L"), "undone before the NOSYNC reply");
    let used = counter(&mut con, "L").expect("the token stays used");
    // A re-entry that is not acknowledged goes back to the count before.
    acquire(&mut con, "L", "a", 30_000);
    let (reply, _) = timed(
        &master,
        &["LOCK.ACQUIRE", "L", "a", "30000", "SYNC", "1", "100"],
    );
    nosync(&reply, "within 100 ms");
    assert_eq!(
        lock_info(&mut con, "L").count_of(b"a"),
        Some(1),
        "the re-entry undone before the NOSYNC reply"
    );
    // Not enough replicas at all: refused the same way.
    let (reply, _) = timed(
        &master,
        &["LOCK.ACQUIRE", "M", "a", "30000", "SYNC", "2", "100"],
    );
    nosync(&reply, "of 2 replicas");
    replicas[0].signal("CONT");
    assert!(!exists(&mut con, "M"), "undone before the NOSYNC reply");
    assert!(counter(&mut con, "L").unwrap() >= used);
    assert_eq!(stat(&master, "lock_grants_undone"), 3);
    assert_eq!(stat(&master, "lock_grants_synced"), 0);
    // The replica, once back, has the same: L held once by a, no M.
    wait_for_replicas(&master, &[&replicas[0]]);
    assert_eq!(count_on(&replicas[0], "L", "a"), Some(1));
    assert!(!exists(&mut replicas[0].connection(), "M"));
}

#[test]
fn hand_offs_wait_for_replicas_and_an_undone_one_goes_to_the_next_waiter() {
    let _alone = alone();
    let (master, replicas) = group(1, false);
    let mut con = master.connection();
    acquire(&mut con, "L", "a", 30_000);
    let mut synced = queue_with(&master, "L", "b", 30_000, 0, &["SYNC", "1", "200"]);
    let mut plain = queue(&master, "L", "c", 30_000, 0);

    // A release hands L to b, whose grant the frozen replica never acknowledges.
    replicas[0].signal("STOP");
    let released_at = now_ms();
    assert_eq!(release(&mut con, "L", "a", None), Some(1));
    let (reply, at) = reply_at(&mut synced);
    nosync(&reply, "0 of 1");
    assert!(
        (200..400).contains(&(at - released_at)),
        "after {} ms",
        at - released_at
    );
    // ... so L goes on to c, in FIFO order.
    assert_eq!(plain.read(), Resp::Nil);
    assert_eq!(holders(&mut con, "L"), owned_by("c"));
    replicas[0].signal("CONT");
    wait_for_replicas(&master, &[&replicas[0]]);

    // A lease's end hands L to d, acknowledged this time.
    let mut waiter = queue_with(
        &master,
        "L",
        "d",
        30_000,
        0,
        &["TOKEN", "SYNC", "1", "2000"],
    );
    assert_eq!(renew(&mut con, "L", "c", 100), 1);
    let Resp::Array(pair) = waiter.read() else {
        panic!("a pair")
    };
    assert_eq!(pair[0], Resp::Int(-1));
    assert_eq!(
        count_on(&replicas[0], "L", "d"),
        Some(1),
        "on the replica when answered"
    );
}

#[test]
fn a_wait_timeout_before_the_acknowledgement_undoes_the_hand_off() {
    let _alone = alone();
    let (master, replicas) = group(1, false);
    let mut con = master.connection();
    acquire(&mut con, "L", "a", 30_000);
    let started = now_ms();
    let mut waiter = queue_with(&master, "L", "b", 30_000, 400, &["SYNC", "1", "5000"]);
    replicas[0].signal("STOP");
    std::thread::sleep(Duration::from_millis(100));
    release(&mut con, "L", "a", None);
    let (reply, at) = reply_at(&mut waiter);
    nosync(&reply, "the WAIT timeout came first");
    assert!(
        at - started < 600,
        "answered {} ms after it queued",
        at - started
    );
    assert!(
        !exists(&mut con, "L"),
        "the hand-off undone before the reply"
    );
    replicas[0].signal("CONT");
}

#[test]
fn a_client_that_leaves_before_the_acknowledgement_leaves_the_lock_free() {
    let _alone = alone();
    let (master, replicas) = group(1, false);
    let mut con = master.connection();
    replicas[0].signal("STOP");
    let mut client = RawClient::connect(master.port);
    client.send(&["LOCK.ACQUIRE", "L", "a", "30000", "SYNC", "1", "10000"]);
    poll_until(Duration::from_secs(2), "the grant waits", || {
        stat(&master, "lock_grants_awaiting_replicas") == 1
    });
    assert!(exists(&mut con, "L"), "granted, not answered yet");
    client.disconnect();
    poll_until(
        Duration::from_secs(2),
        "undone when the client left",
        || !exists(&mut con, "L"),
    );
    assert_eq!(stat(&master, "lock_grants_awaiting_replicas"), 0);
    replicas[0].signal("CONT");
}

#[test]
fn the_configured_default_applies_and_scripts_are_refused_rather_than_unsynced() {
    let (master, replicas) = group(1, false);
    let mut con = master.connection();
    config_set(&mut con, "lock.sync-replicas", 1);
    config_set(&mut con, "lock.sync-timeout-ms", 2000);
    assert_eq!(acquire(&mut con, "L", "a", 30_000), None, "granted");
    assert_eq!(count_on(&replicas[0], "L", "a"), Some(1));
    assert_eq!(stat(&master, "lock_grants_synced"), 1);

    // MULTI and scripts cannot block: the grant is refused, nothing changes.
    let script = redis::cmd("EVAL")
        .arg(&[
            "return redis.call('LOCK.ACQUIRE', KEYS[1], 'a', 30000)",
            "1",
            "S",
        ])
        .query::<Value>(&mut con);
    expect_err(script, "ERR", "SYNC", "a synced grant in a script");
    assert!(!exists(&mut con, "S"));
    let multi = redis::pipe()
        .atomic()
        .cmd("LOCK.ACQUIRE")
        .arg(&["S", "a", "30000", "SYNC", "1", "100"])
        .query::<Value>(&mut con);
    expect_err(multi, "ERR", "SYNC", "a synced grant in MULTI");
    assert!(!exists(&mut con, "S"));
    // ... unless they say SYNC 0 0, and a busy lock needs no replicas.
    let granted = redis::cmd("EVAL")
        .arg(&[
            "return redis.call('LOCK.ACQUIRE', KEYS[1], 'a', 30000, 'SYNC', 0, 0)",
            "1",
            "S",
        ])
        .query::<Value>(&mut con)
        .expect("SYNC 0 0 in a script");
    assert_eq!(granted, Value::Nil);
    let busy = redis::cmd("EVAL")
        .arg(&[
            "return redis.call('LOCK.ACQUIRE', KEYS[1], 'b', 30000)",
            "1",
            "S",
        ])
        .query::<i64>(&mut con)
        .expect("busy");
    assert!(busy > 0);
    for bad in [
        &["SYNC", "-1", "5"][..],
        &["SYNC", "1", "0"],
        &["SYNC", "1"],
    ] {
        let mut args = vec!["X", "a", "30000"];
        args.extend_from_slice(bad);
        let reply = redis::cmd("LOCK.ACQUIRE")
            .arg(&args)
            .query::<Value>(&mut con);
        expect_err(reply, "ERR", "", &format!("{bad:?}"));
        assert!(!exists(&mut con, "X"));
    }
}

/// Found by the chaos test: a write pause (`CLIENT PAUSE WRITE`, a
/// `FAILOVER`) while a grant waited for its replica aborted the master: the
/// request for acknowledgements went into the replication stream during the
/// pause (asked again every 100 ms). It now waits for the pause to end.
#[test]
fn a_write_pause_while_a_grant_waits_for_its_replica_holds_the_request_back() {
    let _alone = alone();
    let (mut master, replicas) = group(1, false);
    replicas[0].signal("STOP");
    let mut client = RawClient::connect(master.port);
    client.send(&[
        "LOCK.ACQUIRE",
        "L",
        "a",
        "30000",
        "TOKEN",
        "SYNC",
        "1",
        "5000",
    ]);
    poll_until(Duration::from_secs(2), "the grant waits", || {
        stat(&master, "lock_grants_awaiting_replicas") == 1
    });
    let mut admin = master.connection();
    run(&mut admin, &["CLIENT", "PAUSE", "1000", "WRITE"]);
    let paused_at = now_ms();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        master.is_alive(),
        "the master must survive a pause during a synced grant"
    );
    replicas[0].signal("CONT");
    // The request made before the pause reaches the replica now: the grant
    // is acknowledged (answering needs no write, so the pause does not hold
    // it back; asking again waits for the pause's end).
    let (reply, at) = reply_at(&mut client);
    let Resp::Array(pair) = reply else {
        panic!("a granted pair: {reply:?}")
    };
    assert_eq!(pair[0], Resp::Int(-1));
    assert!(at - paused_at < 5_000, "answered within SYNC's timeout");
    std::thread::sleep(Duration::from_millis(800));
    assert!(master.is_alive(), "alive after the pause");
    assert!(master.log().find("ASSERTION").is_none());
    assert_eq!(count_on(&replicas[0], "L", "a"), Some(1));
}

#[test]
fn replica_acknowledgement_requests_stay_out_of_the_aof() {
    let dir = TestDir::new("sync-aof");
    let master = Server::with(Options::new().aof().dir(dir.path()));
    let replica = Server::start();
    replica.replicaof(&master);
    wait_for_replicas(&master, &[&replica]);
    let (reply, _) = timed(
        &master,
        &["LOCK.ACQUIRE", "L", "a", "30000", "SYNC", "1", "2000"],
    );
    assert_eq!(reply, Resp::Nil);
    let mut aof = Vec::new();
    for entry in files_under(dir.path()) {
        aof.extend(std::fs::read(entry).unwrap_or_default());
    }
    let text = String::from_utf8_lossy(&aof).to_ascii_uppercase();
    // A grant replicates as one RESTORE (docs/replication.md).
    assert!(text.contains("RESTORE"), "the grant is in the AOF");
    assert!(!text.contains("GETACK"), "no REPLCONF GETACK in the AOF");
}
