//! The library against real servers with the module: guards, re-entry, the
//! watchdog, the lost signal, expiry hand-off, waiting, Redisson interop.
// `alone()` (a std mutex) serialises the timing-sensitive tests of this
// binary. Each #[tokio::test] runs its own runtime on its own test thread,
// so holding that guard across awaits blocks only the other tests' threads,
// which is its purpose.
#![allow(clippy::await_holding_lock)]

use crate::support;

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;
use redis_lock_client::{LockError, Lost, Options};
use redis_lock_test_support::redisson::{script_acquire, script_unlock, ACQUIRE_HINCRBY};
use redis_lock_test_support::*;
use support::{client_on, granted, handed_to, refused, server_with_client};

fn options() -> Options {
    Options::default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_holds_re_enters_and_releases_on_unlock_and_on_drop() {
    let (server, locks) = server_with_client(options());
    let mut con = server.connection();

    let first = locks.lock("order:42").await.expect("lock");
    let owner = first.owner().to_string();
    assert!(
        owner.starts_with(locks.id()),
        "owner {owner} is <client id>:..."
    );
    // The test's body runs outside any task: the thread is the owner.
    assert!(!owner.contains(":task-"), "{owner}");
    let in_task = {
        let locks = locks.clone();
        tokio::spawn(async move { locks.owner() })
            .await
            .expect("task")
    };
    assert!(
        in_task.starts_with(&format!("{}:task-", locks.id())),
        "inside a task, the task is the owner: {in_task}"
    );
    assert_eq!(holders(&mut con, "order:42"), owned_by(&owner));
    assert!(first.is_held().await.expect("is_held"));
    assert!(locks.is_locked("order:42").await.expect("is_locked"));
    let lease = first
        .remaining_lease()
        .await
        .expect("pttl")
        .expect("a lease");
    assert!(lease > Duration::from_secs(25) && lease <= Duration::from_secs(30));

    // Re-entry: the same task, a second guard, count 2.
    let second = locks.lock("order:42").await.expect("re-enter");
    assert_eq!(second.hold_count(), 2);
    assert_eq!(
        holders(&mut con, "order:42"),
        vec![(owner.clone(), "2".to_string())]
    );
    // Another owner is excluded.
    let other = locks.as_owner("someone-else");
    refused(other.try_lock("order:42", Duration::ZERO, None)).await;

    second.unlock().await.expect("unlock one hold");
    assert_eq!(
        holders(&mut con, "order:42"),
        vec![(owner.clone(), "1".to_string())]
    );
    drop(first); // released in the background
    eventually(Duration::from_secs(5), "the dropped guard released", || {
        !exists(&mut con, "order:42")
    })
    .await;
    assert!(!locks.is_locked("order:42").await.expect("is_locked"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_task_is_its_own_owner_and_an_explicit_owner_is_used_as_given() {
    let (server, locks) = server_with_client(options());
    let guard = locks.lock("k").await.expect("lock");
    let other_task = {
        let locks = locks.clone();
        tokio::spawn(async move { locks.try_lock("k", Duration::ZERO, None).await })
    };
    assert!(
        other_task.await.expect("task").expect("try").is_none(),
        "another task of the same client is another owner"
    );
    guard.unlock().await.expect("unlock");

    let worker = locks.as_owner("worker-7");
    let guard = worker.lock("k").await.expect("lock");
    assert_eq!(guard.owner(), "worker-7");
    assert!(holder_is(&mut server.connection(), "k", "worker-7"));
    guard.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_lock_for_three_times_its_lease() {
    let _alone = alone();
    let lease = Duration::from_millis(900);
    let (server, locks) = server_with_client(options().watchdog_lease(lease));
    let mut con = server.connection();
    let guard = locks.lock("job").await.expect("lock");
    let owner = guard.owner().to_string();
    let started = Instant::now();
    let rival = client_on(server.port, options());
    while started.elapsed() < lease * 3 + lease / 2 {
        // "Working": the lock must stay ours all along.
        assert!(
            holder_is(&mut con, "job", &owner),
            "held at {:?}",
            started.elapsed()
        );
        refused(rival.try_lock("job", Duration::ZERO, Some(Duration::from_secs(1)))).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(guard.is_lost(), None);
    let ttl = pttl(&mut con, "job");
    assert!(
        ttl > 0 && ttl <= 900,
        "renewed to the watchdog lease: {ttl}"
    );
    guard.unlock().await.expect("unlock");
    assert!(!exists(&mut con, "job"));
}

/// An unlock whose caller stops waiting for it (a timeout, a `select!`)
/// still frees the lock and stops its renewals: it runs on the client's
/// runtime, not in the caller's future.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_its_caller_stops_waiting_for_still_frees_the_lock() {
    let (server, locks) = server_with_client(options().watchdog_lease(Duration::from_millis(600)));
    let mut con = server.connection();
    let guard = locks.lock("cut").await.expect("lock");
    // Polled once, then dropped (its reply cannot have come back to the
    // caller's task in that one poll; the task it started may be done).
    let unlock = guard.unlock();
    tokio::pin!(unlock);
    tokio::select! {
        biased;
        _ = &mut unlock => {}
        () = std::future::ready(()) => {}
    }
    eventually(Duration::from_secs(2), "the lock is free", || {
        !exists(&mut con, "cut")
    })
    .await;
    // And the client forgot it: its watchdog (every 200 ms) renews nothing.
    let renewals = calls(&server, "lock.renew");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(calls(&server, "lock.renew"), renewals, "renewed no more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_lock_is_signalled_to_its_holder_within_a_third_of_the_lease() {
    let _alone = alone();
    let lease = Duration::from_millis(1500);
    let (server, locks) = server_with_client(options().watchdog_lease(lease));
    for round in 0..3 {
        let guard = locks.lock("ledger").await.expect("lock");
        // Force at different points of the renewal period.
        tokio::time::sleep(Duration::from_millis(137 * round)).await;
        let forced_at = Instant::now();
        assert_eq!(force(&mut server.connection(), "ledger"), 1);
        let why = tokio::time::timeout(lease, guard.lost())
            .await
            .expect("lost() fires within the lease");
        let after = forced_at.elapsed();
        assert_eq!(why, Lost::NotHeld);
        assert!(
            after <= lease / 3 + Duration::from_millis(250),
            "round {round}: told {after:?} after the force; a renewal runs every {:?}",
            lease / 3
        );
        assert_eq!(guard.is_lost(), Some(Lost::NotHeld));
        match guard.unlock().await {
            Err(LockError::NotHeld { name }) => assert_eq!(name, "ledger"),
            other => panic!("unlock of a forced lock: {other:?}"),
        }
    }
}

/// The server stops answering (frozen with SIGSTOP): renewals fail, and the
/// holder is told once the lease has passed since the last renewal that
/// succeeded, not later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_failing_until_the_lease_passed_mark_the_lock_lost() {
    let _alone = alone();
    let server = Server::start();
    let lease = Duration::from_millis(900);
    let options = options()
        .watchdog_lease(lease)
        .command_timeout(Duration::from_millis(200));
    let locks = client_on(server.port, options);
    let guard = locks.lock("frozen").await.expect("lock");
    tokio::time::sleep(lease / 2).await; // a renewal or so
    server.signal("STOP");
    let stopped = Instant::now();
    let told = tokio::time::timeout(lease * 3, guard.lost()).await;
    let after = stopped.elapsed();
    server.signal("CONT");
    let why = told.unwrap_or_else(|_| {
        panic!(
            "not told within three leases; is_lost {:?}, holds {}",
            guard.is_lost(),
            guard.hold_count()
        )
    });
    assert!(matches!(why, Lost::RenewalFailed(_)), "{why:?}");
    assert!(
        after >= lease / 2 && after <= lease + Duration::from_millis(200),
        "told {after:?} after the server froze; lease {lease:?}"
    );
    eventually(Duration::from_secs(3), "the server let it expire", || {
        !exists(&mut server.connection(), "frozen")
    })
    .await;
}

/// The holder's runtime (its process, as far as the lock can tell) dies
/// without unlocking: the watchdog stops, the lease runs out, and the waiter
/// queued in the server gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_holder_frees_the_lock_after_its_lease_and_the_queued_waiter_gets_it() {
    let _alone = alone();
    let server = Server::start();
    let lease = Duration::from_millis(1000);
    let port = server.port;
    let died_at = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("holder runtime");
        let guard = runtime.block_on(async move {
            let holder = client_on(port, Options::default().watchdog_lease(lease));
            let guard = holder.lock("printer").await.expect("holder locks");
            // Working, renewed twice.
            tokio::time::sleep(lease).await;
            guard
        });
        std::mem::forget(guard); // no unlock, ever
        runtime.shutdown_background(); // the process is gone
        Instant::now()
    })
    .join()
    .expect("holder thread");

    let waiter = client_on(server.port, options());
    let got = waiter.lock("printer").await.expect("the waiter locks");
    let waited = died_at.elapsed();
    assert!(holder_is(&mut server.connection(), "printer", got.owner()));
    assert!(
        waited <= lease + Duration::from_millis(500),
        "granted {waited:?} after the holder died, lease {lease:?}"
    );
    got.unlock().await.expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_queues_in_the_server_and_is_handed_the_lock() {
    let (server, locks) = server_with_client(options());
    let holder = locks.as_owner("holder").lock("q").await.expect("lock");
    let waiting = {
        let locks = locks.clone();
        tokio::spawn(async move {
            locks
                .as_owner("waiter")
                .try_lock("q", Duration::from_secs(10), None)
                .await
        })
    };
    queue_becomes(&server, "q", &["waiter"]).await;
    holder.unlock().await.expect("unlock");
    let guard = handed_to(waiting).await;
    assert!(holder_is(&mut server.connection(), "q", "waiter"));
    guard.unlock().await.expect("unlock");

    // A wait that runs out answers None on time.
    let _held = locks.as_owner("holder").lock("q").await.expect("lock");
    let started = Instant::now();
    let none = locks
        .as_owner("waiter")
        .try_lock("q", Duration::from_millis(300), None)
        .await
        .expect("try");
    assert!(none.is_none());
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(1500),
        "{took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_given_by_the_caller_is_not_renewed_and_its_end_is_signalled() {
    let (server, locks) = server_with_client(options());
    let guard = granted(
        locks.try_lock("lease", Duration::ZERO, Some(Duration::from_millis(400))),
        "free",
    )
    .await;
    let ttl = pttl(&mut server.connection(), "lease");
    assert!(ttl > 0 && ttl <= 400, "{ttl}");
    let why = tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("the lease ends");
    assert_eq!(why, Lost::LeaseExpired);
    eventually(Duration::from_secs(2), "the server freed it", || {
        !exists(&mut server.connection(), "lease")
    })
    .await;
    assert!(matches!(
        guard.unlock().await,
        Err(LockError::NotHeld { .. })
    ));
}

/// Redisson's stock scenario through the library: stock 90, 100 tasks
/// (each its own owner) buy one each under the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_hundred_tasks_sell_exactly_the_stock_and_never_below_zero() {
    let _alone = alone();
    let (server, locks) = server_with_client(options());
    let mut setup = server.connection();
    set(&mut setup, "MoonCakeStock", 90);
    let sold = Arc::new(AtomicUsize::new(0));
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let lowest = Arc::new(AtomicI64::new(90));
    let buyers: Vec<_> = (0..100)
        .map(|_| {
            let (locks, sold, inside, overlaps, lowest) = (
                locks.clone(),
                sold.clone(),
                inside.clone(),
                overlaps.clone(),
                lowest.clone(),
            );
            let url = server.url();
            tokio::spawn(async move {
                let mut stock = redis::Client::open(url)
                    .expect("url")
                    // No response timeout, as redis 0.27 had (1.x: 500 ms).
                    .get_multiplexed_async_connection_with_config(
                        &redis::AsyncConnectionConfig::new().set_response_timeout(None),
                    )
                    .await
                    .expect("stock connection");
                let guard = locks.lock("MoonCake").await.expect("lock");
                if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                let left: i64 = redis::cmd("GET")
                    .arg("MoonCakeStock")
                    .query_async(&mut stock)
                    .await
                    .expect("GET");
                if left > 0 {
                    tokio::task::yield_now().await;
                    let now: i64 = redis::cmd("SET")
                        .arg("MoonCakeStock")
                        .arg(left - 1)
                        .query_async::<()>(&mut stock)
                        .await
                        .map(|()| left - 1)
                        .expect("SET");
                    lowest.fetch_min(now, Ordering::SeqCst);
                    sold.fetch_add(1, Ordering::SeqCst);
                }
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.expect("unlock");
            })
        })
        .collect();
    for buyer in buyers {
        buyer.await.expect("buyer task");
    }
    let left: i64 = redis::cmd("GET")
        .arg("MoonCakeStock")
        .query(&mut setup)
        .expect("GET");
    assert_eq!(sold.load(Ordering::SeqCst), 90);
    assert_eq!(left, 0);
    assert_eq!(lowest.load(Ordering::SeqCst), 0, "never below zero");
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "one buyer at a time");
    assert!(!exists(&mut setup, "MoonCake"));
}

/// A lock taken through the library excludes one taken with Redisson's
/// scripts, and the reverse; an owner shared with a Redisson application
/// re-enters what its scripts took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn library_and_redisson_scripts_exclude_each_other() {
    let (server, locks) = server_with_client(options());
    let mut con = server.connection();

    let guard = locks.lock("shared").await.expect("lock");
    let reply = script_acquire(&mut con, ACQUIRE_HINCRBY, b"shared", "redisson:1", 30_000);
    assert!(matches!(reply, Value::Int(ttl) if ttl > 0), "{reply:?}");
    guard.unlock().await.expect("unlock");
    assert_eq!(
        script_acquire(&mut con, ACQUIRE_HINCRBY, b"shared", "redisson:1", 30_000),
        Value::Nil
    );
    refused(locks.try_lock("shared", Duration::from_millis(100), None)).await;
    // The same owner id as the Redisson thread re-enters.
    let same = granted(
        locks
            .as_owner("redisson:1")
            .try_lock("shared", Duration::ZERO, None),
        "re-entered",
    )
    .await;
    assert_eq!(
        holders(&mut con, "shared"),
        vec![("redisson:1".to_string(), "2".to_string())]
    );
    same.unlock().await.expect("unlock");
    assert_eq!(
        script_unlock(&mut con, b"shared", "redisson:1", 30_000),
        Value::Int(1)
    );
    assert!(!exists(&mut con, "shared"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_and_bad_arguments_are_reported() {
    let (server, locks) = server_with_client(options());
    assert!(!locks.force_unlock("nothing").await.expect("force"));
    let _guard = locks.as_owner("a").lock("x").await.expect("lock");
    assert!(locks.force_unlock("x").await.expect("force"));
    assert!(matches!(
        locks
            .try_lock("x", Duration::ZERO, Some(Duration::from_micros(10)))
            .await,
        Err(LockError::InvalidArgument(_))
    ));
    // A wait too long for the clock is a wait without end, not a panic.
    let guard = granted(
        locks.as_owner("b").try_lock("free", Duration::MAX, None),
        "free",
    )
    .await;
    guard.unlock().await.expect("unlock");
    let multi = redis_lock_client::MultiLock::new([(locks.clone(), "free")]).expect("multi");
    let all = granted(multi.try_lock(Duration::MAX, None), "free").await;
    all.unlock().await.expect("unlock");
    set(&mut server.connection(), "not-a-hash", 1);
    match locks.lock("not-a-hash").await {
        Err(LockError::Server(e)) => assert_eq!(e.code(), Some("WRONGTYPE")),
        other => panic!("{other:?}"),
    }
}

/// A lease over 100 years is refused by the client before anything is
/// sent, as the module refuses it (`args::MAX_LEASE_MS`), in its words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_over_100_years_are_refused_before_sending_as_the_module_does() {
    let (server, locks) = server_with_client(options());
    let mut con = server.connection();
    let century = Duration::from_millis(3_155_760_000_000);
    let module = redis::cmd("LOCK.ACQUIRE")
        .arg("x")
        .arg("o")
        .arg(century.as_millis() as u64 + 1)
        .query::<Value>(&mut con);
    let module = expect_err(module, "ERR", "at most", "a lease of 100 years and 1 ms");
    let words = module.trim_start_matches("ERR ");
    let acquires = || server.command_stats().get("lock.acquire").copied();
    let sent = acquires();
    for lease in [century + Duration::from_millis(1), Duration::MAX] {
        match locks.try_lock("x", Duration::ZERO, Some(lease)).await {
            Err(LockError::InvalidArgument(text)) => {
                assert!(text.contains(words), "{text:?} says {words:?}")
            }
            other => panic!("{lease:?}: expected InvalidArgument, got {other:?}"),
        }
    }
    assert_eq!(acquires(), sent, "nothing was sent");
    let watchdog = redis_lock_client::LockClient::with_options(
        redis::Client::open(server.url()).expect("url"),
        options().watchdog_lease(century + Duration::from_secs(1)),
    );
    assert!(matches!(watchdog, Err(LockError::InvalidArgument(_))));
    // 100 years exactly is a lease like any other.
    let guard = granted(locks.try_lock("x", Duration::ZERO, Some(century)), "free").await;
    guard.unlock().await.expect("unlock");
}
