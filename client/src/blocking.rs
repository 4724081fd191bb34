//! The blocking API, for code without an async runtime: the same locks
//! (and read-write locks), semaphores, permits and count-down latches,
//! guards, watchdog and retry checks, run on a one-thread tokio runtime the
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

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Runtime;

use crate::error::{LockError, Result};
use crate::guard::Fenced;
use crate::holds::Lost;
use crate::options::Options;
use crate::owner;
use crate::protocol::{Awaited, LockKind};

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
        LockClient::build(|| crate::LockClient::new(client))
    }

    /// As [`LockClient::new`], with `options`.
    pub fn with_options(client: redis::Client, options: Options) -> Result<LockClient> {
        LockClient::build(|| crate::LockClient::with_options(client, options))
    }

    /// A client for a Redis Cluster, with default [`Options`]: see
    /// [`crate::LockClient::cluster`].
    pub fn cluster(client: redis::cluster::ClusterClient) -> Result<LockClient> {
        LockClient::build(|| crate::LockClient::cluster(client))
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
            held: Held::new(self.runtime.clone(), guard),
        }
    }

    /// The async client acting as the calling thread's owner (or the
    /// explicit one): the blocking forms run its methods of the same name.
    fn as_thread(&self) -> crate::LockClient {
        self.inner.as_owner(self.owner())
    }

    /// Blocks on an async form that waits without end, and wraps its guard.
    fn held(&self, taking: impl Future<Output = Result<crate::LockGuard>>) -> Result<LockGuard> {
        Ok(self.guard(self.runtime.block_on(taking)?))
    }

    /// Blocks on an async fenced form that waits without end, and wraps its
    /// guard.
    fn fenced(
        &self,
        taking: impl Future<Output = Result<Fenced<crate::LockGuard>>>,
    ) -> Result<Fenced<LockGuard>> {
        Ok(self.runtime.block_on(taking)?.map(|g| self.guard(g)))
    }

    /// Blocks on an async fenced `try_` form, and wraps the guard it may
    /// return.
    fn fenced_if(
        &self,
        trying: impl Future<Output = Result<Option<Fenced<crate::LockGuard>>>>,
    ) -> Result<Option<Fenced<LockGuard>>> {
        Ok(self
            .runtime
            .block_on(trying)?
            .map(|f| f.map(|g| self.guard(g))))
    }

    /// Blocks on an async `try_` form, and wraps the guard it may return.
    fn held_if(
        &self,
        trying: impl Future<Output = Result<Option<crate::LockGuard>>>,
    ) -> Result<Option<LockGuard>> {
        Ok(self.runtime.block_on(trying)?.map(|g| self.guard(g)))
    }

    /// [`crate::LockClient::lock`]: waits as long as it takes; watchdog on.
    pub fn lock(&self, name: &str) -> Result<LockGuard> {
        self.held(self.as_thread().lock(name))
    }

    /// [`crate::LockClient::try_lock`]: waits at most `wait`; no watchdog
    /// when `lease` is given.
    pub fn try_lock(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.held_if(self.as_thread().try_lock(name, wait, lease))
    }

    /// [`crate::LockClient::lock_fenced`]: the guard carries a fencing token.
    pub fn lock_fenced(&self, name: &str) -> Result<Fenced<LockGuard>> {
        self.fenced(self.as_thread().lock_fenced(name))
    }

    /// [`crate::LockClient::read_lock`]: a read hold of a read-write lock;
    /// waits as long as it takes; watchdog on.
    pub fn read_lock(&self, name: &str) -> Result<LockGuard> {
        self.held(self.as_thread().read_lock(name))
    }

    /// [`crate::LockClient::write_lock`]: the write hold of a read-write
    /// lock; waits as long as it takes; watchdog on.
    /// [`LockError::UpgradeRefused`] when this owner holds it for reading.
    pub fn write_lock(&self, name: &str) -> Result<LockGuard> {
        self.held(self.as_thread().write_lock(name))
    }

    /// [`crate::LockClient::write_lock_fenced`]: a write hold whose guard
    /// carries a fencing token.
    pub fn write_lock_fenced(&self, name: &str) -> Result<Fenced<LockGuard>> {
        self.fenced(self.as_thread().write_lock_fenced(name))
    }

    /// [`crate::LockClient::try_read_lock`]: waits at most `wait`; no
    /// watchdog when `lease` is given.
    pub fn try_read_lock(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.held_if(self.as_thread().try_read_lock(name, wait, lease))
    }

    /// [`crate::LockClient::try_write_lock`]: waits at most `wait`; no
    /// watchdog when `lease` is given.
    pub fn try_write_lock(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.held_if(self.as_thread().try_write_lock(name, wait, lease))
    }

    /// [`crate::LockClient::try_write_lock_fenced`]: [`LockClient::try_write_lock`]
    /// whose guard carries a fencing token.
    pub fn try_write_lock_fenced(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<Fenced<LockGuard>>> {
        self.fenced_if(self.as_thread().try_write_lock_fenced(name, wait, lease))
    }

    /// [`crate::LockClient::try_lock_fenced`]: [`LockClient::try_lock`]
    /// whose guard carries a fencing token.
    pub fn try_lock_fenced(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<Fenced<LockGuard>>> {
        self.fenced_if(self.as_thread().try_lock_fenced(name, wait, lease))
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

    /// The semaphore `name`, as [`crate::LockClient::semaphore`].
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore {
            runtime: self.runtime.clone(),
            inner: self.inner.semaphore(name),
        }
    }

    /// The permit-expirable semaphore `name`, as
    /// [`crate::LockClient::permit_expirable_semaphore`].
    pub fn permit_expirable_semaphore(&self, name: impl Into<String>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore {
            runtime: self.runtime.clone(),
            inner: self.inner.permit_expirable_semaphore(name),
        }
    }

    /// The count-down latch `name`, as [`crate::LockClient::count_down_latch`].
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch {
            runtime: self.runtime.clone(),
            inner: self.inner.count_down_latch(name),
        }
    }
}

/// A blocking [`crate::Semaphore`]: the same calls, waiting on the
/// client's runtime thread.
///
/// ```no_run
/// # fn demo(locks: redis_lock_client::blocking::LockClient) -> Result<(), redis_lock_client::LockError> {
/// let slots = locks.semaphore("render-slots");
/// slots.try_set_permits(4, None)?;
/// slots.acquire(1)?;
/// slots.release(1)?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    runtime: Arc<Runtime>,
    inner: crate::Semaphore,
}

impl Semaphore {
    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// [`crate::Semaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u64, ttl: Option<Duration>) -> Result<bool> {
        self.runtime
            .block_on(self.inner.try_set_permits(permits, ttl))
    }

    /// [`crate::Semaphore::add_permits`].
    pub fn add_permits(&self, delta: i64) -> Result<i64> {
        self.runtime.block_on(self.inner.add_permits(delta))
    }

    /// [`crate::Semaphore::acquire`]: waits as long as it takes.
    pub fn acquire(&self, permits: u64) -> Result<()> {
        self.runtime.block_on(self.inner.acquire(permits))
    }

    /// [`crate::Semaphore::try_acquire`]: no wait.
    pub fn try_acquire(&self, permits: u64) -> Result<bool> {
        self.runtime.block_on(self.inner.try_acquire(permits))
    }

    /// [`crate::Semaphore::try_acquire_for`]: waits at most `wait`.
    pub fn try_acquire_for(&self, permits: u64, wait: Duration) -> Result<bool> {
        self.runtime
            .block_on(self.inner.try_acquire_for(permits, wait))
    }

    /// [`crate::Semaphore::release`]: the count after.
    pub fn release(&self, permits: u64) -> Result<i64> {
        self.runtime.block_on(self.inner.release(permits))
    }

    /// [`crate::Semaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        self.runtime.block_on(self.inner.available_permits())
    }

    /// [`crate::Semaphore::drain_permits`].
    pub fn drain_permits(&self) -> Result<i64> {
        self.runtime.block_on(self.inner.drain_permits())
    }
}

/// A blocking [`crate::PermitExpirableSemaphore`].
#[derive(Clone, Debug)]
pub struct PermitExpirableSemaphore {
    runtime: Arc<Runtime>,
    inner: crate::PermitExpirableSemaphore,
}

impl PermitExpirableSemaphore {
    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// [`crate::PermitExpirableSemaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u64, ttl: Option<Duration>) -> Result<bool> {
        self.runtime
            .block_on(self.inner.try_set_permits(permits, ttl))
    }

    /// [`crate::PermitExpirableSemaphore::add_permits`].
    pub fn add_permits(&self, delta: i64) -> Result<i64> {
        self.runtime.block_on(self.inner.add_permits(delta))
    }

    /// [`crate::PermitExpirableSemaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        self.runtime.block_on(self.inner.available_permits())
    }

    fn guard(&self, permits: crate::Permits) -> Permits {
        Permits {
            held: Held::new(self.runtime.clone(), permits),
        }
    }

    /// [`crate::PermitExpirableSemaphore::acquire`]: waits as long as it
    /// takes; the watchdog renews them when `lease` is None.
    pub fn acquire(&self, permits: u64, lease: Option<Duration>) -> Result<Permits> {
        let got = self.runtime.block_on(self.inner.acquire(permits, lease))?;
        Ok(self.guard(got))
    }

    /// [`crate::PermitExpirableSemaphore::try_acquire`]: no wait.
    pub fn try_acquire(&self, permits: u64, lease: Option<Duration>) -> Result<Option<Permits>> {
        let got = self
            .runtime
            .block_on(self.inner.try_acquire(permits, lease))?;
        Ok(got.map(|p| self.guard(p)))
    }

    /// [`crate::PermitExpirableSemaphore::try_acquire_for`]: waits at most
    /// `wait`.
    pub fn try_acquire_for(
        &self,
        permits: u64,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<Permits>> {
        let got = self
            .runtime
            .block_on(self.inner.try_acquire_for(permits, wait, lease))?;
        Ok(got.map(|p| self.guard(p)))
    }
}

/// Blocking [`crate::Permits`]: given back by [`Permits::release`] or,
/// before drop returns, on drop.
#[must_use = "dropping the guard gives the permits back at once"]
pub struct Permits {
    held: Held<crate::Permits>,
}

impl std::fmt::Debug for Permits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.held.inner.fmt(f)
    }
}

impl Permits {
    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.held.get().name()
    }

    /// The permits' ids.
    pub fn ids(&self) -> &[String] {
        self.held.get().ids()
    }

    /// Whether the watchdog renews them.
    pub fn is_renewed(&self) -> bool {
        self.held.get().is_renewed()
    }

    /// Whether the permits are known to be lost, and why.
    pub fn is_lost(&self) -> Option<Lost> {
        self.held.get().is_lost()
    }

    /// Blocks until the permits are lost or `timeout` passes: the reason,
    /// or None.
    pub fn wait_lost(&self, timeout: Duration) -> Option<Lost> {
        self.held.wait_lost(timeout)
    }

    /// Gives the permits back; [`LockError::PermitNotHeld`] if one was
    /// lost before.
    pub fn release(self) -> Result<()> {
        self.held.give_back()
    }
}

/// A blocking [`crate::CountDownLatch`].
#[derive(Clone, Debug)]
pub struct CountDownLatch {
    runtime: Arc<Runtime>,
    inner: crate::CountDownLatch,
}

impl CountDownLatch {
    /// The latch's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// [`crate::CountDownLatch::try_set_count`].
    pub fn try_set_count(&self, count: u64, ttl: Option<Duration>) -> Result<bool> {
        self.runtime.block_on(self.inner.try_set_count(count, ttl))
    }

    /// [`crate::CountDownLatch::count_down`]: the count after.
    pub fn count_down(&self) -> Result<u64> {
        self.runtime.block_on(self.inner.count_down())
    }

    /// [`crate::CountDownLatch::count`].
    pub fn count(&self) -> Result<u64> {
        self.runtime.block_on(self.inner.count())
    }

    /// [`crate::CountDownLatch::await_zero`]: blocks until zero, the
    /// timeout, or the latch's expiry.
    pub fn await_zero(&self, timeout: Option<Duration>) -> Result<Awaited> {
        self.runtime.block_on(self.inner.await_zero(timeout))
    }
}

/// A blocking hold of a lock: released by [`LockGuard::unlock`] or, before
/// drop returns, on drop.
#[must_use = "dropping a guard releases the lock at once"]
pub struct LockGuard {
    held: Held<crate::LockGuard>,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.held.inner.fmt(f)
    }
}

impl LockGuard {
    /// The lock's name.
    pub fn name(&self) -> &str {
        self.held.get().name()
    }

    /// The owner id holding it.
    pub fn owner(&self) -> &str {
        self.held.get().owner()
    }

    /// A lock, or a read-write lock held for reading or writing.
    pub fn kind(&self) -> LockKind {
        self.held.get().kind()
    }

    /// The fencing token of a fenced grant (the fenced acquires return a
    /// [`Fenced`] guard, whose own `token()` is a plain number).
    pub fn token(&self) -> Option<i64> {
        self.held.get().token()
    }

    /// This owner's holds, as this client counts them.
    pub fn hold_count(&self) -> u64 {
        self.held.get().hold_count()
    }

    /// Whether the lock is known to be lost, and why (no server call: the
    /// watchdog thread keeps this current).
    pub fn is_lost(&self) -> Option<Lost> {
        self.held.get().is_lost()
    }

    /// Blocks until the lock is lost or `timeout` passes: the reason, or None.
    pub fn wait_lost(&self, timeout: Duration) -> Option<Lost> {
        self.held.wait_lost(timeout)
    }

    /// Asks the server whether this owner still holds the lock.
    pub fn is_held(&self) -> Result<bool> {
        self.held.runtime.block_on(self.held.get().is_held())
    }

    /// The lease left on the server.
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        self.held
            .runtime
            .block_on(self.held.get().remaining_lease())
    }

    /// Releases this hold; [`LockError::NotHeld`] if it was lost before.
    pub fn unlock(self) -> Result<()> {
        self.held.give_back()
    }
}

impl Fenced<LockGuard> {
    /// [`LockGuard::unlock`].
    pub fn unlock(self) -> Result<()> {
        self.into_guard().unlock()
    }
}

/// What a blocking guard needs of the async guard it wraps.
trait AsyncHold: std::fmt::Debug {
    /// Gives the hold back: a lock's `unlock`, permits' `release`.
    fn give_back(self) -> impl Future<Output = Result<()>>;

    /// Resolves when the hold is lost.
    fn lost(&self) -> impl Future<Output = Lost> + '_;
}

impl AsyncHold for crate::LockGuard {
    fn give_back(self) -> impl Future<Output = Result<()>> {
        self.unlock()
    }

    fn lost(&self) -> impl Future<Output = Lost> + '_ {
        crate::LockGuard::lost(self)
    }
}

impl AsyncHold for crate::Permits {
    fn give_back(self) -> impl Future<Output = Result<()>> {
        self.release()
    }

    fn lost(&self) -> impl Future<Output = Lost> + '_ {
        crate::Permits::lost(self)
    }
}

/// The async guard inside a blocking one, and the runtime it runs on: given
/// back by [`Held::give_back`] or, before drop returns, on drop.
struct Held<G: AsyncHold> {
    runtime: Arc<Runtime>,
    /// Taken only by `give_back` and `drop`, which both consume the guard.
    inner: Option<G>,
}

impl<G: AsyncHold> Held<G> {
    fn new(runtime: Arc<Runtime>, guard: G) -> Held<G> {
        Held {
            runtime,
            inner: Some(guard),
        }
    }

    fn get(&self) -> &G {
        self.inner
            .as_ref()
            .expect("a blocking guard keeps its inner guard until it is consumed")
    }

    /// Blocks until the hold is lost or `timeout` passes: the reason, or
    /// None.
    fn wait_lost(&self, timeout: Duration) -> Option<Lost> {
        let guard = self.get();
        self.runtime
            .block_on(async { tokio::time::timeout(timeout, guard.lost()).await.ok() })
    }

    fn give_back(mut self) -> Result<()> {
        match self.inner.take() {
            Some(guard) => self.runtime.block_on(guard.give_back()),
            None => Ok(()),
        }
    }
}

impl<G: AsyncHold> Drop for Held<G> {
    fn drop(&mut self) {
        let Some(guard) = self.inner.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            // Inside async code block_on would panic: give it back in the
            // background instead, as the async guard does.
            drop(guard);
        } else {
            let _ = self.runtime.block_on(guard.give_back());
        }
    }
}
