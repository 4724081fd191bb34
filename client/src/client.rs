//! [`LockClient`]: taking and giving back locks, with retries that cannot
//! count twice.
//!
//! # Why retries are safe (and where the check lives)
//!
//! A command whose connection fails after sending may or may not have run.
//! Resending a `LOCK.ACQUIRE` that did run re-enters the lock (hold count 2,
//! so one unlock leaves it held); resending a `LOCK.RELEASE` that did run
//! releases a hold the caller still has. The library decides on the client,
//! from the hold count it keeps for every (lock, owner) it holds:
//!
//! 1. Commands that change a hold count are serialised per (lock, owner), so
//!    the count this client knows (`known`) is exactly the server's, as long
//!    as nobody else uses the owner id (which is what owner ids are for).
//! 2. After a failure in transit, the failed connection is dropped and, on a
//!    single server, killed by id (`CLIENT KILL ID`) from a new connection.
//!    When the kill returns, the server has run whatever it had read from
//!    the old connection and will read nothing more from it: no late copy of
//!    the command can arrive after step 3.
//! 3. `HGET lock owner` gives the server's count: `known + 1` (acquire) or
//!    `known - 1` (release) means the command ran and its reply was lost, so
//!    it is not sent again; `known` means it did not run, so it is resent;
//!    anything else is reported ([`LockError::HoldCountMismatch`]).
//!
//! The same check decides a wait whose connection broke: a lock granted to
//! the waiter at that instant shows as `known + 1` and is adopted (the
//! caller gets its guard), so it cannot leak.
//!
//! Limits, stated: in a cluster, or where ACLs deny `CLIENT KILL`, step 2
//! only drops the connection, and a command still travelling in the network
//! could run after the check. A re-entry whose own hold ended at the same
//! instant (count `known` either way) is indistinguishable. A module-side
//! request id would close both gaps; the client-side check needs no module
//! change and costs nothing on the happy path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use redis::{Cmd, Value};
use tokio::sync::{watch, Notify};

use crate::conn::{
    is_wrong_role, timeout_error, Backend, ClientId, Con, Connections, Handle, SentinelBackend,
};
use crate::error::{is_transport, refused, LockError, Result};
use crate::guard::{LockGuard, Lost};
use crate::owner;
use crate::tracking::{connect_single, Connector, Tracking};
use crate::watchdog;

/// Settings of a [`LockClient`]. `Options::default()` matches Redisson's
/// defaults where Redisson has one.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// The lease of locks taken without one ([`LockClient::lock`]): the
    /// watchdog renews it every third of it. Redisson's
    /// `lockWatchdogTimeout`, 30 s.
    pub watchdog_lease: Duration,
    /// How long one short command may take before its connection is
    /// considered broken (Redisson's `timeout` is 3 s).
    pub command_timeout: Duration,
    /// How many times a command is resent after a failure in transit, once
    /// the library has made sure the failed attempt did not run.
    pub retries: u32,
    /// The pause before such a resend.
    pub retry_interval: Duration,
    /// How much longer than a `WAIT` the client waits for its reply before
    /// treating the connection as broken: the server answers a timed-out
    /// wait itself, so this only covers the network and a busy server.
    pub wait_margin: Duration,
    /// Synced grants: `Some((n, timeout))` sends `SYNC n timeout-ms` with
    /// every acquire, so a grant is answered only once `n` replicas
    /// acknowledged it within `timeout`; otherwise the module undoes it and
    /// the call fails with [`LockError::NotSynced`] (the lock is not held).
    /// `Some((0, Duration::ZERO))` turns the module's default
    /// (`lock.sync-replicas`) off for this client's acquires; `None` (the
    /// default) leaves it to the module's configuration. Reply deadlines
    /// grow by `timeout`.
    pub sync: Option<(u32, Duration)>,
    /// Whether the client asks the server to tell it at once when a held
    /// lock's key changes (`CLIENT TRACKING`, one RESP3 connection per
    /// client), so [`LockGuard::lost`] fires within milliseconds of a
    /// `LOCK.FORCE`, `DEL` or expiry instead of at the next renewal. On by
    /// default; single servers only (a cluster relies on renewals).
    pub track_locks: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            watchdog_lease: Duration::from_secs(30),
            command_timeout: Duration::from_secs(3),
            retries: 3,
            retry_interval: Duration::from_millis(100),
            wait_margin: Duration::from_secs(2),
            sync: None,
            track_locks: true,
        }
    }
}

impl Options {
    /// Sets [`Options::watchdog_lease`].
    pub fn watchdog_lease(mut self, lease: Duration) -> Self {
        self.watchdog_lease = lease;
        self
    }
    /// Sets [`Options::command_timeout`].
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }
    /// Sets [`Options::retries`].
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }
    /// Sets [`Options::retry_interval`].
    pub fn retry_interval(mut self, interval: Duration) -> Self {
        self.retry_interval = interval;
        self
    }
    /// Sets [`Options::wait_margin`].
    pub fn wait_margin(mut self, margin: Duration) -> Self {
        self.wait_margin = margin;
        self
    }
    /// Sets [`Options::sync`]: every grant waits for `replicas` replicas to
    /// acknowledge it, for at most `timeout` (`sync_replicas(0,
    /// Duration::ZERO)`: never, whatever the module's default).
    pub fn sync_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.sync = Some((replicas, timeout));
        self
    }

    /// Sets [`Options::track_locks`].
    pub fn track_locks(mut self, on: bool) -> Self {
        self.track_locks = on;
        self
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

/// A client for the redis-lock module: Redisson's `RLock` API in Rust.
///
/// Cheap to clone (clones share connections, the hold counts and the one
/// watchdog task). Create it inside a tokio runtime: the watchdog and the
/// releases of dropped guards run on that runtime.
///
/// ```no_run
/// # async fn demo() -> Result<(), redis_lock_client::LockError> {
/// let locks = redis_lock_client::LockClient::new(redis::Client::open("redis://127.0.0.1/").unwrap())?;
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

pub(crate) struct Inner {
    pub(crate) id: String,
    pub(crate) conns: Connections,
    pub(crate) options: Options,
    registry: Mutex<HashMap<(String, String), Arc<Entry>>>,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) wake: Arc<Notify>,
    watchdog_started: std::sync::Once,
    /// The fast lost signal (None: a cluster, or turned off).
    tracking: Option<Tracking>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Lets the watchdog task see that its client is gone and end.
        self.wake.notify_one();
    }
}

/// What this client knows about one (lock, owner) it holds.
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) owner: String,
    /// Serialises hold-count changes, so `State::holds` is the server's.
    pub(crate) op: tokio::sync::Mutex<()>,
    pub(crate) state: Mutex<State>,
    pub(crate) lost: watch::Sender<Option<Lost>>,
}

pub(crate) struct State {
    pub(crate) holds: u64,
    /// Removed from the registry (released or lost): a new acquisition
    /// starts a new entry.
    pub(crate) retired: bool,
    /// The lease the watchdog renews to; None: a caller-given lease.
    pub(crate) watchdog: Option<Duration>,
    /// When the lease ends unless renewed, never later than the server's
    /// deadline: counted from when the command that set it was sent, or
    /// from a measurement of it (see `LockClient::grant_expiry`).
    pub(crate) expires: Instant,
    pub(crate) next_renewal: Instant,
    /// Why the last renewal failed, if it did (for `Lost::RenewalFailed`).
    pub(crate) last_error: Option<String>,
}

impl Entry {
    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A decoded `LOCK.ACQUIRE` reply.
enum Acquired {
    Granted(Option<i64>),
    Busy,
}

/// When a grant's lease ends on the server, as far as the client can tell
/// ([`LockClient::grant_expiry`]).
enum Expiry {
    /// No earlier than this.
    Until(Instant),
    /// The lease could not be measured: about then, to be confirmed by a
    /// renewal at once.
    Unmeasured(Instant),
    /// The owner no longer held the lock when its lease was measured.
    Gone,
}

/// `at + d`, or as late as the clock goes (a lease of centuries).
pub(crate) fn later(at: Instant, d: Duration) -> Instant {
    at.checked_add(d)
        .or_else(|| at.checked_add(Duration::from_secs(1 << 32)))
        .unwrap_or(at)
}

/// The lease `owner` has left, from a `LOCK.INFO` reply: None when the
/// reply is not understood, Some(None) when `owner` holds nothing.
fn lease_left(info: &Value, owner: &str) -> Option<Option<Duration>> {
    let fields = pairs(info);
    let field = |name: &[u8]| {
        fields
            .iter()
            .find(|(k, _)| is_text(k, name))
            .map(|(_, v)| *v)
    };
    let holds = pairs(field(b"owners")?)
        .into_iter()
        .any(|(k, v)| is_text(k, owner.as_bytes()) && !matches!(v, Value::Int(0)));
    if !holds {
        return Some(None);
    }
    match field(b"ttl_ms")? {
        Value::Int(ms) if *ms >= 0 => Some(Some(Duration::from_millis(*ms as u64))),
        _ => None,
    }
}

/// What became of a command that changes a hold count.
enum Outcome {
    Reply(Value),
    /// The connection failed, and the server's count shows the command ran.
    AppliedUnseen,
}

/// What an acquisition in progress has done, for [`LockClient::abandon`].
#[derive(Default)]
struct Progress {
    /// The entry whose operation lock it took, and the count it found.
    entry: Option<Arc<Entry>>,
    known: u64,
    /// Set once a `WAIT` went out on a connection of its own: that
    /// connection's `CLIENT ID`, if known.
    waiting: Option<Option<ClientId>>,
    /// The shared connection the last acquire without `WAIT` went out on.
    /// A clean-up reads behind it there, or fences it: the shared slot may
    /// hold another connection by then, one not ordered after the acquire.
    sent_on: Option<Handle>,
}

type Tracker = Arc<Mutex<Progress>>;

/// How long to wait for a held lock.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    No,
    For(Duration),
    Forever,
}

/// A hold count as `HGET lock owner` answers it: nil is 0.
fn hold_count(reply: Value) -> Result<u64, String> {
    match reply {
        Value::Nil => Ok(0),
        v => redis::from_redis_value::<u64>(&v)
            .map_err(|e| format!("the hold count is not a number: {e}")),
    }
}

/// A lease in whole milliseconds: positive and representable.
pub(crate) fn lease_ms(lease: Duration) -> Result<u64> {
    let ms = lease.as_millis();
    if ms == 0 || ms > i64::MAX as u128 {
        return Err(LockError::InvalidArgument(format!(
            "a lease must be at least 1 ms and fit in i64 milliseconds: {lease:?}"
        )));
    }
    Ok(ms as u64)
}

/// A wait in whole milliseconds, rounded up so it never ends early; at least 1
/// (the module reads 0 as "forever").
fn wait_ms(wait: Duration) -> u64 {
    let ms = wait.as_nanos().div_ceil(1_000_000);
    ms.clamp(1, i64::MAX as u128) as u64
}

pub(crate) fn acquire_cmd(
    name: &str,
    owner: &str,
    lease_ms: u64,
    wait_ms: Option<u64>,
    fenced: bool,
    sync: Option<(u32, u64)>,
) -> Cmd {
    let mut cmd = redis::cmd("LOCK.ACQUIRE");
    cmd.arg(name).arg(owner).arg(lease_ms);
    if let Some(wait) = wait_ms {
        cmd.arg("WAIT").arg(wait);
    }
    if fenced {
        cmd.arg("TOKEN");
    }
    if let Some((replicas, timeout_ms)) = sync {
        cmd.arg("SYNC").arg(replicas).arg(timeout_ms);
    }
    cmd
}

/// Decodes `LOCK.ACQUIRE`: nil / integer, or with `TOKEN` the pair
/// `[-1, token]` / `[remaining-lease, -1]`.
fn parse_acquire(reply: Value, fenced: bool) -> Result<Acquired> {
    match (reply, fenced) {
        (Value::Nil, false) => Ok(Acquired::Granted(None)),
        (Value::Int(_), false) => Ok(Acquired::Busy),
        (Value::Array(pair), true) if pair.len() == 2 => match (&pair[0], &pair[1]) {
            (Value::Int(-1), Value::Int(token)) if *token >= 0 => {
                Ok(Acquired::Granted(Some(*token)))
            }
            (Value::Int(_), Value::Int(-1)) => Ok(Acquired::Busy),
            _ => Err(LockError::Protocol(format!(
                "LOCK.ACQUIRE ... TOKEN answered {pair:?}"
            ))),
        },
        (other, _) => Err(LockError::Protocol(format!(
            "LOCK.ACQUIRE answered {other:?}"
        ))),
    }
}

/// The pairs of a map reply: a RESP3 map or a RESP2 flat key/value array.
fn pairs(v: &Value) -> Vec<(&Value, &Value)> {
    match v {
        Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|c| match c {
                [k, v] => Some((k, v)),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn is_text(v: &Value, text: &[u8]) -> bool {
    match v {
        Value::BulkString(b) => b == text,
        Value::SimpleString(s) => s.as_bytes() == text,
        _ => false,
    }
}

/// Whether a `LOCK.INFO` reply lists `owner` among the waiters.
fn waiters_include(info: &Value, owner: &[u8]) -> bool {
    pairs(info)
        .into_iter()
        .filter(|(k, _)| is_text(k, b"waiters"))
        .any(|(_, waiters)| match waiters {
            Value::Array(list) | Value::Set(list) => list.iter().any(|w| {
                pairs(w)
                    .into_iter()
                    .any(|(k, v)| is_text(k, b"owner") && is_text(v, owner))
            }),
            _ => false,
        })
}

/// Redisson's `prefixName("redisson_lock_token", name)`: the token counter's key.
fn token_key(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_lock_token:{name}")
    } else {
        format!("redisson_lock_token:{{{name}}}")
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
        lease_ms(options.watchdog_lease)?;
        options.sync_args()?;
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
                conns,
                options,
                registry: Mutex::new(HashMap::new()),
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
        self.lock_with(name, false).await
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
        self.try_lock_with(name, wait, lease, false).await
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
    /// let token = guard.token().expect("a fenced guard has a token");
    /// // send `token` with every write; the resource refuses older ones
    /// # let _ = token;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock_fenced(&self, name: &str) -> Result<LockGuard> {
        self.lock_with(name, true).await
    }

    /// [`LockClient::try_lock`] with a fencing token, see [`LockClient::lock_fenced`].
    pub async fn try_lock_fenced(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.try_lock_with(name, wait, lease, true).await
    }

    /// `lock` / `lock_fenced`: the caller's owner, no lease, no end to the wait.
    async fn lock_with(&self, name: &str, fenced: bool) -> Result<LockGuard> {
        let owner = self.owner();
        self.acquire_as(name, &owner, None, Wait::Forever, fenced)
            .await?
            .ok_or_else(|| LockError::Protocol("a wait without end ended without the lock".into()))
    }

    /// `try_lock` / `try_lock_fenced`: a zero `wait` is one attempt.
    async fn try_lock_with(
        &self,
        name: &str,
        wait: Duration,
        lease: Option<Duration>,
        fenced: bool,
    ) -> Result<Option<LockGuard>> {
        let owner = self.owner();
        let wait = if wait.is_zero() {
            Wait::No
        } else {
            Wait::For(wait)
        };
        self.acquire_as(name, &owner, lease, wait, fenced).await
    }

    /// Whether anyone holds the lock (Redisson's `isLocked`).
    pub async fn is_locked(&self, name: &str) -> Result<bool> {
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(name);
        match self.simple(&cmd).await? {
            Value::Int(n) => Ok(n > 0),
            other => Err(LockError::Protocol(format!("EXISTS answered {other:?}"))),
        }
    }

    /// The lock's remaining lease, whoever holds it: `None` when it is free
    /// (or has no expiry, which a lock taken through the module never lacks).
    pub async fn remaining_lease(&self, name: &str) -> Result<Option<Duration>> {
        let mut cmd = redis::cmd("PTTL");
        cmd.arg(name);
        match self.simple(&cmd).await? {
            Value::Int(ms) if ms >= 0 => Ok(Some(Duration::from_millis(ms as u64))),
            Value::Int(_) => Ok(None),
            other => Err(LockError::Protocol(format!("PTTL answered {other:?}"))),
        }
    }

    /// Deletes the lock whoever holds it (`LOCK.FORCE`, Redisson's
    /// `forceUnlock`): an operator's tool. The holder's
    /// [`LockGuard::lost`] fires within milliseconds (with
    /// [`Options::track_locks`], on a single server), or at its watchdog's
    /// next renewal. True if a lock existed.
    pub async fn force_unlock(&self, name: &str) -> Result<bool> {
        let mut cmd = redis::cmd("LOCK.FORCE");
        cmd.arg(name);
        match self.simple(&cmd).await? {
            Value::Int(n) => Ok(n == 1),
            other => Err(LockError::Protocol(format!(
                "LOCK.FORCE answered {other:?}"
            ))),
        }
    }

    /// A command whose resending is harmless (reads, `LOCK.FORCE`,
    /// `LOCK.RENEW`), with the usual retries.
    pub(crate) async fn simple(&self, cmd: &Cmd) -> Result<Value> {
        let mut attempt = 0;
        loop {
            let failure = match self.inner.conns.shared().await {
                Ok(h) => {
                    let mut con = h.con.clone();
                    match tokio::time::timeout(self.inner.options.command_timeout, con.query(cmd))
                        .await
                    {
                        Ok(Ok(v)) => return Ok(v),
                        Ok(Err(e)) if !is_transport(&e) && !is_wrong_role(&e) => {
                            return Err(LockError::Server(e))
                        }
                        // Broken, or a master no more: connect anew.
                        Ok(Err(e)) => {
                            self.inner.conns.discard_shared(&h);
                            e
                        }
                        Err(_) => {
                            self.inner.conns.discard_shared(&h);
                            timeout_error("command")
                        }
                    }
                }
                Err(e) => e,
            };
            attempt += 1;
            if attempt > self.inner.options.retries {
                return Err(LockError::Connection(failure));
            }
            tokio::time::sleep(self.inner.options.retry_interval).await;
        }
    }

    // -----------------------------------------------------------------------
    // Hold counts
    // -----------------------------------------------------------------------

    fn entry(&self, name: &str, owner: &str) -> Arc<Entry> {
        let mut registry = self
            .inner
            .registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        registry
            .entry((name.to_string(), owner.to_string()))
            .or_insert_with(|| {
                let now = Instant::now();
                Arc::new(Entry {
                    name: name.to_string(),
                    owner: owner.to_string(),
                    op: tokio::sync::Mutex::new(()),
                    state: Mutex::new(State {
                        holds: 0,
                        retired: false,
                        watchdog: None,
                        expires: now,
                        next_renewal: now,
                        last_error: None,
                    }),
                    lost: watch::Sender::new(None),
                })
            })
            .clone()
    }

    /// Removes `entry` from the registry (its holds are gone, or lost).
    pub(crate) fn retire(inner: &Inner, entry: &Arc<Entry>) {
        entry.state().retired = true;
        let mut registry = inner
            .registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = (entry.name.clone(), entry.owner.clone());
        if registry.get(&key).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            registry.remove(&key);
        }
    }

    /// Every entry, for the watchdog.
    pub(crate) fn entries(inner: &Inner) -> Vec<Arc<Entry>> {
        inner
            .registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// The server's hold count of `owner` after a failure in transit on
    /// `dead`: fences `dead` first (see the module docs).
    async fn read_back(
        &self,
        dead: Option<ClientId>,
        waited: bool,
        name: &str,
        owner: &str,
    ) -> Result<u64, String> {
        let options = &self.inner.options;
        let mut last = String::from("no attempt");
        for attempt in 0..=options.retries {
            if attempt > 0 {
                tokio::time::sleep(options.retry_interval).await;
            }
            let h = match self.inner.conns.shared().await {
                Ok(h) => h,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            let mut con: Con = h.con.clone();
            let fenced = self
                .inner
                .conns
                .fence(dead, &h, options.command_timeout)
                .await;
            if waited && !fenced {
                // No kill possible (a cluster, NOPERM): the dropped waiting
                // connection leaves the server's queue when the server reads
                // its close. Until then it could still be granted the lock.
                self.await_dequeued(&mut con, name, owner).await;
            }
            let mut hget = redis::cmd("HGET");
            hget.arg(name).arg(owner);
            match tokio::time::timeout(options.command_timeout, con.query(&hget)).await {
                Ok(Ok(v)) => return hold_count(v),
                Ok(Err(e)) => {
                    if is_transport(&e) {
                        self.inner.conns.discard_shared(&h);
                    }
                    last = e.to_string();
                }
                Err(_) => {
                    self.inner.conns.discard_shared(&h);
                    last = "HGET timed out".into();
                }
            }
        }
        Err(last)
    }

    /// `owner`'s hold count read on `h` itself, behind whatever went out on
    /// it before (a connection answers in order). If `h` fails meanwhile,
    /// it is fenced first and the count read elsewhere (see `read_back`).
    async fn read_behind(&self, h: &Handle, name: &str, owner: &str) -> Result<u64, String> {
        let mut hget = redis::cmd("HGET");
        hget.arg(name).arg(owner);
        let mut con = h.con.clone();
        match tokio::time::timeout(self.inner.options.command_timeout, con.query(&hget)).await {
            Ok(Ok(v)) => hold_count(v),
            Ok(Err(e)) if !is_transport(&e) => Err(e.to_string()),
            _ => {
                self.inner.conns.discard_shared(h);
                self.read_back(h.id, false, name, owner).await
            }
        }
    }

    /// Polls `LOCK.INFO` until `owner` is no longer among the lock's
    /// waiters, for at most the command timeout.
    async fn await_dequeued(&self, con: &mut Con, name: &str, owner: &str) {
        let deadline = Instant::now() + self.inner.options.command_timeout;
        let mut info = redis::cmd("LOCK.INFO");
        info.arg(name);
        while Instant::now() < deadline {
            match tokio::time::timeout(self.inner.options.command_timeout, con.query(&info)).await {
                Ok(Ok(v)) if !waiters_include(&v, owner.as_bytes()) => return,
                Ok(Ok(_)) => {}
                _ => return, // the read-back that follows reports failures
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Runs a command that moves `owner`'s count from `known` to `applied`
    /// on the shared connection, resending it only when the server shows it
    /// did not run. An acquisition passes its `progress`, where each attempt
    /// records the connection it goes out on.
    async fn run_counted(
        &self,
        cmd: &Cmd,
        name: &str,
        owner: &str,
        (known, applied): (u64, u64),
        progress: Option<&Tracker>,
        within: Duration,
    ) -> Result<Outcome> {
        let options = &self.inner.options;
        let mut attempt = 0;
        loop {
            let h = match self.inner.conns.shared().await {
                Ok(h) => h,
                Err(e) => {
                    // Nothing was sent.
                    attempt += 1;
                    if attempt > options.retries {
                        return Err(LockError::Connection(e));
                    }
                    tokio::time::sleep(options.retry_interval).await;
                    continue;
                }
            };
            if let Some(progress) = progress {
                progress
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .sent_on = Some(h.clone());
            }
            let mut con = h.con.clone();
            let failure = match tokio::time::timeout(within, con.query(cmd)).await {
                Ok(Ok(v)) => return Ok(Outcome::Reply(v)),
                Ok(Err(e)) if is_wrong_role(&e) => {
                    // Refused by a server that is no master (any more):
                    // nothing ran. Connect anew (through Sentinel: to the
                    // new master) and send it again.
                    self.inner.conns.discard_shared(&h);
                    attempt += 1;
                    if attempt > options.retries {
                        return Err(LockError::Connection(e));
                    }
                    tokio::time::sleep(options.retry_interval).await;
                    continue;
                }
                Ok(Err(e)) if !is_transport(&e) => return Err(refused(name, e)),
                Ok(Err(e)) => e,
                Err(_) => timeout_error("command"),
            };
            self.inner.conns.discard_shared(&h);
            let found = self
                .read_back(h.id, false, name, owner)
                .await
                .map_err(|why| LockError::Uncertain {
                    name: name.to_string(),
                    detail: format!("{failure}; reading the hold count back: {why}"),
                })?;
            if found == applied {
                return Ok(Outcome::AppliedUnseen);
            }
            if found != known {
                return Err(LockError::HoldCountMismatch {
                    name: name.to_string(),
                    expected: vec![known, applied],
                    found,
                });
            }
            attempt += 1;
            if attempt > options.retries {
                return Err(LockError::Connection(failure));
            }
            tokio::time::sleep(options.retry_interval).await;
        }
    }

    /// The token of a fenced grant whose reply was lost: while this owner
    /// holds the lock nobody else can be granted, so the counter's value is
    /// the token of this owner's last grant.
    async fn read_token(&self, name: &str) -> Result<Option<i64>> {
        let mut get = redis::cmd("GET");
        get.arg(token_key(name));
        match self.simple(&get).await? {
            Value::Nil => Ok(None),
            v => redis::from_redis_value::<i64>(&v)
                .map(Some)
                .map_err(|e| LockError::Protocol(format!("the token counter: {e}"))),
        }
    }

    /// Takes `name` for `owner`: the one acquisition path every API uses.
    ///
    /// The work runs in a task of its own, so a caller that stops waiting
    /// (its future dropped by a `timeout` or `select!`) cannot leave a lock
    /// behind: the task then finds out whether the server granted the lock
    /// meanwhile and, if so, gives it back ([`LockClient::abandon`]). A
    /// grant that completes after the caller left is released the same way,
    /// through its guard's drop.
    pub(crate) async fn acquire_as(
        &self,
        name: &str,
        owner: &str,
        lease: Option<Duration>,
        wait: Wait,
        fenced: bool,
    ) -> Result<Option<LockGuard>> {
        let (mut reply, caller) = tokio::sync::oneshot::channel();
        let this = self.clone();
        let (name, owner) = (name.to_string(), owner.to_string());
        self.inner.runtime.spawn(async move {
            let progress: Tracker = Arc::default();
            let finished = tokio::select! {
                biased;
                result = this.acquire_inner(&name, &owner, lease, wait, fenced, &progress) => {
                    Some(result)
                }
                () = reply.closed() => None,
            };
            match finished {
                // If the caller left meanwhile, the guard comes back here
                // and its drop releases the lock.
                Some(result) => drop(reply.send(result)),
                None => this.abandon(&progress).await,
            }
        });
        // `caller` only errs if the task was dropped: the runtime shut down.
        caller.await.unwrap_or_else(|_| {
            Err(LockError::Runtime(std::io::Error::other(
                "the client's runtime shut down during the acquisition",
            )))
        })
    }

    /// Cleans up after a caller that stopped waiting for an acquisition:
    /// the acquisition's future has been dropped (releasing the entry's
    /// operation lock) at any point. A grant it made but did not record
    /// shows as `known + 1` on the server, and is released.
    async fn abandon(&self, progress: &Tracker) {
        let (entry, known, waiting, sent_on) = {
            let p = progress
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            (p.entry.clone(), p.known, p.waiting, p.sent_on.clone())
        };
        let Some(entry) = entry else {
            return; // nothing was sent
        };
        let _op = entry.op.lock().await;
        if entry.state().holds != known {
            return; // the grant was recorded: its guard releases it
        }
        let (name, owner) = (entry.name.as_str(), entry.owner.as_str());
        let found = match (waiting, sent_on) {
            // A WAIT was in flight on its own connection: kill it (or wait
            // for the server to drop it), then look.
            (Some(dead), _) => self.read_back(dead, true, name, owner).await,
            // Read on the connection the acquire went out on, after it,
            // even if the shared slot moved on to another connection: a
            // read elsewhere could come before an acquire still delayed in
            // the network, which would then take the lock for nobody.
            (None, Some(h)) => self.read_behind(&h, name, owner).await,
            (None, None) => Ok(known), // nothing was sent
        };
        if found == Ok(known + 1) {
            let mut release = redis::cmd("LOCK.RELEASE");
            release.arg(name).arg(owner);
            let _ = self
                .run_counted(
                    &release,
                    name,
                    owner,
                    (known + 1, known),
                    None,
                    self.inner.options.command_timeout,
                )
                .await;
        }
        if known == 0 {
            LockClient::retire(&self.inner, &entry);
        }
    }

    async fn acquire_inner(
        &self,
        name: &str,
        owner: &str,
        lease: Option<Duration>,
        wait: Wait,
        fenced: bool,
        progress: &Tracker,
    ) -> Result<Option<LockGuard>> {
        let started = Instant::now();
        let watchdog = lease.is_none();
        let lease = lease.unwrap_or(self.inner.options.watchdog_lease);
        let ms = lease_ms(lease)?;
        let sync = self.inner.options.sync_args()?;
        if owner.is_empty() {
            return Err(LockError::InvalidArgument(
                "an owner id must not be empty".into(),
            ));
        }
        let deadline = match wait {
            Wait::No => Some(started),
            // A wait too long for the clock to represent is a wait forever.
            Wait::For(d) => started.checked_add(d),
            Wait::Forever => None,
        };
        loop {
            let entry = self.entry(name, owner);
            let _op = entry.op.lock().await;
            if entry.state().retired {
                continue; // released or lost meanwhile: take a fresh entry
            }
            let known = entry.state().holds;
            {
                let mut p = progress
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                p.entry = Some(entry.clone());
                p.known = known;
            }

            // One attempt without waiting, on the shared connection.
            let sent = Instant::now();
            let cmd = acquire_cmd(name, owner, ms, None, fenced, sync);
            // The module answers a synced grant once replicas acknowledged
            // it, or undid it: up to the sync timeout later.
            let within = self.inner.options.command_timeout + self.inner.options.sync_time();
            let acquired = match self
                .run_counted(
                    &cmd,
                    name,
                    owner,
                    (known, known + 1),
                    Some(progress),
                    within,
                )
                .await?
            {
                Outcome::Reply(v) => parse_acquire(v, fenced)?,
                Outcome::AppliedUnseen if fenced => Acquired::Granted(self.read_token(name).await?),
                Outcome::AppliedUnseen => Acquired::Granted(None),
            };
            if let Acquired::Granted(token) = acquired {
                let expiry = self.grant_expiry(name, owner, sent, lease).await;
                return Ok(Some(self.granted(&entry, expiry, watchdog, token)));
            }
            if matches!(wait, Wait::No) {
                return Ok(None);
            }
            return self
                .wait_for(
                    &entry, known, ms, lease, watchdog, deadline, fenced, progress,
                )
                .await;
        }
    }

    /// The waiting half of an acquisition: `LOCK.ACQUIRE ... WAIT` on a
    /// connection of its own, with the reply awaited a margin longer than
    /// the wait. Called with the entry's operation lock held.
    #[allow(clippy::too_many_arguments)]
    async fn wait_for(
        &self,
        entry: &Arc<Entry>,
        known: u64,
        ms: u64,
        lease: Duration,
        watchdog: bool,
        deadline: Option<Instant>,
        fenced: bool,
        progress: &Tracker,
    ) -> Result<Option<LockGuard>> {
        let options = &self.inner.options;
        let (name, owner) = (entry.name.as_str(), entry.owner.as_str());
        let mut attempt = 0;
        loop {
            let remaining = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    Some(left)
                }
                None => None,
            };
            // WAIT 0 waits forever, as BLPOP.
            let sync = options.sync_args()?;
            let cmd = acquire_cmd(
                name,
                owner,
                ms,
                Some(remaining.map_or(0, wait_ms)),
                fenced,
                sync,
            );
            let h = match self.inner.conns.dedicated().await {
                Ok(h) => h,
                Err(e) => {
                    attempt += 1;
                    if attempt > options.retries {
                        return Err(LockError::Connection(e));
                    }
                    tokio::time::sleep(options.retry_interval).await;
                    continue;
                }
            };
            progress
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .waiting = Some(h.id);
            let mut con = h.con.clone();
            let sent = Instant::now();
            let reply = match remaining {
                Some(left) => {
                    // A grant at the wait's end may still wait for replicas.
                    let within = left + options.wait_margin + options.sync_time();
                    match tokio::time::timeout(within, con.query(&cmd)).await {
                        Ok(r) => r,
                        Err(_) => Err(timeout_error("LOCK.ACQUIRE ... WAIT")),
                    }
                }
                None => con.query(&cmd).await,
            };
            let failure = match reply {
                Ok(v) => {
                    self.inner.conns.give_back(h);
                    return match parse_acquire(v, fenced)? {
                        Acquired::Granted(token) => {
                            let expiry = self.grant_expiry(name, owner, sent, lease).await;
                            Ok(Some(self.granted(entry, expiry, watchdog, token)))
                        }
                        Acquired::Busy => Ok(None),
                    };
                }
                Err(e) if !is_transport(&e) && !is_wrong_role(&e) => {
                    // An error reply: the connection is still in order.
                    self.inner.conns.give_back(h);
                    return Err(refused(name, e));
                }
                // Broken, or the server stopped being the master (a wait
                // ended by a failover): look, as for a break, and queue
                // again (through Sentinel, on the new master).
                Err(e) => e,
            };
            // The connection broke while waiting: was the lock granted at
            // that instant? Close and kill the waiter's connection, then look.
            let dead = h.id;
            drop(con);
            drop(h);
            let found = self
                .read_back(dead, true, name, owner)
                .await
                .map_err(|why| LockError::Uncertain {
                    name: name.to_string(),
                    detail: format!("{failure} while waiting; reading the hold count back: {why}"),
                })?;
            if found == known + 1 {
                let token = if fenced {
                    self.read_token(name).await?
                } else {
                    None
                };
                let expiry = self.grant_expiry(name, owner, sent, lease).await;
                return Ok(Some(self.granted(entry, expiry, watchdog, token)));
            }
            if found != known {
                return Err(LockError::HoldCountMismatch {
                    name: name.to_string(),
                    expected: vec![known, known + 1],
                    found,
                });
            }
            attempt += 1;
            if attempt > options.retries {
                return Err(LockError::Connection(failure));
            }
            tokio::time::sleep(options.retry_interval).await;
        }
    }

    /// When the lease of a grant to `owner`, asked for at `sent`, ends on
    /// the server at the earliest.
    ///
    /// The server started the lease when it granted the lock: no earlier
    /// than `sent`, no later than now (the reply's arrival). Counting from
    /// `sent` is safe, and it is what a grant answered at once gets. A
    /// grant that took a third of the lease or more to arrive (a wait
    /// handed the lock over late, a slow server, retries) would be due for
    /// renewal, or even expired, on arrival by that count: a lock held
    /// fresh would be reported lost and never renewed. Its lease is
    /// measured instead: `LOCK.INFO`, sent at `asked`, shows the lease left
    /// at some instant after `asked`, so the lease ends no earlier than
    /// `asked` + that, again a safe bound, and a tight one.
    async fn grant_expiry(
        &self,
        name: &str,
        owner: &str,
        sent: Instant,
        lease: Duration,
    ) -> Expiry {
        let received = Instant::now();
        if sent
            .checked_add(lease / 3)
            .is_some_and(|due| received < due)
        {
            return Expiry::Until(later(sent, lease));
        }
        let asked = Instant::now();
        let mut info = redis::cmd("LOCK.INFO");
        info.arg(name);
        match self.simple(&info).await.map(|v| lease_left(&v, owner)) {
            Ok(Some(Some(left))) => Expiry::Until(later(asked, left.min(lease))),
            Ok(Some(None)) => Expiry::Gone,
            // The lease could not be measured. The grant is certain and a
            // few moments old, so it is not reported lost: its lease is
            // counted from the reply's arrival (later than the server's
            // start by the reply's transit only) and the watchdog renews it
            // at once, which restores a safe count.
            Ok(None) | Err(_) => Expiry::Unmeasured(later(received, lease)),
        }
    }

    /// Records a grant (called with the entry's operation lock held) and
    /// makes its guard.
    fn granted(
        &self,
        entry: &Arc<Entry>,
        expiry: Expiry,
        watchdog: bool,
        token: Option<i64>,
    ) -> LockGuard {
        let now = Instant::now();
        let (expires, renew_now) = match expiry {
            Expiry::Until(at) => (at, false),
            Expiry::Unmeasured(at) => (at, true),
            Expiry::Gone => (now, true),
        };
        {
            let mut state = entry.state();
            state.holds += 1;
            // Any acquire (re-entry too) resets the server's lease to `lease`.
            state.expires = expires;
            if watchdog {
                // A third of the lease after it started: two thirds before
                // its end.
                let renew = self.inner.options.watchdog_lease;
                state.watchdog = Some(renew);
                state.next_renewal = match expires.checked_sub(renew - renew / 3) {
                    Some(at) if !renew_now => at,
                    _ => now,
                };
            }
        }
        self.start_watchdog();
        self.inner.wake.notify_one();
        let guard = LockGuard::new(self.clone(), entry.clone(), token);
        if matches!(expiry, Expiry::Gone) {
            // Forced or deleted between the grant and the measurement.
            watchdog::mark_lost(&self.inner, entry, Lost::NotHeld);
        } else if let Some(tracking) = &self.inner.tracking {
            tracking.watch(entry);
        }
        guard
    }

    fn start_watchdog(&self) {
        self.inner.watchdog_started.call_once(|| {
            let weak: Weak<Inner> = Arc::downgrade(&self.inner);
            let wake = self.inner.wake.clone();
            self.inner.runtime.spawn(watchdog::run(weak, wake));
        });
    }

    /// Gives back one hold of `entry` (the guard's unlock and drop).
    pub(crate) async fn release(&self, entry: &Arc<Entry>) -> Result<()> {
        let _op = entry.op.lock().await;
        let (known, renew, lost) = {
            let state = entry.state();
            (state.holds, state.watchdog, state.retired)
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
            entry.state().holds -= 1;
            return Err(not_held());
        }
        let mut cmd = redis::cmd("LOCK.RELEASE");
        cmd.arg(&entry.name).arg(&entry.owner);
        if let (Some(renew), true) = (renew, known > 1) {
            // Holds remain: restart the watchdog's lease, as Redisson does.
            cmd.arg(lease_ms(renew)?);
        }
        let outcome = self
            .run_counted(
                &cmd,
                &entry.name,
                &entry.owner,
                (known, known - 1),
                None,
                self.inner.options.command_timeout,
            )
            .await;
        let result = match outcome {
            Ok(Outcome::Reply(Value::Nil)) => Err(not_held()),
            Ok(Outcome::Reply(Value::Int(0 | 1))) | Ok(Outcome::AppliedUnseen) => Ok(()),
            Ok(Outcome::Reply(other)) => {
                return Err(LockError::Protocol(format!(
                    "LOCK.RELEASE answered {other:?}"
                )))
            }
            Err(LockError::HoldCountMismatch { found: 0, .. }) => Err(not_held()),
            Err(e) => return Err(e),
        };
        let holds = {
            let mut state = entry.state();
            state.holds -= 1;
            if result.is_err() {
                state.holds = 0;
            }
            state.holds
        };
        if result.is_err() {
            // The server had no hold left: any other guard of this tenure
            // has lost the lock too, and is told.
            watchdog::mark_lost(&self.inner, entry, Lost::NotHeld);
        } else if holds == 0 {
            LockClient::retire(&self.inner, entry);
        }
        result
    }

    /// `LOCK.RENEW` for the watchdog: Some(true) renewed, Some(false) not
    /// held, Err on failure (the caller decides when that means lost).
    pub(crate) async fn renew(&self, entry: &Entry, lease: Duration) -> Result<bool> {
        let mut cmd = redis::cmd("LOCK.RENEW");
        cmd.arg(&entry.name).arg(&entry.owner).arg(lease_ms(lease)?);
        // One attempt, connecting included, takes at most a third of the
        // lease: the next one is due by then.
        let within = self.inner.options.command_timeout.min(lease / 3);
        let started = Instant::now();
        let h = tokio::time::timeout(within, self.inner.conns.shared())
            .await
            .map_err(|_| LockError::Connection(timeout_error("connect")))?
            .map_err(LockError::Connection)?;
        let mut con = h.con.clone();
        let within = within.saturating_sub(started.elapsed());
        match tokio::time::timeout(within, con.query(&cmd)).await {
            Ok(Ok(Value::Int(1))) => Ok(true),
            Ok(Ok(Value::Int(0))) => Ok(false),
            Ok(Ok(other)) => Err(LockError::Protocol(format!(
                "LOCK.RENEW answered {other:?}"
            ))),
            Ok(Err(e)) if !is_transport(&e) && !is_wrong_role(&e) => Err(LockError::Server(e)),
            Ok(Err(e)) => {
                self.inner.conns.discard_shared(&h);
                Err(LockError::Connection(e))
            }
            Err(_) => {
                self.inner.conns.discard_shared(&h);
                Err(LockError::Connection(timeout_error("LOCK.RENEW")))
            }
        }
    }

    /// The client behind `inner`, for tasks that hold only the inner part.
    pub(crate) fn from_inner(inner: Arc<Inner>) -> LockClient {
        LockClient { inner, owner: None }
    }

    /// Whether this client talks to a cluster.
    pub fn is_cluster(&self) -> bool {
        self.inner.conns.is_cluster()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_round_up_and_never_mean_forever() {
        assert_eq!(wait_ms(Duration::from_micros(1)), 1);
        assert_eq!(wait_ms(Duration::from_micros(1500)), 2);
        assert_eq!(wait_ms(Duration::from_millis(7)), 7);
        assert_eq!(wait_ms(Duration::ZERO), 1);
    }

    #[test]
    fn leases_must_be_whole_positive_milliseconds() {
        assert!(lease_ms(Duration::from_micros(999)).is_err());
        assert_eq!(lease_ms(Duration::from_secs(30)).ok(), Some(30_000));
        assert!(lease_ms(Duration::MAX).is_err());
    }

    #[test]
    fn acquire_replies_decode_both_contracts() {
        assert!(matches!(
            parse_acquire(Value::Nil, false),
            Ok(Acquired::Granted(None))
        ));
        assert!(matches!(
            parse_acquire(Value::Int(2900), false),
            Ok(Acquired::Busy)
        ));
        let granted = Value::Array(vec![Value::Int(-1), Value::Int(17)]);
        assert!(matches!(
            parse_acquire(granted, true),
            Ok(Acquired::Granted(Some(17)))
        ));
        let busy = Value::Array(vec![Value::Int(2900), Value::Int(-1)]);
        assert!(matches!(parse_acquire(busy, true), Ok(Acquired::Busy)));
        assert!(parse_acquire(Value::Nil, true).is_err());
        assert!(parse_acquire(Value::Okay, false).is_err());
    }

    #[test]
    fn waiters_are_found_in_both_protocols() {
        let text = |t: &str| Value::BulkString(t.as_bytes().to_vec());
        let waiter = Value::Array(vec![
            text("owner"),
            text("w1"),
            text("waited_ms"),
            Value::Int(3),
        ]);
        let resp2 = Value::Array(vec![
            text("state"),
            text("held"),
            text("waiters"),
            Value::Array(vec![waiter]),
        ]);
        assert!(waiters_include(&resp2, b"w1"));
        assert!(!waiters_include(&resp2, b"w2"));
        let resp3 = Value::Map(vec![(
            text("waiters"),
            Value::Array(vec![Value::Map(vec![(text("owner"), text("w2"))])]),
        )]);
        assert!(waiters_include(&resp3, b"w2"));
        assert!(!waiters_include(&Value::Nil, b"w2"));
    }

    #[test]
    fn the_lease_left_is_read_for_the_owner_only() {
        let text = |t: &str| Value::BulkString(t.as_bytes().to_vec());
        let resp2 = Value::Array(vec![
            text("state"),
            text("held"),
            text("owners"),
            Value::Array(vec![text("b"), Value::Int(1)]),
            text("ttl_ms"),
            Value::Int(987),
        ]);
        assert_eq!(
            lease_left(&resp2, "b"),
            Some(Some(Duration::from_millis(987)))
        );
        assert_eq!(lease_left(&resp2, "a"), Some(None));
        let resp3 = Value::Map(vec![
            (text("owners"), Value::Map(vec![(text("b"), Value::Int(2))])),
            (text("ttl_ms"), Value::Int(5)),
        ]);
        assert_eq!(
            lease_left(&resp3, "b"),
            Some(Some(Duration::from_millis(5)))
        );
        assert_eq!(lease_left(&Value::Nil, "b"), None);
    }

    #[test]
    fn token_keys_follow_redissons_prefix_rule() {
        assert_eq!(token_key("stock"), "redisson_lock_token:{stock}");
        assert_eq!(token_key("{o}:s"), "redisson_lock_token:{o}:s");
    }

    #[test]
    fn commands_put_wait_before_token() {
        let cmd = acquire_cmd("k", "o", 100, Some(5), true, Some((1, 250)));
        let args: Vec<Vec<u8>> = cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => b.to_vec(),
                redis::Arg::Cursor => Vec::new(),
            })
            .collect();
        let text: Vec<String> = args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        assert_eq!(
            text,
            [
                "LOCK.ACQUIRE",
                "k",
                "o",
                "100",
                "WAIT",
                "5",
                "TOKEN",
                "SYNC",
                "1",
                "250"
            ]
        );
    }
}
