//! Count-down latches through the library (issue 18) against real servers
//! with the module: a count set once and counted down, waiters told at
//! zero, a wait that times out, a latch whose time-to-live ends under its
//! waiters, a deleted latch counting as zero, a wait that does not stall
//! the client, the blocking forms.
#![allow(clippy::await_holding_lock)]

use crate::support;

use std::time::{Duration, Instant};

use redis_lock_client::{Awaited, CountDownLatch, LockClient, LockError, Options};
use redis_lock_test_support::*;
use support::{
    assert_not_stalled_by_a_wait, blocking_client_on, client_on, new_latch, server_with_client,
    spawn_await_zero, timed, Proxy,
};
use tokio::task::JoinHandle;

/// The new latch `name` set to `count`, and a waiter without a timeout
/// queued on it (in a task of its own: that task).
async fn with_a_waiter(
    server: &Server,
    locks: &LockClient,
    name: &str,
    count: u64,
) -> (CountDownLatch, JoinHandle<Result<Awaited, LockError>>) {
    let latch = new_latch(locks, name, count).await;
    let waiter = spawn_await_zero(&latch, None);
    latch_queue_becomes(server, name, 1).await;
    (latch, waiter)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_counts_down_to_zero_and_wakes_every_waiter() {
    let (server, locks) = server_with_client(Options::default());
    let other = client_on(server.port, Options::default());
    let latch = locks.count_down_latch("ready");

    assert_eq!(latch.count().await.expect("count"), 0);
    assert!(latch.try_set_count(2, None).await.expect("set"));
    assert!(
        !latch.try_set_count(5, None).await.expect("set again"),
        "an existing latch keeps its count"
    );
    assert_eq!(latch.count().await.expect("count"), 2);
    assert!(matches!(
        latch.try_set_count(0, None).await,
        Err(LockError::InvalidArgument(_))
    ));

    let waiters: Vec<_> = [&locks, &other]
        .into_iter()
        .map(|client| spawn_await_zero(&client.count_down_latch("ready"), None))
        .collect();
    latch_queue_becomes(&server, "ready", 2).await;
    assert_eq!(latch.count_down().await.expect("count down"), 1);
    // One left: nobody is answered.
    assert_eq!(latch_waiters(&server, "ready"), 2);
    assert!(waiters.iter().all(|w| !w.is_finished()));
    assert_eq!(
        other
            .count_down_latch("ready")
            .count_down()
            .await
            .expect("count down"),
        0
    );
    for waiter in waiters {
        assert_eq!(
            waiter.await.expect("task").expect("await"),
            Awaited::Reached
        );
    }
    assert!(!exists(&mut server.connection(), "ready"), "gone at zero");
    assert_eq!(latch.count().await.expect("count"), 0);
    assert_eq!(
        latch
            .count_down()
            .await
            .expect("count down a missing latch"),
        0
    );
    // No latch: zero already.
    let started = Instant::now();
    assert_eq!(
        latch
            .await_zero(Some(Duration::from_secs(5)))
            .await
            .expect("await"),
        Awaited::Reached
    );
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_times_out_while_the_count_is_above_zero() {
    let (server, locks) = server_with_client(Options::default());
    let latch = new_latch(&locks, "slow", 1).await;

    let (outcome, waited) = timed(latch.await_zero(Some(Duration::from_millis(250)))).await;
    assert_eq!(outcome.expect("await"), Awaited::TimedOut);
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(2),
        "waited {waited:?}"
    );
    assert_eq!(latch_waiters(&server, "slow"), 0);
    assert_eq!(latch.count().await.expect("count"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_whose_ttl_ends_tells_its_waiters_it_expired() {
    let _alone = alone();
    let (server, locks) = server_with_client(Options::default());
    let latch = locks.count_down_latch("brief");
    assert!(latch
        .try_set_count(3, Some(Duration::from_millis(300)))
        .await
        .expect("set with a ttl"));
    let ttl = pttl(&mut server.connection(), "brief");
    assert!((1..=300).contains(&ttl), "PX 300 gave pttl {ttl}");

    let (outcome, waited) = timed(latch.await_zero(Some(Duration::from_secs(5)))).await;
    assert_eq!(outcome.expect("await"), Awaited::Expired);
    assert!(waited < Duration::from_secs(2), "told after {waited:?}");
    assert!(!exists(&mut server.connection(), "brief"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_latch_counts_as_zero() {
    let (server, locks) = server_with_client(Options::default());
    let (_latch, waiter) = with_a_waiter(&server, &locks, "deleted", 4).await;
    run(&mut server.connection(), &["DEL", "deleted"]);
    let outcome = tokio::time::timeout(Duration::from_secs(2), waiter)
        .await
        .expect("told within 2 s")
        .expect("task")
        .expect("await");
    assert_eq!(outcome, Awaited::Reached);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_does_not_stall_the_clients_other_commands_and_can_be_given_up() {
    let (server, locks) = server_with_client(Options::default());
    let (latch, waiter) = with_a_waiter(&server, &locks, "gate", 1).await;
    assert_not_stalled_by_a_wait(&locks, async {
        assert_eq!(latch.count().await.expect("count"), 1);
    })
    .await;
    // Given up: its connection closes, and the server forgets the wait.
    waiter.abort();
    let _ = waiter.await;
    latch_queue_becomes(&server, "gate", 0).await;
    assert_eq!(latch.count().await.expect("count"), 1);
}

#[test]
fn the_blocking_forms_count_down_and_wait() {
    let server = Server::start();
    let locks = blocking_client_on(server.port, Options::default());
    let latch = locks.count_down_latch("b-latch");
    assert!(latch.try_set_count(2, None).expect("set"));
    let waiter = {
        let latch = latch.clone();
        std::thread::spawn(move || latch.await_zero(Some(Duration::from_secs(10))))
    };
    poll_until(Duration::from_secs(5), "the waiter queued", || {
        latch_waiters(&server, "b-latch") == 1
    });
    assert_eq!(latch.count_down().expect("count down"), 1);
    assert_eq!(latch.count().expect("count"), 1);
    assert_eq!(latch.count_down().expect("count down"), 0);
    assert_eq!(
        waiter.join().expect("thread").expect("await"),
        Awaited::Reached
    );
    assert_eq!(
        latch
            .await_zero(Some(Duration::from_millis(50)))
            .expect("await"),
        Awaited::Reached
    );
    assert!(latch.try_set_count(1, None).expect("set again"));
    assert_eq!(
        latch
            .await_zero(Some(Duration::from_millis(100)))
            .expect("await"),
        Awaited::TimedOut
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_down_whose_reply_was_lost_is_not_counted_twice_and_a_broken_wait_resumes() {
    let server = Server::start();
    let proxy = Proxy::start(server.port);
    let locks = client_on(proxy.port, Options::default());
    let latch = new_latch(&locks, "cut", 3).await;

    proxy.cut_after("LOCK.COUNTDOWN");
    let err = latch.count_down().await.expect_err("the reply was cut");
    assert!(
        matches!(&err, LockError::Unconfirmed { command, .. } if command == "LOCK.COUNTDOWN"),
        "{err:?}"
    );
    assert_eq!(latch.count().await.expect("count"), 2, "counted once");

    // A wait whose connection breaks is resumed on a new one.
    let waiter = spawn_await_zero(&latch, Some(Duration::from_secs(10)));
    latch_queue_becomes(&server, "cut", 1).await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("SKIPME")
        .arg("yes")
        .arg("TYPE")
        .arg("normal")
        .query(&mut server.connection())
        .expect("CLIENT KILL");
    assert!(killed >= 1);
    latch_queue_becomes(&server, "cut", 1).await;
    let mut con = server.connection();
    run(&mut con, &["LOCK.COUNTDOWN", "cut"]);
    run(&mut con, &["LOCK.COUNTDOWN", "cut"]);
    let outcome = waiter.await.expect("task").expect("await");
    assert_eq!(outcome, Awaited::Reached);
}
