//! `lock_fenced`: every grant carries the module's fencing token, tokens only
//! grow (re-entry, hand-off, a lost reply), and `LOCK.FENCE` on the
//! resource's side refuses a holder whose lock was taken over.

use crate::support;

use std::time::Duration;

use redis_lock_client::Options;
use redis_lock_test_support::*;
use support::{handed_to, refused_then_waiting, server_with_client, through_proxy};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_grants_carry_growing_tokens() {
    let (server, locks) = server_with_client(Options::default());
    let a = locks.as_owner("a");
    let b = locks.as_owner("b");

    let first = a.lock_fenced("stock").await.expect("lock");
    let t1 = first.token();
    assert!(t1 > 0);
    let again = a.lock_fenced("stock").await.expect("re-enter");
    let t2 = again.token();
    assert!(t2 > t1, "re-entry raises the token: {t1} then {t2}");

    // A waiter handed the lock gets its own, larger token.
    let waiting = refused_then_waiting(&b, |b, wait| async move {
        b.try_lock_fenced("stock", wait, None).await
    })
    .await;
    queue_becomes(&server, "stock", &["b"]).await;
    again.unlock().await.expect("unlock");
    first.unlock().await.expect("unlock");
    let handed = handed_to(waiting).await;
    let t3 = handed.token();
    assert!(t3 > t2, "hand-off: {t2} then {t3}");

    // A plain lock has no token.
    let plain = a
        .try_lock("other", Duration::ZERO, None)
        .await
        .expect("try")
        .expect("free");
    assert_eq!(plain.token(), None);
    plain.unlock().await.expect("unlock");
    handed.unlock().await.expect("unlock");
}

/// A fenced acquire whose reply was lost: the grant is adopted and its
/// token read back from the counter, the same the server issued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_grant_whose_reply_was_lost_keeps_its_token() {
    let (server, proxy, locks) = through_proxy("o");
    proxy.cut_after("TOKEN");
    let guard = locks
        .lock_fenced("stock")
        .await
        .expect("lock despite the cut");
    let counter = counter(&mut server.connection(), "stock").expect("a counter");
    assert_eq!(guard.token(), counter);
    assert_eq!(holders(&mut server.connection(), "stock"), owned_by("o"));
    guard.unlock().await.expect("unlock");
}

/// The stock scenario's point: a holder whose lease ran out while it
/// paused, and whose lock someone else took and wrote under, is refused by
/// the resource's fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fence_refuses_a_holder_whose_lock_was_taken_over() {
    let (server, locks) = server_with_client(Options::default());
    let mut con = server.connection();
    let slow = locks
        .as_owner("slow")
        .try_lock_fenced("stock", Duration::ZERO, Some(Duration::from_millis(200)))
        .await
        .expect("try")
        .expect("free");
    let old = slow.token();
    slow.lost().await; // paused past its lease
    let fast = locks
        .as_owner("fast")
        .lock_fenced("stock")
        .await
        .expect("lock");
    let new = fast.token();
    let seen = fence(&mut con, "{stock}:fence", new).expect("the new holder writes");
    assert_eq!(seen, new);
    let stale = fence(&mut con, "{stock}:fence", old);
    expect_err(stale, "STALE", "", "the old holder's late write");
    fast.unlock().await.expect("unlock");
}

/// The client refuses a fenced lock on a name whose counter would land in
/// another cluster slot before sending anything, with the module's rule and
/// the module's words (`protocol::token_key` mirrors `fencing::counter_key`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_the_module_refuses_for_tokens_are_refused_by_the_client_in_its_words() {
    let (server, locks) = server_with_client(Options::default());
    let mut con = server.connection();
    let acquires = || server.command_stats().get("lock.acquire").copied();
    for name in ["a{b", "{}x", "a}b"] {
        let module =
            command(&["LOCK.ACQUIRE", name, "o", "1000", "TOKEN"]).query::<redis::Value>(&mut con);
        let module = expect_err(module, "ERR", "TOKEN needs", name);
        let sent = acquires();
        let client = locks.try_lock_fenced(name, Duration::ZERO, None).await;
        match client {
            Err(redis_lock_client::LockError::InvalidArgument(text)) => {
                assert_eq!(format!("ERR {text}"), module, "{name}");
            }
            other => panic!("{name}: expected InvalidArgument, got {other:?}"),
        }
        let waited = locks
            .try_lock_fenced(name, Duration::from_secs(1), None)
            .await;
        assert!(waited.is_err(), "{name}: {waited:?}");
        assert_eq!(acquires(), sent, "{name}: nothing was sent");
    }
    // The plain API has no counter, and no such rule.
    let plain = locks
        .try_lock("a{b", Duration::ZERO, None)
        .await
        .expect("try")
        .expect("free");
    plain.unlock().await.expect("unlock");
}
