//! Locks over several locks or several servers.
//!
//! * [`MultiLock`]: all of several locks or none (Redisson's
//!   `RedissonMultiLock`). The locks may live on independent servers. Use it
//!   when one operation needs several resources each guarded by its own
//!   lock: a transfer between two accounts, an order and its stock.
//! * [`RedLock`]: one lock held on a majority (N/2 + 1) of N independent
//!   masters (the Redlock algorithm, Redisson's deprecated `RedissonRedLock`).
//!   It survives the loss of a minority of masters without replication, but
//!   it relies on bounded clock drift and process pauses for its safety, and
//!   it has no fencing: Redisson deprecated it (3.12.5) and points to a
//!   plain lock on a replicated master (with `WAIT`), or a fenced lock when
//!   correctness matters. See `client/README.md`'s "Which lock?" section.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::Value;

use crate::acquire::{Ask, Wait};
use crate::client::LockClient;
use crate::error::{LockError, Result};
use crate::guard::LockGuard;
use crate::holds::Lost;
use crate::protocol::{self, Holder, LockKind};

/// All of several locks, or none: taken one after the other in the order
/// given, within one shared wait budget; if one cannot be had, those already
/// taken are released before the call returns. Released together.
///
/// Every user of the same set of locks should list them in the same order:
/// two callers taking them in opposite orders can each hold one and wait for
/// the other (until their budgets end).
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn demo(east: redis_lock_client::LockClient, west: redis_lock_client::LockClient)
/// #     -> Result<(), redis_lock_client::LockError> {
/// use redis_lock_client::MultiLock;
/// let both = MultiLock::new([(east, "account:1"), (west, "account:2")])?;
/// if let Some(guard) = both.try_lock(Duration::from_secs(1), None).await? {
///     // move money between the two accounts
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
pub struct MultiLock {
    parts: Vec<(LockClient, String)>,
}

impl MultiLock {
    /// A multi-lock over `(client, lock name)` pairs (clients may differ:
    /// independent servers). At least one pair.
    pub fn new<N: Into<String>>(
        parts: impl IntoIterator<Item = (LockClient, N)>,
    ) -> Result<MultiLock> {
        let parts: Vec<(LockClient, String)> =
            parts.into_iter().map(|(c, n)| (c, n.into())).collect();
        if parts.is_empty() {
            return Err(LockError::InvalidArgument(
                "a MultiLock needs at least one lock".into(),
            ));
        }
        Ok(MultiLock { parts })
    }

    /// Takes every lock, waiting as long as it takes; the watchdog keeps them.
    pub async fn lock(&self) -> Result<MultiGuard> {
        self.acquire(Wait::Forever, None)
            .await?
            .ok_or_else(|| LockError::Protocol("a wait without end ended without the locks".into()))
    }

    /// Takes every lock within `wait` (shared by all of them), or none.
    /// With `lease: Some(..)`, every lock's lease restarts together once all
    /// are held, so none ends before the others.
    pub async fn try_lock(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<MultiGuard>> {
        self.acquire(Wait::from(wait), lease).await
    }

    async fn acquire(&self, wait: Wait, lease: Option<Duration>) -> Result<Option<MultiGuard>> {
        let deadline = match wait {
            // Too long for the clock: no deadline, as a wait forever.
            Wait::For(d) => Instant::now().checked_add(d),
            _ => None,
        };
        let mut held: Vec<LockGuard> = Vec::with_capacity(self.parts.len());
        for (client, name) in &self.parts {
            let part_wait = match (wait, deadline) {
                (Wait::For(_), Some(d)) => Wait::from(d.saturating_duration_since(Instant::now())),
                (other, _) => other,
            };
            match client
                .acquire_as(Ask {
                    kind: LockKind::Lock,
                    name: name.clone(),
                    owner: client.owner(),
                    lease,
                    wait: part_wait,
                    fenced: false,
                })
                .await
            {
                Ok(Some(guard)) => held.push(guard),
                Ok(None) => {
                    roll_back(held).await;
                    return Ok(None);
                }
                Err(e) => {
                    roll_back(held).await;
                    return Err(e);
                }
            }
        }
        if let (Some(lease), true) = (lease, held.len() > 1) {
            // The first lock's lease started long before the last's: restart
            // them all now. One that already ended means the set was never
            // held whole.
            let mut whole = true;
            for guard in &held {
                whole &= matches!(guard.restart_lease(lease).await, Ok(true));
            }
            if !whole {
                roll_back(held).await;
                return Ok(None);
            }
        }
        Ok(Some(MultiGuard { guards: held }))
    }
}

async fn roll_back(held: Vec<LockGuard>) {
    let releases = held.into_iter().map(|g| g.unlock());
    let _ = futures_util::future::join_all(releases).await;
}

/// The locks of a [`MultiLock`]: released together by
/// [`MultiGuard::unlock`] or on drop.
#[must_use = "dropping a guard releases the locks at once"]
#[derive(Debug)]
pub struct MultiGuard {
    guards: Vec<LockGuard>,
}

impl MultiGuard {
    /// The guard of each lock, in the order given.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// Whether any of the locks is known to be lost: its index and why.
    pub fn is_lost(&self) -> Option<(usize, Lost)> {
        self.guards
            .iter()
            .enumerate()
            .find_map(|(i, g)| g.is_lost().map(|why| (i, why)))
    }

    /// Resolves when any of the locks is lost: its index and why.
    pub async fn lost(&self) -> (usize, Lost) {
        let each = self
            .guards
            .iter()
            .enumerate()
            .map(|(i, g)| Box::pin(async move { (i, g.lost().await) }));
        futures_util::future::select_all(each).await.0
    }

    /// Releases every lock (all are attempted); the first error, if any.
    pub async fn unlock(self) -> Result<()> {
        let results =
            futures_util::future::join_all(self.guards.into_iter().map(|g| g.unlock())).await;
        results.into_iter().collect::<Result<Vec<()>>>().map(|_| ())
    }
}

/// Distinct owner ids for RedLock rounds.
static ROUND: AtomicU64 = AtomicU64::new(1);

/// One lock on a majority of independent masters (Redlock).
///
/// Each round sends one `LOCK.ACQUIRE` (no waiting) to every master at once,
/// each bounded by a short per-master timeout, so dead masters cost little.
/// The round wins when at least N/2 + 1 granted it and time is left:
/// validity = lease - elapsed - drift, drift = 1% of the lease + 2 ms. A
/// round that loses is released on *every* master (one that timed out may
/// have granted it) and the next starts after a short random pause, until
/// the wait budget is spent.
///
/// Each round uses a fresh owner id, `<first client's id>:redlock-<n>`, and
/// never resends: a master holds it at most once, so releasing it blindly on
/// every master can never free someone else's hold. RedLock is therefore not
/// re-entrant, has no watchdog (pick a lease longer than the work), and
/// gives no fencing token.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn demo(masters: Vec<redis_lock_client::LockClient>) -> Result<(), redis_lock_client::LockError> {
/// use redis_lock_client::RedLock;
/// let lock = RedLock::new(masters, "nightly-report")?;
/// if let Some(guard) = lock.try_lock(Duration::from_secs(2), Duration::from_secs(30)).await? {
///     assert!(guard.validity() <= Duration::from_secs(30));
///     // finish the work within guard.validity()
///     guard.unlock().await;
/// }
/// # Ok(()) }
/// ```
pub struct RedLock {
    masters: Vec<LockClient>,
    name: String,
}

impl RedLock {
    /// A RedLock on `masters` (independent servers, not replicas of one
    /// another; an odd number, 3 or 5, is usual).
    pub fn new(masters: Vec<LockClient>, name: impl Into<String>) -> Result<RedLock> {
        if masters.is_empty() {
            return Err(LockError::InvalidArgument(
                "a RedLock needs at least one master".into(),
            ));
        }
        Ok(RedLock {
            masters,
            name: name.into(),
        })
    }

    /// How many masters must grant it: N/2 + 1.
    pub fn quorum(&self) -> usize {
        self.masters.len() / 2 + 1
    }

    /// Takes the lock on a quorum within `wait`, for `lease`. `Ok(None)` when
    /// no round won within the budget (busy, or too few masters reachable).
    pub async fn try_lock(&self, wait: Duration, lease: Duration) -> Result<Option<RedLockGuard>> {
        let ms = protocol::lease_ms(lease)?;
        // A budget too long for the clock never ends.
        let budget_end = Instant::now().checked_add(wait);
        let per_master = (lease / 10).clamp(
            Duration::from_millis(5),
            self.masters[0].options().command_timeout,
        );
        let drift = lease / 100 + Duration::from_millis(2);
        loop {
            let owner = format!(
                "{}:redlock-{}",
                self.masters[0].id(),
                ROUND.fetch_add(1, Ordering::Relaxed)
            );
            let started = Instant::now();
            let attempts = self.masters.iter().map(|m| {
                // A master whose sync setting is invalid cannot grant.
                let sync = m.options().sync_args();
                let cmd = sync.as_ref().ok().map(|sync| {
                    protocol::acquire(Holder::lock(&self.name, &owner), ms, None, false, *sync)
                });
                let within = per_master + m.options().sync_time();
                async move {
                    let Some(cmd) = cmd else { return false };
                    matches!(
                        tokio::time::timeout(within, m.inner.counted.one_shot(&cmd)).await,
                        Ok(Ok(Value::Nil))
                    )
                }
            });
            let granted = futures_util::future::join_all(attempts)
                .await
                .into_iter()
                .filter(|g| *g)
                .count();
            let validity = lease
                .checked_sub(started.elapsed())
                .and_then(|v| v.checked_sub(drift))
                .unwrap_or_default();
            let guard = RedLockGuard {
                masters: self.masters.clone(),
                name: self.name.clone(),
                owner,
                valid_until: started + validity,
                armed: true,
            };
            if granted >= self.quorum() && !validity.is_zero() {
                return Ok(Some(guard));
            }
            guard.unlock().await;
            let left = budget_end.map_or(Duration::MAX, |end| {
                end.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return Ok(None);
            }
            // A random pause, so competing clients do not retry in lockstep.
            let pause =
                Duration::from_millis(u64::from(uuid::Uuid::new_v4().as_bytes()[0]) % 40 + 10);
            tokio::time::sleep(pause.min(left)).await;
        }
    }
}

/// A [`RedLock`] held on a quorum. Valid until [`RedLockGuard::validity`]
/// runs out; released on every master by [`RedLockGuard::unlock`] or on drop.
#[must_use = "dropping a guard releases the lock at once"]
#[derive(Debug)]
pub struct RedLockGuard {
    masters: Vec<LockClient>,
    name: String,
    owner: String,
    valid_until: Instant,
    armed: bool,
}

impl RedLockGuard {
    /// How long the lock is still valid: the lease, less the time taking it
    /// took, less the allowance for clock drift, less the time since.
    pub fn validity(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }

    /// The owner id this round used on every master.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Resolves when the validity has run out.
    pub async fn lost(&self) -> Lost {
        tokio::time::sleep_until(self.valid_until.into()).await;
        Lost::LeaseExpired
    }

    /// Releases the lock on every master, reachable or not (errors are
    /// ignored: an unreachable master's hold ends with its lease).
    pub async fn unlock(mut self) {
        self.armed = false;
        release_everywhere(&self.masters, &self.name, &self.owner).await;
    }
}

async fn release_everywhere(masters: &[LockClient], name: &str, owner: &str) {
    let releases = masters.iter().map(|m| {
        let cmd = protocol::release(Holder::lock(name, owner), None);
        let within = m.options().command_timeout;
        async move {
            let _ = tokio::time::timeout(within, m.inner.counted.one_shot(&cmd)).await;
        }
    });
    futures_util::future::join_all(releases).await;
}

impl Drop for RedLockGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (masters, name, owner) = (
            std::mem::take(&mut self.masters),
            std::mem::take(&mut self.name),
            std::mem::take(&mut self.owner),
        );
        if let Some(first) = masters.first() {
            let runtime = first.inner.runtime.clone();
            runtime.spawn(async move { release_everywhere(&masters, &name, &owner).await });
        }
    }
}
