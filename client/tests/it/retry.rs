//! Retries that cannot count twice: a TCP proxy between the library and the
//! server cuts the connection right after a command reached the server and
//! ran (its reply is swallowed), or right before (it never ran). The
//! library must end with the hold count the caller believes in.

use crate::support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use redis_lock_client::{LockClient, LockError, LockGuard, Options};
use redis_lock_test_support::*;
use support::{client_on, handed_to, server_with_client, through_proxy, Proxy};
use tokio::task::JoinHandle;

fn count(server: &Server, key: &str, owner: &str) -> Vec<(String, String)> {
    let _ = owner;
    holders(&mut server.connection(), key)
}

/// How many times the server executed `command` (commandstats name).
fn held(owner: &str, n: u64) -> Vec<(String, String)> {
    vec![(owner.to_string(), n.to_string())]
}

/// The control: without the library's check, resending after this cut does
/// leave a hold count of 2, so the tests below can fail.
#[test]
fn a_naive_resend_after_the_cut_counts_twice() {
    let server = Server::start();
    let proxy = Proxy::start(server.port);
    proxy.cut_after("LOCK.ACQUIRE");
    let url = format!("redis://127.0.0.1:{}/", proxy.port);
    let client = redis::Client::open(url).expect("url");
    let mut con = client.get_connection().expect("connect");
    let lost = redis::cmd("LOCK.ACQUIRE")
        .arg("k")
        .arg("naive")
        .arg(30_000)
        .query::<redis::Value>(&mut con);
    assert!(lost.is_err(), "the reply was swallowed: {lost:?}");
    let mut con = client.get_connection().expect("reconnect");
    let _: redis::Value = redis::cmd("LOCK.ACQUIRE")
        .arg("k")
        .arg("naive")
        .arg(30_000)
        .query(&mut con)
        .expect("resend");
    assert_eq!(count(&server, "k", "naive"), held("naive", 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_whose_reply_was_lost_is_not_sent_again() {
    let (server, proxy, locks) = through_proxy("o");
    proxy.cut_after("LOCK.ACQUIRE");
    let guard = locks.lock("k").await.expect("lock despite the cut");
    assert_eq!(proxy.cuts.load(Ordering::SeqCst), 1, "the proxy did cut");
    assert_eq!(count(&server, "k", "o"), held("o", 1));
    assert_eq!(guard.hold_count(), 1);

    // A re-entry cut the same way: 2, not 3.
    proxy.cut_after("LOCK.ACQUIRE");
    let again = locks.lock("k").await.expect("re-enter despite the cut");
    assert_eq!(proxy.cuts.load(Ordering::SeqCst), 2);
    assert_eq!(count(&server, "k", "o"), held("o", 2));

    again.unlock().await.expect("unlock");
    guard.unlock().await.expect("unlock");
    assert!(
        !exists(&mut server.connection(), "k"),
        "two unlocks free it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_that_never_arrived_is_sent_again() {
    let (server, proxy, locks) = through_proxy("o");
    proxy.cut_before("LOCK.ACQUIRE");
    let guard = locks.lock("k").await.expect("lock despite the cut");
    assert_eq!(proxy.cuts.load(Ordering::SeqCst), 1);
    assert_eq!(count(&server, "k", "o"), held("o", 1));
    guard.unlock().await.expect("unlock");
    assert!(!exists(&mut server.connection(), "k"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_reply_was_lost_is_not_sent_again() {
    let (server, proxy, locks) = through_proxy("o");
    let outer = locks.lock("k").await.expect("lock");
    let inner = locks.lock("k").await.expect("re-enter");
    assert_eq!(count(&server, "k", "o"), held("o", 2));

    proxy.cut_after("LOCK.RELEASE");
    inner.unlock().await.expect("unlock despite the cut");
    assert_eq!(proxy.cuts.load(Ordering::SeqCst), 1);
    assert_eq!(
        count(&server, "k", "o"),
        held("o", 1),
        "released once, not twice"
    );

    proxy.cut_before("LOCK.RELEASE");
    outer.unlock().await.expect("unlock despite the cut");
    assert_eq!(proxy.cuts.load(Ordering::SeqCst), 2);
    assert!(
        !exists(&mut server.connection(), "k"),
        "a release that never arrived is resent"
    );
}

/// "holder" takes `k`, talking to `server` directly (not through a proxy);
/// then `waiter` starts waiting for it (up to 20 s) and is queued. The
/// holder's guard and the wait's task.
async fn queued_behind_a_holder(
    server: &Server,
    waiter: LockClient,
) -> (LockGuard, JoinHandle<Result<Option<LockGuard>, LockError>>) {
    let holder = client_on(server.port, Options::default())
        .as_owner("holder")
        .lock("k")
        .await
        .expect("lock");
    let waiting =
        tokio::spawn(async move { waiter.try_lock("k", Duration::from_secs(20), None).await });
    queue_becomes(server, "k", &["waiter"]).await;
    (holder, waiting)
}

/// The connection breaks while the library waits in the server's queue,
/// right as the server grants it the lock: the grant is found and adopted,
/// never leaked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_granted_as_the_waiting_connection_breaks_is_adopted() {
    let (server, proxy, waiter) = through_proxy("waiter");
    grant_at_the_cut_is_adopted(&server, &proxy, waiter).await;
}

/// `holder` takes `k`, `waiter` (talking through `proxy`) waits for it, and
/// the proxy swallows the grant's reply and cuts: the waiter must adopt the
/// lock it was granted, with a hold count of 1.
async fn grant_at_the_cut_is_adopted(server: &Server, proxy: &Proxy, waiter: LockClient) {
    proxy.cut_after("WAIT");
    let (holder, waiting) = queued_behind_a_holder(server, waiter).await;
    holder.unlock().await.expect("unlock");
    // The server hands the lock to the waiter; the proxy swallows the reply
    // and cuts.
    let guard = handed_to(waiting).await;
    assert_eq!(proxy.cuts.load(Ordering::SeqCst), 1);
    assert_eq!(count(server, "k", "waiter"), held("waiter", 1));
    assert!(guard.is_held().await.expect("is_held"));
    guard.unlock().await.expect("unlock");
    assert!(!exists(&mut server.connection(), "k"));
}

/// The waiting connection breaks while the lock is still held by someone
/// else: nothing was granted, so the library waits again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_cut_before_any_grant_waits_again() {
    let (server, proxy, waiter) = through_proxy("waiter");
    proxy.cut_before("WAIT");
    let (holder, waiting) = queued_behind_a_holder(&server, waiter).await;
    assert_eq!(proxy.cuts.load(Ordering::SeqCst), 1);
    holder.unlock().await.expect("unlock");
    let guard = handed_to(waiting).await;
    assert_eq!(count(&server, "k", "waiter"), held("waiter", 1));
    guard.unlock().await.expect("unlock");
}

/// A command stuck in the server (writes paused) when its reply times out:
/// the library kills its connection (`CLIENT KILL ID`) before it looks and
/// resends, so the stuck copy can never run later. After the pause nothing
/// has run: the caller's error ("not taken") is the truth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_stuck_in_a_paused_server_is_killed_before_it_is_resent() {
    let server = Server::start();
    let options = Options::default()
        .command_timeout(Duration::from_millis(300))
        .retries(1);
    let locks = client_on(server.port, options).as_owner("o");
    let mut admin = server.connection();
    let _: redis::Value = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(5_000)
        .arg("WRITE")
        .query(&mut admin)
        .expect("CLIENT PAUSE");
    let result = locks.try_lock("k", Duration::ZERO, None).await;
    assert!(
        matches!(result, Err(redis_lock_client::LockError::Connection(_))),
        "two attempts timed out and neither ran: {result:?}"
    );
    let _: redis::Value = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut admin)
        .expect("CLIENT UNPAUSE");
    // Anything still queued on a live connection would run now.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !exists(&mut admin, "k"),
        "no stuck acquire ran after the pause"
    );
    assert_eq!(
        calls(&server, "lock.acquire"),
        0,
        "LOCK.ACQUIRE never executed"
    );
    // And the client works again.
    let guard = locks.lock("k").await.expect("lock");
    guard.unlock().await.expect("unlock");
}

/// The same, for a user whose ACL denies `CLIENT KILL`: the library cannot
/// fence the broken connection, so it waits until the server has dropped
/// the waiter from the queue before it reads the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_at_the_cut_is_adopted_without_client_kill_too() {
    let server = Server::start();
    let _: redis::Value = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "app",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-client|kill",
        ])
        .query(&mut server.connection())
        .expect("ACL SETUSER");
    let proxy = Proxy::start(server.port);
    let url = format!("redis://app:pw@127.0.0.1:{}/", proxy.port);
    let waiter = LockClient::new(redis::Client::open(url).expect("url"))
        .expect("client")
        .as_owner("waiter");
    grant_at_the_cut_is_adopted(&server, &proxy, waiter).await;
}

/// A caller that stops waiting (its future dropped by a timeout) leaves
/// nothing in the queue, and the lock is never handed to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_future_dropped_while_waiting_leaves_nothing_behind() {
    let (server, locks) = server_with_client(Options::default());
    let holder = locks.as_owner("holder").lock("k").await.expect("lock");
    let gave_up =
        tokio::time::timeout(Duration::from_millis(300), locks.as_owner("w").lock("k")).await;
    assert!(gave_up.is_err(), "still held: the timeout fires");
    queue_becomes(&server, "k", &[]).await;
    holder.unlock().await.expect("unlock");
    assert!(!exists(&mut server.connection(), "k"), "nobody got it");
    assert_eq!(stat(&server, "lock_waits_granted"), 0);
}

/// The server grants the lock to a waiter whose caller gives up before the
/// reply arrives (the proxy holds the reply back): the library finds the
/// grant and gives it back, so the lock is not stuck until its lease ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_made_as_the_caller_gave_up_is_given_back() {
    let (server, proxy, waiter) = through_proxy("waiter");
    proxy.swallow_after("WAIT");
    let (holder, caller) = queued_behind_a_holder(&server, waiter).await;
    holder.unlock().await.expect("unlock");
    let srv = &server;
    eventually(
        Duration::from_secs(5),
        "the server granted the waiter",
        || holders(&mut srv.connection(), "k") == held("waiter", 1),
    )
    .await;
    caller.abort(); // the caller gives up; the reply never reached it
    assert!(caller.await.is_err(), "aborted");
    eventually(
        Duration::from_secs(5),
        "the abandoned grant is released",
        || !exists(&mut srv.connection(), "k"),
    )
    .await;
}

/// A caller gives up while its acquire is delayed in the network (the proxy
/// holds it back), and the clean-up's read behind it on that connection
/// times out. The clean-up must fence that connection before it concludes
/// nothing was granted: a read on a new connection would come before the
/// delayed acquire, which would then take the lock for an owner nobody
/// releases it for, until its lease ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_delayed_past_its_callers_give_up_never_runs_later() {
    let server = Server::start();
    let proxy = Proxy::start(server.port);
    let options = Options::default()
        .command_timeout(Duration::from_millis(300))
        .retries(1);
    let late = client_on(proxy.port, options).as_owner("late");
    proxy.hold_from("LOCK.ACQUIRE");
    let caller = tokio::spawn(async move { late.try_lock("k", Duration::ZERO, None).await });
    eventually(Duration::from_secs(5), "the acquire is held back", || {
        proxy.cuts.load(Ordering::SeqCst) == 1
    })
    .await;
    caller.abort(); // the caller gives up before any reply
    assert!(caller.await.is_err(), "aborted");
    // The clean-up's read behind the acquire times out (300 ms); then it
    // reads the count elsewhere, which the server sees as an HGET.
    let srv = &server;
    eventually(
        Duration::from_secs(10),
        "the clean-up read the count",
        || calls(srv, "hget") >= 1,
    )
    .await;
    proxy.release(); // the delayed acquire reaches the server now
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        calls(&server, "lock.acquire"),
        0,
        "the delayed LOCK.ACQUIRE never executed: its connection was killed"
    );
    assert!(
        !exists(&mut server.connection(), "k"),
        "nobody holds the lock"
    );
}
