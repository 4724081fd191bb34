//! Count-down latches (Redisson's `RCountDownLatch`), on the module's
//! `LOCK.LATCHSET`, `LOCK.COUNTDOWN`, `LOCK.LATCHCOUNT` and `LOCK.AWAIT`.

use std::time::{Duration, Instant};

use redis::Value;
use tokio::sync::watch;

use crate::client::LockClient;
use crate::error::{refused, LockError, Result};
use crate::pieces::{self, Outcome, Waiting};
use crate::protocol::{self, Awaited};
use crate::request::detached;

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
    /// own, in a task of its own: dropping the future cancels the wait
    /// (`LOCK.CANCEL`, in the background), so nothing is left queued or
    /// kept. A connection that fails while waiting is replaced and the wait
    /// goes on (a wait changes nothing, so it is safe to repeat).
    pub async fn await_zero(&self, timeout: Option<Duration>) -> Result<Awaited> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let this = self.clone();
        let runtime = self.client.inner.runtime.clone();
        detached(&runtime, move |mut caller| async move {
            let (give_up, mut gave_up) = watch::channel(false);
            let waiting = this.wait_in_pieces(deadline, &mut gave_up);
            tokio::pin!(waiting);
            let result = tokio::select! {
                biased;
                result = &mut waiting => result,
                () = caller.left() => {
                    let _ = give_up.send(true);
                    waiting.await
                }
            };
            caller.answer(result);
        })
        .await
    }

    async fn wait_in_pieces(
        &self,
        deadline: Option<Instant>,
        give_up: &mut watch::Receiver<bool>,
    ) -> Result<Awaited> {
        let waiter = protocol::new_waiter_id();
        let command =
            |wait_ms| protocol::with_waiter(protocol::await_zero(&self.name, wait_ms), &waiter);
        let ends = |reply: &Value| Ok(protocol::parse_await(reply)? != Awaited::TimedOut);
        let waiting = Waiting {
            name: &self.name,
            identity: &waiter,
            command: &command,
            grants: &ends,
            extra: Duration::ZERO,
        };
        let ended = pieces::wait(&self.client.inner, &waiting, deadline, give_up).await;
        match ended?.outcome {
            Outcome::Granted { reply, .. } => protocol::parse_await(&reply),
            Outcome::NotGranted => Ok(Awaited::TimedOut),
            Outcome::Refused(e) if protocol::is_unknown(&e) => {
                Err(protocol::module_too_old("WAITER", &e))
            }
            Outcome::Refused(e) => Err(refused(&self.name, e)),
            Outcome::Failed(e) => Err(LockError::Connection(e)),
            // Nobody reads it: the caller left.
            Outcome::GaveUp { .. } => Ok(Awaited::TimedOut),
        }
    }
}
