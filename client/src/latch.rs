//! Count-down latches (Redisson's `RCountDownLatch`), on the module's
//! `LOCK.LATCHSET`, `LOCK.COUNTDOWN`, `LOCK.LATCHCOUNT` and `LOCK.AWAIT`.

use std::time::{Duration, Instant};

use redis::Value;
use tokio::sync::watch;

use crate::client::LockClient;
use crate::error::{refused, LockError, Result};
use crate::pieces::{self, Outcome, Waiting};
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
    /// The wait blocks connections of its own (`LOCK.AWAIT`), in pieces
    /// that keep the waiter's place (`pieces.rs`) under a waiter id of its
    /// own. Dropping the future closes them and cancels the wait
    /// (`LOCK.CANCEL`, in the background). A connection that fails while
    /// waiting is replaced and the wait goes on (a wait changes nothing,
    /// so it is safe to repeat).
    pub async fn await_zero(&self, timeout: Option<Duration>) -> Result<Awaited> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let waiter = protocol::new_waiter_id();
        let command = |wait_ms| {
            protocol::with_waiter(protocol::await_zero(&self.name, wait_ms), &waiter)
        };
        let ends = |reply: &Value| Ok(protocol::parse_await(reply)? != Awaited::TimedOut);
        let waiting = Waiting {
            name: &self.name,
            identity: &waiter,
            command: &command,
            grants: &ends,
            extra: Duration::ZERO,
        };
        // Never told to give up: a dropped future cancels on drop.
        let (_keep, mut never) = watch::channel(false);
        let mut cancel = CancelOnDrop {
            client: Some(self.client.clone()),
            name: &self.name,
            waiter: &waiter,
        };
        let ended = pieces::wait(&self.client.inner, &waiting, deadline, &mut never).await;
        cancel.client = None;
        match ended?.outcome {
            Outcome::Granted { reply, .. } => protocol::parse_await(&reply),
            Outcome::NotGranted => Ok(Awaited::TimedOut),
            Outcome::Refused(e) if protocol::is_unknown(&e) => {
                Err(protocol::module_too_old("WAITER", &e))
            }
            Outcome::Refused(e) => Err(refused(&self.name, e)),
            Outcome::Failed(e) => Err(LockError::Connection(e)),
            Outcome::GaveUp { .. } => Ok(Awaited::TimedOut),
        }
    }
}

/// Cancels a latch's wait (`LOCK.CANCEL`) in the background if the future
/// that waits is dropped: its pieces' connections close, and the place they
/// keep on the server goes too.
struct CancelOnDrop<'a> {
    client: Option<LockClient>,
    name: &'a str,
    waiter: &'a str,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let cancel = protocol::cancel(self.name, self.waiter);
        let runtime = client.inner.runtime.clone();
        runtime.spawn(async move {
            let _ = client.simple_parsed(&cancel, |_, _| Ok(())).await;
        });
    }
}
