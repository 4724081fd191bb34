//! Time: polling until a condition holds (blocking and async), the clocks
//! of the test and of the server, and running timing-sensitive tests alone.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::{ConnectionLike, ToRedisArgs};

use crate::commands::{pexpiretime, query};

/// Calls `check` every few ms until it is true; panics naming `what` after `timeout`.
pub fn poll_until(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// [`poll_until`] for async tests: polls `check` every 5 ms, yielding to the
/// runtime, until true; panics naming `what` after `timeout`.
pub async fn eventually(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs the rest of a test alone among the tests of its binary that also
/// call this: the timing-sensitive ones (a hand-off within 20 ms of a
/// deadline) and the CPU-heavy ones (dozens of client threads). On a 2-core
/// machine a heavy neighbour starves the measured server of CPU for tens of
/// ms, which is the machine's doing, not the module's. Other tests still
/// run in parallel; test binaries run one after another anyway.
pub fn alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How many ms after `deadline` the server handed `key` on to a waiter that
/// asked for `lease_ms`, by the server's own clock: a hand-off sets the new
/// holder's deadline to the moment it happened plus its lease. (When the
/// waiter's reply is read also counts this test process's own scheduling,
/// tens of ms on a loaded 2-core machine.)
pub fn handed_on_after(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    lease_ms: i64,
    deadline: i64,
) -> i64 {
    pexpiretime(con, key) - lease_ms - deadline
}

/// Asserts that the server handed `key` on, to a waiter that asked for
/// `lease_ms`, within 20 ms after `deadline` ([`handed_on_after`]); `what`
/// says which hand-off, when it fails.
pub fn assert_handed_on_in_time(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    lease_ms: i64,
    deadline: i64,
    what: &str,
) {
    let late = handed_on_after(con, key, lease_ms, deadline);
    assert!(
        (0..=20).contains(&late),
        "{what}: handed on {late} ms after the deadline"
    );
}

/// Server time in unix ms.
pub fn server_now_ms(con: &mut impl ConnectionLike) -> i64 {
    let (secs, micros): (i64, i64) = query(con, &redis::cmd("TIME"));
    secs * 1000 + micros / 1000
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}
