//! [`LockGuard`]: one hold of a lock, released by `unlock()` or on drop, and
//! the signal that tells its holder when the lock is gone. What the guard
//! knows of its hold is the client's (`holds.rs`): it asks, never sets.

use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::client::LockClient;
use crate::error::{LockError, Result};
use crate::holds::{Entry, Lost};
use crate::protocol::{self, LockKind};

/// A hold of a lock, or a read or write hold of a read-write lock
/// ([`LockGuard::kind`]). Release it with [`LockGuard::unlock`] (which
/// reports errors) or by dropping it (which releases in the background, on
/// the client's runtime). Several guards of one owner on one lock (of one
/// kind) are re-entrant holds: the lock is free when the last is released.
///
/// The guard also tells you when the lock is lost ([`LockGuard::lost`]):
/// select on it next to your work, and stop writing when it fires.
///
/// ```no_run
/// # async fn demo(locks: redis_lock_client::LockClient) -> Result<(), redis_lock_client::LockError> {
/// # async fn work() {}
/// let guard = locks.lock("ledger").await?;
/// tokio::select! {
///     _ = work() => guard.unlock().await?,
///     why = guard.lost() => eprintln!("lock lost ({why}): stopping"),
/// }
/// # Ok(()) }
/// ```
#[must_use = "dropping a guard releases the lock at once"]
pub struct LockGuard {
    held: Held,
    token: Option<i64>,
    armed: bool,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.held.entry.name)
            .field("owner", &self.held.entry.owner)
            .field("kind", &self.held.entry.kind)
            .field("token", &self.token)
            .field("lost", &*self.held.lost.borrow())
            .finish()
    }
}

impl LockGuard {
    pub(crate) fn new(client: LockClient, entry: Arc<Entry>, token: Option<i64>) -> LockGuard {
        LockGuard {
            held: Held::new(client, entry),
            token,
            armed: true,
        }
    }

    /// The lock's name (its key).
    pub fn name(&self) -> &str {
        &self.held.entry.name
    }

    /// The owner id holding it (the hash field).
    pub fn owner(&self) -> &str {
        &self.held.entry.owner
    }

    /// What this is a hold of: a lock, or a read-write lock held for reading
    /// or for writing.
    pub fn kind(&self) -> LockKind {
        self.held.entry.kind
    }

    /// The fencing token of this grant; None for a lock taken without one.
    /// The fenced acquires ([`LockClient::lock_fenced`],
    /// [`LockClient::write_lock_fenced`]) return a [`Fenced`] guard, whose
    /// own `token()` is a plain number.
    pub fn token(&self) -> Option<i64> {
        self.token
    }

    /// How many holds this owner has on the lock, as this client counts them
    /// (of this kind: a read-write lock counts reads and writes apart).
    pub fn hold_count(&self) -> u64 {
        self.held.entry.state().holds()
    }

    /// Whether the lock is known to be lost, and why. A lease that has
    /// passed without a successful renewal counts, even before the watchdog
    /// has run.
    pub fn is_lost(&self) -> Option<Lost> {
        self.held.is_lost()
    }

    /// Resolves when the lock is lost, at once if it already is. Never
    /// resolves while the lock is held. On a single server (or through
    /// Sentinel) the server tells the client when the lock's key changes
    /// ([`Options::track_locks`](crate::Options::track_locks)), so a
    /// `LOCK.FORCE`, `DEL` or expiry is known within milliseconds; in a
    /// cluster, or if that connection is down, the watchdog finds a lost
    /// lock at its next renewal, at most a third of the lease after the
    /// loss. A lock taken with a lease is lost when that lease has passed.
    pub async fn lost(&self) -> Lost {
        self.held.lost().await
    }

    /// A receiver of the lost signal, for code that wants to own it (to move
    /// it into another task, or `select!` on it in a loop): it holds `None`
    /// while the lock is held, then the reason.
    pub fn lost_signal(&self) -> watch::Receiver<Option<Lost>> {
        self.held.lost.clone()
    }

    /// Asks the server whether this owner still holds the lock (Redisson's
    /// `isHeldByThread`): whether its field (`<owner>`, or `<owner>:write`
    /// for a write hold) is in the lock's hash.
    pub async fn is_held(&self) -> Result<bool> {
        let Held { client, entry, .. } = &self.held;
        let cmd = protocol::is_held(&entry.name, &entry.field);
        client.simple_parsed(&cmd, protocol::parse_flag).await
    }

    /// The lease left on the server; None if the lock is free. For a
    /// read-write lock this is the lock's, which lasts as long as the
    /// longest hold of anyone.
    pub async fn remaining_lease(&self) -> Result<Option<Duration>> {
        let Held { client, entry, .. } = &self.held;
        client.remaining_lease(&entry.name).await
    }

    /// Restarts the lease on the server (`LOCK.RENEW`): false if the lock
    /// is no longer held. For multi-locks, whose parts must end together.
    pub(crate) async fn restart_lease(&self, lease: Duration) -> Result<bool> {
        let Held { client, entry, .. } = &self.held;
        let sent = Instant::now();
        let renewed = client.inner.counted.renew(entry.holder(), lease).await?;
        if renewed {
            entry.state().lease_restarted(sent, lease);
        }
        Ok(renewed)
    }

    /// Releases this hold. [`LockError::NotHeld`](crate::LockError::NotHeld)
    /// when the lock was lost before (its lease ended or it was forced):
    /// whatever was done under it may have overlapped another holder.
    pub async fn unlock(mut self) -> Result<()> {
        self.armed = false;
        self.held
            .finish(|client, entry| async move { client.release(&entry).await })
            .await
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.armed {
            self.held
                .release_in_background(|client, entry| async move { client.release(&entry).await });
        }
    }
}

/// A hold taken with a fencing token ([`LockClient::lock_fenced`],
/// [`LockClient::write_lock_fenced`], their `try_` forms, and the blocking
/// client's): the guard, whose methods it has through `Deref`, and the
/// grant's token as a plain number, since a fenced grant always has one.
///
/// ```no_run
/// # async fn demo(locks: redis_lock_client::LockClient) -> Result<(), redis_lock_client::LockError> {
/// let guard = locks.lock_fenced("stock").await?;
/// let token: i64 = guard.token(); // send it with every write
/// # let _ = token;
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a guard releases the lock at once"]
#[derive(Debug)]
pub struct Fenced<G> {
    guard: G,
    token: i64,
}

impl<G> Fenced<G> {
    /// The grant's fencing token: one per grant, growing; the protected
    /// resource refuses writes with a token older than one it has seen.
    pub fn token(&self) -> i64 {
        self.token
    }

    /// The guard alone (its `token()` is then `Some` of this one).
    pub fn into_guard(self) -> G {
        self.guard
    }

    /// The same token on another guard of the same hold (the blocking
    /// client wraps the async guard).
    pub(crate) fn map<H>(self, wrap: impl FnOnce(G) -> H) -> Fenced<H> {
        Fenced {
            guard: wrap(self.guard),
            token: self.token,
        }
    }
}

impl Fenced<LockGuard> {
    /// A fenced acquire's guard. A grant whose token could not be read
    /// back (its reply was lost and the counter was deleted meanwhile) is an
    /// error, and the hold is given back as the guard drops.
    pub(crate) fn of(guard: LockGuard) -> Result<Fenced<LockGuard>> {
        match guard.token {
            Some(token) => Ok(Fenced { guard, token }),
            None => Err(LockError::Protocol(format!(
                "the fenced grant of '{}' has no token (its counter is gone); released",
                guard.name()
            ))),
        }
    }

    /// [`LockGuard::unlock`].
    pub async fn unlock(self) -> Result<()> {
        self.guard.unlock().await
    }
}

impl<G> Deref for Fenced<G> {
    type Target = G;

    fn deref(&self) -> &G {
        &self.guard
    }
}

/// What every guard (a lock's hold, a grant of permits) has: its client,
/// its entry in the client's registry, and the entry's lost signal.
pub(crate) struct Held {
    pub(crate) client: LockClient,
    pub(crate) entry: Arc<Entry>,
    pub(crate) lost: watch::Receiver<Option<Lost>>,
}

impl Held {
    pub(crate) fn new(client: LockClient, entry: Arc<Entry>) -> Held {
        let lost = entry.lost_signal();
        Held {
            client,
            entry,
            lost,
        }
    }

    /// Whether the entry is known to be lost, and why; a lease that has
    /// passed without a successful renewal counts.
    pub(crate) fn is_lost(&self) -> Option<Lost> {
        self.client
            .inner
            .holds
            .expire_if_due(&self.entry, Instant::now());
        self.lost.borrow().clone()
    }

    /// Gives the entry back on the client's runtime (`release` sends it),
    /// for a guard dropped before it was released. If the runtime is gone
    /// the lease ends the hold (no watchdog runs).
    pub(crate) fn release_in_background<F>(&self, release: impl FnOnce(LockClient, Arc<Entry>) -> F)
    where
        F: Future<Output = Result<()>> + Send + 'static,
    {
        let released = release(self.client.clone(), self.entry.clone());
        self.client.inner.runtime.spawn(async move {
            let _ = released.await;
        });
    }

    /// Gives the entry back on the client's runtime and awaits it, for a
    /// guard's explicit release: a caller that stops waiting (a timeout, a
    /// `select!`) does not cut it short, which would leave the entry
    /// registered and renewed by the watchdog.
    pub(crate) async fn finish<F>(
        &self,
        release: impl FnOnce(LockClient, Arc<Entry>) -> F,
    ) -> Result<()>
    where
        F: Future<Output = Result<()>> + Send + 'static,
    {
        let released = release(self.client.clone(), self.entry.clone());
        self.client
            .inner
            .runtime
            .spawn(released)
            .await
            .unwrap_or_else(|_| {
                Err(LockError::Runtime(std::io::Error::other(
                    "the client's runtime shut down during the release",
                )))
            })
    }

    /// Resolves when the entry is lost, at once if it already is: the one
    /// wait every guard's `lost()` uses.
    pub(crate) async fn lost(&self) -> Lost {
        let Held {
            client,
            entry,
            lost,
        } = self;
        let mut rx = lost.clone();
        loop {
            client.inner.holds.expire_if_due(entry, Instant::now());
            if let Some(why) = rx.borrow_and_update().clone() {
                return why;
            }
            // Woken by the watchdog, or by the lease's end as last renewed:
            // then checked above, whatever the watchdog task is doing.
            let (expires, held) = {
                let state = entry.state();
                (state.expires(), state.is_held())
            };
            if !held {
                // Retired without a reason yet: wait for the one coming.
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
                continue;
            }
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        // Unreachable while the guard holds the entry.
                        std::future::pending::<()>().await;
                    }
                }
                () = tokio::time::sleep_until(expires.into()) => {}
            }
        }
    }
}
