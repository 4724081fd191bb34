//! The lock API of [`LockClient`]: taking a lock or a read or write hold
//! of a read-write lock (plain, `try_`, fenced: each an [`Ask`] carried out
//! by `acquire.rs`), asking the server about a lock, forcing it, and giving
//! a hold back (a [`LockGuard`]'s unlock and drop).

use std::sync::Arc;
use std::time::Duration;

use crate::client::LockClient;
use crate::counted::Outcome;
use crate::error::{LockError, Result};
use crate::guard::{Fenced, LockGuard};
use crate::holds::{Entry, Lost};
use crate::protocol::{self, LockKind};
use crate::request::{Ask, Wait};

impl LockClient {
    /// Takes the lock, waiting as long as it takes, in the server's FIFO
    /// queue. The watchdog keeps the lease
    /// ([`Options::watchdog_lease`](crate::Options::watchdog_lease)) alive
    /// until the guard is released; [`LockGuard::lost`] tells you if it
    /// cannot. Re-entrant: the same owner may take it again.
    pub async fn lock(&self, name: &str) -> Result<LockGuard> {
        self.lock_with(LockKind::Lock, name, false).await
    }

    /// Tries to take the lock, waiting at most `wait` (zero: one attempt).
    /// With `lease: Some(..)` the lock frees itself after it and no watchdog
    /// runs (as in Redisson); with `None` the watchdog keeps it. `Ok(None)`
    /// when someone else held it for the whole wait.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(locks: redis_lock_client::LockClient) -> Result<(), redis_lock_client::LockError> {
    /// match locks.try_lock("report", Duration::from_secs(2), Some(Duration::from_secs(10))).await? {
    ///     Some(guard) => { /* at most 10 s of work */ guard.unlock().await? }
    ///     None => println!("busy for 2 s, giving up"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.try_lock_with(LockKind::Lock, name, wait, lease, false)
            .await
    }

    /// [`LockClient::lock`], also returning the lock's fencing token
    /// ([`LockGuard::token`]): a number the module makes larger with every
    /// grant, for the protected resource to reject writes older than one it
    /// has seen (Redisson's `RFencedLock`). Needs a module with
    /// `LOCK.ACQUIRE ... TOKEN`.
    ///
    /// ```no_run
    /// # async fn demo(locks: redis_lock_client::LockClient) -> Result<(), redis_lock_client::LockError> {
    /// let guard = locks.lock_fenced("stock").await?;
    /// let token = guard.token();
    /// // send `token` with every write; the resource refuses older ones
    /// # let _ = token;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock_fenced(&self, name: &str) -> Result<Fenced<LockGuard>> {
        Fenced::of(self.lock_with(LockKind::Lock, name, true).await?)
    }

    /// [`LockClient::try_lock`] with a fencing token, see [`LockClient::lock_fenced`].
    pub async fn try_lock_fenced(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<Fenced<LockGuard>>> {
        self.try_lock_with(LockKind::Lock, name, wait, lease, true)
            .await?
            .map(Fenced::of)
            .transpose()
    }

    /// Takes a read hold of the read-write lock `name` (Redisson's
    /// `RReadWriteLock.readLock().lock()`), waiting as long as it takes in
    /// the server's one FIFO queue of readers and writers; the watchdog
    /// keeps it (`LOCK.RWRENEW`). Readers share the lock; a writer excludes
    /// them. The queue is fair both ways: a reader that arrives while a
    /// writer waits queues behind it.
    ///
    /// Re-entrant, and an owner holding the write lock may also take read
    /// (a downgrade: its write release then leaves it reading). Each read
    /// hold has a lease of its own; the returned guard is one hold, with
    /// everything a [`LockGuard`] does ([`LockGuard::lost`],
    /// [`LockGuard::unlock`], release on drop).
    ///
    /// ```no_run
    /// # async fn demo(locks: redis_lock_client::LockClient) -> Result<(), redis_lock_client::LockError> {
    /// let reading = locks.read_lock("catalog").await?; // others may read too
    /// // ... read ...
    /// reading.unlock().await?;
    /// let writing = locks.write_lock("catalog").await?; // nobody else reads or writes
    /// // ... write ...
    /// writing.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn read_lock(&self, name: &str) -> Result<LockGuard> {
        self.lock_with(LockKind::Read, name, false).await
    }

    /// Takes the write hold of the read-write lock `name` (Redisson's
    /// `writeLock().lock()`), waiting as long as it takes until no one else
    /// reads or writes; the watchdog keeps it. Re-entrant.
    ///
    /// An owner that holds the lock for reading is refused at once with
    /// [`LockError::UpgradeRefused`]: it would wait for its own read holds
    /// forever (release them first). Redisson leaves it waiting.
    pub async fn write_lock(&self, name: &str) -> Result<LockGuard> {
        self.lock_with(LockKind::Write, name, false).await
    }

    /// [`LockClient::read_lock`], waiting at most `wait` (zero: one
    /// attempt), as [`LockClient::try_lock`]: with `lease: Some(..)` the
    /// hold ends after it and no watchdog runs; `Ok(None)` when the lock
    /// could not be had within `wait`.
    ///
    /// Each read hold has its own lease: re-entered holds with a caller's
    /// lease end one by one, and the guards report the lock lost when the
    /// first of them ends. `LOCK.RWRENEW` renews every hold an owner has on
    /// a name, so a leased hold of an owner that also holds the name under
    /// the watchdog (a writer reading) lasts as long as that one.
    pub async fn try_read_lock(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.try_lock_with(LockKind::Read, name, wait, lease, false)
            .await
    }

    /// [`LockClient::write_lock`], waiting at most `wait`, as
    /// [`LockClient::try_lock`]. [`LockError::UpgradeRefused`] when this
    /// owner holds the lock for reading.
    pub async fn try_write_lock(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.try_lock_with(LockKind::Write, name, wait, lease, false)
            .await
    }

    /// [`LockClient::write_lock`] with a fencing token
    /// ([`LockGuard::token`], `LOCK.WACQUIRE ... TOKEN`): one per grant,
    /// growing, from the same counter as [`LockClient::lock_fenced`]'s.
    /// Reads are not fenced.
    pub async fn write_lock_fenced(&self, name: &str) -> Result<Fenced<LockGuard>> {
        Fenced::of(self.lock_with(LockKind::Write, name, true).await?)
    }

    /// [`LockClient::try_write_lock`] with a fencing token, see
    /// [`LockClient::write_lock_fenced`].
    pub async fn try_write_lock_fenced(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<Fenced<LockGuard>>> {
        self.try_lock_with(LockKind::Write, name, wait, lease, true)
            .await?
            .map(Fenced::of)
            .transpose()
    }

    /// `lock` / `read_lock` / `write_lock` and their fenced forms: the
    /// caller's owner, no lease, no end to the wait.
    async fn lock_with(&self, kind: LockKind, name: &str, fenced: bool) -> Result<LockGuard> {
        let ask = Ask {
            kind,
            name: name.to_string(),
            owner: self.owner(),
            lease: None,
            wait: Wait::Forever,
            fenced,
        };
        self.acquire_as(ask)
            .await?
            .ok_or_else(|| LockError::Protocol("a wait without end ended without the lock".into()))
    }

    /// The `try_` forms: a zero `wait` is one attempt.
    async fn try_lock_with(
        &self,
        kind: LockKind,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
        fenced: bool,
    ) -> Result<Option<LockGuard>> {
        let ask = Ask {
            kind,
            name: name.to_string(),
            owner: self.owner(),
            lease,
            wait: Wait::from(wait),
            fenced,
        };
        self.acquire_as(ask).await
    }

    /// Whether anyone holds the lock (Redisson's `isLocked`).
    pub async fn is_locked(&self, name: &str) -> Result<bool> {
        let cmd = protocol::is_locked(name);
        self.simple_parsed(&cmd, protocol::parse_flag).await
    }

    /// The lock's remaining lease, whoever holds it: `None` when it is free
    /// (or has no expiry, which a lock taken through the module never lacks).
    pub async fn remaining_lease(&self, name: &str) -> Result<Option<Duration>> {
        protocol::parse_pttl(&self.simple(&protocol::lease_left(name)).await?)
    }

    /// Deletes the lock whoever holds it (`LOCK.FORCE`, Redisson's
    /// `forceUnlock`): an operator's tool. The holder's
    /// [`LockGuard::lost`] fires within milliseconds (with
    /// [`Options::track_locks`](crate::Options::track_locks), on a single
    /// server), or at its watchdog's next renewal. True if a lock existed.
    pub async fn force_unlock(&self, name: &str) -> Result<bool> {
        let cmd = protocol::force(name);
        self.simple_parsed(&cmd, protocol::parse_flag).await
    }

    /// Gives back one hold of `entry` (the guard's unlock and drop).
    pub(crate) async fn release(&self, entry: &Arc<Entry>) -> Result<()> {
        let _op = entry.op.lock().await;
        let (known, renew, lost) = {
            let state = entry.state();
            (state.holds(), state.watchdog(), state.is_retired())
        };
        let not_held = || LockError::NotHeld {
            name: entry.name.clone(),
        };
        if known == 0 {
            return Err(not_held());
        }
        if lost {
            // Lost (lease ended or forced): the server has nothing of this
            // tenure left, and a new tenure of the same owner must not lose
            // a hold to this guard.
            entry.state().drop_lost_hold();
            return Err(not_held());
        }
        // Holds remain: restart the watchdog's lease, as Redisson does (a
        // read release has none to restart: each read hold has its own).
        let lease_ms = match (renew, known > 1) {
            (Some(renew), true) => Some(protocol::lease_ms(renew)?),
            _ => None,
        };
        let cmd = protocol::release(entry.holder(), lease_ms);
        let counted = &self.inner.counted;
        let within = counted.options.command_timeout;
        let outcome = counted
            .run(&cmd, entry.holder(), (known, known - 1), &|_| {}, within)
            .await;
        let held = match outcome {
            Ok(Outcome::Reply(v)) => protocol::parse_release(&v)?,
            Ok(Outcome::AppliedUnseen) => true,
            Err(LockError::HoldCountMismatch { found: 0, .. }) => false,
            Err(e) => return Err(e),
        };
        let holds = entry.state().released(held);
        if !held {
            // The server had no hold left: any other guard of this tenure
            // has lost the lock too, and is told.
            self.inner.holds.mark_lost(entry, Lost::NotHeld);
            return Err(not_held());
        }
        if holds == 0 {
            self.inner.holds.retire(entry);
        }
        Ok(())
    }
}
