//! The lost signal within milliseconds: a held lock forced (`LOCK.FORCE`)
//! or deleted (`DEL`) reaches `lost()` long before the next renewal, through
//! one tracking connection per client; the client's own renewals, re-entries
//! and releases raise no false alarm.
// `alone()` (a std mutex) serialises the timing-sensitive tests of this
// binary; holding it across awaits blocks only the other tests' threads.
#![allow(clippy::await_holding_lock)]

use crate::support;

use std::time::{Duration, Instant};

use redis::Value;
use redis_lock_client::{LockClient, Lost, Options};
use redis_lock_test_support::*;
use support::{client_on, server_with_client};

/// How soon a loss must be told: far below a third of the 30 s lease.
const SOON: Duration = Duration::from_millis(200);

/// The lines of `CLIENT LIST` for connections with tracking on.
fn tracking_connections(server: &Server) -> Vec<String> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut server.connection())
        .expect("CLIENT LIST");
    list.lines()
        .filter(|line| {
            line.split(' ')
                .find_map(|f| f.strip_prefix("flags="))
                .is_some_and(|flags| flags.contains('t'))
        })
        .map(str::to_string)
        .collect()
}

/// On a server of its own, with the default 30 s lease: takes `key` and,
/// for a few rounds at different points, takes it away with `take`,
/// expecting `lost()` within [`SOON`].
async fn told_soon(key: &str, take: &[&str]) {
    let _alone = alone();
    let (server, locks) = server_with_client(Options::default());
    for round in 0..3u64 {
        let guard = locks.lock(key).await.expect("lock");
        tokio::time::sleep(Duration::from_millis(37 * round)).await;
        let taken = Instant::now();
        let _: Value = redis::cmd(take[0])
            .arg(&take[1..])
            .query(&mut server.connection())
            .expect("take the lock away");
        let why = tokio::time::timeout(SOON, guard.lost())
            .await
            .unwrap_or_else(|_| panic!("round {round}: {take:?} not told within {SOON:?}"));
        assert_eq!(why, Lost::NotHeld);
        eprintln!("round {round}: {take:?} told after {:?}", taken.elapsed());
        assert!(guard.unlock().await.is_err(), "a lost lock is not released");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_lock_is_told_within_milliseconds_with_a_30_s_lease() {
    told_soon("ledger", &["LOCK.FORCE", "ledger"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_lock_is_told_within_milliseconds_with_a_30_s_lease() {
    told_soon("ledger", &["DEL", "ledger"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_with_a_callers_lease_is_told_of_a_force_too() {
    let _alone = alone();
    let (server, locks) = server_with_client(Options::default());
    let guard = locks
        .try_lock("report", Duration::ZERO, Some(Duration::from_secs(30)))
        .await
        .expect("try_lock")
        .expect("free");
    assert_eq!(force(&mut server.connection(), "report"), 1);
    let why = tokio::time::timeout(SOON, guard.lost())
        .await
        .expect("told soon");
    assert_eq!(why, Lost::NotHeld);
}

/// The server's lease can end a moment before the client's count of it
/// (its deadline is a whole millisecond): the key's expiry, seen first by
/// the tracking connection, is still reported as the lease ending, not as
/// a lock taken away. (CI once saw `NotHeld` here; shortening the server's
/// lease by 5 ms makes that race certain.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_lease_ending_a_moment_early_on_the_server_is_the_lease_ending() {
    let _alone = alone();
    let (server, locks) = server_with_client(Options::default());
    let lease = Duration::from_millis(300);
    let guard = locks
        .try_lock("report", Duration::ZERO, Some(lease))
        .await
        .expect("try_lock")
        .expect("free");
    let mut con = server.connection();
    let left: i64 = redis::cmd("PTTL")
        .arg("report")
        .query(&mut con)
        .expect("PTTL");
    assert!(left > 100, "lease left: {left}");
    let _: i64 = redis::cmd("PEXPIRE")
        .arg("report")
        .arg(left - 5)
        .query(&mut con)
        .expect("PEXPIRE");
    let why = tokio::time::timeout(lease * 2, guard.lost())
        .await
        .expect("the lease ends");
    assert_eq!(why, Lost::LeaseExpired);
    assert!(
        guard.unlock().await.is_err(),
        "an expired lock is not released"
    );
}

/// Renewals (every 200 ms here), a re-entry and its release all change the
/// key and so trigger a check: none of them may report a loss, and the
/// unlock at the end succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_re_entries_and_releases_raise_no_false_alarm() {
    let _alone = alone();
    let server = Server::start();
    let locks = client_on(
        server.port,
        Options::default().watchdog_lease(Duration::from_millis(600)),
    );
    let guard = locks.lock("job").await.expect("lock");
    let started = Instant::now();
    let hgets_before = server.command_stats().get("hget").copied().unwrap_or(0);
    let renewals_before = server
        .command_stats()
        .get("lock.renew")
        .copied()
        .unwrap_or(0);
    while started.elapsed() < Duration::from_secs(3) {
        // Renewed twice or so meanwhile (a re-entry restarts the lease, so
        // the pause is longer than a renewal period).
        tokio::time::sleep(Duration::from_millis(450)).await;
        assert_eq!(guard.is_lost(), None, "at {:?}", started.elapsed());
        let again = locks.lock("job").await.expect("re-enter");
        tokio::time::sleep(Duration::from_millis(50)).await;
        again.unlock().await.expect("release the re-entry");
        assert_eq!(guard.is_lost(), None, "at {:?}", started.elapsed());
    }
    let renewals = server
        .command_stats()
        .get("lock.renew")
        .copied()
        .unwrap_or(0)
        - renewals_before;
    assert!(renewals >= 8, "renewed {renewals} times");
    // Each renewal changed the key, so each was checked (and passed).
    let hgets = server.command_stats().get("hget").copied().unwrap_or(0) - hgets_before;
    assert!(hgets >= renewals, "{hgets} checks for {renewals} renewals");
    assert_eq!(guard.is_lost(), None);
    guard.unlock().await.expect("unlock");
    // Releases of other locks of the same client, each the last hold.
    for i in 0..20 {
        let name = format!("short-{i}");
        let g = locks.lock(&name).await.expect("lock");
        let keep = locks.lock("kept").await.expect("lock kept");
        g.unlock().await.expect("unlock");
        keep.unlock().await.expect("unlock kept");
    }
}

/// One tracking connection per client, however many locks it holds; if it
/// is killed, the client connects again and a loss during the gap is still
/// told, long before a renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tracking_connection_per_client_and_it_comes_back() {
    let _alone = alone();
    let (server, locks) = server_with_client(Options::default());
    let guards = futures_util::future::join_all((0..5).map(|i| {
        let locks = locks.clone();
        async move { locks.lock(&format!("many-{i}")).await.expect("lock") }
    }))
    .await;
    eventually(Duration::from_secs(2), "one tracking connection", || {
        tracking_connections(&server).len() == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(tracking_connections(&server).len(), 1);

    let line = tracking_connections(&server).remove(0);
    let id = line
        .split(' ')
        .find_map(|f| f.strip_prefix("id="))
        .expect("an id")
        .to_string();
    let _: Value = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&id)
        .query(&mut server.connection())
        .expect("CLIENT KILL");
    assert_eq!(force(&mut server.connection(), "many-3"), 1);
    let why = tokio::time::timeout(Duration::from_secs(2), guards[3].lost())
        .await
        .expect("told after the tracking connection came back");
    assert_eq!(why, Lost::NotHeld);
    assert_eq!(tracking_connections(&server).len(), 1);
    // And it tracks again.
    assert_eq!(force(&mut server.connection(), "many-1"), 1);
    let why = tokio::time::timeout(SOON, guards[1].lost())
        .await
        .expect("told soon");
    assert_eq!(why, Lost::NotHeld);
    for (i, g) in guards.iter().enumerate() {
        if i != 1 && i != 3 {
            assert_eq!(g.is_lost(), None, "lock {i}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tracking_a_force_waits_for_the_renewal() {
    let _alone = alone();
    let (server, locks) = server_with_client(Options::default().track_locks(false));
    let guard = locks.lock("slow").await.expect("lock");
    assert_eq!(force(&mut server.connection(), "slow"), 1);
    assert!(
        tokio::time::timeout(Duration::from_millis(500), guard.lost())
            .await
            .is_err(),
        "not told before the renewal"
    );
    assert!(tracking_connections(&server).is_empty());
}

/// A user whose ACL denies `CLIENT`: no tracking (renewals tell the loss),
/// and no connection attempt after the first refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_denied_client_tracking_falls_back_to_renewals_quietly() {
    let _alone = alone();
    let server = Server::start();
    let _: Value = redis::cmd("ACL")
        .arg(&[
            "SETUSER", "limited", "on", ">pw", "~*", "&*", "+@all", "-client",
        ])
        .query(&mut server.connection())
        .expect("ACL SETUSER");
    let url = format!("redis://limited:pw@127.0.0.1:{}/", server.port);
    let locks = LockClient::with_options(
        redis::Client::open(url).expect("url"),
        Options::default().watchdog_lease(Duration::from_millis(900)),
    )
    .expect("client");
    let guard = locks.lock("k").await.expect("lock");
    // Counted on one connection of the test's own, opened before.
    let mut con = server.connection();
    let mut accepted = || {
        let stats: String = redis::cmd("INFO")
            .arg("stats")
            .query(&mut con)
            .expect("INFO stats");
        info_field(&stats, "total_connections_received")
            .and_then(|n| n.parse::<u64>().ok())
            .expect("total_connections_received")
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = accepted();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(accepted(), before, "no new connection attempts");
    assert!(tracking_connections(&server).is_empty());
    assert_eq!(force(&mut server.connection(), "k"), 1);
    let why = tokio::time::timeout(Duration::from_millis(900), guard.lost())
        .await
        .expect("told by the next renewal");
    assert_eq!(why, Lost::NotHeld);
}
