//! [`LockClient`]: the client's public face: building it, its owner ids,
//! and what every object's API (`lock.rs`, `semaphore.rs`, `latch.rs`,
//! `multi.rs`) sends its commands through.
//!
//! What happens underneath lives in rooms of its own: what the clones share
//! in `inner.rs`, taking a lock in `acquire.rs`, sending and safe retries in
//! `counted.rs`, the hold counts in `holds.rs`, the commands and replies in
//! `protocol/`, the connections in `conn.rs`.

use std::sync::{Arc, Weak};

use crate::conn::{Backend, SentinelBackend};
use crate::error::{LockError, Result};
use crate::inner::Inner;
use crate::options::Options;
use crate::owner;
use crate::protocol;
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
    /// not survive the failover is reported lost
    /// ([`LockGuard::lost`](crate::LockGuard::lost)).
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
        let inner = Inner::new(backend, options, runtime);
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
