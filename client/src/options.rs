//! [`Options`]: a client's settings, fixed when it is built.
//!
//! The fields are private and set through builder methods (as redis-rs's
//! `AsyncConnectionConfig` and `ConnectionManagerConfig` do), so there is
//! one way to set each, and a client can check them once, when it is built
//! ([`Options::check`]), instead of at every use.

use std::time::Duration;

use crate::error::{LockError, Result};
use crate::protocol;

/// Settings of a [`LockClient`](crate::LockClient). `Options::default()`
/// matches Redisson's defaults where Redisson has one; each builder method
/// says what it sets.
///
/// ```
/// # use std::time::Duration;
/// use redis_lock_client::Options;
/// let options = Options::default()
///     .watchdog_lease(Duration::from_secs(10))
///     .retries(5);
/// # let _ = options;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    pub(crate) watchdog_lease: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) retries: u32,
    pub(crate) retry_interval: Duration,
    pub(crate) wait_margin: Duration,
    pub(crate) wait_piece: Duration,
    pub(crate) sync: Option<(u32, Duration)>,
    pub(crate) track_locks: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            watchdog_lease: Duration::from_secs(30),
            command_timeout: Duration::from_secs(3),
            retries: 3,
            retry_interval: Duration::from_millis(100),
            wait_margin: Duration::from_secs(2),
            wait_piece: Duration::from_secs(2),
            sync: None,
            track_locks: true,
        }
    }
}

impl Options {
    /// The lease of locks taken without one ([`LockClient::lock`]): the
    /// watchdog renews it every third of it. Redisson's
    /// `lockWatchdogTimeout`, 30 s by default.
    ///
    /// [`LockClient::lock`]: crate::LockClient::lock
    pub fn watchdog_lease(mut self, lease: Duration) -> Self {
        self.watchdog_lease = lease;
        self
    }

    /// How long one short command may take before its connection is
    /// considered broken (Redisson's `timeout`, 3 s by default).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// How many times a command is resent after a failure in transit, once
    /// the library has made sure the failed attempt did not run (3 by
    /// default).
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// The pause before such a resend (100 ms by default).
    pub fn retry_interval(mut self, interval: Duration) -> Self {
        self.retry_interval = interval;
        self
    }

    /// How much longer than a `WAIT` the client waits for its reply before
    /// treating the connection as broken (2 s by default): the server
    /// answers a timed-out wait itself, so this only covers the network and
    /// a busy server.
    pub fn wait_margin(mut self, margin: Duration) -> Self {
        self.wait_margin = margin;
        self
    }

    /// The longest one waiting command stays unanswered (2 s by default,
    /// below the common drivers' and proxies' timeouts). A longer wait is
    /// cut into pieces that keep the waiter's place in the server's queue:
    /// half a piece after each piece went out, the next goes out on a
    /// second connection and takes its place, and the first is answered at
    /// once (`docs/waiting.md`), so the waiter is never absent from the
    /// queue and nobody who arrived later overtakes it. At least 10 ms.
    pub fn wait_piece(mut self, piece: Duration) -> Self {
        self.wait_piece = piece;
        self
    }

    /// Synced grants: every acquire sends `SYNC replicas timeout-ms`, so a
    /// grant is answered only once `replicas` replicas acknowledged it
    /// within `timeout`; otherwise the module undoes it and the call fails
    /// with [`LockError::NotSynced`] (the lock is not held). Reply deadlines
    /// grow by `timeout`.
    ///
    /// `sync_replicas(0, Duration::ZERO)` turns the module's default
    /// (`lock.sync-replicas`) off for this client's acquires; without this
    /// option (the default) the module's configuration decides.
    ///
    /// Read-write locks are not synced (the module's `LOCK.RACQUIRE` and
    /// `LOCK.WACQUIRE` take no `SYNC`): with `replicas > 0` their acquires
    /// fail with [`LockError::InvalidArgument`] before anything is sent.
    pub fn sync_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.sync = Some((replicas, timeout));
        self
    }

    /// Whether the client asks the server to tell it at once when a held
    /// lock's key changes (`CLIENT TRACKING`, one RESP3 connection per
    /// client), so [`LockGuard::lost`] fires within milliseconds of a
    /// `LOCK.FORCE`, `DEL` or expiry instead of at the next renewal. On by
    /// default; single servers only (a cluster relies on renewals).
    ///
    /// [`LockGuard::lost`]: crate::LockGuard::lost
    pub fn track_locks(mut self, on: bool) -> Self {
        self.track_locks = on;
        self
    }

    /// Refuses settings no command could carry, when a client is built
    /// rather than at its first lock.
    pub(crate) fn check(&self) -> Result<()> {
        protocol::lease_ms(self.watchdog_lease)?;
        if self.wait_piece < Duration::from_millis(10) {
            return Err(LockError::InvalidArgument(format!(
                "a wait piece must be at least 10 ms: {:?}",
                self.wait_piece
            )));
        }
        self.sync_args()?;
        Ok(())
    }

    /// How much longer than a plain command an acquire may take to answer:
    /// the time the module may spend waiting for replicas.
    pub(crate) fn sync_time(&self) -> Duration {
        self.sync.map_or(Duration::ZERO, |(_, timeout)| timeout)
    }

    /// `SYNC`'s arguments, checked: a positive timeout when replicas are
    /// asked for (Redis reads a zero timeout as "forever"), in whole ms.
    pub(crate) fn sync_args(&self) -> Result<Option<(u32, u64)>> {
        let Some((replicas, timeout)) = self.sync else {
            return Ok(None);
        };
        let ms = timeout.as_nanos().div_ceil(1_000_000);
        if (replicas > 0 && ms == 0) || ms > i64::MAX as u128 {
            return Err(LockError::InvalidArgument(format!(
                "a sync timeout must be positive and fit in i64 milliseconds: {timeout:?}"
            )));
        }
        Ok(Some((replicas, ms as u64)))
    }
}
