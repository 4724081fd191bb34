//! Connections: one shared multiplexed connection for every short command,
//! and dedicated connections for waiting.
//!
//! `LOCK.ACQUIRE ... WAIT` blocks the connection it arrives on: Redis answers
//! a client's commands in order, so every command pipelined behind a blocked
//! one would wait with it. Waits therefore get a connection of their own,
//! taken from a small pool of idle ones, and given back only after a clean
//! reply. Any connection whose command failed in transit is thrown away.
//!
//! A connection to a single server knows its `CLIENT ID`. After a failure in
//! transit the library kills that id (`CLIENT KILL ID`) from a new connection
//! before it reads the lock's state back: once the kill returns, the server
//! has executed whatever it had read from the dead connection and will never
//! read more, so the state read afterwards is final (see `counted.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, RedisResult, Value};

/// Where the locks live.
pub(crate) enum Backend {
    Single(redis::Client),
    Cluster(ClusterClient),
    /// The master Sentinel names, asked anew for every new connection.
    Sentinel(SentinelBackend),
}

pub(crate) struct SentinelBackend {
    /// One per sentinel: each is asked in turn, since right after a
    /// failover some still name the old master for a while.
    pub(crate) sentinels: Vec<tokio::sync::Mutex<redis::sentinel::Sentinel>>,
    pub(crate) name: String,
    pub(crate) node: redis::sentinel::SentinelNodeConnectionInfo,
}

/// A connection's `CLIENT ID`, and which server it is an id on: ids are per
/// server, and after a failover a dead connection's id means nothing (or
/// someone else) on the new master.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClientId {
    pub(crate) id: i64,
    server: u64,
}

/// A number for a server's address (the `ClientId`s' server).
fn server_number(client: &redis::Client) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    client.get_connection_info().addr().to_string().hash(&mut h);
    h.finish()
}

/// One connection, of either kind.
#[derive(Clone)]
pub(crate) enum Con {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl Con {
    pub(crate) async fn query(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        // An error reply arrives as a value; make it the error it is.
        let reply = match self {
            Con::Single(c) => c.req_packed_command(cmd).await,
            Con::Cluster(c) => c.req_packed_command(cmd).await,
        };
        reply.and_then(Value::extract_error)
    }
}

/// A connection and what identifies it on the server.
#[derive(Clone)]
pub(crate) struct Handle {
    pub(crate) con: Con,
    /// `CLIENT ID` on a single server (None in a cluster, or when ACLs deny it).
    pub(crate) id: Option<ClientId>,
    /// The server it goes to (None in a cluster).
    server: Option<u64>,
    generation: u64,
}

/// How many idle wait connections are kept for reuse.
const IDLE_WAITERS: usize = 8;

pub(crate) struct Connections {
    backend: Backend,
    connect_timeout: Duration,
    shared: Mutex<Option<Handle>>,
    connecting: tokio::sync::Mutex<()>,
    generation: AtomicU64,
    idle: Mutex<Vec<Handle>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere cannot leave these plain slots half-written.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Connections {
    pub(crate) fn new(backend: Backend, connect_timeout: Duration) -> Connections {
        Connections {
            backend,
            connect_timeout,
            shared: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
            idle: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.backend, Backend::Cluster(_))
    }

    /// The client of the master: the one server, or the master Sentinel
    /// names now (None in a cluster).
    pub(crate) async fn master_client(&self) -> RedisResult<Option<redis::Client>> {
        match &self.backend {
            Backend::Single(client) => Ok(Some(client.clone())),
            Backend::Cluster(_) => Ok(None),
            Backend::Sentinel(s) => {
                // The first master a sentinel names that answers as one
                // (redis-rs checks its ROLE).
                let mut last = timeout_error("asking Sentinel for the master");
                for sentinel in &s.sentinels {
                    let mut sentinel = sentinel.lock().await;
                    let asking = sentinel.async_master_for(&s.name, Some(&s.node));
                    match tokio::time::timeout(self.connect_timeout, asking).await {
                        Ok(Ok(client)) => return Ok(Some(client)),
                        Ok(Err(e)) => last = e,
                        Err(_) => {}
                    }
                }
                Err(last)
            }
        }
    }

    /// A new connection, with its `CLIENT ID` on a single server.
    async fn connect(&self) -> RedisResult<Handle> {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        match &self.backend {
            Backend::Single(_) | Backend::Sentinel(_) => {
                let Some(client) = self.master_client().await? else {
                    return Err(timeout_error("no master"));
                };
                let server = server_number(&client);
                // No response timeout here: every call site bounds its own
                // wait (a WAIT may legitimately last long). redis 1.x
                // defaults to 500 ms, so it is switched off explicitly.
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(self.connect_timeout))
                    .set_response_timeout(None);
                let connecting = client.get_multiplexed_async_connection_with_config(&config);
                let mut con = tokio::time::timeout(self.connect_timeout, connecting)
                    .await
                    .map_err(|_| timeout_error("connect"))??;
                let id = tokio::time::timeout(
                    self.connect_timeout,
                    con.req_packed_command(redis::cmd("CLIENT").arg("ID")),
                )
                .await
                .ok()
                .and_then(|r| r.ok())
                .and_then(|v| match v {
                    Value::Int(id) => Some(ClientId { id, server }),
                    _ => None,
                });
                Ok(Handle {
                    con: Con::Single(con),
                    id,
                    server: Some(server),
                    generation,
                })
            }
            Backend::Cluster(client) => {
                let con = tokio::time::timeout(self.connect_timeout, client.get_async_connection())
                    .await
                    .map_err(|_| timeout_error("connect"))??;
                Ok(Handle {
                    con: Con::Cluster(con),
                    id: None,
                    server: None,
                    generation,
                })
            }
        }
    }

    /// The shared connection, connecting when there is none.
    pub(crate) async fn shared(&self) -> RedisResult<Handle> {
        if let Some(h) = lock(&self.shared).clone() {
            return Ok(h);
        }
        let _gate = self.connecting.lock().await;
        if let Some(h) = lock(&self.shared).clone() {
            return Ok(h);
        }
        let h = self.connect().await?;
        *lock(&self.shared) = Some(h.clone());
        Ok(h)
    }

    /// Forgets the shared connection `h` (if it is still the current one):
    /// the next command connects anew.
    pub(crate) fn discard_shared(&self, h: &Handle) {
        let mut slot = lock(&self.shared);
        if slot.as_ref().is_some_and(|c| c.generation == h.generation) {
            *slot = None;
        }
    }

    /// A connection of its own for a blocking wait.
    pub(crate) async fn dedicated(&self) -> RedisResult<Handle> {
        if let Some(h) = lock(&self.idle).pop() {
            return Ok(h);
        }
        self.connect().await
    }

    /// Returns a wait connection whose last command got its reply.
    pub(crate) fn give_back(&self, h: Handle) {
        let mut idle = lock(&self.idle);
        if idle.len() < IDLE_WAITERS {
            idle.push(h);
        }
    }

    /// Makes sure the server will not execute anything more from the
    /// connection whose `CLIENT ID` is `dead`: `CLIENT KILL ID` through
    /// `through`. Returns false
    /// when that cannot be done (a cluster, no id, or `NOPERM`): the caller
    /// then relies on the dead connection being closed, which is weaker.
    /// Also false when `through` goes to another server than `dead` did
    /// (Sentinel named a new master): the dead connection's commands cannot
    /// reach the server `through` reads from, and its id there could be
    /// someone else's.
    pub(crate) async fn fence(
        &self,
        dead: Option<ClientId>,
        through: &Handle,
        within: Duration,
    ) -> bool {
        match client_command(&["KILL", "ID"], dead, through, within).await {
            Some(Ok(_)) => true,
            // "No such client": the server already dropped it.
            Some(Err(e)) => e.detail().is_some_and(|d| d.contains("No such client")),
            None => false,
        }
    }
}

/// `CLIENT <words> <id>` about the connection `target`, sent through
/// `through`, its reply awaited at most `within` (no reply in time is an
/// error); None when `target` has no id or `through` goes to another
/// server (where its id could be someone else's).
async fn client_command(
    words: &[&str],
    target: Option<ClientId>,
    through: &Handle,
    within: Duration,
) -> Option<RedisResult<Value>> {
    let ClientId { id, server } = target?;
    if through.server != Some(server) {
        return None;
    }
    let mut cmd = redis::cmd("CLIENT");
    cmd.arg(words).arg(id);
    let mut through = through.con.clone();
    let reply = tokio::time::timeout(within, through.query(&cmd)).await;
    Some(reply.unwrap_or_else(|_| Err(timeout_error("the reply"))))
}

/// Whether a refusal says the server is not (or no longer) the master:
/// `READONLY` (a write on a replica: nothing ran), Redis's `UNBLOCKED`
/// (a wait ended by a demotion) or the module's own word for that. After a
/// failover the client connects again, through Sentinel, to the new master.
pub(crate) fn is_wrong_role(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
        || e.code() == Some("UNBLOCKED")
        || e.code() == Some("READONLY")
        || e.detail().is_some_and(|d| d.contains("became a replica"))
}

pub(crate) fn timeout_error(what: &'static str) -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("{what} timed out"),
    ))
}
