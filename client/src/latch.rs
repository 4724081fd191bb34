//! Count-down latches (Redisson's `RCountDownLatch`), on the module's
//! `LOCK.LATCHSET`, `LOCK.COUNTDOWN`, `LOCK.LATCHCOUNT` and `LOCK.AWAIT`.

use std::time::{Duration, Instant};

use crate::client::LockClient;
use crate::counted::Sent;
use crate::error::{refused, LockError, Result};
use crate::protocol::{self, Awaited};

/// A count-down latch (Redisson's `RCountDownLatch`): set a count once,
/// count it down from anywhere, and wait until it reaches zero. At zero
/// the latch's key is gone, and every waiter is told at once.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn demo(locks: redis_lock_client::LockClient) -> Result<(), redis_lock_client::LockError> {
/// use redis_lock_client::Awaited;
/// let ready = locks.count_down_latch("workers-ready");
/// ready.try_set_count(3, None).await?;
/// // ... each of three workers calls ready.count_down().await? ...
/// match ready.await_zero(Some(Duration::from_secs(10))).await? {
///     Awaited::Reached => println!("all three are ready"),
///     Awaited::TimedOut => println!("still waiting for {}", ready.count().await?),
///     Awaited::Expired => println!("the latch's time-to-live ended first"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct CountDownLatch {
    client: LockClient,
    name: String,
}

impl LockClient {
    /// The count-down latch `name` (Redisson's `getCountDownLatch`): a
    /// handle, nothing is sent until it is used.
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch {
            client: self.clone(),
            name: name.into(),
        }
    }
}

impl CountDownLatch {
    /// The latch's name (its key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the count (at least 1) if the latch does not exist (Redisson's
    /// `trySetCount`): true if set, false if it exists (unchanged). With
    /// `ttl` the latch expires after it: its waiters are then told
    /// [`Awaited::Expired`].
    pub async fn try_set_count(&self, count: u64, ttl: Option<Duration>) -> Result<bool> {
        if count == 0 || count > i64::MAX as u64 {
            return Err(LockError::InvalidArgument(format!(
                "count must be a positive integer: {count}"
            )));
        }
        let ttl = ttl.map(protocol::ttl_ms).transpose()?;
        let cmd = protocol::latch_set(&self.name, count, ttl);
        self.client
            .once_parsed(&cmd, &self.name, protocol::parse_flag)
            .await
    }

    /// Counts down by one, returning the count after (0: it reached zero,
    /// or there was no latch). Not sent again after a failure in transit
    /// ([`LockError::Unconfirmed`]): a count down must not count twice.
    pub async fn count_down(&self) -> Result<u64> {
        let cmd = protocol::count_down(&self.name);
        self.client
            .once_parsed(&cmd, &self.name, protocol::parse_count)
            .await
    }

    /// The count now (0 when there is no latch).
    pub async fn count(&self) -> Result<u64> {
        let cmd = protocol::latch_count(&self.name);
        self.client.simple_parsed(&cmd, protocol::parse_count).await
    }

    /// Waits until the count is zero, at most `timeout` (None: as long as
    /// it takes): [`Awaited::Reached`] (at once when there is no latch,
    /// or when it is deleted), [`Awaited::TimedOut`], or
    /// [`Awaited::Expired`] when the latch's time-to-live ended first.
    ///
    /// The wait blocks a connection of its own (`LOCK.AWAIT`). Dropping the
    /// future closes it, which ends the wait on the server. A connection
    /// that fails while waiting is replaced and the wait resumed for the
    /// time left (a wait changes nothing, so it is safe to repeat).
    pub async fn await_zero(&self, timeout: Option<Duration>) -> Result<Awaited> {
        let counted = &self.client.inner.counted;
        let options = &counted.options;
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut attempts = 0;
        loop {
            let (timeout_ms, within) = match deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    (protocol::wait_ms(left), Some(left + options.wait_margin))
                }
                None => (0, None),
            };
            let cmd = protocol::await_zero(&self.name, timeout_ms);
            let failure = match counted
                .wait_own(&cmd, within, &mut attempts, &|_| {})
                .await?
            {
                Sent::Reply(v) => return protocol::parse_await(&v),
                Sent::Refused(e) => return Err(refused(&self.name, e)),
                Sent::WrongRole(e) | Sent::Broken(e) => e,
            };
            counted.retry(&mut attempts, failure).await?;
        }
    }
}
