//! Synced grants (`LOCK.ACQUIRE ... SYNC n timeout-ms`, `Options::sync`):
//! answered once replicas acknowledged them, otherwise undone by the module
//! and reported as `LockError::NotSynced`, with the lock not held.
// `alone()` (a std mutex) serialises the timing-sensitive tests of this
// binary; holding it across awaits blocks only the other tests' threads.
#![allow(clippy::await_holding_lock)]

use crate::support;

use std::time::{Duration, Instant};

use redis_lock_client::{blocking, LockError, Options};
use redis_lock_test_support::*;
use support::{client_on, handed_to};

const SYNC_TIMEOUT: Duration = Duration::from_millis(300);

fn synced() -> Options {
    Options::default().sync_replicas(1, SYNC_TIMEOUT)
}

/// A master with the module and one replica of it.
fn master_and_replica() -> (Server, Server) {
    let master = Server::start();
    let replica = Server::start();
    replica.replicaof(&master);
    // `replicaof` returns with the link up, but a master fed by a diskless
    // sync streams to the replica only after the replica's first periodic
    // acknowledgement (up to a second later): until then nothing is
    // acknowledged. One synced grant with a long timeout waits for that, so
    // the tests' own grants take a replica round trip.
    let warm_up: redis::Value = redis::cmd("LOCK.ACQUIRE")
        .arg("warm-up")
        .arg("harness")
        .arg(1000)
        .arg("SYNC")
        .arg(1)
        .arg(5000)
        .query(&mut master.connection())
        .expect("a synced grant with a live replica");
    assert_eq!(warm_up, redis::Value::Nil, "granted");
    (master, replica)
}

/// A frozen replica (SIGSTOP) is thawed even when the test fails.
struct Frozen<'a>(&'a Server);

impl<'a> Frozen<'a> {
    fn new(server: &'a Server) -> Frozen<'a> {
        server.signal("STOP");
        Frozen(server)
    }
}

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        self.0.signal("CONT");
    }
}

/// Waits until `key` is free again: the module answers `NOSYNC` first and
/// undoes the grant on its next timer tick (about a millisecond later).
async fn undone(server: &Server, key: &str) {
    let what = format!("the grant of {key} was undone");
    eventually(Duration::from_millis(100), &what, || {
        !exists(&mut server.connection(), key)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synced_grant_succeeds_with_a_live_replica_through_every_api() {
    let (master, replica) = master_and_replica();
    let locks = client_on(master.port, synced());
    let guard = locks.lock("s").await.expect("lock");
    // Answered after the replica acknowledged it: the replica has it now.
    assert!(holder_is(&mut replica.connection(), "s", guard.owner()));
    guard.unlock().await.expect("unlock");

    let guard = locks
        .try_lock("s", Duration::ZERO, Some(Duration::from_secs(5)))
        .await
        .expect("try_lock")
        .expect("free");
    assert!(holder_is(&mut replica.connection(), "s", guard.owner()));
    guard.unlock().await.expect("unlock");

    let guard = locks.lock_fenced("s").await.expect("lock_fenced");
    assert!(guard.token() > 0);
    assert!(holder_is(&mut replica.connection(), "s", guard.owner()));
    guard.unlock().await.expect("unlock");

    // A hand-off after a wait is synced too.
    let holder = locks.as_owner("holder").lock("s").await.expect("holder");
    let waiting = {
        let waiter = locks.as_owner("waiter");
        tokio::spawn(async move { waiter.try_lock("s", Duration::from_secs(5), None).await })
    };
    queue_becomes(&master, "s", &["waiter"]).await;
    holder.unlock().await.expect("holder unlocks");
    let guard = handed_to(waiting).await;
    assert!(holder_is(&mut replica.connection(), "s", "waiter"));
    guard.unlock().await.expect("unlock");

    let blocking = {
        let url = master.url();
        std::thread::spawn(move || {
            let locks = blocking::LockClient::with_options(
                redis::Client::open(url).expect("url"),
                synced(),
            )
            .expect("client");
            let guard = locks.lock("s").expect("blocking lock");
            let owner = guard.owner().to_string();
            guard.unlock().expect("unlock");
            owner
        })
        .join()
        .expect("blocking thread")
    };
    assert!(blocking.contains(':'));
}

/// The replica is frozen: the grant is not acknowledged, the module undoes
/// it, and the caller is told the lock is not held; the lock is free. The
/// client's reply deadline (200 ms) is shorter than the sync timeout
/// (300 ms): it must wait for the module's answer, not give up before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unacknowledged_grant_is_undone_and_reported_not_held() {
    let _alone = alone();
    let (master, replica) = master_and_replica();
    let options = synced().command_timeout(Duration::from_millis(200));
    let locks = client_on(master.port, options.clone());
    let frozen = Frozen::new(&replica);

    let started = Instant::now();
    let err = locks.lock("s").await.expect_err("not synced");
    let took = started.elapsed();
    match &err {
        LockError::NotSynced { name, detail, .. } => {
            assert_eq!(name, "s");
            assert!(detail.starts_with("NOSYNC"), "{detail}");
            let cause = std::error::Error::source(&err).map(|e| e.to_string());
            assert!(cause.is_some_and(|c| c.contains("NOSYNC")), "{err:?}");
        }
        other => panic!("expected NotSynced, got {other:?}"),
    }
    assert!(err.to_string().contains("NOT held"), "{err}");
    assert!(err.is_transient());
    // The module's deadline is in whole ms of its (cached) clock: allow a
    // few ms early.
    assert!(
        took >= SYNC_TIMEOUT - Duration::from_millis(10)
            && took < SYNC_TIMEOUT + Duration::from_secs(1),
        "answered after {took:?}"
    );
    undone(&master, "s").await;

    // try_lock and the fenced API report it the same way.
    assert!(matches!(
        locks.try_lock("s", Duration::ZERO, None).await,
        Err(LockError::NotSynced { .. })
    ));
    undone(&master, "s").await;
    assert!(matches!(
        locks.lock_fenced("s").await,
        Err(LockError::NotSynced { .. })
    ));
    undone(&master, "s").await;

    // A client that opts out for its calls (SYNC 0 0) still locks.
    let unsynced = client_on(
        master.port,
        Options::default().sync_replicas(0, Duration::ZERO),
    );
    let guard = unsynced.lock("s").await.expect("lock without sync");
    guard.unlock().await.expect("unlock");
    drop(frozen);
}

/// A hand-off to a synced waiter that is not acknowledged: the waiter is
/// told it does not hold the lock, and the lock goes on to the next waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unacknowledged_hand_off_is_undone_and_the_lock_handed_on() {
    let _alone = alone();
    let (master, replica) = master_and_replica();
    let synced_locks = client_on(master.port, synced());
    let plain = client_on(
        master.port,
        Options::default().sync_replicas(0, Duration::ZERO),
    );
    let holder = plain.as_owner("holder").lock("s").await.expect("holder");
    let frozen = Frozen::new(&replica);
    let first = {
        let waiter = synced_locks.as_owner("synced");
        tokio::spawn(async move { waiter.try_lock("s", Duration::from_secs(5), None).await })
    };
    queue_becomes(&master, "s", &["synced"]).await;
    let second = {
        let waiter = plain.as_owner("next");
        tokio::spawn(async move { waiter.try_lock("s", Duration::from_secs(5), None).await })
    };
    queue_becomes(&master, "s", &["synced", "next"]).await;
    holder.unlock().await.expect("holder unlocks");
    match first.await.expect("task") {
        Err(LockError::NotSynced { name, .. }) => assert_eq!(name, "s"),
        other => panic!("expected NotSynced, got {other:?}"),
    }
    let next = handed_to(second).await;
    assert!(holder_is(&mut master.connection(), "s", "next"));
    next.unlock().await.expect("unlock");
    drop(frozen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_without_a_timeout_is_refused_before_anything_is_sent() {
    let err = redis_lock_client::LockClient::with_options(
        redis::Client::open("redis://127.0.0.1:1/").expect("url"),
        Options::default().sync_replicas(1, Duration::ZERO),
    )
    .expect_err("refused");
    assert!(matches!(err, LockError::InvalidArgument(_)), "{err:?}");
}
