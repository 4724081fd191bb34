//! `INFO lock`'s wait and hold times (`lock_times`) and most contended keys
//! (`lock_hot_keys`): known waits give percentiles within a bucket of the
//! truth, every kind has its own, and `CONFIG RESETSTAT` forgets them.

use std::thread::sleep;
use std::time::{Duration, Instant};

use redis_lock_test_support::*;

const HOLD: Duration = Duration::from_millis(50);

/// `lock_times` as field -> value.
fn times(server: &Server) -> std::collections::HashMap<String, u64> {
    server
        .info_section("lock_times")
        .lines()
        .filter_map(|line| line.split_once(':'))
        .filter_map(|(k, v)| v.trim().parse().ok().map(|v| (k.to_string(), v)))
        .collect()
}

/// The nearest-rank percentile of `sorted` (ms), as the histogram ranks.
fn nearest_rank(sorted: &[f64], permille: usize) -> f64 {
    let rank = (sorted.len() * permille).div_ceil(1000).max(1);
    sorted[rank - 1]
}

/// `reported_us` is the histogram's answer for a true value of `truth_ms`
/// as this test measured it from outside: the top of the true value's
/// bucket (at most 1/8 above it, never below), give or take `slack_ms` for
/// what the test cannot see (the moment the server granted or released
/// versus the moment the test sent or read).
fn within_a_bucket(reported_us: u64, truth_ms: f64, slack_ms: f64, what: &str) {
    let reported = reported_us as f64 / 1000.0;
    assert!(
        reported >= truth_ms - slack_ms && reported <= truth_ms * 1.125 + slack_ms,
        "{what}: INFO says {reported:.1} ms, the truth is {truth_ms:.1} ms (+- {slack_ms} ms)"
    );
}

/// A holder that holds 50 ms, and 10 waiters each holding 50 ms in turn:
/// the waits are about 50, 100, ... 500 ms and the holds about 50 ms. The
/// test times each wait and hold from outside (from the moment a waiter is
/// seen queued to the moment its grant is read, and from that to the
/// release), and INFO's percentiles must be within a bucket of those.
#[test]
fn a_50_ms_holder_and_ten_waiters_give_percentiles_within_a_bucket_of_the_truth() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(acquire(&mut con, "hot", "holder", 30_000), None);
    let mut owners = vec!["holder".to_string()];
    let mut waiters = Vec::new();
    let mut joined = Vec::new();
    for i in 0..10 {
        let owner = format!("w{i}");
        waiters.push(queue(&server, "hot", &owner, 30_000, 60_000));
        joined.push(Instant::now());
        owners.push(owner);
    }
    let mut waits_ms = Vec::new();
    let mut holds_ms = Vec::new();
    let mut held_since = Instant::now();
    for (i, waiter) in waiters.iter_mut().enumerate() {
        sleep(HOLD.saturating_sub(held_since.elapsed()));
        let released = Instant::now();
        if i > 0 {
            holds_ms.push((released - held_since).as_secs_f64() * 1000.0);
        }
        assert_eq!(release(&mut con, "hot", &owners[i], None), Some(1));
        assert!(waiter.read().is_nil(), "w{i} granted");
        held_since = Instant::now();
        waits_ms.push((released - joined[i]).as_secs_f64() * 1000.0);
    }
    sleep(HOLD.saturating_sub(held_since.elapsed()));
    holds_ms.push(held_since.elapsed().as_secs_f64() * 1000.0);
    assert_eq!(release(&mut con, "hot", "w9", None), Some(1));

    let t = times(&server);
    assert_eq!(t["lock_wait_lock_count"], 10);
    assert_eq!(
        t["lock_hold_lock_count"], 11,
        "the first holder's hold and ten more"
    );
    waits_ms.sort_by(f64::total_cmp);
    // Between being seen queued and being granted the test sees the whole
    // wait plus a round trip or two either side.
    let slack = 15.0;
    for (field, permille) in [("p50", 500), ("p90", 900), ("p99", 990), ("p999", 999)] {
        let truth = nearest_rank(&waits_ms, permille);
        within_a_bucket(
            t[&format!("lock_wait_lock_{field}_us")],
            truth,
            slack,
            field,
        );
    }
    within_a_bucket(t["lock_wait_lock_max_us"], waits_ms[9], slack, "max");
    // Ten holds of about 50 ms, and the first one, longer (the waiters
    // queued meanwhile): the median is a 50 ms hold.
    holds_ms.sort_by(f64::total_cmp);
    let median = nearest_rank(&holds_ms, 500);
    within_a_bucket(t["lock_hold_lock_p50_us"], median, slack, "hold p50");

    let hot = server.info_section("lock_hot_keys");
    assert!(
        hot.contains("lock_most_waiters_1:db=0,key=hot,waiters=10,error=0"),
        "{hot}"
    );
    assert!(
        hot.contains("lock_longest_waits_1:db=0,key=hot,waited_us="),
        "{hot}"
    );

    // CONFIG RESETSTAT forgets it all (noticed at the next INFO).
    run(&mut con, &["CONFIG", "RESETSTAT"]);
    let t = times(&server);
    assert!(t.iter().all(|(_, &v)| v == 0), "{t:?}");
    assert!(!server.info_section("lock_hot_keys").contains("key="));
    // And counts again afterwards.
    assert_eq!(acquire(&mut con, "hot", "again", 30_000), None);
    assert_eq!(release(&mut con, "hot", "again", None), Some(1));
    assert_eq!(times(&server)["lock_hold_lock_count"], 1);
}

/// A reset before anyone ever read `INFO lock` is noticed too, and one
/// when the module's own marker call was the only `LOCK.INFO`.
#[test]
fn a_reset_is_noticed_whoever_called_lock_info_before() {
    let server = Server::start();
    let mut con = server.connection();
    for round in 0..3 {
        assert_eq!(acquire(&mut con, "k", "o", 30_000), None);
        assert_eq!(release(&mut con, "k", "o", None), Some(1));
        if round == 1 {
            lock_info(&mut con, "k");
        }
        run(&mut con, &["CONFIG", "RESETSTAT"]);
        assert_eq!(times(&server)["lock_hold_lock_count"], 0, "round {round}");
    }
}

/// Waits on read-write locks, semaphores, permits and latches go to their
/// own kind; holds of read-write locks too.
#[test]
fn every_kind_has_its_own_wait_times() {
    let server = Server::start();
    let mut con = server.connection();
    run(&mut con, &["LOCK.WACQUIRE", "rw", "w", "30000"]);
    let mut reader = raw::RawClient::connect(server.port);
    reader.send(&["LOCK.RACQUIRE", "rw", "r", "30000", "WAIT", "5000"]);
    let mut sem = raw::RawClient::connect(server.port);
    sem.send(&["LOCK.SEMACQUIRE", "s", "1", "WAIT", "5000"]);
    let mut permit = raw::RawClient::connect(server.port);
    permit.send(&[
        "LOCK.PERMITACQUIRE",
        "p",
        "1",
        "LEASE",
        "5000",
        "WAIT",
        "5000",
    ]);
    run(&mut con, &["LOCK.LATCHSET", "l", "1"]);
    let mut latch = raw::RawClient::connect(server.port);
    latch.send(&["LOCK.AWAIT", "l", "5000"]);
    poll_until(Duration::from_secs(5), "four waiters", || {
        stat(&server, "lock_waiting_clients") == 4
    });
    sleep(Duration::from_millis(20));
    run(&mut con, &["LOCK.WRELEASE", "rw", "w"]);
    run(&mut con, &["LOCK.SEMADD", "s", "1"]);
    run(&mut con, &["LOCK.SEMSET", "p", "1"]);
    run(&mut con, &["LOCK.COUNTDOWN", "l"]);
    for client in [&mut reader, &mut sem, &mut permit, &mut latch] {
        client.read();
    }
    let t = times(&server);
    for kind in ["rwlock", "semaphore", "permits", "latch"] {
        assert_eq!(t[&format!("lock_wait_{kind}_count")], 1, "{kind}: {t:?}");
        assert!(
            t[&format!("lock_wait_{kind}_p50_us")] >= 15_000,
            "{kind} waited 20 ms"
        );
    }
    assert_eq!(t["lock_wait_lock_count"], 0);
    assert_eq!(t["lock_hold_rwlock_count"], 1, "the writer's hold");
}

/// A wait in pieces (issue 24: the first piece times out, its place is
/// kept, the same owner asks again) is one wait, from its first join to the
/// grant, and one waiter of the hot key; its pieces' time in the queue is
/// the hot key's wait time.
#[test]
fn a_wait_in_pieces_counts_from_its_first_join() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(acquire(&mut con, "sliced", "holder", 30_000), None);
    let joined = Instant::now();
    let first = try_run(
        &mut con,
        &[
            "LOCK.ACQUIRE",
            "sliced",
            "w",
            "30000",
            "WAIT",
            "100",
            "KEEP",
            "10000",
        ],
    );
    assert!(matches!(first, Ok(redis::Value::Int(_))), "busy: {first:?}");
    sleep(Duration::from_millis(200)); // away, its place kept
    let mut waiter = raw::RawClient::connect(server.port);
    waiter.send(&[
        "LOCK.ACQUIRE",
        "sliced",
        "w",
        "30000",
        "WAIT",
        "5000",
        "KEEP",
        "10000",
    ]);
    poll_until(Duration::from_secs(5), "the second piece waits", || {
        stat(&server, "lock_waiting_clients") == 1
    });
    sleep(Duration::from_millis(100));
    let released = Instant::now();
    assert_eq!(release(&mut con, "sliced", "holder", None), Some(1));
    assert!(waiter.read().is_nil(), "granted");
    let whole_ms = (released - joined).as_secs_f64() * 1000.0;
    let t = times(&server);
    assert_eq!(t["lock_wait_lock_count"], 1, "one wait: {t:?}");
    within_a_bucket(t["lock_wait_lock_max_us"], whole_ms, 15.0, "the whole wait");
    let hot = server.info_section("lock_hot_keys");
    assert!(
        hot.contains("lock_most_waiters_1:db=0,key=sliced,waiters=1,error=0"),
        "one waiter, however many pieces: {hot}"
    );
    let queued_us: u64 = hot
        .lines()
        .find_map(|l| l.strip_prefix("lock_longest_waits_1:db=0,key=sliced,waited_us="))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{hot}"));
    // In the queue about 100 ms + about 100 ms, not the 200 ms away.
    assert!(
        (150_000..(whole_ms as u64 - 100) * 1000).contains(&queued_us),
        "time in the queue {queued_us} us of a {whole_ms:.0} ms wait"
    );
}
