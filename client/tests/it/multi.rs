//! MultiLock over independent servers, and RedLock on five masters with
//! some of them killed.
// `alone()` (a std mutex) serialises the timing-sensitive tests of this
// binary. Each #[tokio::test] runs its own runtime on its own test thread,
// so holding that guard across awaits blocks only the other tests' threads,
// which is its purpose.
#![allow(clippy::await_holding_lock)]

use crate::support;

use std::time::{Duration, Instant};

use redis_lock_client::{LockClient, MultiLock, Options, RedLock};
use redis_lock_test_support::*;
use support::{client_on, handed_to};

fn clients(servers: &[Server]) -> Vec<LockClient> {
    servers
        .iter()
        .map(|s| client_on(s.port, Options::default()))
        .collect()
}

fn is_free(server: &Server, key: &str) -> bool {
    !exists(&mut server.connection(), key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multilock_over_three_servers_rolls_back_a_partial_grant() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let locks = clients(&servers);
    let multi = MultiLock::new(
        locks
            .iter()
            .cloned()
            .zip(["account:1", "account:2", "account:3"]),
    )
    .expect("multi");

    // Someone else holds the third: the first two are taken, then given back.
    let blocker = locks[2]
        .as_owner("blocker")
        .lock("account:3")
        .await
        .expect("lock");
    let started = Instant::now();
    let none = multi
        .try_lock(Duration::from_millis(400), None)
        .await
        .expect("try");
    let took = started.elapsed();
    assert!(none.is_none(), "all or nothing");
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_millis(1500),
        "one shared wait budget: {took:?}"
    );
    assert!(is_free(&servers[0], "account:1"), "rolled back");
    assert!(is_free(&servers[1], "account:2"), "rolled back");
    assert!(holder_is(
        &mut servers[2].connection(),
        "account:3",
        "blocker"
    ));

    // Freed while the multi-lock waits for it: all three are taken.
    let waiting = {
        let multi =
            MultiLock::new(
                locks
                    .iter()
                    .cloned()
                    .zip(["account:1", "account:2", "account:3"]),
            )
            .expect("multi");
        tokio::spawn(async move { multi.try_lock(Duration::from_secs(10), None).await })
    };
    let third = &servers[2];
    eventually(Duration::from_secs(5), "queued for the third", || {
        waiter_owners(third, "account:3").len() == 1
    })
    .await;
    blocker.unlock().await.expect("unlock");
    let all = handed_to(waiting).await;
    for (server, (guard, key)) in
        servers.iter().zip(
            all.guards()
                .iter()
                .zip(["account:1", "account:2", "account:3"]),
        )
    {
        assert!(holder_is(&mut server.connection(), key, guard.owner()));
    }
    all.unlock().await.expect("unlock all");
    for (server, key) in servers.iter().zip(["account:1", "account:2", "account:3"]) {
        assert!(is_free(server, key), "{key} released with the others");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multilock_with_a_lease_restarts_every_lease_together() {
    let servers: Vec<Server> = (0..2).map(|_| Server::start()).collect();
    let locks = clients(&servers);
    let multi = MultiLock::new(locks.iter().cloned().zip(["a", "b"])).expect("multi");
    let guard = multi
        .try_lock(Duration::from_secs(1), Some(Duration::from_millis(800)))
        .await
        .expect("try")
        .expect("free");
    let ttls: Vec<i64> = servers
        .iter()
        .zip(["a", "b"])
        .map(|(s, k)| pttl(&mut s.connection(), k))
        .collect();
    assert!(ttls.iter().all(|t| *t > 0 && *t <= 800), "{ttls:?}");
    let (index, why) = tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("the leases end");
    assert!(index < 2);
    assert_eq!(why, redis_lock_client::Lost::LeaseExpired);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_on_five_masters_survives_two_dead_and_fails_in_budget_with_three() {
    let _alone = alone();
    let mut servers: Vec<Server> = (0..5).map(|_| Server::start()).collect();
    let masters = clients(&servers);
    let redlock = RedLock::new(masters, "report").expect("redlock");
    assert_eq!(redlock.quorum(), 3);
    let lease = Duration::from_secs(10);

    // All five up.
    let guard = redlock
        .try_lock(Duration::from_secs(1), lease)
        .await
        .expect("try")
        .expect("locked");
    assert!(guard.validity() > Duration::from_secs(9) && guard.validity() < lease);
    for server in &servers {
        assert!(holder_is(&mut server.connection(), "report", guard.owner()));
    }
    guard.unlock().await;
    assert!(servers.iter().all(|s| is_free(s, "report")));

    // Two killed: three of five is a quorum.
    servers[0].crash();
    servers[1].crash();
    let guard = redlock
        .try_lock(Duration::from_secs(2), lease)
        .await
        .expect("try")
        .expect("a quorum of three");
    for server in &servers[2..] {
        assert!(holder_is(&mut server.connection(), "report", guard.owner()));
    }
    // A second RedLock client cannot have it meanwhile.
    let rival = RedLock::new(clients(&servers[2..]), "report").expect("rival");
    assert!(rival
        .try_lock(Duration::from_millis(200), lease)
        .await
        .expect("try")
        .is_none());
    guard.unlock().await;
    assert!(servers[2..].iter().all(|s| is_free(s, "report")));

    // Three killed: two of five is not, and it gives up within its budget,
    // leaving nothing behind on the live ones.
    servers[2].crash();
    let wait = Duration::from_millis(800);
    let started = Instant::now();
    let none = redlock.try_lock(wait, lease).await.expect("try");
    let took = started.elapsed();
    assert!(none.is_none(), "no quorum");
    assert!(
        took < wait + Duration::from_millis(500),
        "gave up {took:?} after starting, budget {wait:?}"
    );
    assert!(servers[3..].iter().all(|s| is_free(s, "report")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_loses_to_a_majority_held_elsewhere_and_releases_its_minority() {
    let servers: Vec<Server> = (0..5).map(|_| Server::start()).collect();
    let masters = clients(&servers);
    for server in &servers[..3] {
        acquire(&mut server.connection(), "report", "other", 30_000);
    }
    let redlock = RedLock::new(masters, "report").expect("redlock");
    let none = redlock
        .try_lock(Duration::from_millis(300), Duration::from_secs(10))
        .await
        .expect("try");
    assert!(none.is_none());
    assert!(
        servers[3..].iter().all(|s| is_free(s, "report")),
        "the two it did get are released"
    );
}
