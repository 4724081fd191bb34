//! [`Inner`]: what the clones of one [`LockClient`](crate::LockClient)
//! share (its connections, its hold counts, its runtime, its watchdog's
//! wake-up, its tracking connection), and how they are put together.

use std::sync::{Arc, Weak};

use tokio::sync::Notify;

use crate::conn::{timeout_error, Backend, Connections};
use crate::counted::Counted;
use crate::holds::Registry;
use crate::options::Options;
use crate::tracking::{connect_single, Connector, Tracking};

/// What the clones of one client share.
pub(crate) struct Inner {
    pub(crate) id: String,
    /// The connections and the options: every command goes through it.
    pub(crate) counted: Counted,
    /// The hold counts, and the lost signals.
    pub(crate) holds: Arc<Registry>,
    pub(crate) runtime: tokio::runtime::Handle,
    /// Wakes the watchdog task (a new grant, or the client is gone).
    pub(crate) wake: Arc<Notify>,
    pub(crate) watchdog_started: std::sync::Once,
    /// The fast lost signal (None: a cluster, or turned off).
    pub(crate) tracking: Option<Tracking>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Lets the watchdog task see that its client is gone and end.
        self.wake.notify_one();
    }
}

impl Inner {
    /// A client's shared state over `backend`, with checked `options`, on
    /// `runtime`; its tracking task starts here (when `options` and the
    /// backend allow one), its watchdog at the first grant.
    pub(crate) fn new(
        backend: Backend,
        options: Options,
        runtime: tokio::runtime::Handle,
    ) -> Arc<Inner> {
        let conns = Connections::new(backend, options.command_timeout);
        let tracked = options.track_locks && !conns.is_cluster();
        let timeout = options.command_timeout;
        let holds = Arc::new(Registry::default());
        Arc::new_cyclic(|weak: &Weak<Inner>| {
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
                Tracking::start(Arc::downgrade(&holds), &runtime, timeout, connect)
            });
            Inner {
                id: uuid::Uuid::new_v4().to_string(),
                counted: Counted { conns, options },
                holds,
                runtime,
                wake: Arc::new(Notify::new()),
                watchdog_started: std::sync::Once::new(),
                tracking,
            }
        })
    }
}
