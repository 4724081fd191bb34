//! A grant handed over after a wait longer than the lease (issue 15 (a)):
//! its lease starts when the server granted it, not when the wait was sent,
//! so the guard must be born held, renewed by the watchdog, and released by
//! `unlock()`. Through every acquiring API: async, blocking, MultiLock, and
//! a caller-given lease.
// `alone()` (a std mutex) serialises the timing-sensitive tests of this
// binary; holding it across awaits blocks only the other tests' threads.
#![allow(clippy::await_holding_lock)]

use crate::support;

use std::future::Future;
use std::time::{Duration, Instant};

use redis_lock_client::{blocking, LockClient, LockError, Lost, MultiLock, Options};
use redis_lock_test_support::*;
use support::{client_on, handed_to, unlock_last};

/// The watchdog lease of these tests: short, so a wait of 1.5 of it is quick.
const LEASE: Duration = Duration::from_millis(1000);

fn options() -> Options {
    Options::default().watchdog_lease(LEASE)
}

/// Checks, for a while longer than the lease, that `owner` keeps `key` and
/// that the server's lease stays within the watchdog's (it is renewed).
async fn stays_held(server: &Server, key: &str, owner: &str, lost: impl Fn() -> Option<Lost>) {
    let started = Instant::now();
    while started.elapsed() < LEASE * 2 {
        assert_eq!(lost(), None, "at {:?}", started.elapsed());
        let mut con = server.connection();
        assert!(
            holder_is(&mut con, key, owner),
            "{owner} holds {key} at {:?}",
            started.elapsed()
        );
        let ttl = pttl(&mut con, key);
        assert!(ttl > 0 && ttl <= 1000, "renewed: {ttl}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// "a" holds `key` while "b" waits for it (`wait`, given b's client) half
/// a lease longer than the lease, then "a" unlocks: b's wait, being handed
/// the lock.
async fn handed_over_late<F>(
    server: &Server,
    key: &str,
    wait: impl FnOnce(LockClient) -> F,
) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let locks = client_on(server.port, options());
    let a = locks.as_owner("a").lock(key).await.expect("a locks");
    let waiting = tokio::spawn(wait(locks.as_owner("b")));
    queue_becomes(server, key, &["b"]).await;
    tokio::time::sleep(LEASE * 3 / 2).await;
    a.unlock().await.expect("a unlocks");
    waiting
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_handed_over_after_waiting_longer_than_the_lease_is_held_and_renewed() {
    let _alone = alone();
    let server = Server::start();
    let waiting = handed_over_late(&server, "x", |b| async move { b.lock("x").await }).await;
    let b = waiting.await.expect("task").expect("b locks");
    assert_eq!(b.is_lost(), None, "a fresh grant is not lost");
    stays_held(&server, "x", "b", || b.is_lost()).await;
    unlock_last(b, &mut server.connection()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_given_lease_handed_over_late_runs_from_the_grant() {
    let _alone = alone();
    let server = Server::start();
    let waiting = handed_over_late(&server, "x", |b| async move {
        b.try_lock("x", Duration::from_secs(10), Some(LEASE)).await
    })
    .await;
    let granted = Instant::now();
    let b = handed_to(waiting).await;
    assert_eq!(b.is_lost(), None, "a fresh grant is not lost");
    let why = tokio::time::timeout(LEASE * 2, b.lost())
        .await
        .expect("the lease ends");
    let after = granted.elapsed();
    assert_eq!(why, Lost::LeaseExpired);
    assert!(
        after >= LEASE - Duration::from_millis(100) && after <= LEASE + Duration::from_millis(100),
        "told {after:?} after the grant; lease {LEASE:?}"
    );
    assert!(matches!(b.unlock().await, Err(LockError::NotHeld { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multilock_part_handed_over_late_is_held() {
    let _alone = alone();
    let server = Server::start();
    let waiting = handed_over_late(&server, "y", |b| async move {
        MultiLock::new([(b.clone(), "x"), (b, "y")])
            .expect("multilock")
            .lock()
            .await
    })
    .await;
    let both = waiting.await.expect("task").expect("b locks both");
    assert_eq!(both.is_lost(), None, "a fresh grant is not lost");
    stays_held(&server, "y", "b", || both.is_lost().map(|(_, why)| why)).await;
    both.unlock().await.expect("b's unlock releases both");
    assert!(!exists(&mut server.connection(), "x"));
    assert!(!exists(&mut server.connection(), "y"));
}

#[test]
fn the_blocking_api_handed_over_late_is_held() {
    let _alone = alone();
    let server = Server::start();
    let client = || redis::Client::open(server.url()).expect("url");
    let locks = blocking::LockClient::with_options(client(), options()).expect("client");
    let a = locks.as_owner("a").lock("x").expect("a locks");
    let b_locks = locks.as_owner("b");
    let waiting = std::thread::spawn(move || b_locks.lock("x"));
    poll_until(Duration::from_secs(5), "b queued", || {
        waiter_owners(&server, "x") == ["b"]
    });
    std::thread::sleep(LEASE * 3 / 2);
    a.unlock().expect("a unlocks");
    let b = waiting.join().expect("thread").expect("b locks");
    assert_eq!(b.is_lost(), None, "a fresh grant is not lost");
    std::thread::sleep(LEASE * 2);
    assert_eq!(b.is_lost(), None);
    assert!(holder_is(&mut server.connection(), "x", "b"));
    b.unlock().expect("b's unlock releases it");
    assert!(!exists(&mut server.connection(), "x"));
}
