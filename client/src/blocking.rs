//! The blocking API, for code without an async runtime: the same locks
//! (and read-write locks), guards, watchdog and retry checks, run on a one-thread tokio runtime the
//! client owns. The watchdog keeps running on that thread while your thread
//! works.
//!
//! Owner ids are per thread here, as in Redisson: `<client id>:<thread
//! number>` (see the crate docs), or an explicit one ([`LockClient::as_owner`]).
//!
//! Do not call it from async code (it blocks the caller); use the async
//! [`crate::LockClient`] there.
//!
//! ```no_run
//! # fn demo() -> Result<(), redis_lock_client::LockError> {
//! use redis_lock_client::{blocking::LockClient, redis};
//! let locks = LockClient::new(redis::Client::open("redis://127.0.0.1/").unwrap())?;
//! let guard = locks.lock("order:42")?;
//! // ... work; guard.is_lost() tells you if the watchdog lost it ...
//! guard.unlock()?;
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Runtime;

use crate::acquire::{Ask, Wait};
use crate::error::{LockError, Result};
use crate::holds::Lost;
use crate::options::Options;
use crate::owner;
use crate::protocol::LockKind;

/// A blocking client: see the [module docs](self).
#[derive(Clone)]
pub struct LockClient {
    runtime: Arc<Runtime>,
    inner: crate::LockClient,
}

impl std::fmt::Debug for LockClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl LockClient {
    /// A client for a single server, with default [`Options`].
    pub fn new(client: redis::Client) -> Result<LockClient> {
        LockClient::with_options(client, Options::default())
    }

    /// As [`LockClient::new`], with `options`.
    pub fn with_options(client: redis::Client, options: Options) -> Result<LockClient> {
        LockClient::build(|| crate::LockClient::with_options(client, options))
    }

    /// A client for a Redis Cluster, with default [`Options`]: see
    /// [`crate::LockClient::cluster`].
    pub fn cluster(client: redis::cluster::ClusterClient) -> Result<LockClient> {
        LockClient::cluster_with_options(client, Options::default())
    }

    /// As [`LockClient::cluster`], with `options`.
    pub fn cluster_with_options(
        client: redis::cluster::ClusterClient,
        options: Options,
    ) -> Result<LockClient> {
        LockClient::build(|| crate::LockClient::cluster_with_options(client, options))
    }

    /// A client for the master Sentinel names `master_name`, see
    /// [`crate::LockClient::sentinel`].
    pub fn sentinel<T: redis::IntoConnectionInfo>(
        sentinels: Vec<T>,
        master_name: &str,
        options: Options,
    ) -> Result<LockClient> {
        LockClient::build(|| crate::LockClient::sentinel(sentinels, master_name, options))
    }

    fn build(make: impl FnOnce() -> Result<crate::LockClient>) -> Result<LockClient> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redis-lock-client")
            .enable_all()
            .build()
            .map_err(LockError::Runtime)?;
        let inner = {
            let _inside = runtime.enter();
            make()?
        };
        Ok(LockClient {
            runtime: Arc::new(runtime),
            inner,
        })
    }

    /// Whether this client talks to a cluster.
    pub fn is_cluster(&self) -> bool {
        self.inner.is_cluster()
    }

    /// The async client underneath (it shares everything with this one).
    pub fn as_async(&self) -> &crate::LockClient {
        &self.inner
    }

    /// This client's id, the first half of its owner ids.
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// The same client acting as `owner` instead of the calling thread.
    pub fn as_owner(&self, owner: impl Into<String>) -> LockClient {
        LockClient {
            runtime: self.runtime.clone(),
            inner: self.inner.as_owner(owner),
        }
    }

    /// The owner id used right now: the explicit one, or the calling thread's.
    pub fn owner(&self) -> String {
        match self.inner.explicit_owner() {
            Some(owner) => owner.to_string(),
            None => owner::thread_owner(self.inner.id()),
        }
    }

    fn guard(&self, guard: crate::LockGuard) -> LockGuard {
        LockGuard {
            runtime: self.runtime.clone(),
            inner: Some(guard),
        }
    }

    fn acquire(
        &self,
        kind: LockKind,
        name: &str,
        lease: Option<Duration>,
        wait: Wait,
        fenced: bool,
    ) -> Result<Option<LockGuard>> {
        let ask = Ask {
            kind,
            name: name.to_string(),
            owner: self.owner(),
            lease,
            wait,
            fenced,
        };
        let got = self.runtime.block_on(self.inner.acquire_as(ask))?;
        Ok(got.map(|g| self.guard(g)))
    }

    /// [`crate::LockClient::lock`]: waits as long as it takes; watchdog on.
    pub fn lock(&self, name: &str) -> Result<LockGuard> {
        self.lock_with(LockKind::Lock, name, false)
    }

    /// [`crate::LockClient::try_lock`]: waits at most `wait`; no watchdog
    /// when `lease` is given.
    pub fn try_lock(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.acquire(LockKind::Lock, name, lease, Wait::from(wait), false)
    }

    /// [`crate::LockClient::lock_fenced`]: the guard carries a fencing token.
    pub fn lock_fenced(&self, name: &str) -> Result<LockGuard> {
        self.lock_with(LockKind::Lock, name, true)
    }

    /// [`crate::LockClient::read_lock`]: a read hold of a read-write lock;
    /// waits as long as it takes; watchdog on.
    pub fn read_lock(&self, name: &str) -> Result<LockGuard> {
        self.lock_with(LockKind::Read, name, false)
    }

    /// [`crate::LockClient::write_lock`]: the write hold of a read-write
    /// lock; waits as long as it takes; watchdog on.
    /// [`LockError::UpgradeRefused`] when this owner holds it for reading.
    pub fn write_lock(&self, name: &str) -> Result<LockGuard> {
        self.lock_with(LockKind::Write, name, false)
    }

    /// [`crate::LockClient::write_lock_fenced`]: a write hold whose guard
    /// carries a fencing token.
    pub fn write_lock_fenced(&self, name: &str) -> Result<LockGuard> {
        self.lock_with(LockKind::Write, name, true)
    }

    /// [`crate::LockClient::try_read_lock`]: waits at most `wait`; no
    /// watchdog when `lease` is given.
    pub fn try_read_lock(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.acquire(LockKind::Read, name, lease, Wait::from(wait), false)
    }

    /// [`crate::LockClient::try_write_lock`]: waits at most `wait`; no
    /// watchdog when `lease` is given.
    pub fn try_write_lock(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.acquire(LockKind::Write, name, lease, Wait::from(wait), false)
    }

    /// [`crate::LockClient::try_write_lock_fenced`]: [`LockClient::try_write_lock`]
    /// whose guard carries a fencing token.
    pub fn try_write_lock_fenced(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.acquire(LockKind::Write, name, lease, Wait::from(wait), true)
    }

    /// The waiting forms: no lease, no end to the wait.
    fn lock_with(&self, kind: LockKind, name: &str, fenced: bool) -> Result<LockGuard> {
        self.acquire(kind, name, None, Wait::Forever, fenced)?
            .ok_or_else(|| LockError::Protocol("a wait without end ended without the lock".into()))
    }

    /// [`crate::LockClient::try_lock_fenced`]: [`LockClient::try_lock`]
    /// whose guard carries a fencing token.
    pub fn try_lock_fenced(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.acquire(LockKind::Lock, name, lease, Wait::from(wait), true)
    }

    /// Whether anyone holds the lock.
    pub fn is_locked(&self, name: &str) -> Result<bool> {
        self.runtime.block_on(self.inner.is_locked(name))
    }

    /// The lock's remaining lease, whoever holds it; None when free.
    pub fn remaining_lease(&self, name: &str) -> Result<Option<Duration>> {
        self.runtime.block_on(self.inner.remaining_lease(name))
    }

    /// `LOCK.FORCE`: deletes the lock whoever holds it.
    pub fn force_unlock(&self, name: &str) -> Result<bool> {
        self.runtime.block_on(self.inner.force_unlock(name))
    }
}

/// A blocking hold of a lock: released by [`LockGuard::unlock`] or, before
/// drop returns, on drop.
#[must_use = "dropping a guard releases the lock at once"]
pub struct LockGuard {
    runtime: Arc<Runtime>,
    inner: Option<crate::LockGuard>,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl LockGuard {
    fn get(&self) -> &crate::LockGuard {
        // Only `unlock` and `drop` take it, and both consume the guard.
        self.inner
            .as_ref()
            .expect("a blocking guard keeps its inner guard until it is consumed")
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.get().name()
    }

    /// The owner id holding it.
    pub fn owner(&self) -> &str {
        self.get().owner()
    }

    /// A lock, or a read-write lock held for reading or writing.
    pub fn kind(&self) -> LockKind {
        self.get().kind()
    }

    /// The fencing token of a fenced grant.
    pub fn token(&self) -> Option<i64> {
        self.get().token()
    }

    /// This owner's holds, as this client counts them.
    pub fn hold_count(&self) -> u64 {
        self.get().hold_count()
    }

    /// Whether the lock is known to be lost, and why (no server call: the
    /// watchdog thread keeps this current).
    pub fn is_lost(&self) -> Option<Lost> {
        self.get().is_lost()
    }

    /// Blocks until the lock is lost or `timeout` passes: the reason, or None.
    pub fn wait_lost(&self, timeout: Duration) -> Option<Lost> {
        let guard = self.get();
        self.runtime
            .block_on(async { tokio::time::timeout(timeout, guard.lost()).await.ok() })
    }

    /// Asks the server whether this owner still holds the lock.
    pub fn is_held(&self) -> Result<bool> {
        self.runtime.block_on(self.get().is_held())
    }

    /// The lease left on the server.
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        self.runtime.block_on(self.get().remaining_lease())
    }

    /// Releases this hold; [`LockError::NotHeld`] if it was lost before.
    pub fn unlock(mut self) -> Result<()> {
        match self.inner.take() {
            Some(guard) => self.runtime.block_on(guard.unlock()),
            None => Ok(()),
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(guard) = self.inner.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            // Inside async code block_on would panic: release in the
            // background instead, as the async guard does.
            drop(guard);
        } else {
            let _ = self.runtime.block_on(guard.unlock());
        }
    }
}
