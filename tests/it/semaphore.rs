//! The semaphores against real servers: `LOCK.SEM*` on Redisson
//! `RSemaphore`'s layout and `LOCK.PERMIT*` on `RPermitExpirableSemaphore`'s:
//! the fair queue (head first, large requests not starved), leased permits
//! reclaimed at their deadline from a holder killed with SIGKILL, the set
//! holding only live permits, inspection, bad input, replication, restarts,
//! pauses and ACLs. (Redisson's own scripts both ways:
//! `semaphore_redisson.rs`.)

use std::process::{Command, Stdio};
use std::time::Duration;

use redis::{Connection, Value};
use redis_lock_test_support::raw::{RawClient, Resp};
use redis_lock_test_support::*;

fn get(con: &mut Connection, key: &str) -> Option<String> {
    as_string(&run(con, &["GET", key]))
}

/// Takes `n` leased permits of `name` for `lease_ms`: their ids.
fn take(con: &mut Connection, name: &str, n: u32, lease_ms: u64) -> Vec<String> {
    let reply = run(
        con,
        &[
            "LOCK.PERMITACQUIRE",
            name,
            &n.to_string(),
            "LEASE",
            &lease_ms.to_string(),
        ],
    );
    ids_of(&reply)
}

fn ids_of_resp(reply: Resp) -> Vec<String> {
    reply.array().into_iter().map(|id| id.text()).collect()
}

/// A server whose semaphore `s` has its one permit leased for 200 ms (the
/// permit's id) and a waiter queued for it: the start of the tests of a
/// lease ending while the server holds writes back.
fn one_permit_ending_soon_with_a_waiter() -> (Server, Connection, String, RawClient) {
    let (server, mut con) = server_set_up_by(&["LOCK.SEMSET", "s", "1"]);
    let id = take(&mut con, "s", 1, 200).remove(0);
    let waiter = queue_for(&server, &["LOCK.SEMACQUIRE", "s", "1", "WAIT", "0"]);
    (server, con, id, waiter)
}

#[test]
fn permits_are_counted_in_redissons_string_and_announced_on_its_channel() {
    let server = Server::start();
    let mut con = server.connection();
    let mut sub = Subscriber::new(&server, &[b"redisson_sc:{s}"]);
    assert_eq!(run_int(&mut con, &["LOCK.SEMSET", "s", "3"]), 1);
    assert_eq!(run_int(&mut con, &["LOCK.SEMSET", "s", "9"]), 0, "set once");
    assert_eq!(get(&mut con, "s").as_deref(), Some("3"));
    assert_eq!(run_int(&mut con, &["LOCK.SEMACQUIRE", "s", "2"]), 1);
    assert_eq!(
        run_int(&mut con, &["LOCK.SEMACQUIRE", "s", "2"]),
        0,
        "one left"
    );
    assert_eq!(run_int(&mut con, &["LOCK.SEMRELEASE", "s", "2"]), 3);
    assert_eq!(run_int(&mut con, &["LOCK.SEMADD", "s", "-1"]), 2);
    assert_eq!(run_int(&mut con, &["LOCK.SEMAVAILABLE", "s"]), 2);
    assert_eq!(run_int(&mut con, &["LOCK.SEMDRAIN", "s"]), 2);
    assert_eq!(get(&mut con, "s").as_deref(), Some("0"));
    assert_eq!(run_int(&mut con, &["LOCK.SEMAVAILABLE", "missing"]), 0);
    assert_eq!(
        show(&sub.drain(&mut con)),
        vec![
            ("redisson_sc:{s}".to_string(), "3".to_string()),
            ("redisson_sc:{s}".to_string(), "3".to_string()),
            ("redisson_sc:{s}".to_string(), "2".to_string()),
        ],
        "set, release and add announce the count; acquire and drain do not"
    );
    // A semaphore set with a time to live keeps it through every change.
    assert_eq!(
        run_int(&mut con, &["LOCK.SEMSET", "t", "2", "PX", "60000"]),
        1
    );
    let deadline = pexpiretime(&mut con, "t");
    assert_eq!(run_int(&mut con, &["LOCK.SEMACQUIRE", "t", "1"]), 1);
    assert_eq!(run_int(&mut con, &["LOCK.SEMRELEASE", "t", "1"]), 2);
    assert_eq!(pexpiretime(&mut con, "t"), deadline);
}

#[test]
fn the_head_of_the_queue_is_served_first_even_when_it_wants_more() {
    let (server, mut con) = server_set_up_by(&["LOCK.SEMSET", "s", "1"]);
    let mut big = queue_for(&server, &["LOCK.SEMACQUIRE", "s", "3", "WAIT", "0"]);
    let mut small = queue_for(&server, &["LOCK.SEMACQUIRE", "s", "1", "WAIT", "0"]);
    assert_eq!(
        queued(&mut con, "LOCK.SEMINFO", "s"),
        vec![("permits".to_string(), 3), ("permits".to_string(), 1)]
    );
    // A newcomer does not take the free permit: it is kept for the head.
    assert_eq!(run_int(&mut con, &["LOCK.SEMACQUIRE", "s", "1"]), 0);
    assert!(small.nothing_within(Duration::from_millis(50)));
    assert_eq!(run_int(&mut con, &["LOCK.SEMRELEASE", "s", "2"]), 3);
    assert_eq!(big.read(), Resp::Int(1), "the head got its 3");
    assert!(small.nothing_within(Duration::from_millis(50)));
    assert_eq!(run_int(&mut con, &["LOCK.SEMRELEASE", "s", "1"]), 1);
    assert_eq!(small.read(), Resp::Int(1));
    assert_eq!(get(&mut con, "s").as_deref(), Some("0"));
    assert!(queued(&mut con, "LOCK.SEMINFO", "s").is_empty());
}

#[test]
fn a_head_that_gives_up_lets_the_smaller_requests_behind_it_in() {
    let (server, mut con) = server_set_up_by(&["LOCK.SEMSET", "s", "1"]);
    let mut big = queue_for(&server, &["LOCK.SEMACQUIRE", "s", "5", "WAIT", "200"]);
    let mut small = queue_for(&server, &["LOCK.PERMITACQUIRE", "s", "1", "WAIT", "0"]);
    assert_eq!(big.read(), Resp::Int(0), "timed out");
    let ids = ids_of_resp(small.read());
    assert_eq!(ids.len(), 1);
    assert_eq!(permits_taken(&mut con, "s"), 1);
    // And a leased waiter that times out hears nil.
    let mut late = queue_for(&server, &["LOCK.PERMITACQUIRE", "s", "1", "WAIT", "50"]);
    assert_eq!(late.read(), Resp::Nil);
}

#[test]
fn leased_permits_go_back_to_the_set_only_by_id_and_renew_while_live() {
    let (_server, mut con) = server_set_up_by(&["LOCK.SEMSET", "s", "2"]);
    let ids = take(&mut con, "s", 2, 30_000);
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    assert_eq!(get(&mut con, "s").as_deref(), Some("0"));
    let deadline = permit_deadline(&mut con, "s", &ids[0]).expect("in the set");
    assert!((deadline - server_now_ms(&mut con) - 30_000).abs() < 1_000);
    // Renew: a new deadline on the server's clock.
    assert_eq!(
        run_int(&mut con, &["LOCK.PERMITRENEW", "s", &ids[0], "60000"]),
        1
    );
    assert!(permit_deadline(&mut con, "s", &ids[0]).unwrap() > deadline + 20_000);
    // An unknown id changes nothing, even next to a good one.
    let unknown = "00000000000000000000000000000000";
    let refused = try_run(&mut con, &["LOCK.PERMITRELEASE", "s", &ids[0], unknown]).unwrap_err();
    assert!(
        refused.contains(&format!("permit {unknown} is not held")),
        "{refused}"
    );
    assert_eq!(permits_taken(&mut con, "s"), 2);
    assert_eq!(
        run_int(&mut con, &["LOCK.PERMITRENEW", "s", unknown, "1000"]),
        0
    );
    assert_eq!(
        run_int(&mut con, &["LOCK.PERMITRELEASE", "s", &ids[0], &ids[1]]),
        2
    );
    assert_eq!(get(&mut con, "s").as_deref(), Some("2"));
    assert_eq!(permits_taken(&mut con, "s"), 0);
    assert!(
        try_run(&mut con, &["LOCK.PERMITRELEASE", "s", &ids[0]]).is_err(),
        "twice"
    );
    // Without a lease, Redisson's never-expiring score.
    let forever = ids_of(&run(&mut con, &["LOCK.PERMITACQUIRE", "s", "1"]));
    assert_eq!(
        permit_deadline(&mut con, "s", &forever[0]),
        Some(922_337_203_685_477)
    );
}

/// A holder process is killed with SIGKILL while holding a leased permit:
/// the waiter gets the permit from the queue's timer within 20 ms of the
/// dead holder's deadline, by the server's clock.
#[test]
fn a_killed_holders_permit_reaches_the_waiter_within_20_ms_of_its_lease() {
    let _alone = alone();
    let (server, mut con) = server_set_up_by(&["LOCK.SEMSET", "s", "1"]);
    let out = server.dir().join("holder.out");
    let mut holder = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "redis-cli -p {} LOCK.PERMITACQUIRE s 1 LEASE 400 > {}; exec sleep 60",
            server.port,
            out.display()
        ))
        .stdout(Stdio::null())
        .spawn()
        .expect("start the holder");
    poll_until(Duration::from_secs(5), "the holder has its permit", || {
        std::fs::read_to_string(&out).is_ok_and(|s| s.trim().len() == 32)
    });
    let dead_id = std::fs::read_to_string(&out).unwrap().trim().to_string();
    holder.kill().expect("SIGKILL the holder");
    holder.wait().unwrap();
    let deadline = permit_deadline(&mut con, "s", &dead_id).expect("still held");
    let mut waiter = queue_for(
        &server,
        &["LOCK.PERMITACQUIRE", "s", "1", "LEASE", "5000", "WAIT", "0"],
    );
    let ids = ids_of_resp(waiter.read());
    let granted_at = permit_deadline(&mut con, "s", &ids[0]).unwrap() - 5_000;
    let late = granted_at - deadline;
    assert!(
        (0..=20).contains(&late),
        "the waiter got the permit {late} ms after the dead holder's deadline"
    );
    assert_eq!(permit_deadline(&mut con, "s", &dead_id), None, "reclaimed");
    eprintln!("permit handed on {late} ms after the dead holder's lease");
}

#[test]
fn an_expired_permit_leaves_the_set_at_its_deadline_with_nobody_calling() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    let mut sub = Subscriber::new(&server, &[b"redisson_sc:{s}"]);
    assert_eq!(run_int(&mut con, &["LOCK.SEMSET", "s", "2"]), 1);
    let ids = take(&mut con, "s", 1, 150);
    let deadline = permit_deadline(&mut con, "s", &ids[0]).unwrap();
    assert_eq!(
        server.lock_stats()["lock_handoff_timers"],
        1,
        "one timer watches it"
    );
    poll_until(Duration::from_secs(2), "the permit is reclaimed", || {
        permits_taken(&mut con, "s") == 0
    });
    let seen_at = server_now_ms(&mut con);
    assert!(
        seen_at - deadline <= 20,
        "reclaimed {} ms late",
        seen_at - deadline
    );
    assert_eq!(get(&mut con, "s").as_deref(), Some("2"));
    assert_eq!(server.lock_stats()["lock_permits_reclaimed"], 1);
    assert_eq!(
        server.lock_stats()["lock_handoff_timers"],
        0,
        "no timer left"
    );
    assert!(
        !exists(&mut con, permits_key("s")),
        "the set went with its last permit"
    );
    let messages = show(&sub.drain(&mut con));
    assert_eq!(
        messages.last(),
        Some(&("redisson_sc:{s}".to_string(), "2".to_string()))
    );
    assert_eq!(
        run_int(&mut con, &["LOCK.PERMITRENEW", "s", &ids[0], "1000"]),
        0,
        "gone"
    );
}

#[test]
fn seminfo_shows_free_permits_leases_and_waiters() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(
        run(&mut con, &["LOCK.SEMINFO", "s"]),
        run(&mut con, &["LOCK.SEMINFO", "s"])
    );
    assert_eq!(run_int(&mut con, &["LOCK.SEMSET", "s", "1"]), 1);
    let ids = take(&mut con, "s", 1, 30_000);
    let _waiter = queue_for(
        &server,
        &["LOCK.PERMITACQUIRE", "s", "2", "LEASE", "1000", "WAIT", "0"],
    );
    let info = run(&mut con, &["LOCK.SEMINFO", "s"]);
    let field = |name: &str| field_of(&info, name);
    assert_eq!(field("available"), Value::Int(0));
    let Value::Array(permits) = field("permits") else {
        panic!("permits")
    };
    assert_eq!(permits.len(), 1);
    let Value::Array(permit) = &permits[0] else {
        panic!("a permit")
    };
    assert_eq!(as_string(&permit[0]), Some(ids[0].clone()));
    assert_eq!(
        permit[1],
        Value::Int(permit_deadline(&mut con, "s", &ids[0]).unwrap())
    );
    assert_eq!(
        queued(&mut con, "LOCK.SEMINFO", "s"),
        vec![("leased".to_string(), 2)]
    );
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let (_server, mut con) = server_set_up_by(&["LOCK.SEMSET", "s", "2"]);
    let cases: &[(&[&str], &str)] = &[
        (
            &["LOCK.SEMACQUIRE", "s", "0"],
            "ERR permits must be a positive integer",
        ),
        (
            &["LOCK.SEMACQUIRE", "s", "1", "WAIT", "x"],
            "ERR WAIT timeout-ms",
        ),
        (
            &["LOCK.SEMACQUIRE", "s", "1", "LEASE", "5"],
            "ERR syntax error",
        ),
        (
            &["LOCK.SEMRELEASE", "s", "-2"],
            "ERR permits must be a positive integer",
        ),
        (&["LOCK.SEMADD", "s", "1.5"], "ERR delta must be an integer"),
        (
            &["LOCK.SEMADD", "s", "9223372036854775807"],
            "ERR the semaphore's permits would overflow",
        ),
        (
            &["LOCK.SEMSET", "n", "-1"],
            "ERR permits must be a non-negative integer",
        ),
        (&["LOCK.SEMSET", "n", "1", "PX", "0"], "ERR PX ttl-ms"),
        (
            &["LOCK.PERMITACQUIRE", "s", "10001"],
            "ERR permits must be at most 10000",
        ),
        (
            &["LOCK.PERMITACQUIRE", "a{b", "1"],
            "ERR leased permits need their set in the semaphore's cluster slot",
        ),
        (
            &["LOCK.PERMITACQUIRE", "a}b", "1"],
            "ERR leased permits need their set",
        ),
        (
            &["LOCK.PERMITACQUIRE", "s", "1", "LEASE", "0"],
            "ERR lease-ms",
        ),
        (
            &["LOCK.PERMITRELEASE", "s", "abc"],
            "ERR permit id must be 32 hex",
        ),
        (
            &[
                "LOCK.PERMITRENEW",
                "s",
                "00000000000000000000000000000000",
                "-1",
            ],
            "ERR lease-ms",
        ),
        (&["LOCK.SEMACQUIRE", "s"], "ERR wrong number of arguments"),
    ];
    assert_refused(&mut con, cases);
    assert_eq!(get(&mut con, "s").as_deref(), Some("2"));
    assert!(!exists(&mut con, "n"));
    run(&mut con, &["HSET", "h", "f", "1"]);
    run(&mut con, &["SET", "junk", "x"]);
    run(&mut con, &["SET", "{z}:timeout", "x"]);
    for args in [
        &["LOCK.SEMACQUIRE", "h", "1"][..],
        &["LOCK.SEMAVAILABLE", "h"],
        &["LOCK.PERMITACQUIRE", "z", "1"],
        &["LOCK.SEMINFO", "z"],
    ] {
        let err = try_run(&mut con, args).unwrap_err();
        assert!(err.starts_with("WRONGTYPE"), "{args:?}: {err}");
    }
    let err = try_run(&mut con, &["LOCK.SEMRELEASE", "junk", "1"]).unwrap_err();
    assert!(
        err.starts_with("ERR the semaphore's value is not an integer"),
        "{err}"
    );
    assert_eq!(get(&mut con, "junk").as_deref(), Some("x"));
}

#[test]
fn effects_replicate_as_plain_commands_and_survive_an_aof_restart() {
    let mut trio = ReplicaTrio::start();
    let mut con = trio.master.connection();
    assert_eq!(
        run_int(&mut con, &["LOCK.SEMSET", "s", "5", "PX", "600000"]),
        1
    );
    assert_eq!(run_int(&mut con, &["LOCK.SEMACQUIRE", "s", "1"]), 1);
    let ids = take(&mut con, "s", 3, 60_000);
    assert_eq!(
        run_int(&mut con, &["LOCK.PERMITRENEW", "s", &ids[1], "90000"]),
        1
    );
    assert_eq!(run_int(&mut con, &["LOCK.PERMITRELEASE", "s", &ids[2]]), 1);
    let short = take(&mut con, "s", 1, 100);
    poll_until(
        Duration::from_secs(2),
        "the short permit is reclaimed",
        || permit_deadline(&mut con, "s", &short[0]).is_none(),
    );
    let zkey = permits_key("s");
    let expected = trio.assert_replicated(|server: &Server| {
        let mut con = server.connection();
        let members: Vec<(Vec<u8>, f64)> =
            command(&["ZRANGE", zkey.as_str(), "0", "-1", "WITHSCORES"])
                .query(&mut con)
                .unwrap();
        (
            get(&mut con, "s"),
            pexpiretime(&mut con, "s"),
            members,
            pexpiretime(&mut con, zkey.as_str()),
        )
    });
    assert_eq!(expected.0.as_deref(), Some("2"));
    assert_eq!(expected.2.len(), 2);
    assert_eq!(
        expected.3, expected.1,
        "the set expires with the value, as Redisson's"
    );
}

/// A lease ending while writes are paused is reclaimed only when the pause
/// ends, and then handed to the waiter (the one place that holds back every
/// kind's timer writes).
#[test]
fn a_lease_ending_during_a_pause_is_reclaimed_after_it() {
    let _alone = alone();
    let (server, mut con, id, mut waiter) = one_permit_ending_soon_with_a_waiter();
    while_writes_paused(&server, Duration::from_millis(500), &mut waiter, || {
        assert!(
            permit_deadline(&mut con, "s", &id).is_some(),
            "not reclaimed yet"
        )
    });
    assert_eq!(waiter.read(), Resp::Int(1));
    assert_eq!(permit_deadline(&mut con, "s", &id), None);
    assert_eq!(get(&mut con, "s").as_deref(), Some("0"));
}

#[test]
fn a_redisson_style_release_behind_the_modules_back_serves_the_queue() {
    let (server, mut con) = server_set_up_by(&["LOCK.SEMSET", "s", "0"]);
    let mut waiter = queue_for(&server, &["LOCK.SEMACQUIRE", "s", "2", "WAIT", "0"]);
    run(&mut con, &["INCRBY", "s", "1"]);
    assert!(
        waiter.nothing_within(Duration::from_millis(50)),
        "one is not enough"
    );
    run(&mut con, &["INCRBY", "s", "1"]);
    assert_eq!(waiter.read(), Resp::Int(1));
    assert_eq!(get(&mut con, "s").as_deref(), Some("0"));
}

#[test]
fn acl_key_patterns_apply_to_the_semaphore_key() {
    let server = Server::start();
    let mut admin = server.connection();
    let rules = [
        "~app:*",
        "%R~ro:*",
        "+lock.semset",
        "+lock.semacquire",
        "+lock.permitacquire",
        "+lock.semavailable",
    ];
    let mut app = server.connection_as("app", &rules);
    assert_eq!(run_int(&mut app, &["LOCK.SEMSET", "app:s", "1"]), 1);
    assert_eq!(
        ids_of(&run(&mut app, &["LOCK.PERMITACQUIRE", "app:s", "1"])).len(),
        1
    );
    assert_eq!(
        run_int(&mut app, &["LOCK.SEMAVAILABLE", "ro:s"]),
        0,
        "read allowed"
    );
    assert_refused(
        &mut app,
        &[
            (&["LOCK.SEMACQUIRE", "ro:s", "1"], "NOPERM"),
            (&["LOCK.SEMSET", "other", "1"], "NOPERM"),
        ],
    );
    assert!(!exists(&mut admin, "other"));
}

/// While Redis refuses writes for want of good replicas
/// (`min-replicas-to-write`), a lease that ends is not reclaimed (a write
/// a failover could lose); once writes are allowed again it is, and the
/// waiter is served. The same check as for a pause, in the one place every
/// kind's timer passes.
#[test]
fn a_lease_ending_without_enough_good_replicas_is_reclaimed_once_writes_are_allowed() {
    let _alone = alone();
    let (_server, mut con, id, mut waiter) = one_permit_ending_soon_with_a_waiter();
    config_set(&mut con, "min-replicas-to-write", 1);
    let refused = try_run(&mut con, &["SET", "x", "1"]).unwrap_err();
    assert!(refused.starts_with("NOREPLICAS"), "{refused}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(waiter.nothing_within(Duration::from_millis(10)));
    assert!(
        permit_deadline(&mut con, "s", &id).is_some(),
        "not reclaimed"
    );
    config_set(&mut con, "min-replicas-to-write", 0);
    assert_eq!(waiter.read(), Resp::Int(1));
    assert_eq!(permit_deadline(&mut con, "s", &id), None);
}
