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
//! read more, so the state read afterwards is final (see `client.rs`).

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
    pub(crate) id: Option<i64>,
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

    /// A new connection, with its `CLIENT ID` on a single server.
    async fn connect(&self) -> RedisResult<Handle> {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        match &self.backend {
            Backend::Single(client) => {
                // No response timeout here: every call site bounds its own
                // wait (a WAIT may legitimately last long).
                let config =
                    AsyncConnectionConfig::new().set_connection_timeout(self.connect_timeout);
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
                    Value::Int(id) => Some(id),
                    _ => None,
                });
                Ok(Handle {
                    con: Con::Single(con),
                    id,
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
    pub(crate) async fn fence(
        &self,
        dead: Option<i64>,
        through: &mut Con,
        within: Duration,
    ) -> bool {
        let Some(id) = dead else {
            return false;
        };
        let mut kill = redis::cmd("CLIENT");
        kill.arg("KILL").arg("ID").arg(id);
        match tokio::time::timeout(within, through.query(&kill)).await {
            Ok(Ok(_)) => true,
            // "No such client": the server already dropped it.
            Ok(Err(e)) => e.detail().is_some_and(|d| d.contains("No such client")),
            Err(_) => false,
        }
    }
}

/// Whether an `HGET lock owner` reply says the owner holds nothing.
pub(crate) fn is_hold_count_zero(reply: &Value) -> bool {
    match reply {
        Value::Nil | Value::Int(0) => true,
        Value::BulkString(b) => b == b"0",
        _ => false,
    }
}

/// The `redis::Client` of a single server, for connections of other kinds.
impl Connections {
    pub(crate) fn single_client(&self) -> Option<redis::Client> {
        match &self.backend {
            Backend::Single(client) => Some(client.clone()),
            Backend::Cluster(_) => None,
        }
    }
}

pub(crate) fn timeout_error(what: &'static str) -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("{what} timed out"),
    ))
}
