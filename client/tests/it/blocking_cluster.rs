//! The blocking API, and the client on a Redis Cluster.

use crate::support;

use std::time::{Duration, Instant};

use redis::Value;
use redis_lock_client::{blocking, LockClient, Lost, Options};
use redis_lock_test_support::*;
use support::handed_to;

#[test]
fn the_blocking_api_locks_per_thread_and_its_watchdog_runs_alone() {
    let server = Server::start();
    let url = server.url();
    let options = Options::default().watchdog_lease(Duration::from_millis(600));
    let locks = blocking::LockClient::with_options(redis::Client::open(url).expect("url"), options)
        .expect("client");
    let guard = locks.lock("k").expect("lock");
    assert_eq!(guard.owner(), locks.owner());
    assert!(
        !guard.owner().contains("task-"),
        "a thread owner: {}",
        guard.owner()
    );
    // Another thread is another owner.
    let other = {
        let locks = locks.clone();
        std::thread::spawn(move || {
            locks
                .try_lock("k", Duration::ZERO, None)
                .expect("try")
                .is_none()
        })
        .join()
        .expect("thread")
    };
    assert!(other, "another thread is excluded");
    // This thread sleeps (no runtime calls); the watchdog renews anyway.
    std::thread::sleep(Duration::from_millis(2000));
    assert!(guard.is_held().expect("is_held"));
    assert_eq!(guard.is_lost(), None);
    let again = locks.lock("k").expect("re-enter");
    assert_eq!(again.hold_count(), 2);
    drop(again); // released before drop returns
    assert_eq!(
        holders(&mut server.connection(), "k"),
        vec![(locks.owner(), "1".to_string())]
    );

    assert_eq!(force(&mut server.connection(), "k"), 1);
    assert_eq!(guard.wait_lost(Duration::from_secs(2)), Some(Lost::NotHeld));
    assert!(matches!(
        guard.unlock(),
        Err(redis_lock_client::LockError::NotHeld { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_client_routes_every_lock_command_to_the_keys_node() {
    let nodes = Cluster::start().nodes;
    let urls: Vec<String> = nodes.iter().map(|n| n.url()).collect();
    let locks = LockClient::cluster_with_options(
        redis::cluster::ClusterClient::new(urls).expect("cluster client"),
        Options::default().watchdog_lease(Duration::from_millis(900)),
    )
    .expect("client");
    assert!(locks.is_cluster());

    let mut guards = Vec::new();
    let mut per_node = std::collections::HashMap::new();
    for i in 0..30 {
        let key = format!("lock:{i}");
        let guard = locks.lock(&key).await.expect("lock");
        // Exactly one node has it, and the others redirect.
        let holders: Vec<u16> = nodes
            .iter()
            .filter(|n| {
                matches!(
                    redis::cmd("HEXISTS")
                        .arg(&key)
                        .arg(guard.owner())
                        .query::<Value>(&mut n.connection()),
                    Ok(Value::Int(1))
                )
            })
            .map(|n| n.port)
            .collect();
        assert_eq!(holders.len(), 1, "{key} on one node: {holders:?}");
        *per_node.entry(holders[0]).or_insert(0) += 1;
        guards.push(guard);
    }
    assert_eq!(per_node.len(), 3, "keys on every node: {per_node:?}");

    // The watchdog renews on every node.
    let started = Instant::now();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    for guard in &guards {
        assert_eq!(
            guard.is_lost(),
            None,
            "{} after {:?}",
            guard.name(),
            started.elapsed()
        );
        assert!(guard.is_held().await.expect("is_held"));
    }

    // Waiting on a dedicated connection, on the key's node.
    let waiting = {
        let locks = locks.as_owner("waiter");
        tokio::spawn(async move {
            locks
                .try_lock("lock:7", Duration::from_secs(10), None)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    for guard in guards {
        guard.unlock().await.expect("unlock");
    }
    let got = handed_to(waiting).await;
    assert_eq!(got.owner(), "waiter");
    assert!(locks.force_unlock("lock:7").await.expect("force"));
    assert_eq!(got.lost().await, Lost::NotHeld);
}

#[test]
fn the_blocking_api_takes_fenced_locks_with_a_wait_and_a_lease() {
    let server = Server::start();
    let client = || redis::Client::open(server.url()).expect("url");
    let locks = blocking::LockClient::new(client()).expect("client");
    assert!(!locks.is_cluster());
    let a = locks.as_owner("a");
    let b = locks.as_owner("b");

    let first = a
        .try_lock_fenced("stock", Duration::ZERO, None)
        .expect("try")
        .expect("free");
    let t1 = first.token();
    assert!(b
        .try_lock_fenced("stock", Duration::ZERO, None)
        .expect("try")
        .is_none());
    // A waiter is handed the lock, with a larger token.
    let waiting = {
        let b = b.clone();
        std::thread::spawn(move || b.try_lock_fenced("stock", Duration::from_secs(10), None))
    };
    poll_until(Duration::from_secs(5), "b waits", || {
        waiter_owners(&server, "stock") == ["b"]
    });
    first.unlock().expect("unlock");
    let handed = waiting
        .join()
        .expect("thread")
        .expect("wait")
        .expect("granted");
    assert!(handed.token() > t1);
    handed.unlock().expect("unlock");

    // With a lease: no watchdog, lost when it ends.
    let leased = a
        .try_lock_fenced("stock", Duration::ZERO, Some(Duration::from_millis(300)))
        .expect("try")
        .expect("free");
    assert!(leased.token() > 0);
    assert_eq!(
        leased.wait_lost(Duration::from_secs(5)),
        Some(Lost::LeaseExpired)
    );
    // A name whose counter cannot share its slot: refused before sending.
    assert!(matches!(
        a.try_lock_fenced("a{b", Duration::ZERO, None),
        Err(redis_lock_client::LockError::InvalidArgument(_))
    ));
}

#[test]
fn the_blocking_cluster_client_takes_options() {
    let nodes = Cluster::start().nodes;
    let urls: Vec<String> = nodes.iter().map(|n| n.url()).collect();
    let lease = Duration::from_millis(900);
    let locks = blocking::LockClient::cluster_with_options(
        redis::cluster::ClusterClient::new(urls).expect("cluster client"),
        Options::default().watchdog_lease(lease),
    )
    .expect("client");
    assert!(locks.is_cluster());
    let guards: Vec<_> = (0..6)
        .map(|i| locks.lock(&format!("lock:{i}")).expect("lock"))
        .collect();
    for guard in &guards {
        // The option's lease, not the default 30 s.
        let left = guard.remaining_lease().expect("pttl").expect("held");
        assert!(left <= lease, "{}: {left:?}", guard.name());
    }
    // This thread sleeps past the lease; the watchdog renews on every node.
    std::thread::sleep(lease * 2);
    for guard in &guards {
        assert_eq!(guard.is_lost(), None, "{}", guard.name());
        assert!(guard.is_held().expect("is_held"));
    }
    let fenced = locks
        .try_lock_fenced("{stock}:1", Duration::ZERO, None)
        .expect("try")
        .expect("free");
    assert!(fenced.token() > 0);
    fenced.unlock().expect("unlock");
    for guard in guards {
        guard.unlock().expect("unlock");
    }
}
