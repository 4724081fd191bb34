//! The read-write lock through the library (`read_lock` / `write_lock`,
//! their `try_` and fenced forms, the blocking API) against real servers
//! with the module: readers share and a writer excludes, the watchdog
//! renews read and write holds (`LOCK.RWRENEW`), the lost signal, the fair
//! hand-off, downgrade and the refused upgrade, fencing tokens, re-entry.
// `alone()` (a std mutex) serialises the timing-sensitive tests of this
// binary. Each #[tokio::test] runs its own runtime on its own test thread,
// so holding that guard across awaits blocks only the other tests' threads,
// which is its purpose.
#![allow(clippy::await_holding_lock)]

use crate::support;

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redis_lock_client::{blocking, Fenced, LockError, LockKind, Lost, Options};
use redis_lock_test_support::*;
use support::{
    client_on, granted, granted_within, handed_to, refused, refused_then_waiting,
    server_with_client, through_proxy, unlock_last, Proxy,
};

/// The lock's hash as sorted (field, value) text pairs.
fn fields(con: &mut redis::Connection, key: &str) -> Vec<(String, String)> {
    holders(con, key)
}

/// What [`fields`] answers: `mode` and the given (field, count) pairs.
fn expect(mode: &str, holds: &[(&str, u64)]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = holds
        .iter()
        .map(|(field, n)| (field.to_string(), n.to_string()))
        .collect();
    pairs.push(("mode".to_string(), mode.to_string()));
    pairs.sort();
    pairs
}

/// The owners queued on the read-write lock `key`, in order (`LOCK.INFO`'s
/// `waiters`; the harness's `waiter_owners` reads a plain lock's reply).
fn waiters(server: &Server, key: &str) -> Vec<String> {
    let info = run(&mut server.connection(), &["LOCK.INFO", key]);
    map_pairs(&info)
        .into_iter()
        .filter(|(k, _)| as_string(k).as_deref() == Some("waiters"))
        .flat_map(|(_, list)| match list {
            redis::Value::Array(list) => list,
            other => panic!("waiters: {other:?}"),
        })
        .map(|w| {
            find_field(&w, "owner")
                .and_then(|owner| as_string(&owner))
                .expect("a waiter's owner")
        })
        .collect()
}

/// Waits (up to 5 s) until the waiters queued on `key` are exactly `owners`.
async fn queue_becomes(server: &Server, key: &str, owners: &[&str]) {
    let what = format!("the queue of {key} is {owners:?}");
    eventually(Duration::from_secs(5), &what, || {
        waiters(server, key) == owners
    })
    .await;
}

/// The key of `owner`'s `n`th read hold of `key` (Redisson's layout).
fn hold_key(key: &str, owner: &str, n: u32) -> String {
    format!("{{{key}}}:{owner}:rwlock_timeout:{n}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_a_writer_excludes() {
    let (server, locks) = server_with_client(Options::default());
    let mut con = server.connection();
    let (r1, r2, w) = (
        locks.as_owner("r1"),
        locks.as_owner("r2"),
        locks.as_owner("w"),
    );

    let a = r1.read_lock("doc").await.expect("r1 reads");
    let b = granted(
        r2.try_read_lock("doc", Duration::ZERO, None),
        "r2 reads alongside r1",
    )
    .await;
    assert_eq!((a.kind(), b.kind()), (LockKind::Read, LockKind::Read));
    assert_eq!(
        fields(&mut con, "doc"),
        expect("read", &[("r1", 1), ("r2", 1)])
    );
    assert!(pttl(&mut con, hold_key("doc", "r1", 1)) > 25_000);
    assert!(a.is_held().await.expect("is_held"));
    assert!(locks.is_locked("doc").await.expect("is_locked"));
    assert!(
        w.try_write_lock("doc", Duration::ZERO, None)
            .await
            .expect("try")
            .is_none(),
        "a writer is excluded while anyone reads"
    );

    a.unlock().await.expect("r1 releases");
    refused(w.try_write_lock("doc", Duration::ZERO, None)).await;
    b.unlock().await.expect("r2 releases");
    assert!(!exists(&mut con, "doc"));

    let writing = granted(
        w.try_write_lock("doc", Duration::ZERO, None),
        "free: the writer gets it",
    )
    .await;
    assert_eq!(writing.kind(), LockKind::Write);
    assert_eq!(fields(&mut con, "doc"), expect("write", &[("w:write", 1)]));
    assert!(writing.is_held().await.expect("is_held"));
    for (who, read) in [(&r1, true), (&r2, false)] {
        let got = if read {
            who.try_read_lock("doc", Duration::from_millis(50), None)
                .await
        } else {
            who.try_write_lock("doc", Duration::from_millis(50), None)
                .await
        };
        assert!(got.expect("try").is_none(), "the writer excludes everyone");
    }
    drop(writing); // released in the background
    eventually(Duration::from_secs(5), "the dropped guard released", || {
        !exists(&mut con, "doc")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_read_and_write_holds_for_three_times_the_lease() {
    let _alone = alone();
    let server = Server::start();
    let lease = Duration::from_millis(900);
    // Renewals only: the lost signal must come from nowhere else here.
    let options = Options::default().watchdog_lease(lease).track_locks(false);
    let locks = client_on(server.port, options);
    let mut con = server.connection();
    let reading = locks.as_owner("r").read_lock("books").await.expect("read");
    let writing = locks.as_owner("w").write_lock("pens").await.expect("write");
    let rival = client_on(server.port, Options::default()).as_owner("rival");
    let started = Instant::now();
    while started.elapsed() < lease * 3 + lease / 2 {
        let at = started.elapsed();
        assert_eq!(
            fields(&mut con, "books"),
            expect("read", &[("r", 1)]),
            "{at:?}"
        );
        assert!(exists(&mut con, hold_key("books", "r", 1)), "{at:?}");
        assert_eq!(
            fields(&mut con, "pens"),
            expect("write", &[("w:write", 1)]),
            "{at:?}"
        );
        let short = Some(Duration::from_secs(1));
        refused(rival.try_write_lock("books", Duration::ZERO, short)).await;
        refused(rival.try_read_lock("pens", Duration::ZERO, short)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!((reading.is_lost(), writing.is_lost()), (None, None));
    for key in [hold_key("books", "r", 1), "books".into(), "pens".into()] {
        let ttl = pttl(&mut con, &key);
        assert!(ttl > 0 && ttl <= 900, "{key} renewed to the lease: {ttl}");
    }
    reading.unlock().await.expect("unlock");
    writing.unlock().await.expect("unlock");
    assert!(!exists(&mut con, "books") && !exists(&mut con, "pens"));
    assert!(!exists(&mut con, hold_key("books", "r", 1)));
}

/// `LOCK.FORCE` on the name: the tracking connection tells read and write
/// holders within milliseconds (the lease is 30 s, so no renewal is due),
/// and with tracking off the renewal (`LOCK.RWRENEW` answering 0) within a
/// third of the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_read_write_lock_marks_its_read_and_write_guards_lost_quickly() {
    let _alone = alone();
    let (server, locks) = server_with_client(Options::default());
    let mut con = server.connection();
    let r1 = locks.as_owner("r1").read_lock("doc").await.expect("read");
    let r2 = locks.as_owner("r2").read_lock("doc").await.expect("read");
    let again = locks
        .as_owner("r1")
        .read_lock("doc")
        .await
        .expect("re-enter");
    let w = locks.as_owner("w").write_lock("page").await.expect("write");
    // The writer also reads (a downgrade in waiting): two entries.
    let wr = locks
        .as_owner("w")
        .read_lock("page")
        .await
        .expect("read too");
    let forced_at = Instant::now();
    assert_eq!(force(&mut con, "doc"), 1);
    assert_eq!(force(&mut con, "page"), 1);
    for guard in [&r1, &r2, &again, &w, &wr] {
        let why = tokio::time::timeout(Duration::from_secs(5), guard.lost())
            .await
            .expect("lost() fires");
        assert_eq!(why, Lost::NotHeld);
    }
    let after = forced_at.elapsed();
    assert!(
        after < Duration::from_millis(1000),
        "told {after:?} after the force, where the first renewal is 10 s away"
    );
    assert!(!exists(&mut con, hold_key("doc", "r1", 2)));
    for guard in [r1, r2, again, w, wr] {
        match guard.unlock().await {
            Err(LockError::NotHeld { .. }) => {}
            other => panic!("unlock of a forced hold: {other:?}"),
        }
    }

    // Without tracking: the watchdog's LOCK.RWRENEW answers 0.
    let lease = Duration::from_millis(1500);
    let options = Options::default().watchdog_lease(lease).track_locks(false);
    let renewed_only = client_on(server.port, options);
    for round in 0..2u32 {
        let reading = renewed_only
            .as_owner("r")
            .read_lock("doc")
            .await
            .expect("read");
        let writing = renewed_only
            .as_owner("w")
            .write_lock("page")
            .await
            .expect("write");
        tokio::time::sleep(Duration::from_millis(137 * u64::from(round))).await;
        let forced_at = Instant::now();
        assert_eq!(force(&mut con, "doc"), 1);
        assert_eq!(force(&mut con, "page"), 1);
        for guard in [&reading, &writing] {
            let why = tokio::time::timeout(lease, guard.lost())
                .await
                .expect("lost() fires within the lease");
            assert_eq!(why, Lost::NotHeld);
        }
        let after = forced_at.elapsed();
        assert!(
            after <= lease / 3 + Duration::from_millis(250),
            "round {round}: told {after:?} after the force; a renewal runs every {:?}",
            lease / 3
        );
        assert!(reading.unlock().await.is_err() && writing.unlock().await.is_err());
    }

    // A read hold with the caller's lease is lost when that lease ends.
    let lease = Duration::from_millis(300);
    let leased = granted(
        locks
            .as_owner("r")
            .try_read_lock("doc", Duration::ZERO, Some(lease)),
        "free",
    )
    .await;
    let taken = Instant::now();
    let why = tokio::time::timeout(Duration::from_secs(3), leased.lost())
        .await
        .expect("lost when the lease ends");
    assert_eq!(why, Lost::LeaseExpired);
    assert!(taken.elapsed() >= lease - Duration::from_millis(20));
    eventually(Duration::from_secs(2), "the lock expired", || {
        !exists(&mut con, "doc")
    })
    .await;
}

/// Readers hold; a writer queues, and a reader arriving after it queues
/// behind it (fair). The writer is granted when the last reader leaves; the
/// readers behind it, when it releases, together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_writer_is_granted_when_the_readers_release() {
    let (server, locks) = server_with_client(Options::default());
    let mut con = server.connection();
    let r1 = locks.as_owner("r1").read_lock("doc").await.expect("read");
    let r2 = locks.as_owner("r2").read_lock("doc").await.expect("read");
    let writer = {
        let w = locks.as_owner("w");
        tokio::spawn(async move { w.write_lock("doc").await })
    };
    queue_becomes(&server, "doc", &["w"]).await;
    assert!(
        locks
            .as_owner("r3")
            .try_read_lock("doc", Duration::ZERO, None)
            .await
            .expect("try")
            .is_none(),
        "a new reader does not overtake the waiting writer"
    );
    // Queued one after the other, so the order is known.
    let mut late_readers = Vec::new();
    for (owner, queue) in [("r3", &["w", "r3"][..]), ("r4", &["w", "r3", "r4"][..])] {
        let r = locks.as_owner(owner);
        late_readers.push(tokio::spawn(async move {
            r.try_read_lock("doc", Duration::from_secs(20), None).await
        }));
        queue_becomes(&server, "doc", queue).await;
    }

    r1.unlock().await.expect("r1 releases");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!writer.is_finished(), "r2 still reads");
    r2.unlock().await.expect("r2 releases");
    let writing = granted_within(Duration::from_secs(5), writer).await;
    assert_eq!(writing.kind(), LockKind::Write);
    assert_eq!(fields(&mut con, "doc"), expect("write", &[("w:write", 1)]));
    queue_becomes(&server, "doc", &["r3", "r4"]).await;

    writing.unlock().await.expect("the writer releases");
    let mut readers = Vec::new();
    for task in late_readers {
        let guard = granted_within(Duration::from_secs(5), task)
            .await
            .expect("granted within the wait");
        readers.push(guard);
    }
    assert_eq!(
        fields(&mut con, "doc"),
        expect("read", &[("r3", 1), ("r4", 1)])
    );
    for guard in readers {
        guard.unlock().await.expect("unlock");
    }
    assert!(!exists(&mut con, "doc"));
}

/// A caller that stops waiting (its future dropped) leaves the queue, and
/// the readers behind it are let in at once; nothing is granted to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_gives_up_leaves_the_queue_and_lets_the_readers_in() {
    let (server, locks) = server_with_client(Options::default());
    let mut con = server.connection();
    let reading = locks.as_owner("r1").read_lock("doc").await.expect("read");
    let w = locks.as_owner("w");
    let (give_up, told) = tokio::sync::oneshot::channel::<()>();
    let writer = tokio::spawn(async move {
        tokio::select! {
            got = w.write_lock("doc") => Some(got),
            _ = told => None,
        }
    });
    queue_becomes(&server, "doc", &["w"]).await;
    let r2 = locks.as_owner("r2");
    let reader =
        tokio::spawn(async move { r2.try_read_lock("doc", Duration::from_secs(10), None).await });
    queue_becomes(&server, "doc", &["w", "r2"]).await;
    give_up.send(()).expect("the writer waits");
    assert!(writer.await.expect("task").is_none(), "the caller gave up");
    queue_becomes(&server, "doc", &[]).await;
    let second = reader
        .await
        .expect("task")
        .expect("read")
        .expect("let in once the writer left");
    assert_eq!(
        fields(&mut con, "doc"),
        expect("read", &[("r1", 1), ("r2", 1)])
    );
    reading.unlock().await.expect("unlock");
    unlock_last(second, &mut con).await;
}

/// A writer may take read (downgrade): its write release leaves it reading.
/// A reader asking to write is refused at once, waiting or not, with its
/// read hold untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_downgrades_and_a_readers_upgrade_is_refused() {
    let (server, locks) = server_with_client(Options::default());
    let mut con = server.connection();
    let owner = locks.as_owner("app");

    let writing = owner.write_lock("doc").await.expect("write");
    let reading = owner.read_lock("doc").await.expect("the writer reads too");
    assert_eq!(reading.kind(), LockKind::Read);
    assert_eq!((writing.hold_count(), reading.hold_count()), (1, 1));
    assert_eq!(
        fields(&mut con, "doc"),
        expect("write", &[("app", 1), ("app:write", 1)])
    );
    writing.unlock().await.expect("write release");
    assert_eq!(fields(&mut con, "doc"), expect("read", &[("app", 1)]));
    assert!(reading.is_held().await.expect("is_held"));
    assert_eq!(reading.is_lost(), None);
    // Others may read now, not write.
    let other = granted(
        locks
            .as_owner("other")
            .try_read_lock("doc", Duration::ZERO, None),
        "shared again",
    )
    .await;
    other.unlock().await.expect("unlock");

    let refused = owner
        .try_write_lock("doc", Duration::from_secs(5), None)
        .await
        .expect_err("an upgrade is refused");
    match &refused {
        LockError::UpgradeRefused { name, .. } => assert_eq!(name, "doc"),
        other => panic!("expected UpgradeRefused, got {other:?}"),
    }
    let source = std::error::Error::source(&refused).map(|s| s.to_string());
    assert!(
        source.is_some_and(|s| s.contains("holds this read-write lock for reading")),
        "the module's words are the cause"
    );
    let waited = Instant::now();
    let forever = tokio::time::timeout(Duration::from_secs(5), owner.write_lock("doc"))
        .await
        .expect("refused at once, not left waiting for itself");
    assert!(matches!(forever, Err(LockError::UpgradeRefused { .. })));
    assert!(waited.elapsed() < Duration::from_secs(1));
    assert!(matches!(
        owner.write_lock_fenced("doc").await,
        Err(LockError::UpgradeRefused { .. })
    ));
    // Nothing changed: still reading, once.
    assert_eq!(fields(&mut con, "doc"), expect("read", &[("app", 1)]));
    assert_eq!(reading.hold_count(), 1);
    unlock_last(reading, &mut con).await;

    // Released, it may write.
    owner
        .try_write_lock("doc", Duration::ZERO, None)
        .await
        .expect("try")
        .expect("free")
        .unlock()
        .await
        .expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_writes_carry_growing_tokens() {
    let (server, locks) = server_with_client(Options::default());
    let (a, b) = (locks.as_owner("a"), locks.as_owner("b"));
    let mut con = server.connection();

    let first = a.write_lock_fenced("stock").await.expect("write");
    let t1 = first.token();
    assert!(t1 > 0);
    assert_eq!(counter(&mut con, "stock"), Some(t1));
    let again = a.write_lock_fenced("stock").await.expect("re-enter");
    let t2 = again.token();
    assert!(t2 > t1, "re-entry raises the token: {t1} then {t2}");
    // A plain write re-entry has no token, and leaves the counter alone.
    let plain = a.write_lock("stock").await.expect("re-enter unfenced");
    assert_eq!(plain.token(), None);
    assert_eq!(counter(&mut con, "stock"), Some(t2));
    let waiting = refused_then_waiting(&b, |b, wait| async move {
        b.try_write_lock_fenced("stock", wait, None).await
    })
    .await;
    queue_becomes(&server, "stock", &["b"]).await;
    for guard in [plain, again.into_guard(), first.into_guard()] {
        guard.unlock().await.expect("unlock");
    }
    let handed = handed_to(waiting).await;
    let t3 = handed.token();
    assert!(t3 > t2, "the hand-off raises the token: {t2} then {t3}");
    handed.unlock().await.expect("unlock");
    let t4 = a
        .try_write_lock_fenced("stock", Duration::ZERO, None)
        .await
        .expect("try")
        .expect("free")
        .token();
    assert!(t4 > t3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_and_writes_re_enter_and_free_the_lock_with_the_last_hold() {
    let (server, locks) = server_with_client(Options::default());
    let mut con = server.connection();
    let owner = locks.as_owner("o");

    let one = owner.read_lock("doc").await.expect("read");
    let two = granted(owner.try_read_lock("doc", Duration::ZERO, None), "re-enter").await;
    assert_eq!(two.hold_count(), 2);
    assert_eq!(fields(&mut con, "doc"), expect("read", &[("o", 2)]));
    assert!(exists(&mut con, hold_key("doc", "o", 1)) && exists(&mut con, hold_key("doc", "o", 2)));
    one.unlock().await.expect("unlock one");
    assert_eq!(fields(&mut con, "doc"), expect("read", &[("o", 1)]));
    assert_eq!(two.hold_count(), 1);
    drop(two);
    eventually(
        Duration::from_secs(5),
        "the last read hold released",
        || !exists(&mut con, "doc"),
    )
    .await;

    let one = owner.write_lock("doc").await.expect("write");
    let two = owner.write_lock("doc").await.expect("re-enter");
    assert_eq!(two.hold_count(), 2);
    assert_eq!(fields(&mut con, "doc"), expect("write", &[("o:write", 2)]));
    two.unlock().await.expect("unlock one");
    assert_eq!(fields(&mut con, "doc"), expect("write", &[("o:write", 1)]));
    // Another task of the same client is another owner.
    let other_task = {
        let locks = locks.clone();
        tokio::spawn(async move { locks.try_read_lock("doc", Duration::ZERO, None).await })
    };
    assert!(other_task.await.expect("task").expect("try").is_none());
    unlock_last(one, &mut con).await;
    match owner.try_read_lock("doc", Duration::ZERO, None).await {
        Ok(Some(g)) => g.unlock().await.expect("unlock"),
        other => panic!("free again: {other:?}"),
    }
}

/// Arms `proxy` to cut the connection right after `command` (`cuts`
/// counts the cuts armed so far), awaits `call`, which sends it and must
/// succeed all the same (`what`), and asserts the proxy did cut: one step
/// of the lost-reply test below.
async fn despite_a_cut_after<T>(
    proxy: &Proxy,
    cuts: &mut usize,
    command: &str,
    call: impl Future<Output = Result<T, LockError>>,
    what: &str,
) -> T {
    proxy.cut_after(command);
    *cuts += 1;
    let answer = call.await.expect(what);
    assert_eq!(
        proxy.cuts.load(Ordering::SeqCst),
        *cuts,
        "the proxy did cut after {command}"
    );
    answer
}

/// The retry check reads the hold's own field back: a read or write
/// acquire (or release) whose reply was lost is not sent again, so the
/// counts stay the ones the caller believes in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_and_releases_whose_replies_were_lost_are_not_sent_again() {
    let (server, proxy, owner) = through_proxy("o");
    let mut con = server.connection();
    let mut cuts = 0;

    let write = despite_a_cut_after(
        &proxy,
        &mut cuts,
        "LOCK.WACQUIRE",
        owner.write_lock("doc"),
        "write despite the cut",
    )
    .await;
    let write_again = despite_a_cut_after(
        &proxy,
        &mut cuts,
        "LOCK.WACQUIRE",
        owner.write_lock("doc"),
        "re-enter despite the cut",
    )
    .await;
    assert_eq!(fields(&mut con, "doc"), expect("write", &[("o:write", 2)]));
    let read = despite_a_cut_after(
        &proxy,
        &mut cuts,
        "LOCK.RACQUIRE",
        owner.read_lock("doc"),
        "downgrade despite the cut",
    )
    .await;
    assert_eq!(
        fields(&mut con, "doc"),
        expect("write", &[("o", 1), ("o:write", 2)])
    );
    assert_eq!((write_again.hold_count(), read.hold_count()), (2, 1));
    // Two read holds: a read-back of the wrong field (`o` = 2, the write
    // count before the release) would resend the write release below.
    let read_again = owner.read_lock("doc").await.expect("re-enter");

    despite_a_cut_after(
        &proxy,
        &mut cuts,
        "LOCK.WRELEASE",
        write_again.unlock(),
        "release despite the cut",
    )
    .await;
    assert_eq!(
        fields(&mut con, "doc"),
        expect("write", &[("o", 2), ("o:write", 1)])
    );
    write.unlock().await.expect("the last write hold");
    assert_eq!(fields(&mut con, "doc"), expect("read", &[("o", 2)]));
    read_again.unlock().await.expect("unlock");
    despite_a_cut_after(
        &proxy,
        &mut cuts,
        "LOCK.RRELEASE",
        read.unlock(),
        "release despite the cut",
    )
    .await;
    assert!(!exists(&mut con, "doc"));
}

/// What the module does not offer for read-write locks is refused before
/// anything is sent: synced grants and fenced reads (no public API asks for
/// the latter).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synced_grants_are_refused_for_read_write_locks_before_anything_is_sent() {
    let synced = Options::default().sync_replicas(1, Duration::from_millis(100));
    let (server, locks) = server_with_client(synced);
    for result in [
        locks.read_lock("doc").await,
        locks.write_lock("doc").await,
        locks.write_lock_fenced("doc").await.map(Fenced::into_guard),
    ] {
        match result {
            Err(LockError::InvalidArgument(why)) => {
                assert!(why.contains("not offered for read-write locks"), "{why}")
            }
            other => panic!("expected InvalidArgument: {other:?}"),
        }
    }
    assert!(!exists(&mut server.connection(), "doc"));
    // Turning the module's default off asks for nothing: allowed.
    let unsynced = Options::default().sync_replicas(0, Duration::ZERO);
    let guard = client_on(server.port, unsynced)
        .read_lock("doc")
        .await
        .expect("read");
    guard.unlock().await.expect("unlock");
}

#[test]
fn the_blocking_api_reads_writes_and_refuses_an_upgrade() {
    let server = Server::start();
    let mut con = server.connection();
    let options = Options::default().watchdog_lease(Duration::from_millis(600));
    let client = redis::Client::open(server.url()).expect("url");
    let locks = blocking::LockClient::with_options(client, options).expect("client");

    let reading = locks.read_lock("doc").expect("read");
    assert_eq!(reading.kind(), LockKind::Read);
    assert_eq!(reading.owner(), locks.owner());
    let other = locks.as_owner("other");
    let shared = other
        .try_read_lock("doc", Duration::ZERO, None)
        .expect("try")
        .expect("readers share");
    assert!(other
        .try_write_lock("doc", Duration::from_millis(50), None)
        .is_err_and(|e| matches!(e, LockError::UpgradeRefused { .. })));
    drop(shared); // released before drop returns
    assert!(matches!(
        locks.write_lock("doc"),
        Err(LockError::UpgradeRefused { .. })
    ));
    assert!(other
        .try_write_lock_fenced("doc", Duration::ZERO, None)
        .expect("try")
        .is_none());
    // Renewed by the client's own runtime thread while this one sleeps.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(reading.is_lost(), None);
    assert!(reading.is_held().expect("is_held"));
    reading.unlock().expect("unlock");
    assert!(!exists(&mut con, "doc"));

    let writing = locks.write_lock_fenced("doc").expect("write");
    assert_eq!(writing.kind(), LockKind::Write);
    let token = writing.token();
    assert!(other
        .try_read_lock("doc", Duration::ZERO, None)
        .expect("try")
        .is_none());
    let downgrade = locks
        .try_read_lock("doc", Duration::ZERO, Some(Duration::from_secs(5)))
        .expect("try")
        .expect("the writer may read");
    let name = format!("{}:write", locks.owner());
    assert!(fields(&mut con, "doc").contains(&(name, "1".to_string())));
    writing.unlock().expect("write release");
    drop(downgrade);
    assert!(!exists(&mut con, "doc"));
    let next = other
        .try_write_lock_fenced("doc", Duration::from_secs(1), None)
        .expect("try")
        .expect("free");
    assert!(next.token() > token);
    assert_eq!(next.wait_lost(Duration::from_millis(10)), None);
    let plain = other.write_lock("doc").expect("re-enter");
    assert_eq!(plain.hold_count(), 2);
}
