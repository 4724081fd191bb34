//! Waits in pieces that keep their place, and waits given up by a cancel
//! (issue 24; `docs/waiting.md`), against real servers with the module:
//! clients that slice their wait are granted in their order of arrival,
//! ahead of later arrivals with single long waits; a dropped future (a
//! timeout on the client side) cancels its wait with `LOCK.CANCEL`, kills
//! no connection and leaves nothing held or queued, for every kind that
//! waits; a give-up racing a grant ends one way only.
// `alone()` (a std mutex) serialises the timing-sensitive tests of this
// binary; holding it across awaits blocks only the other tests' threads.
#![allow(clippy::await_holding_lock)]

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis_lock_client::{LockClient, Options};
use redis_lock_test_support::*;
use support::{client_on, new_latch, new_permits, new_semaphore};

/// The slicing clients' piece: short, so a few seconds hold many pieces.
const PIECE: Duration = Duration::from_millis(200);

fn sliced() -> Options {
    Options::default().wait_piece(PIECE)
}

/// No connection was killed and no place left kept: a wait given up was
/// cancelled (`LOCK.CANCEL`), not cut.
fn nothing_killed_or_kept(server: &Server) {
    assert_eq!(calls(server, "client|kill"), 0, "no connection killed");
    assert_eq!(stat(server, "lock_places_kept"), 0, "no place kept");
    assert_eq!(stat(server, "lock_kept_places"), 0);
}

/// Waits until the server has nobody waiting and no place kept.
async fn all_gone(server: &Server) {
    eventually(
        Duration::from_secs(5),
        "no waiter or kept place left",
        || stat(server, "lock_waiting_clients") == 0 && stat(server, "lock_kept_places") == 0,
    )
    .await;
}

/// When a race's waiter gives up (after its first try, while it waits)
/// and when the object frees: from 15 ms before to 15 ms after it.
fn race_times(round: u64) -> (Duration, Duration) {
    let give_up = Duration::from_millis(30);
    (give_up, Duration::from_millis(15 + round % 31))
}

/// 4 clients slicing their waits into 200 ms pieces queue first, then 4
/// with single long waits; the lock stays held for many pieces, then goes
/// round. Grants follow first arrival: no slicing client is overtaken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slicing_waiters_are_granted_in_their_order_of_arrival() {
    let _alone = alone();
    let server = Server::start();
    let slicing = client_on(server.port, sliced());
    let long = client_on(
        server.port,
        Options::default().wait_piece(Duration::from_secs(60)),
    );
    let holder = long.as_owner("h").lock("L").await.expect("h locks");
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiting = Vec::new();
    let mut queued: Vec<String> = Vec::new();
    for (client, name) in [(&slicing, "s"), (&long, "a")] {
        for i in 0..4 {
            let owner = format!("{name}{i}");
            let (locks, order) = (client.as_owner(owner.clone()), order.clone());
            waiting.push(tokio::spawn(async move {
                let wait = Duration::from_secs(30);
                let guard = locks.try_lock("L", wait, None).await.expect("wait");
                let guard = guard.expect("granted");
                order.lock().unwrap().push(guard.owner().to_string());
                tokio::time::sleep(Duration::from_millis(20)).await;
                guard.unlock().await.expect("unlock");
            }));
            queued.push(owner);
            let owners: Vec<&str> = queued.iter().map(String::as_str).collect();
            queue_becomes(&server, "L", &owners).await;
        }
    }
    // Several pieces each: every slicing client's place handed on.
    tokio::time::sleep(PIECE * 5).await;
    assert!(
        stat(&server, "lock_waits_continued") >= 4 * 4,
        "pieces continued"
    );
    holder.unlock().await.expect("h unlocks");
    for task in waiting {
        task.await.expect("a waiter");
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(order, queued, "granted in order of arrival");
    all_gone(&server).await;
    nothing_killed_or_kept(&server);
}

/// A future dropped while it waits (a timeout on the client side) cancels
/// the wait: nothing stays queued, kept or held, for the lock, the fenced
/// lock, a read and a write lock, a semaphore, permits and a latch; and
/// what frees afterwards goes to nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_wait_is_cancelled_and_leaves_nothing_held() {
    let _alone = alone();
    let server = Server::start();
    let locks = client_on(server.port, sliced());
    let mut con = server.connection();
    let give_up = Duration::from_millis(500); // past two pieces' hand-over
    let holder = locks.as_owner("h");
    let w = locks.as_owner("w");

    let held = holder.lock("L").await.expect("h locks");
    let waited = tokio::time::timeout(give_up, w.lock("L")).await;
    assert!(waited.is_err(), "still held");
    let waited = tokio::time::timeout(give_up, w.lock_fenced("L")).await;
    assert!(waited.is_err(), "still held");
    all_gone(&server).await;
    held.unlock().await.expect("h unlocks");
    assert!(!exists(&mut con, "L"), "handed to nobody");

    let held = holder.write_lock("RW").await.expect("h writes");
    let waited = tokio::time::timeout(give_up, w.read_lock("RW")).await;
    assert!(waited.is_err(), "still written");
    let waited = tokio::time::timeout(give_up, w.write_lock("RW")).await;
    assert!(waited.is_err(), "still written");
    all_gone(&server).await;
    held.unlock().await.expect("h unlocks");
    assert!(!exists(&mut con, "RW"), "handed to nobody");

    let pool = new_semaphore(&locks, "S", 0).await;
    let waited = tokio::time::timeout(give_up, pool.acquire(1)).await;
    assert!(waited.is_err(), "nothing free");
    let permits = new_permits(&locks, "P", 0).await;
    let waited = tokio::time::timeout(give_up, permits.acquire(1, None)).await;
    assert!(waited.is_err(), "nothing free");
    let latch = new_latch(&locks, "C", 1).await;
    let waited = tokio::time::timeout(give_up, latch.await_zero(None)).await;
    assert!(waited.is_err(), "still closed");
    all_gone(&server).await;
    assert_eq!(pool.release(1).await.expect("release"), 1);
    assert_eq!(permits.add_permits(1).await.expect("add"), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(pool.available_permits().await.expect("available"), 1);
    assert_eq!(permits.available_permits().await.expect("available"), 1);

    assert!(stat(&server, "lock_waits_cancelled") >= 7, "cancelled");
    nothing_killed_or_kept(&server);
}

/// The lock `L`'s holder `h` releases while `w`'s wait is given up, at
/// moments that move across each other; each round ends one way only:
/// `w` was granted and told (it holds `L`, once), or nobody holds `L`.
async fn lock_race(server: &Server, locks: &LockClient, round: u64) {
    let mut con = server.connection();
    let held = locks.as_owner("h").lock("L").await.expect("h locks");
    let w = locks.as_owner("w");
    let (give_up, free_at) = race_times(round);
    let waiting = tokio::spawn(async move { tokio::time::timeout(give_up, w.lock("L")).await });
    tokio::time::sleep(free_at).await;
    held.unlock().await.expect("h unlocks");
    match waiting.await.expect("the waiting task") {
        Ok(guard) => {
            let guard = guard.expect("w locks");
            assert!(holder_is(&mut con, "L", "w"), "w holds L");
            assert_eq!(guard.hold_count(), 1, "granted once");
            assert_eq!(holders(&mut con, "L").len(), 1);
            guard.unlock().await.expect("w unlocks");
        }
        Err(_) => {
            // Given up: a grant that came first is given back.
            eventually(Duration::from_secs(5), "L free", || !exists(&mut con, "L")).await;
        }
    }
    all_gone(server).await;
}

/// The same race for a semaphore of one permit: in the end the permit is
/// back, once (never kept by a caller that left, never counted twice).
async fn semaphore_race(server: &Server, locks: &LockClient, round: u64) {
    let pool = locks.semaphore("S");
    assert!(pool.try_acquire(1).await.expect("take the permit"));
    let ((give_up, free_at), waiter) = (race_times(round), pool.clone());
    let waiting =
        tokio::spawn(async move { tokio::time::timeout(give_up, waiter.acquire(1)).await });
    tokio::time::sleep(free_at).await;
    pool.release(1).await.expect("release");
    if let Ok(granted) = waiting.await.expect("the waiting task") {
        granted.expect("acquired");
        pool.release(1).await.expect("give it back");
    }
    all_gone(server).await;
    // A grant to a caller that left is given back in the background.
    let mut available = 0;
    for _ in 0..100 {
        available = pool.available_permits().await.expect("available");
        if available == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(available, 1, "the permit is back, once (round {round})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_give_up_racing_a_grant_ends_one_way_only() {
    let _alone = alone();
    let server = Server::start();
    let locks = client_on(server.port, sliced());
    new_semaphore(&locks, "S", 1).await;
    for round in 0..100 {
        lock_race(&server, &locks, round).await;
        semaphore_race(&server, &locks, round).await;
    }
    assert!(
        stat(&server, "lock_waits_cancelled") > 20,
        "many were cancelled"
    );
    assert!(
        stat(&server, "lock_waits_granted") > 20,
        "many were granted"
    );
    nothing_killed_or_kept(&server);
}
