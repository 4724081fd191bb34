//! The client through Sentinel, across a real failover: the watchdog renews
//! on the new master, a waiting acquire queues there again, and a lock that
//! did not survive the failover is reported lost.
// `alone()` (a std mutex) serialises the timing-sensitive tests; holding it
// across awaits blocks only the other tests' threads.
#![allow(clippy::await_holding_lock)]

use crate::support;

use std::time::{Duration, Instant};

use redis::Value;
use redis_lock_client::{LockClient, LockError, LockGuard, Lost, Options};
use redis_lock_test_support::sentinel::{SentinelConfig, Sentinels};
use redis_lock_test_support::*;
use support::{granted_within, unlock_last};
use tokio::task::JoinHandle;

fn run(server: &Server, args: &[&str]) {
    let _: Value = redis::cmd(args[0])
        .arg(&args[1..])
        .query(&mut server.connection())
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

/// Cuts `replica` off its master for good (until the test ends): it keeps
/// trying to sync, authenticating as a user that does not exist.
fn cut_off(master: &Server, replicas: &[&Server]) {
    for replica in replicas {
        run(replica, &["CONFIG", "SET", "masteruser", "no-such-user"]);
        run(replica, &["CONFIG", "SET", "masterauth", "wrong"]);
    }
    run(master, &["CLIENT", "KILL", "TYPE", "replica"]);
    for replica in replicas {
        poll_until(Duration::from_secs(5), "the replica's link is down", || {
            replica.info("replication", "master_link_status").as_deref() == Some("down")
        });
    }
}

/// A server's role, None while it cannot answer (Sentinel kills a demoted
/// master's clients, this poll's among them).
fn role(server: &Server) -> Option<String> {
    let mut con = redis::Client::open(server.url())
        .ok()?
        .get_connection_with_timeout(Duration::from_secs(1))
        .ok()?;
    let text: String = redis::cmd("INFO").arg("replication").query(&mut con).ok()?;
    info_field(&text, "role")
}

/// Two replicas of `master` and three Sentinels watching it, ready; a
/// client through them with `watchdog_lease`.
fn watched(master: &Server, watchdog_lease: Duration) -> ([Server; 2], Sentinels, LockClient) {
    let replicas = [Server::start(), Server::start()];
    for replica in &replicas {
        replica.replicaof(master);
    }
    let sentinels = Sentinels::start(SentinelConfig::new(master.port), 3);
    sentinels.wait_ready(2);
    // A failover takes seconds: retries cover 20 s of it.
    let options = Options::default()
        .watchdog_lease(watchdog_lease)
        .retries(200)
        .retry_interval(Duration::from_millis(100));
    let locks = LockClient::sentinel(sentinels.urls(), "mymaster", options).expect("client");
    (replicas, sentinels, locks)
}

type Waiting = JoinHandle<Result<LockGuard, LockError>>;

/// "kept" taken by `holder`, with "waiter" queued for it, and both on the
/// replicas: the holder's guard and the waiter's task.
async fn kept_with_a_waiter(
    locks: &LockClient,
    holder: &LockClient,
    master: &Server,
    replicas: &[Server; 2],
) -> (LockGuard, Waiting) {
    let kept = holder.lock("kept").await.expect("lock kept");
    let waiting = {
        let waiter = locks.as_owner("waiter");
        tokio::spawn(async move { waiter.lock("kept").await })
    };
    queue_becomes(master, "kept", &["waiter"]).await;
    wait_for_replicas(master, &[&replicas[0], &replicas[1]]);
    (kept, waiting)
}

/// The replica the sentinels name master once the one on `old_port` is not.
async fn promoted<'a>(
    sentinels: &Sentinels,
    replicas: &'a [Server; 2],
    old_port: u16,
) -> &'a Server {
    eventually(Duration::from_secs(30), "a replica is promoted", || {
        sentinels.master_port().is_some_and(|p| p != old_port)
    })
    .await;
    let new_port = sentinels.master_port().expect("a master");
    replicas
        .iter()
        .find(|r| r.port == new_port)
        .expect("one of the replicas")
}

/// After the failover, "kept" is renewed on `promoted`, the waiter queued
/// there again, and the holder was never told it lost the lock.
async fn renewed_with_the_waiter_queued(promoted: &Server, kept: &LockGuard) {
    eventually(Duration::from_secs(20), "renewed on the new master", || {
        calls(promoted, "lock.renew") > 0
    })
    .await;
    queue_becomes(promoted, "kept", &["waiter"]).await;
    assert_eq!(kept.is_lost(), None);
}

/// "kept" released on the new master: the waiter is handed it there.
async fn handed_to_the_waiter(promoted: &Server, kept: LockGuard, waiting: Waiting) -> LockGuard {
    kept.unlock().await.expect("unlock on the new master");
    let got = granted_within(Duration::from_secs(10), waiting).await;
    assert!(holder_is(&mut promoted.connection(), "kept", "waiter"));
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_moves_renewals_and_waits_to_the_new_master_and_reports_lost_locks() {
    let _alone = alone();
    let mut master = Server::start();
    let (replicas, sentinels, locks) = watched(&master, Duration::from_secs(10));

    // "kept" is on the replicas before the failover; a waiter queues on it.
    let holder = locks.as_owner("holder");
    let (kept, waiting) = kept_with_a_waiter(&locks, &holder, &master, &replicas).await;

    // "gone" is taken once no replica can hear of it: a failover loses it.
    cut_off(&master, &[&replicas[0], &replicas[1]]);
    let gone = holder.lock("gone").await.expect("lock gone");
    for replica in &replicas {
        assert!(!exists(&mut replica.connection(), "gone"));
        assert!(holder_is(&mut replica.connection(), "kept", "holder"));
    }

    let old_port = master.port;
    master.crash();
    let crashed = Instant::now();
    let promoted = promoted(&sentinels, &replicas, old_port).await;
    eventually(
        Duration::from_secs(10),
        "the promoted replica is master",
        || role(promoted).as_deref() == Some("master"),
    )
    .await;
    eprintln!("promoted {:?} after the crash", crashed.elapsed());

    // The lock the new master never had is reported lost.
    let why = tokio::time::timeout(Duration::from_secs(20), gone.lost())
        .await
        .expect("the lost lock is reported");
    assert_eq!(why, Lost::NotHeld);
    eprintln!("lost reported {:?} after the crash", crashed.elapsed());

    // The one it had is renewed there, and the waiter queued there again.
    renewed_with_the_waiter_queued(promoted, &kept).await;
    assert!(holder_is(&mut promoted.connection(), "kept", "holder"));
    let ttl = pttl(&mut promoted.connection(), "kept");
    assert!(ttl > 0 && ttl <= 10_000, "{ttl}");

    let got = handed_to_the_waiter(promoted, kept, waiting).await;
    unlock_last(got, &mut promoted.connection()).await;
}

/// `SENTINEL FAILOVER`: the old master lives on as a replica. A wait there
/// is ended by the demotion, connections to it are killed or refused with
/// `READONLY`; the client moves to the new master all the same, and never
/// kills a connection by an id it had on the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_failover_keeps_the_lock_and_the_waiter_queues_on_the_new_master() {
    let _alone = alone();
    let master = Server::start();
    let (replicas, sentinels, locks) = watched(&master, Duration::from_secs(20));
    let holder = locks.as_owner("holder");

    // Through Sentinel too, a force is told within milliseconds.
    let forced = holder.lock("forced").await.expect("lock forced");
    assert_eq!(force(&mut master.connection(), "forced"), 1);
    let why = tokio::time::timeout(Duration::from_millis(200), forced.lost())
        .await
        .expect("told soon");
    assert_eq!(why, Lost::NotHeld);

    let (kept, waiting) = kept_with_a_waiter(&locks, &holder, &master, &replicas).await;

    let mut sentinel = sentinels.sentinels[0].connection().expect("sentinel");
    let _: Value = redis::cmd("SENTINEL")
        .arg("FAILOVER")
        .arg("mymaster")
        .query(&mut sentinel)
        .expect("SENTINEL FAILOVER");
    let promoted = promoted(&sentinels, &replicas, master.port).await;
    let asked = Instant::now();
    eventually(
        Duration::from_secs(30),
        "the old master is a replica",
        || role(&master).as_deref() == Some("slave"),
    )
    .await;
    eprintln!(
        "old master demoted {:?} after the failover",
        asked.elapsed()
    );

    renewed_with_the_waiter_queued(promoted, &kept).await;
    let got = handed_to_the_waiter(promoted, kept, waiting).await;
    assert_eq!(got.is_lost(), None);
    got.unlock().await.expect("unlock");
}
