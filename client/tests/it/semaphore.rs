//! Semaphores and permits with a lease through the library (issue 18)
//! against real servers with the module: counts set once, taken and given
//! back; FIFO waiting (a newcomer never overtakes a waiter); permits handed
//! over on release; a wait that does not stall the shared connection and
//! that leaves nothing behind when given up; permit ids and leases, the
//! watchdog keeping a permit past its lease, the lost signal (a caller's
//! lease ending, a permit removed on the server); the blocking forms.
// `alone()` (a std mutex) serialises the timing-sensitive tests of this
// binary, as in rwlock.rs.
#![allow(clippy::await_holding_lock)]

use crate::support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redis_lock_client::{LockClient, LockError, Lost, Options, PermitExpirableSemaphore, Permits};
use redis_lock_test_support::*;
use support::{
    assert_not_stalled_by_a_wait, blocking_client_on, client_on, granted, handed_to, new_latch,
    new_permits, new_semaphore, server_with_client, spawn_await_zero, Proxy,
};

fn short_watchdog() -> Options {
    Options::default().watchdog_lease(Duration::from_millis(600))
}

/// Waits until nobody is queued for `name` and asserts the library has sent
/// `cancels` `LOCK.CANCEL`s at least, and killed no connection: a wait given
/// up must end the server's wait at once, not leave it queued or kept.
async fn assert_wait_ended_on_the_server(server: &Server, name: &str, cancels: u64) {
    eventually(Duration::from_secs(1), "the wait left the queue", || {
        sem_waiters(server, name) == 0 && stat(server, "lock_kept_places") == 0
    })
    .await;
    assert!(calls(server, "lock.cancel") >= cancels);
    assert_eq!(calls(server, "client|kill"), 0);
}

/// A server, a client on it with a 600 ms watchdog lease, and the new
/// semaphore `name` of `permits` permits, all held by that client with no
/// lease of their own (the watchdog renews them): the start of the
/// watchdog's tests.
async fn all_permits_held_under_a_short_watchdog(
    name: &str,
    permits: u64,
) -> (Server, LockClient, PermitExpirableSemaphore, Permits) {
    let (server, locks) = server_with_client(short_watchdog());
    let quota = new_permits(&locks, name, permits).await;
    let held = quota.acquire(permits, None).await.expect("acquire");
    (server, locks, quota, held)
}

/// A server, a client on it, and the new one-permit semaphore `name` whose
/// permit that client holds with a 300 ms lease: the start of the tests of
/// a caller's lease ending.
async fn one_permit_leased_for_300_ms(
    name: &str,
) -> (Server, LockClient, PermitExpirableSemaphore, Permits) {
    let (server, locks) = server_with_client(Options::default());
    let quota = new_permits(&locks, name, 1).await;
    let permit = granted(
        quota.try_acquire(1, Some(Duration::from_millis(300))),
        "free",
    )
    .await;
    (server, locks, quota, permit)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_are_set_once_taken_and_given_back() {
    let (server, locks) = server_with_client(Options::default());
    let pool = locks.semaphore("pool");

    assert_eq!(pool.available_permits().await.expect("available"), 0);
    assert!(pool.try_set_permits(3, None).await.expect("set"));
    assert!(
        !pool.try_set_permits(9, None).await.expect("set again"),
        "an existing semaphore keeps its count"
    );
    assert_eq!(pool.available_permits().await.expect("available"), 3);
    assert!(pool.try_acquire(2).await.expect("take 2"));
    assert_eq!(pool.available_permits().await.expect("available"), 1);
    assert!(!pool.try_acquire(2).await.expect("2 of 1"), "only 1 free");
    assert_eq!(pool.release(2).await.expect("release"), 3);
    assert_eq!(pool.add_permits(-1).await.expect("remove one"), 2);
    assert_eq!(pool.drain_permits().await.expect("drain"), 2);
    assert_eq!(pool.available_permits().await.expect("available"), 0);
    assert_eq!(pool.add_permits(4).await.expect("add"), 4);
    assert!(matches!(
        pool.try_acquire(0).await,
        Err(LockError::InvalidArgument(_))
    ));

    let short = locks.semaphore("short-lived");
    assert!(short
        .try_set_permits(1, Some(Duration::from_millis(300)))
        .await
        .expect("set with a ttl"));
    let ttl = pttl(&mut server.connection(), "short-lived");
    assert!((1..=300).contains(&ttl), "PX 300 gave pttl {ttl}");

    // Another type under the name: the server's refusal, with its cause.
    run(&mut server.connection(), &["HSET", "hash", "f", "v"]);
    let err = locks
        .semaphore("hash")
        .try_acquire(1)
        .await
        .expect_err("WRONGTYPE");
    assert!(matches!(err, LockError::Server(_)), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_first_come_first_served_even_a_greedy_head() {
    let _alone = alone();
    let (server, locks) = server_with_client(Options::default());
    let pool = new_semaphore(&locks, "fifo", 0).await;

    let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel();
    let greedy = {
        let (pool, done_tx) = (pool.clone(), done_tx.clone());
        tokio::spawn(async move {
            pool.acquire(2).await.expect("the head gets 2");
            done_tx.send("greedy").expect("send");
        })
    };
    sem_queue_becomes(&server, "fifo", 1).await;
    let modest = {
        let pool = pool.clone();
        tokio::spawn(async move {
            pool.acquire(1).await.expect("the second gets 1");
            done_tx.send("modest").expect("send");
        })
    };
    sem_queue_becomes(&server, "fifo", 2).await;

    // One free permit would do for the second waiter, not for the head:
    // nobody is served, and a newcomer does not overtake either.
    assert_eq!(pool.release(1).await.expect("release"), 1);
    assert!(!pool.try_acquire(1).await.expect("newcomer"));
    let info = sem_info(&mut server.connection(), "fifo").expect("info");
    assert_eq!((info.available, info.waiters), (1, 2), "{info:?}");

    pool.release(1).await.expect("release");
    assert_eq!(done.recv().await, Some("greedy"));
    greedy.await.expect("greedy task");
    sem_queue_becomes(&server, "fifo", 1).await;
    assert_eq!(pool.available_permits().await.expect("available"), 0);
    pool.release(1).await.expect("release");
    assert_eq!(done.recv().await, Some("modest"));
    modest.await.expect("modest task");
    assert_eq!(pool.available_permits().await.expect("available"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_hands_the_permits_to_the_waiter_at_once() {
    let _alone = alone();
    let (server, locks) = server_with_client(Options::default());
    let other = client_on(server.port, Options::default());
    let pool = new_semaphore(&locks, "handover", 0).await;

    let waiter = {
        let pool = other.semaphore("handover");
        tokio::spawn(async move {
            let got = pool.try_acquire_for(1, Duration::from_secs(10)).await;
            (got, Instant::now())
        })
    };
    sem_queue_becomes(&server, "handover", 1).await;
    let released = Instant::now();
    // The count after the release, before the queue took its share.
    assert_eq!(pool.release(1).await.expect("release"), 1);
    let (got, at) = waiter.await.expect("waiter");
    assert!(got.expect("try_acquire_for"), "the waiter got the permit");
    let took = at.duration_since(released);
    assert!(took < Duration::from_secs(2), "handed over after {took:?}");
    assert_eq!(pool.available_permits().await.expect("available"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_wait_ends_without_permits_and_leaves_the_queue() {
    let (server, locks) = server_with_client(Options::default());
    let pool = new_semaphore(&locks, "timed", 1).await;
    assert!(pool.try_acquire(1).await.expect("take the only one"));

    let started = Instant::now();
    let got = pool
        .try_acquire_for(1, Duration::from_millis(250))
        .await
        .expect("try_acquire_for");
    let waited = started.elapsed();
    assert!(!got, "nobody released");
    assert!(waited >= Duration::from_millis(250), "waited {waited:?}");
    assert!(waited < Duration::from_secs(2), "waited {waited:?}");
    sem_queue_becomes(&server, "timed", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_without_end_does_not_stall_the_clients_other_commands() {
    let (server, locks) = server_with_client(Options::default());
    let pool = new_semaphore(&locks, "busy", 0).await;

    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.acquire(1).await })
    };
    sem_queue_becomes(&server, "busy", 1).await;
    // The same client, while its wait blocks a connection on the server.
    assert_not_stalled_by_a_wait(&locks, async {
        assert_eq!(pool.available_permits().await.expect("available"), 0);
    })
    .await;
    assert!(!waiter.is_finished());
    pool.release(1).await.expect("release");
    waiter.await.expect("waiter").expect("acquired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_given_up_leaves_the_queue_and_takes_nothing() {
    let _alone = alone();
    let (server, locks) = server_with_client(Options::default());
    let pool = new_semaphore(&locks, "abandoned", 0).await;

    let given_up = tokio::time::timeout(Duration::from_millis(200), pool.acquire(1)).await;
    assert!(given_up.is_err(), "nothing was free");
    // The library ends the server's wait (LOCK.CANCEL) in the background,
    // well before it would give up on the reply (the 3 s command timeout).
    assert_wait_ended_on_the_server(&server, "abandoned", 1).await;
    assert_eq!(pool.release(1).await.expect("release"), 1);
    assert_eq!(pool.available_permits().await.expect("available"), 1);

    // Permits granted to a wait whose caller is leaving are given back.
    let permits = new_permits(&locks, "abandoned-p", 0).await;
    let waiting = tokio::spawn({
        let permits = permits.clone();
        async move { permits.acquire(1, None).await }
    });
    sem_queue_becomes(&server, "abandoned-p", 1).await;
    waiting.abort();
    let _ = waiting.await;
    assert_wait_ended_on_the_server(&server, "abandoned-p", 2).await;
    assert_eq!(permits.add_permits(1).await.expect("add"), 1);
    assert_eq!(permits.available_permits().await.expect("available"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_have_ids_and_a_renewed_lease_and_come_back_on_release() {
    let (server, locks) = server_with_client(Options::default());
    let mut con = server.connection();
    let quota = new_permits(&locks, "quota", 3).await;

    let before = server_now_ms(&mut con);
    let two = granted(quota.try_acquire(2, None), "2 of 3 are free").await;
    assert_eq!(two.ids().len(), 2);
    assert_ne!(two.ids()[0], two.ids()[1]);
    for id in two.ids() {
        assert!(
            id.len() == 32
                && id
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
            "{id}"
        );
    }
    assert!(two.is_renewed(), "no lease given: the watchdog's");
    assert_eq!(two.is_lost(), None);
    let info = sem_info(&mut con, "quota").expect("info");
    assert_eq!(info.available, 1);
    let mut listed: Vec<String> = info.permits.iter().map(|(id, _)| id.clone()).collect();
    listed.sort();
    let mut ids = two.ids().to_vec();
    ids.sort();
    assert_eq!(listed, ids);
    for (_, deadline) in &info.permits {
        let lease = deadline - before;
        assert!(
            (29_000..=31_000).contains(&lease),
            "the watchdog's 30 s lease, got {lease} ms"
        );
    }
    assert_eq!(permits_taken(&mut con, "quota"), 2);

    assert!(quota.try_acquire(2, None).await.expect("try").is_none());
    let one = quota
        .try_acquire_for(1, Duration::from_secs(1), Some(Duration::from_secs(60)))
        .await
        .expect("try_acquire_for")
        .expect("the third");
    assert!(!one.is_renewed(), "a caller's lease is not renewed");
    two.release().await.expect("release");
    assert_eq!(quota.available_permits().await.expect("available"), 2);
    drop(one);
    eventually(Duration::from_secs(5), "the dropped permit is back", || {
        permits_taken(&mut con, "quota") == 0
    })
    .await;
    assert_eq!(quota.available_permits().await.expect("available"), 3);
}

/// A release whose caller stops waiting for it (a timeout, a `select!`)
/// still gives the permits back: it runs on the client's runtime, not in
/// the caller's future, which would leave them registered and renewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_its_caller_stops_waiting_for_still_gives_the_permits_back() {
    let (server, _locks, _quota, held) = all_permits_held_under_a_short_watchdog("gone", 2).await;
    let mut con = server.connection();
    assert_eq!(permits_taken(&mut con, "gone"), 2);
    // Polled once, then dropped (its reply cannot have come back to the
    // caller's task in that one poll; the task it started may be done).
    let release = held.release();
    tokio::pin!(release);
    tokio::select! {
        biased;
        _ = &mut release => {}
        () = std::future::ready(()) => {}
    }
    eventually(Duration::from_secs(2), "the permits are back", || {
        permits_taken(&mut con, "gone") == 0
    })
    .await;
    // And the client forgot them: its watchdog (every 200 ms) renews nothing.
    let renewals = calls(&server, "lock.permitrenew");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        calls(&server, "lock.permitrenew"),
        renewals,
        "permits given back are renewed no more"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_permit_past_its_lease() {
    let _alone = alone();
    let (server, _locks, quota, permit) = all_permits_held_under_a_short_watchdog("kept", 1).await;

    // Four leases of 600 ms: the lease would have ended three times over.
    let held = tokio::time::timeout(Duration::from_millis(2_400), permit.lost()).await;
    assert!(held.is_err(), "lost: {held:?}");
    assert_eq!(permit.is_lost(), None);
    let mut con = server.connection();
    let info = sem_info(&mut con, "kept").expect("info");
    assert_eq!(info.available, 0);
    assert_eq!(info.permits.len(), 1);
    let left = info.permits[0].1 - server_now_ms(&mut con);
    assert!((1..=600).contains(&left), "renewed to 600 ms: {left} left");
    permit.release().await.expect("still held");
    assert_eq!(quota.available_permits().await.expect("available"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_lease_ends_the_permit_and_the_guard_is_told() {
    let _alone = alone();
    let (server, _locks, quota, permit) = one_permit_leased_for_300_ms("leased").await;
    let why = tokio::time::timeout(Duration::from_secs(3), permit.lost())
        .await
        .expect("told within 3 s");
    assert_eq!(why, Lost::LeaseExpired);
    // The server reclaims it at its deadline.
    let mut con = server.connection();
    eventually(Duration::from_secs(2), "the permit is reclaimed", || {
        sem_info(&mut con, "leased").is_some_and(|i| i.available == 1 && i.permits.is_empty())
    })
    .await;
    let err = permit.release().await.expect_err("not held");
    assert!(
        matches!(&err, LockError::PermitNotHeld { name, .. } if name == "leased"),
        "{err:?}"
    );
    assert_eq!(quota.available_permits().await.expect("available"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_removed_on_the_server_is_lost_at_the_next_renewal() {
    let _alone = alone();
    let (server, _locks, _quota, permits) =
        all_permits_held_under_a_short_watchdog("{removed}", 2).await;
    let gone = permits.ids()[0].clone();
    let kept = permits.ids()[1].clone();

    let mut con = server.connection();
    let removed: i64 = redis::cmd("ZREM")
        .arg(permits_key("{removed}"))
        .arg(id_bytes(&gone))
        .query(&mut con)
        .expect("ZREM");
    assert_eq!(removed, 1, "the member is the id's 16 raw bytes");
    let why = tokio::time::timeout(Duration::from_secs(2), permits.lost())
        .await
        .expect("told within a renewal period");
    assert_eq!(why, Lost::NotHeld);
    // The other permit is still held until the guard gives it back.
    let info = sem_info(&mut con, "{removed}").expect("info");
    assert_eq!(info.permits.len(), 1);
    assert_eq!(info.permits[0].0, kept);
    let err = permits.release().await.expect_err("one was removed");
    assert!(matches!(err, LockError::PermitNotHeld { .. }), "{err:?}");
    let info = sem_info(&mut con, "{removed}").expect("info");
    assert!(
        info.permits.is_empty(),
        "the kept one was given back: {info:?}"
    );
    // The removed one left the sorted set without coming back to the count.
    assert_eq!(info.available, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_gets_the_permit_whose_lease_ended() {
    let _alone = alone();
    let (_server, _locks, quota, first) = one_permit_leased_for_300_ms("reclaimed").await;
    let started = Instant::now();
    let second = quota
        .try_acquire_for(1, Duration::from_secs(5), None)
        .await
        .expect("try_acquire_for")
        .expect("the expired permit goes to the waiter");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_secs(2),
        "waited {waited:?} for a 300 ms lease"
    );
    assert_ne!(first.ids(), second.ids());
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(1), first.lost()).await,
        Ok(Lost::LeaseExpired)
    );
    second.release().await.expect("release");
    assert_eq!(quota.available_permits().await.expect("available"), 1);
}

#[test]
fn the_blocking_forms_wait_take_and_give_back() {
    let server = Server::start();
    let locks = blocking_client_on(server.port, short_watchdog());

    let pool = locks.semaphore("b-pool");
    assert!(pool.try_set_permits(1, None).expect("set"));
    assert!(pool.try_acquire(1).expect("take"));
    let waiter = {
        let pool = pool.clone();
        std::thread::spawn(move || pool.try_acquire_for(1, Duration::from_secs(10)))
    };
    poll_until(Duration::from_secs(5), "the waiter queued", || {
        sem_waiters(&server, "b-pool") == 1
    });
    assert_eq!(pool.release(1).expect("release"), 1);
    assert!(waiter.join().expect("thread").expect("waited"));
    assert_eq!(pool.available_permits().expect("available"), 0);
    pool.acquire(0).expect_err("0 permits");

    let quota = locks.permit_expirable_semaphore("b-quota");
    quota.try_set_permits(1, None).expect("set");
    let permit = quota.acquire(1, None).expect("acquire");
    assert!(permit.is_renewed());
    assert_eq!(
        permit.wait_lost(Duration::from_millis(1_500)),
        None,
        "renewed"
    );
    assert!(quota.try_acquire(1, None).expect("try").is_none());
    drop(permit); // given back before drop returns
    assert_eq!(quota.available_permits().expect("available"), 1);
    let leased = quota
        .try_acquire_for(1, Duration::from_secs(1), Some(Duration::from_millis(200)))
        .expect("try")
        .expect("free");
    assert_eq!(
        leased.wait_lost(Duration::from_secs(3)),
        Some(Lost::LeaseExpired)
    );
    assert!(matches!(
        leased.release(),
        Err(LockError::PermitNotHeld { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takes_whose_replies_were_lost_are_not_sent_again() {
    let server = Server::start();
    let proxy = Proxy::start(server.port);
    let locks = client_on(proxy.port, Options::default());
    let pool = new_semaphore(&locks, "cut", 3).await;

    proxy.cut_after("LOCK.SEMACQUIRE");
    let err = pool.try_acquire(1).await.expect_err("the reply was cut");
    assert_eq!(proxy.cuts.load(Ordering::SeqCst), 1, "the proxy did cut");
    assert!(
        matches!(&err, LockError::Unconfirmed { name, command, .. }
            if name == "cut" && command == "LOCK.SEMACQUIRE"),
        "{err:?}"
    );
    assert!(err.is_transient());
    assert!(std::error::Error::source(&err).is_some());
    // It ran once, and only once.
    assert_eq!(pool.available_permits().await.expect("available"), 2);

    proxy.cut_after("LOCK.SEMRELEASE");
    let err = pool.release(1).await.expect_err("the reply was cut");
    assert!(matches!(err, LockError::Unconfirmed { .. }), "{err:?}");
    assert_eq!(pool.available_permits().await.expect("available"), 3);

    // Giving permits back by id is safe to repeat: a release whose reply
    // was lost is sent again, and its "not held" then means it ran.
    let quota = new_permits(&locks, "cut-p", 1).await;
    let permit = quota.acquire(1, None).await.expect("acquire");
    proxy.cut_after("LOCK.PERMITRELEASE");
    permit.release().await.expect("released despite the cut");
    assert_eq!(proxy.cuts.load(Ordering::SeqCst), 3);
    assert_eq!(quota.available_permits().await.expect("available"), 1);

    proxy.cut_after("LOCK.PERMITACQUIRE");
    let err = quota.try_acquire(1, None).await.expect_err("cut");
    assert!(matches!(err, LockError::Unconfirmed { .. }), "{err:?}");
    let info = sem_info(&mut server.connection(), "cut-p").expect("info");
    assert_eq!(
        (info.available, info.permits.len()),
        (0, 1),
        "taken once, with a lease of its own that frees it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_granted_as_their_caller_leaves_are_given_back() {
    let (server, locks) = server_with_client(Options::default());
    let mut con = server.connection();
    // The grant and the caller's leaving race: whichever wins, the permit
    // is given back at once (by the guard's drop, or by the wait's task),
    // not held for the 30 s watchdog lease nobody renews.
    for round in 0..5 {
        let name = format!("race-{round}");
        let quota = new_permits(&locks, &name, 0).await;
        let waiting = tokio::spawn({
            let quota = quota.clone();
            async move { quota.acquire(1, None).await }
        });
        sem_queue_becomes(&server, &name, 1).await;
        run(&mut con, &["LOCK.SEMADD", &name, "1"]);
        waiting.abort();
        drop(waiting.await);
        eventually(Duration::from_secs(2), "the permit is given back", || {
            sem_info(&mut con, &name).is_some_and(|i| i.available == 1 && i.permits.is_empty())
        })
        .await;

        // A plain semaphore's permits have no guard: a caller that got
        // them has them, one that left gave them back.
        let name = format!("plain-race-{round}");
        let pool = new_semaphore(&locks, &name, 0).await;
        let waiting = tokio::spawn({
            let pool = pool.clone();
            async move { pool.acquire(1).await }
        });
        sem_queue_becomes(&server, &name, 1).await;
        run(&mut con, &["LOCK.SEMADD", &name, "1"]);
        waiting.abort();
        let expected = match waiting.await {
            Ok(got) => {
                got.expect("acquired");
                0
            }
            Err(e) => {
                assert!(e.is_cancelled(), "{e}");
                1
            }
        };
        eventually(Duration::from_secs(2), "the count settles", || {
            sem_info(&mut con, &name).is_some_and(|i| i.available == expected)
        })
        .await;
        // No late give-back follows.
        assert_eq!(pool.available_permits().await.expect("available"), expected);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphores_permits_and_latches_route_to_their_keys_node_in_a_cluster() {
    let cluster = Cluster::start();
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url()).collect();
    let locks = redis_lock_client::LockClient::cluster_with_options(
        redis::cluster::ClusterClient::new(urls).expect("cluster client"),
        short_watchdog(),
    )
    .expect("client");

    let mut permits = Vec::new();
    let mut nodes = std::collections::HashSet::new();
    for i in 0..12 {
        let name = if i % 2 == 0 {
            format!("quota:{i}")
        } else {
            format!("{{tagged}}:quota:{i}")
        };
        let quota = new_permits(&locks, &name, 1).await;
        let permit = quota.acquire(1, None).await.expect("acquire");
        let node = cluster.node_for(&name);
        let info = sem_info(&mut node.connection(), &name).expect("on the key's node");
        assert_eq!(info.permits.len(), 1, "{name}: {info:?}");
        nodes.insert(node.port);
        permits.push((quota, permit));
    }
    assert!(nodes.len() >= 2, "keys on several nodes: {nodes:?}");

    // The watchdog renews on every node: past two 600 ms leases.
    let lost = tokio::time::timeout(
        Duration::from_millis(1_500),
        futures_lost(permits.iter().map(|(_, p)| p)),
    )
    .await;
    assert!(lost.is_err(), "a permit was lost: {lost:?}");

    // A wait on a dedicated connection to the key's node.
    let (quota, permit) = permits.pop().expect("one");
    let waiting = tokio::spawn({
        let quota = quota.clone();
        async move {
            quota
                .try_acquire_for(1, Duration::from_secs(10), None)
                .await
        }
    });
    sem_queue_becomes(cluster.node_for(quota.name()), quota.name(), 1).await;
    permit.release().await.expect("release");
    let handed = handed_to(waiting).await;
    handed.release().await.expect("release");
    for (_, permit) in permits {
        permit.release().await.expect("release");
    }

    let latch = new_latch(&locks, "gate", 1).await;
    let waiter = spawn_await_zero(&latch, Some(Duration::from_secs(10)));
    latch_queue_becomes(cluster.node_for("gate"), "gate", 1).await;
    assert_eq!(latch.count_down().await.expect("count down"), 0);
    assert_eq!(
        waiter.await.expect("task").expect("await"),
        redis_lock_client::Awaited::Reached
    );
}

/// Resolves when any of `permits` is lost, with the reason.
async fn futures_lost<'a>(permits: impl Iterator<Item = &'a redis_lock_client::Permits>) -> Lost {
    let waits: Vec<_> = permits.map(|p| Box::pin(p.lost())).collect();
    futures_util::future::select_all(waits).await.0
}
