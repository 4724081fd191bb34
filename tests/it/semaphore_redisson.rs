//! Issue 18 against Redisson's own scripts (redisson/sem-*.lua,
//! permit-*.lua, latch-*.lua, as Redisson master has them): the module's
//! LOCK.SEM*, LOCK.PERMIT* and latch commands and Redisson's scripts work on
//! the same keys both ways: permits taken by one are seen and released by
//! the other, leases set by one are kept by the other, and each side's
//! messages wake the other's waiters.

use std::time::{Duration, Instant};

use redis::{Connection, FromRedisValue, Value};
use redis_lock_test_support::raw::{RawClient, Resp};
use redis_lock_test_support::redisson::*;
use redis_lock_test_support::*;

const LEASE: i64 = 30_000;

/// Runs a command; a server error fails the test, naming the command.
fn cmd<T: FromRedisValue>(con: &mut Connection, args: &[&str]) -> T {
    command(args)
        .query(con)
        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")))
}

fn try_cmd(con: &mut Connection, args: &[&str]) -> redis::RedisResult<Value> {
    command(args).query(con)
}

fn get(con: &mut Connection, key: &str) -> Option<i64> {
    redisson_get_count(con, key)
}

fn zcard(con: &mut Connection, key: &str) -> i64 {
    cmd(con, &["ZCARD", key])
}

/// The lease deadline of permit `id` (hex) in `name`'s leases, by its raw bytes.
fn score(con: &mut Connection, name: &str, id: &str) -> Option<i64> {
    let s: Option<f64> = redis::cmd("ZSCORE")
        .arg(permit_timeouts(name))
        .arg(id_bytes(id))
        .query(con)
        .expect("ZSCORE");
    s.map(|s| s as i64)
}

/// `LOCK.PERMITACQUIRE name n [LEASE ms]`: the ids (hex), or None.
fn permit_acquire(
    con: &mut Connection,
    name: &str,
    n: usize,
    lease: Option<i64>,
) -> Option<Vec<String>> {
    let n = n.to_string();
    let lease = lease.map(|l| l.to_string());
    let mut args = vec!["LOCK.PERMITACQUIRE", name, &n];
    if let Some(lease) = &lease {
        args.extend(["LEASE", lease]);
    }
    cmd(con, &args)
}

/// How many waiters `LOCK.SEMINFO` / `LOCK.LATCHINFO` shows.
fn waiters(con: &mut Connection, info_cmd: &str, name: &str) -> usize {
    let v: Value = cmd(con, &[info_cmd, name]);
    if v == Value::Nil {
        return 0;
    }
    find_field(&v, "waiters")
        .map(|w| match w {
            Value::Array(items) => items.len(),
            Value::Set(items) => items.len(),
            other => panic!("{info_cmd} waiters: {other:?}"),
        })
        .unwrap_or_else(|| panic!("{info_cmd} {name} has no `waiters`: {v:?}"))
}

/// Sends a blocking command from a raw client and returns once `info_cmd`
/// shows one more waiter on `name`.
fn queued(server: &Server, info_cmd: &str, name: &str, args: &[&str]) -> RawClient {
    let mut con = server.connection();
    let before = waiters(&mut con, info_cmd, name);
    let mut waiter = RawClient::connect(server.port);
    waiter.send(args);
    poll_until(Duration::from_secs(5), "the waiter is queued", || {
        waiters(&mut con, info_cmd, name) > before
    });
    waiter
}

fn is_hex_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

// ---------------------------------------------------------------------------
// RSemaphore
// ---------------------------------------------------------------------------

#[test]
fn module_permits_released_by_redisson_and_redisson_permits_released_by_module() {
    let server = Server::start();
    let mut con = server.connection();
    let s = "sem-both-ways";
    let mut sub = Subscriber::new(&server, &[sem_channel(s).as_bytes()]);

    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMSET", s, "3"]), 1);
    assert_eq!(
        script_sem_try_set(&mut con, s, 10),
        0,
        "Redisson sees it set"
    );
    assert_eq!(
        get(&mut con, s),
        Some(3),
        "the value is Redisson's plain count"
    );

    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMACQUIRE", s, "2"]), 1);
    assert_eq!(get(&mut con, s), Some(1));
    assert!(
        !script_sem_try_acquire(&mut con, s, 2),
        "Redisson sees 1 left"
    );
    script_sem_release(&mut con, s, 2);
    assert_eq!(get(&mut con, s), Some(3), "Redisson's release returns ours");

    assert!(script_sem_try_acquire(&mut con, s, 3));
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMACQUIRE", s, "1"]), 0);
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMAVAILABLE", s]), 0);
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMRELEASE", s, "3"]), 3);
    assert_eq!(get(&mut con, s), Some(3));

    script_sem_add(&mut con, s, 2);
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMAVAILABLE", s]), 5);
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMADD", s, "-1"]), 4);
    assert_eq!(script_sem_drain(&mut con, s), 4);
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMDRAIN", s]), 0);
    assert_eq!(get(&mut con, s), Some(0));

    // Both sides publish the new count on redisson_sc:{name}, which is what
    // SemaphorePubSub reads (Long.valueOf of the message).
    let messages: Vec<(String, String)> = show(&sub.drain(&mut con));
    let counts: Vec<&str> = messages.iter().map(|(_, m)| m.as_str()).collect();
    assert!(
        messages.iter().all(|(c, _)| c == &sem_channel(s)),
        "{messages:?}"
    );
    // SEMSET 3, Redisson release -> 3, SEMRELEASE -> 3, addPermits -> 5, SEMADD -> 4.
    assert_eq!(counts, vec!["3", "3", "3", "5", "4"], "{messages:?}");
}

#[test]
fn redisson_release_wakes_a_semacquire_waiter() {
    let server = Server::start();
    let mut con = server.connection();
    let s = "sem-wake";
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMSET", s, "0"]), 1);
    let mut waiter = queued(
        &server,
        "LOCK.SEMINFO",
        s,
        &["LOCK.SEMACQUIRE", s, "1", "WAIT", "10000"],
    );
    let started = Instant::now();
    script_sem_release(&mut con, s, 1);
    assert_eq!(waiter.read(), Resp::Int(1), "the waiter got the permit");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "woken by the script's write, not a poll: {:?}",
        started.elapsed()
    );
    assert_eq!(get(&mut con, s), Some(0), "the waiter's permit is taken");

    // addPermits (Redisson's SET of the new value) wakes one too.
    let mut waiter = queued(
        &server,
        "LOCK.SEMINFO",
        s,
        &["LOCK.SEMACQUIRE", s, "2", "WAIT", "10000"],
    );
    script_sem_add(&mut con, s, 1);
    assert!(
        waiter.nothing_within(Duration::from_millis(100)),
        "1 of 2 is not enough"
    );
    script_sem_add(&mut con, s, 1);
    assert_eq!(waiter.read(), Resp::Int(1));
    assert_eq!(get(&mut con, s), Some(0));
}

#[test]
fn redisson_try_acquire_does_not_overtake_a_waiter_it_cannot_see_but_takes_free_permits() {
    // Redisson's tryAcquire script knows nothing of the module's queue: with
    // a free permit it takes it (the module cannot stop a script). What the
    // module owes is not to lose its waiter's claim: after Redisson releases,
    // the waiter gets the permit.
    let server = Server::start();
    let mut con = server.connection();
    let s = "sem-script-newcomer";
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMSET", s, "1"]), 1);
    assert!(script_sem_try_acquire(&mut con, s, 1));
    let mut waiter = queued(
        &server,
        "LOCK.SEMINFO",
        s,
        &["LOCK.SEMACQUIRE", s, "1", "WAIT", "10000"],
    );
    assert!(!script_sem_try_acquire(&mut con, s, 1), "nothing free");
    script_sem_release(&mut con, s, 1);
    assert_eq!(waiter.read(), Resp::Int(1));
    assert_eq!(get(&mut con, s), Some(0));
}

#[test]
fn channel_names_follow_redisson_prefix_name() {
    let server = Server::start();
    let mut con = server.connection();
    for s in ["plain-sem", "tagged{t}sem"] {
        let channel = sem_channel(s);
        let mut sub = Subscriber::new(&server, &[channel.as_bytes()]);
        assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMSET", s, "2"]), 1);
        assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMRELEASE", s, "1"]), 3);
        assert_eq!(
            show(&sub.drain(&mut con)),
            vec![
                (channel.clone(), "2".to_string()),
                (channel.clone(), "3".to_string())
            ],
            "{s}: messages on {channel}"
        );
    }
}

// ---------------------------------------------------------------------------
// RPermitExpirableSemaphore
// ---------------------------------------------------------------------------

#[test]
fn redisson_try_acquire_sees_permits_permitacquire_took() {
    let server = Server::start();
    let mut con = server.connection();
    let p = "permits-seen";
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMSET", p, "2"]), 1);
    let ids = permit_acquire(&mut con, p, 2, Some(LEASE)).expect("two free permits");
    assert_eq!(ids.len(), 2);
    assert!(ids.iter().all(|id| is_hex_id(id)), "{ids:?}");
    let now = server_now_ms(&mut con);
    for id in &ids {
        let deadline =
            score(&mut con, p, id).unwrap_or_else(|| panic!("{id} in {}", permit_timeouts(p)));
        assert!(
            (now + LEASE - 1000..=now + LEASE).contains(&deadline),
            "deadline {deadline} is now {now} + {LEASE}"
        );
    }
    assert_eq!(get(&mut con, p), Some(0));
    // Redisson's script: nothing free, the nearest deadline is ours.
    match script_permit_try_acquire(&mut con, p, 1, Some(LEASE)) {
        PermitTry::Nearest(at) => {
            let first = ids
                .iter()
                .filter_map(|id| score(&mut con, p, id))
                .min()
                .unwrap();
            assert_eq!(at, first, "Redisson waits until our nearest deadline");
        }
        other => panic!("Redisson's tryAcquire on 2 taken permits: {other:?}"),
    }
    assert!(
        !script_sem_try_acquire(&mut con, p, 1),
        "RSemaphore's script too"
    );
    assert_eq!(script_permit_available(&mut con, p), 0);

    // Without a lease the score is Redisson's nonExpirableTimeout, and
    // Redisson's script answers nil (no deadline to wait for).
    let q = "permits-no-lease";
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMSET", q, "1"]), 1);
    let ids = permit_acquire(&mut con, q, 1, None).expect("a free permit");
    assert_eq!(score(&mut con, q, &ids[0]), Some(NON_EXPIRABLE));
    assert_eq!(
        script_permit_try_acquire(&mut con, q, 1, None),
        PermitTry::None
    );
}

#[test]
fn redisson_try_release_of_a_permitacquire_id() {
    let server = Server::start();
    let mut con = server.connection();
    let p = "permit-released-by-redisson";
    let mut sub = Subscriber::new(&server, &[sem_channel(p).as_bytes()]);
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMSET", p, "2"]), 1);
    let ids = permit_acquire(&mut con, p, 2, Some(LEASE)).expect("two free permits");
    assert_eq!(
        script_permit_release(&mut con, p, &ids[0]),
        1,
        "Redisson releases our id"
    );
    assert_eq!(get(&mut con, p), Some(1));
    assert_eq!(zcard(&mut con, &permit_timeouts(p)), 1);
    assert_eq!(script_permit_release(&mut con, p, &ids[0]), 0, "only once");
    expect_err(
        try_cmd(&mut con, &["LOCK.PERMITRELEASE", p, &ids[0]]),
        "ERR",
        &format!("permit {} is not held", ids[0]),
        "the module sees it released",
    );
    assert_eq!(script_permit_release_many(&mut con, p, &[&ids[1]]), 1);
    assert_eq!(get(&mut con, p), Some(2));
    assert_eq!(zcard(&mut con, &permit_timeouts(p)), 0);
    let messages = show(&sub.drain(&mut con));
    let counts: Vec<&str> = messages.iter().map(|(_, m)| m.as_str()).collect();
    // SEMSET 2; tryRelease(id) publishes the count 1; tryRelease(ids) the number 1.
    assert_eq!(counts, vec!["2", "1", "1"], "{messages:?}");
}

#[test]
fn module_permitrelease_of_a_redisson_id() {
    let server = Server::start();
    let mut con = server.connection();
    let p = "permit-released-by-module";
    assert_eq!(
        script_sem_try_set(&mut con, p, 2),
        1,
        "Redisson's trySetPermits"
    );
    let PermitTry::Taken(ids) = script_permit_try_acquire(&mut con, p, 2, Some(LEASE)) else {
        panic!("Redisson takes two free permits")
    };
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMAVAILABLE", p]), 0);
    let info: Value = cmd(&mut con, &["LOCK.SEMINFO", p]);
    let shown = format!("{info:?}");
    assert!(
        ids.iter().all(|id| shown.contains(id.as_str())),
        "SEMINFO lists Redisson's ids in hex: {shown}"
    );
    assert_eq!(
        cmd::<i64>(&mut con, &["LOCK.PERMITRELEASE", p, &ids[0], &ids[1]]),
        2
    );
    assert_eq!(get(&mut con, p), Some(2));
    assert_eq!(zcard(&mut con, &permit_timeouts(p)), 0);
    assert_eq!(
        script_permit_release(&mut con, p, &ids[0]),
        0,
        "Redisson sees it released"
    );

    // A permit Redisson took without a lease (score nonExpirableTimeout):
    // the module releases it and does not reclaim it by itself.
    let PermitTry::Taken(ids) = script_permit_try_acquire(&mut con, p, 1, None) else {
        panic!("Redisson takes a free permit")
    };
    assert_eq!(
        cmd::<i64>(&mut con, &["LOCK.PERMITRENEW", p, &ids[0], "1000"]),
        1
    );
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.PERMITRELEASE", p, &ids[0]]), 1);
    assert_eq!(get(&mut con, p), Some(2));
}

#[test]
fn redisson_update_lease_on_a_module_permit_is_kept() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    let p = "permit-lease-updated";
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMSET", p, "1"]), 1);
    let ids = permit_acquire(&mut con, p, 1, Some(300)).expect("a free permit");
    assert_eq!(
        script_permit_update_lease(&mut con, p, &ids[0], Some(60_000)),
        1
    );
    let deadline = score(&mut con, p, &ids[0]).expect("still held");
    assert!(
        deadline > now_ms() + 50_000,
        "Redisson's new deadline {deadline}"
    );
    // Past the old deadline the module must not reclaim the permit: its
    // timer has to read the new score.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        get(&mut con, p),
        Some(0),
        "not reclaimed at the old deadline"
    );
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMAVAILABLE", p]), 0);
    assert_eq!(score(&mut con, p, &ids[0]), Some(deadline));
    assert_eq!(
        cmd::<i64>(&mut con, &["LOCK.PERMITRENEW", p, &ids[0], "1000"]),
        1
    );
}

/// Redisson's updateLeaseTime shortens a module permit's lease: the module
/// reclaims it at the new deadline (its timer must follow the score).
#[test]
fn redisson_shortened_lease_is_reclaimed_at_the_new_deadline() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    let p = "permit-lease-shortened";
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMSET", p, "1"]), 1);
    let ids = permit_acquire(&mut con, p, 1, Some(60_000)).expect("a free permit");
    assert_eq!(
        script_permit_update_lease(&mut con, p, &ids[0], Some(300)),
        1
    );
    let deadline = score(&mut con, p, &ids[0]).expect("held");
    poll_until(
        Duration::from_secs(3),
        "the permit is reclaimed by the module alone",
        || get(&mut con, p) == Some(1),
    );
    let late = now_ms() - deadline;
    assert!(
        late < 200,
        "reclaimed {late} ms after Redisson's new deadline"
    );
    assert_eq!(zcard(&mut con, &permit_timeouts(p)), 0);
}

#[test]
fn module_renew_of_a_redisson_permit() {
    let server = Server::start();
    let mut con = server.connection();
    let p = "permit-renewed-by-module";
    assert_eq!(script_sem_try_set(&mut con, p, 1), 1);
    let PermitTry::Taken(ids) = script_permit_try_acquire(&mut con, p, 1, Some(1000)) else {
        panic!("Redisson takes a free permit")
    };
    assert_eq!(
        cmd::<i64>(&mut con, &["LOCK.PERMITRENEW", p, &ids[0], "60000"]),
        1
    );
    let now = server_now_ms(&mut con);
    let deadline = score(&mut con, p, &ids[0]).expect("held");
    assert!(
        (now + 59_000..=now + 60_000).contains(&deadline),
        "{deadline} vs {now}"
    );
    assert_eq!(
        script_permit_update_lease(&mut con, p, &ids[0], Some(LEASE)),
        1
    );
}

/// Redisson's expired permits (the module never saw them granted) are
/// reclaimed by the module's permit commands before they act.
#[test]
fn expired_redisson_permits_are_reclaimed_by_module_commands() {
    let server = Server::start();
    let mut con = server.connection();
    let p = "permit-redisson-expired";
    assert_eq!(script_sem_try_set(&mut con, p, 2), 1);
    let PermitTry::Taken(ids) = script_permit_try_acquire(&mut con, p, 2, Some(100)) else {
        panic!("Redisson takes two free permits")
    };
    std::thread::sleep(Duration::from_millis(250));
    expect_err(
        try_cmd(&mut con, &["LOCK.PERMITRELEASE", p, &ids[0]]),
        "ERR",
        "is not held",
        "an expired Redisson permit",
    );
    assert_eq!(zcard(&mut con, &permit_timeouts(p)), 0, "reclaimed first");
    assert_eq!(get(&mut con, p), Some(2));
    assert_eq!(
        cmd::<i64>(&mut con, &["LOCK.PERMITRENEW", p, &ids[1], "1000"]),
        0
    );

    // A plain semaphore acquire on the value reclaims too.
    let PermitTry::Taken(_) = script_permit_try_acquire(&mut con, p, 2, Some(100)) else {
        panic!("Redisson takes two free permits")
    };
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMACQUIRE", p, "2"]), 1);
    assert_eq!(zcard(&mut con, &permit_timeouts(p)), 0);
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMRELEASE", p, "2"]), 2);

    // And the module's own expired permit, reclaimed by its timer, is gone
    // for Redisson too.
    let ids = permit_acquire(&mut con, p, 1, Some(100)).expect("a free permit");
    poll_until(
        Duration::from_secs(3),
        "the module's timer reclaims",
        || zcard(&mut con, &permit_timeouts(p)) == 0,
    );
    assert_eq!(get(&mut con, p), Some(2));
    assert_eq!(script_permit_release(&mut con, p, &ids[0]), 0);
    assert_eq!(script_permit_available(&mut con, p), 2);
}

/// Permits leased by Redisson's script on a semaphore the module never
/// touched: `LOCK.SEMAVAILABLE` (read-only, so replicas answer it too)
/// counts the expired ones as free, and the next change through the module
/// writes their reclaim, publishing the count as Redisson's reclaim does.
/// (The module watches only semaphores its commands have touched: a sorted
/// set that merely looks like `{name}:timeout` is never written.)
#[test]
fn semavailable_counts_expired_redisson_permits_and_the_next_change_reclaims_them() {
    let server = Server::start();
    let mut con = server.connection();
    let p = "permit-semavailable-reclaims";
    let mut sub = Subscriber::new(&server, &[sem_channel(p).as_bytes()]);
    assert_eq!(script_sem_try_set(&mut con, p, 2), 1);
    let PermitTry::Taken(_) = script_permit_try_acquire(&mut con, p, 2, Some(100)) else {
        panic!("Redisson takes two free permits")
    };
    std::thread::sleep(Duration::from_millis(250));
    sub.drain(&mut con);
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMAVAILABLE", p]), 2);
    assert_eq!(get(&mut con, p), Some(0), "a read writes nothing");
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMACQUIRE", p, "1"]), 1);
    assert_eq!(get(&mut con, p), Some(1), "reclaimed, then one taken");
    assert_eq!(
        zcard(&mut con, &permit_timeouts(p)),
        0,
        "the leases are removed"
    );
    assert_eq!(
        show(&sub.drain(&mut con)),
        vec![(sem_channel(p), "2".to_string())],
        "the reclaim's count is published, as Redisson's reclaim does"
    );
}

/// A waiter queued behind permits Redisson's script leased (the module
/// did not write them) gets one at its deadline: the module's timer must
/// be armed from the leases' scores, not only from the permits it granted.
#[test]
fn a_waiter_gets_a_redisson_leased_permit_at_its_deadline() {
    let _alone = alone();
    let server = Server::start();
    let mut con = server.connection();
    for (i, waiter_cmd) in [
        &["LOCK.SEMACQUIRE", "", "1", "WAIT", "5000"][..],
        &[
            "LOCK.PERMITACQUIRE",
            "",
            "1",
            "LEASE",
            "5000",
            "WAIT",
            "5000",
        ][..],
    ]
    .into_iter()
    .enumerate()
    {
        let p = format!("permit-redisson-deadline-{i}");
        assert_eq!(script_sem_try_set(&mut con, &p, 1), 1);
        let PermitTry::Taken(ids) = script_permit_try_acquire(&mut con, &p, 1, Some(300)) else {
            panic!("Redisson takes a free permit")
        };
        let deadline = score(&mut con, &p, &ids[0]).expect("leased");
        let mut args = waiter_cmd.to_vec();
        args[1] = &p;
        let mut waiter = queued(&server, "LOCK.SEMINFO", &p, &args);
        let reply = waiter.try_read();
        let at = now_ms();
        assert!(
            matches!(reply, Some(Resp::Int(1)) | Some(Resp::Array(_))),
            "{}: the waiter gets the expired permit, got {reply:?}",
            args.join(" ")
        );
        assert!(
            at - deadline < 200,
            "{}: granted {} ms after the Redisson lease's deadline",
            args.join(" "),
            at - deadline
        );
    }
}

/// A waiter whose WAIT runs out while an expired Redisson permit is still
/// in the leases: it is answered (the permit, or nil with nothing taken),
/// never left without a reply while its permit is taken.
#[test]
fn a_wait_timeout_over_an_expired_redisson_permit_is_answered() {
    let server = Server::start();
    let mut con = server.connection();
    let p = "permit-redisson-timeout";
    assert_eq!(script_sem_try_set(&mut con, p, 1), 1);
    let PermitTry::Taken(_) = script_permit_try_acquire(&mut con, p, 1, Some(300)) else {
        panic!("Redisson takes a free permit")
    };
    // Queued before the Redisson permit expires; its WAIT ends after that.
    let mut waiter = queued(
        &server,
        "LOCK.SEMINFO",
        p,
        &["LOCK.PERMITACQUIRE", p, "1", "WAIT", "1000"],
    );
    let started = Instant::now();
    let reply = waiter.try_read();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "answered by the WAIT timeout at the latest"
    );
    match reply {
        Some(Resp::Array(ids)) => {
            assert_eq!(ids.len(), 1);
            assert_eq!(get(&mut con, p), Some(0));
        }
        Some(Resp::Nil) => assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMAVAILABLE", p]), 1),
        other => panic!("no reply within the WAIT (the permit is taken meanwhile): {other:?}"),
    }
}

#[test]
fn permit_ids_must_be_32_hex_characters() {
    let server = Server::start();
    let mut con = server.connection();
    let p = "permit-bad-id";
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.SEMSET", p, "1"]), 1);
    for bad in [
        "abc",
        "0123456789abcdef0123456789abcdeg",
        "0123456789abcdef0123456789abcdef00",
    ] {
        expect_err(
            try_cmd(&mut con, &["LOCK.PERMITRELEASE", p, bad]),
            "ERR",
            "permit id must be 32 hex characters",
            bad,
        );
        expect_err(
            try_cmd(&mut con, &["LOCK.PERMITRENEW", p, bad, "1000"]),
            "ERR",
            "permit id must be 32 hex characters",
            bad,
        );
    }
    // Redisson's ids are lowercase hex; the 16 bytes are what is stored.
    let PermitTry::Taken(ids) = script_permit_try_acquire(&mut con, p, 1, Some(LEASE)) else {
        panic!("Redisson takes a free permit")
    };
    let upper = ids[0].to_uppercase();
    let released: redis::RedisResult<Value> = try_cmd(&mut con, &["LOCK.PERMITRELEASE", p, &upper]);
    // Either is defensible (hexDump is lowercase, decodeHexDump takes both);
    // what may not happen is a release of something else.
    match released {
        Ok(v) => assert_eq!(v, Value::Int(1)),
        Err(_) => assert_eq!(cmd::<i64>(&mut con, &["LOCK.PERMITRELEASE", p, &ids[0]]), 1),
    }
    assert_eq!(get(&mut con, p), Some(1));
}

// ---------------------------------------------------------------------------
// RCountDownLatch
// ---------------------------------------------------------------------------

#[test]
fn redisson_count_down_opens_await_waiters() {
    let server = Server::start();
    let mut con = server.connection();
    let l = "latch-script-countdown";
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.LATCHSET", l, "2"]), 1);
    let mut a = queued(&server, "LOCK.LATCHINFO", l, &["LOCK.AWAIT", l, "10000"]);
    let mut b = queued(&server, "LOCK.LATCHINFO", l, &["LOCK.AWAIT", l, "0"]);
    script_latch_count_down(&mut con, l);
    assert_eq!(get(&mut con, l), Some(1));
    assert!(
        a.nothing_within(Duration::from_millis(100)),
        "1 left: still waiting"
    );
    let started = Instant::now();
    // The script DECRs to 0 and DELs the key: the module must notice.
    script_latch_count_down(&mut con, l);
    assert!(!exists(&mut con, l));
    assert_eq!(a.read(), Resp::Int(1));
    assert_eq!(b.read(), Resp::Int(1));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.LATCHCOUNT", l]), 0);
}

#[test]
fn redisson_delete_opens_await_waiters() {
    let server = Server::start();
    let mut con = server.connection();
    let l = "latch-script-delete";
    assert_eq!(script_latch_try_set(&mut con, l, 5), 1);
    let mut a = queued(&server, "LOCK.LATCHINFO", l, &["LOCK.AWAIT", l, "10000"]);
    assert_eq!(script_latch_delete(&mut con, l), 1);
    assert_eq!(a.read(), Resp::Int(1), "a deleted latch counts as zero");

    let mut b = {
        assert_eq!(cmd::<i64>(&mut con, &["LOCK.LATCHSET", l, "5"]), 1);
        queued(&server, "LOCK.LATCHINFO", l, &["LOCK.AWAIT", l, "10000"])
    };
    let _: i64 = cmd(&mut con, &["DEL", l]);
    assert_eq!(b.read(), Resp::Int(1), "a plain DEL too");
}

#[test]
fn countdown_publishes_what_redisson_latch_subscribers_expect() {
    let server = Server::start();
    let mut con = server.connection();
    for l in ["latch-messages", "latch{tag}messages"] {
        // RedissonCountDownLatch.getChannelName: always braced.
        let channel = latch_channel(l);
        let mut sub = Subscriber::new(&server, &[channel.as_bytes()]);
        assert_eq!(cmd::<i64>(&mut con, &["LOCK.LATCHSET", l, "2"]), 1);
        assert_eq!(cmd::<i64>(&mut con, &["LOCK.COUNTDOWN", l]), 1);
        assert_eq!(get(&mut con, l), Some(1), "Redisson's getCount");
        assert_eq!(cmd::<i64>(&mut con, &["LOCK.COUNTDOWN", l]), 0);
        assert!(
            !exists(&mut con, l),
            "deleted at zero, as Redisson's countDown does"
        );
        assert_eq!(
            show(&sub.drain(&mut con)),
            vec![
                (channel.clone(), "1".to_string()),
                (channel.clone(), "0".to_string())
            ],
            "{l}: NEW_COUNT on LATCHSET, ZERO_COUNT at zero, on {channel}"
        );
    }
}

#[test]
fn redisson_try_set_count_and_module_latch_commands() {
    let server = Server::start();
    let mut con = server.connection();
    let l = "latch-script-set";
    let mut sub = Subscriber::new(&server, &[latch_channel(l).as_bytes()]);
    assert_eq!(script_latch_try_set(&mut con, l, 3), 1);
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.LATCHCOUNT", l]), 3);
    assert_eq!(
        cmd::<i64>(&mut con, &["LOCK.LATCHSET", l, "7"]),
        0,
        "exists"
    );
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.COUNTDOWN", l]), 2);
    script_latch_count_down(&mut con, l);
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.LATCHCOUNT", l]), 1);
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.COUNTDOWN", l]), 0);
    assert_eq!(
        cmd::<i64>(&mut con, &["LOCK.AWAIT", l, "100"]),
        1,
        "open: at once"
    );
    // The module's latch is Redisson's: trySetCount works again on it.
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.LATCHSET", l, "1"]), 1);
    assert_eq!(script_latch_try_set(&mut con, l, 4), 0);
    script_latch_count_down(&mut con, l);
    assert_eq!(cmd::<i64>(&mut con, &["LOCK.LATCHCOUNT", l]), 0);
    let messages = show(&sub.drain(&mut con));
    let got: Vec<&str> = messages.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(got, vec!["1", "0", "1", "0"], "{messages:?}");
}
