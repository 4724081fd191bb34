//! The fast lost signal: one connection per client with server-assisted
//! client-side caching (`CLIENT TRACKING on`, RESP3), so the server tells
//! the client the moment a held lock's key changes.
//!
//! Every lock this client holds is read once on that connection (`HGET key
//! owner`), which makes the server remember the key for the connection.
//! When the key changes in any way (`LOCK.FORCE`, `DEL`, the lease's
//! expiry, a release, and also this client's own renewals: the module's
//! writes signal the key as modified), the server pushes an `invalidate`
//! message naming it, once. The task then reads the key again on the same
//! connection, which both re-arms the notification and answers the
//! question: a hold count of 0 means the lock left its holder, and the
//! guard is marked lost at once ([`crate::Lost::NotHeld`], or
//! [`crate::Lost::LeaseExpired`] when a caller-given lease was ending:
//! the server's expiry can beat this client's own timer); otherwise (a
//! renewal, a re-entry) nothing happens.
//!
//! Each check takes the entry's operation lock, as acquisitions and
//! releases do, so a check never judges a hold mid-change: a lock being
//! released by its guard is retired before the check looks, and the check
//! then does nothing.
//!
//! The renewal stays the fallback: if tracking cannot be had (a cluster,
//! a server without RESP3, ACLs denying `CLIENT TRACKING`: such a refusal
//! is final, the task stops asking) or its connection is down, the watchdog's next renewal finds the loss as before. After the
//! tracking connection comes back, every held lock is checked again (which
//! also re-arms it), so a loss during the gap is reported then.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, PushInfo, PushKind, Value};
use tokio::sync::mpsc;

use crate::conn::timeout_error;
use crate::holds::{Entry, Registry};
use crate::protocol;

/// The client's handle on its tracking task.
pub(crate) struct Tracking {
    watch: mpsc::UnboundedSender<Arc<Entry>>,
}

impl Tracking {
    /// Starts the tracking task of the client whose hold registry is
    /// `holds`, on `runtime`; its reads time out after `timeout`. `connect`
    /// makes a RESP3 connection whose pushes go to the sender. The task and
    /// its checks end their work when the registry is gone (the client is).
    pub(crate) fn start(
        holds: Weak<Registry>,
        runtime: &tokio::runtime::Handle,
        timeout: Duration,
        connect: Connector,
    ) -> Tracking {
        let (watch, watch_rx) = mpsc::unbounded_channel();
        let checks = Checks {
            holds,
            runtime: runtime.clone(),
            timeout,
        };
        runtime.spawn(run(checks, watch_rx, connect));
        Tracking { watch }
    }

    /// Starts watching `entry` (a grant was just recorded): checked, and
    /// armed, at once.
    pub(crate) fn watch(&self, entry: &Arc<Entry>) {
        // The task ends only with the client: a send cannot fail while
        // anyone can call this.
        let _ = self.watch.send(entry.clone());
    }
}

/// How the task connects: a future for a RESP3 connection, with its pushes
/// delivered to the given sender.
pub(crate) type Connector = Box<
    dyn Fn(
            mpsc::UnboundedSender<PushInfo>,
        )
            -> futures_util::future::BoxFuture<'static, redis::RedisResult<MultiplexedConnection>>
        + Send
        + Sync,
>;

/// A RESP3 connection with tracking on, for `client`'s server; pushes go
/// to `pushes`.
pub(crate) async fn connect_single(
    client: redis::Client,
    timeout: Duration,
    pushes: mpsc::UnboundedSender<PushInfo>,
) -> redis::RedisResult<MultiplexedConnection> {
    let info = client.get_connection_info().clone();
    let redis_settings = info
        .redis_settings()
        .clone()
        .set_protocol(redis::ProtocolVersion::RESP3);
    let resp3 = redis::Client::open(info.set_redis_settings(redis_settings))?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_push_sender(pushes);
    let mut con = tokio::time::timeout(
        timeout,
        resp3.get_multiplexed_async_connection_with_config(&config),
    )
    .await
    .map_err(|_| timeout_error("connect"))??;
    let mut on = redis::cmd("CLIENT");
    on.arg("TRACKING").arg("ON");
    con.req_packed_command(&on)
        .await
        .and_then(Value::extract_error)?;
    Ok(con)
}

/// Whether connecting failed because the server refuses tracking for good
/// (`NOPERM`, an unknown `HELLO` or `CLIENT TRACKING`), not for now.
fn is_refusal(e: &redis::RedisError) -> bool {
    e.code() == Some("NOPERM")
        || e.detail()
            .is_some_and(|d| d.contains("unknown command") || d.contains("unknown subcommand"))
}

/// The longest pause between attempts to connect again.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// What a check needs: the registry to mark a loss in, where to run,
/// how long a read may take.
struct Checks {
    holds: Weak<Registry>,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
}

async fn run(
    checks: Checks,
    mut watch_rx: mpsc::UnboundedReceiver<Arc<Entry>>,
    connect: Connector,
) {
    let (push_tx, mut push_rx) = mpsc::unbounded_channel::<PushInfo>();
    // Held locks by key; an entry leaves when found retired.
    let mut watched: HashMap<String, Vec<Arc<Entry>>> = HashMap::new();
    let mut con: Option<MultiplexedConnection> = None;
    let mut backoff = Duration::from_millis(100);
    let mut retry_at: Option<tokio::time::Instant> = None;
    let mut disabled = false;
    loop {
        // Connect when something is watched and no connection is up.
        if con.is_none() && !watched.is_empty() && retry_at.is_none() && !disabled {
            match connect(push_tx.clone()).await {
                Ok(c) => {
                    backoff = Duration::from_millis(100);
                    // Arm (and check) everything held: a change during the
                    // gap was not pushed.
                    for entries in watched.values() {
                        for entry in entries {
                            checks.spawn(&c, entry.clone());
                        }
                    }
                    con = Some(c);
                }
                Err(e) if is_refusal(&e) => {
                    // The server will not track for this user (ACLs), or
                    // cannot (no RESP3): renewals only, without retrying.
                    disabled = true;
                }
                Err(_) => {
                    retry_at = Some(tokio::time::Instant::now() + backoff);
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        let retry = async {
            match retry_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            entry = watch_rx.recv() => {
                let Some(entry) = entry else {
                    return; // the client is gone
                };
                let same = watched.entry(entry.name.clone()).or_default();
                if !same.iter().any(|e| Arc::ptr_eq(e, &entry)) {
                    same.push(entry.clone());
                }
                if let Some(c) = &con {
                    checks.spawn(c, entry);
                }
            }
            push = push_rx.recv() => {
                let Some(push) = push else { continue };
                match push.kind {
                    PushKind::Invalidate => {
                        prune(&mut watched);
                        let Some(c) = &con else { continue };
                        for name in invalidated(&push.data, &watched) {
                            for entry in watched.get(&name).into_iter().flatten() {
                                checks.spawn(c, entry.clone());
                            }
                        }
                    }
                    PushKind::Disconnection => {
                        con = None;
                        retry_at = Some(tokio::time::Instant::now() + backoff);
                    }
                    _ => {}
                }
            }
            () = retry => {
                retry_at = None;
            }
        }
    }
}

/// Drops entries no longer held (released or lost).
fn prune(watched: &mut HashMap<String, Vec<Arc<Entry>>>) {
    watched.retain(|_, entries| {
        entries.retain(|e| e.state().is_held());
        !entries.is_empty()
    });
}

/// The watched keys an `invalidate` push names: its keys, or every watched
/// key when it carries none (the server flushed its tracking table: a
/// `FLUSHALL`, or the tracking table grew too large).
fn invalidated(data: &[Value], watched: &HashMap<String, Vec<Arc<Entry>>>) -> Vec<String> {
    let keys = match data.first() {
        Some(Value::Array(keys)) => keys,
        _ => return watched.keys().cloned().collect(),
    };
    keys.iter()
        .filter_map(|k| match k {
            Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
            Value::SimpleString(s) => Some(s.clone()),
            _ => None,
        })
        .filter(|k| watched.contains_key(k))
        .collect()
}

impl Checks {
    /// Reads `entry`'s hold count on the tracking connection (re-arming the
    /// notification) and marks it lost if the count is 0.
    fn spawn(&self, con: &MultiplexedConnection, entry: Arc<Entry>) {
        if self.holds.strong_count() == 0 {
            return; // the client is gone
        }
        let (holds, timeout) = (self.holds.clone(), self.timeout);
        let mut con = con.clone();
        self.runtime.spawn(async move {
            // Not while an acquisition or release of this hold is under way:
            // its outcome is not recorded yet.
            let _op = entry.op.lock().await;
            if !entry.state().is_held() {
                return;
            }
            let hget = protocol::hold_count(&entry.name, &entry.field);
            let reply = tokio::time::timeout(timeout, con.req_packed_command(&hget)).await;
            // Failures are left to the renewal (and a broken connection to the
            // task, which hears of it).
            if let Ok(Ok(count)) = reply {
                if protocol::is_hold_count_zero(&count) {
                    if let Some(holds) = holds.upgrade() {
                        holds.mark_gone(&entry, Instant::now());
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalidation_names_keys_or_means_all() {
        let watched: HashMap<String, Vec<Arc<Entry>>> =
            [("a".to_string(), Vec::new()), ("b".to_string(), Vec::new())]
                .into_iter()
                .collect();
        let keys = vec![Value::Array(vec![
            Value::BulkString(b"a".to_vec()),
            Value::BulkString(b"zzz".to_vec()),
        ])];
        assert_eq!(invalidated(&keys, &watched), vec!["a".to_string()]);
        let mut all = invalidated(&[Value::Nil], &watched);
        all.sort();
        assert_eq!(all, vec!["a".to_string(), "b".to_string()]);
    }
}
