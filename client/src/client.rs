//! [`LockClient`]: the client's public face (building it, owner ids, the
//! lock API) and giving a hold back.
//!
//! What happens underneath lives in rooms of its own: taking a lock in
//! `acquire.rs`, sending and safe retries in `counted.rs`, the hold counts
//! in `holds.rs`, the commands and replies in `protocol.rs`, the
//! connections in `conn.rs`.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use crate::acquire::{Ask, Wait};
use crate::conn::{timeout_error, Backend, Connections, SentinelBackend};
use crate::counted::{Counted, Outcome};
use crate::error::{LockError, Result};
use crate::guard::{Fenced, LockGuard};
use crate::holds::{Entry, Lost, Registry};
use crate::options::Options;
use crate::owner;
use crate::protocol::{self, LockKind};
use crate::tracking::{connect_single, Connector, Tracking};
use crate::watchdog;

/// A client for the redis-lock module: Redisson's `RLock` API in Rust.
///
/// Cheap to clone (clones share connections, the hold counts and the one
/// watchdog task). Create it inside a tokio runtime: the watchdog and the
/// releases of dropped guards run on that runtime.
///
/// ```no_run
/// # async fn demo() -> Result<(), redis_lock_client::LockError> {
/// use redis_lock_client::{redis, LockClient};
/// let locks = LockClient::new(redis::Client::open("redis://127.0.0.1/").unwrap())?;
/// let guard = locks.lock("order:42").await?; // waits, the watchdog keeps it
/// // ... work ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LockClient {
    pub(crate) inner: Arc<Inner>,
    /// An explicit owner id ([`LockClient::as_owner`]); the task's otherwise.
    owner: Option<Arc<str>>,
}

impl std::fmt::Debug for LockClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockClient")
            .field("id", &self.id())
            .field("cluster", &self.is_cluster())
            .finish()
    }
}

/// What the clones of one client share.
pub(crate) struct Inner {
    pub(crate) id: String,
    /// The connections and the options: every command goes through it.
    pub(crate) counted: Counted,
    /// The hold counts, and the lost signals.
    pub(crate) holds: Registry,
    pub(crate) runtime: tokio::runtime::Handle,
    /// Wakes the watchdog task (a new grant, or the client is gone).
    pub(crate) wake: Arc<Notify>,
    watchdog_started: std::sync::Once,
    /// The fast lost signal (None: a cluster, or turned off).
    pub(crate) tracking: Option<Tracking>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Lets the watchdog task see that its client is gone and end.
        self.wake.notify_one();
    }
}

impl LockClient {
    /// A client for a single Redis server (or a master, with Sentinel or a
    /// proxy in front) with default [`Options`].
    ///
    /// Connects lazily. Fails only outside a tokio runtime.
    pub fn new(client: redis::Client) -> Result<LockClient> {
        LockClient::with_options(client, Options::default())
    }

    /// As [`LockClient::new`], with `options`.
    pub fn with_options(client: redis::Client, options: Options) -> Result<LockClient> {
        LockClient::build(Backend::Single(client), options)
    }

    /// A client for a Redis Cluster: every command is routed by the lock's
    /// name, as the module expects (load it on every node).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), redis_lock_client::LockError> {
    /// let nodes = vec!["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"];
    /// let cluster = redis::cluster::ClusterClient::new(nodes).unwrap();
    /// let locks = redis_lock_client::LockClient::cluster(cluster)?;
    /// let guard = locks.lock("{order:42}:payment").await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn cluster(client: redis::cluster::ClusterClient) -> Result<LockClient> {
        LockClient::cluster_with_options(client, Options::default())
    }

    /// As [`LockClient::cluster`], with `options`.
    pub fn cluster_with_options(
        client: redis::cluster::ClusterClient,
        options: Options,
    ) -> Result<LockClient> {
        LockClient::build(Backend::Cluster(client), options)
    }

    /// A client for the master that Sentinel names `master_name`
    /// (`sentinel monitor <master_name> ...`), asking the sentinels at
    /// `sentinels` (any that answers) for its address whenever it connects.
    ///
    /// After a failover, connections to the old master fail (Sentinel kills
    /// the clients of a demoted master; a dead one refuses) or are refused
    /// with `READONLY`, and the client connects to the new master: the
    /// watchdog renews there, a wait queues there again, and a lock that did
    /// not survive the failover is reported lost ([`LockGuard::lost`]).
    /// A failover takes seconds (Sentinel's `down-after-milliseconds` plus
    /// an election): give [`Options::retries`] × [`Options::retry_interval`]
    /// that long, or calls made during it fail with
    /// [`LockError::Connection`].
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo() -> Result<(), redis_lock_client::LockError> {
    /// use redis_lock_client::{LockClient, Options};
    /// let options = Options::default().retries(100).retry_interval(Duration::from_millis(100));
    /// let locks = LockClient::sentinel(
    ///     vec!["redis://127.0.0.1:26379/", "redis://127.0.0.1:26380/"],
    ///     "mymaster",
    ///     options,
    /// )?;
    /// let guard = locks.lock("order:42").await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn sentinel<T: redis::IntoConnectionInfo>(
        sentinels: Vec<T>,
        master_name: &str,
        options: Options,
    ) -> Result<LockClient> {
        let sentinels = sentinels
            .into_iter()
            .map(|address| {
                redis::sentinel::Sentinel::build(vec![address])
                    .map(tokio::sync::Mutex::new)
                    .map_err(|e| LockError::InvalidArgument(format!("a sentinel's address: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        if sentinels.is_empty() {
            return Err(LockError::InvalidArgument(
                "Sentinel needs at least one sentinel's address".into(),
            ));
        }
        LockClient::build(
            Backend::Sentinel(SentinelBackend {
                sentinels,
                name: master_name.to_string(),
                node: redis::sentinel::SentinelNodeConnectionInfo::default(),
            }),
            options,
        )
    }

    fn build(backend: Backend, options: Options) -> Result<LockClient> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            LockError::InvalidArgument(
                "a LockClient must be created inside a tokio runtime (or use blocking::LockClient)"
                    .into(),
            )
        })?;
        options.check()?;
        let conns = Connections::new(backend, options.command_timeout);
        let tracked = options.track_locks && !conns.is_cluster();
        let timeout = options.command_timeout;
        let inner = Arc::new_cyclic(|weak: &Weak<Inner>| {
            let tracking = tracked.then(|| {
                let weak_inner = weak.clone();
                let connect: Connector = Box::new(move |pushes| {
                    let weak_inner = weak_inner.clone();
                    Box::pin(async move {
                        // The server the commands go to: through Sentinel,
                        // the master it names now.
                        let inner = weak_inner
                            .upgrade()
                            .ok_or_else(|| timeout_error("the client is gone"))?;
                        let client = inner
                            .counted
                            .conns
                            .master_client()
                            .await?
                            .ok_or_else(|| timeout_error("no master"))?;
                        drop(inner);
                        connect_single(client, timeout, pushes).await
                    })
                });
                Tracking::start(weak.clone(), &runtime, connect)
            });
            Inner {
                id: uuid::Uuid::new_v4().to_string(),
                counted: Counted { conns, options },
                holds: Registry::default(),
                runtime,
                wake: Arc::new(Notify::new()),
                watchdog_started: std::sync::Once::new(),
                tracking,
            }
        });
        Ok(LockClient { inner, owner: None })
    }

    /// This client's id: the first half of every owner id it makes.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The same client, acting as `owner` instead of the calling task.
    ///
    /// Use it when the unit of ownership is not a task: a request id, a
    /// worker name, an owner shared with a Redisson application. The id must
    /// be used by one holder at a time (the hold counts and the retry check
    /// depend on it), as Redisson's thread ids are.
    ///
    /// ```no_run
    /// # async fn demo(locks: redis_lock_client::LockClient) -> Result<(), redis_lock_client::LockError> {
    /// let worker = locks.as_owner("billing-worker-7");
    /// let guard = worker.lock("invoice:9").await?;
    /// assert_eq!(guard.owner(), "billing-worker-7");
    /// # Ok(()) }
    /// ```
    pub fn as_owner(&self, owner: impl Into<String>) -> LockClient {
        LockClient {
            inner: self.inner.clone(),
            owner: Some(Arc::from(owner.into())),
        }
    }

    /// The owner id this client acts as right now: the explicit one, or
    /// `<client id>:task-<tokio task id>` inside a task, or `<client
    /// id>:<thread number>` outside one.
    pub fn owner(&self) -> String {
        match &self.owner {
            Some(owner) => owner.to_string(),
            None => owner::current_owner(&self.inner.id),
        }
    }

    /// The explicit owner id, if [`LockClient::as_owner`] set one.
    pub(crate) fn explicit_owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// Takes the lock, waiting as long as it takes, in the server's FIFO
    /// queue. The watchdog keeps the lease ([`Options::watchdog_lease`])
    /// alive until the guard is released; [`LockGuard::lost`] tells you if it
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
    /// [`Options::track_locks`], on a single server), or at its watchdog's
    /// next renewal. True if a lock existed.
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

    /// A command whose resending is harmless, on this client's connections.
    pub(crate) async fn simple(&self, cmd: &redis::Cmd) -> Result<redis::Value> {
        self.inner.counted.simple(cmd).await
    }

    /// [`LockClient::simple`], its reply read by `parse` (`parse_flag`,
    /// `parse_int`, `parse_count`: given the command's name for errors).
    pub(crate) async fn simple_parsed<T>(
        &self,
        cmd: &redis::Cmd,
        parse: fn(&str, &redis::Value) -> Result<T>,
    ) -> Result<T> {
        let reply = self.simple(cmd).await?;
        parse(&protocol::command_name(cmd), &reply)
    }

    /// The client's options.
    pub(crate) fn options(&self) -> &Options {
        &self.inner.counted.options
    }

    pub(crate) fn start_watchdog(&self) {
        self.inner.watchdog_started.call_once(|| {
            let weak: Weak<Inner> = Arc::downgrade(&self.inner);
            let wake = self.inner.wake.clone();
            self.inner.runtime.spawn(watchdog::run(weak, wake));
        });
    }

    /// Whether this client talks to a cluster.
    pub fn is_cluster(&self) -> bool {
        self.inner.counted.conns.is_cluster()
    }
}
