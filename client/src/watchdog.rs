//! The watchdog: one task per client renews every lock it holds without a
//! caller-given lease, every third of the lease, and tells holders at once
//! when a lock is lost. Permits of a permit-expirable semaphore taken
//! without a lease are renewed the same way (`LOCK.PERMITRENEW`, one per
//! id): they are entries of the same registry.
//!
//! Where Redisson logs a failed renewal and tries again (its holders never
//! hear of it), here:
//! * a renewal answered 0 means the owner no longer holds the lock (forced,
//!   deleted, expired): the guard is marked lost at once;
//! * a renewal that fails (timeout, connection) is retried every tenth of the
//!   lease; if none succeeds before the lease has passed, counted from when
//!   the last successful renewal was *sent* (the server's lease started no
//!   earlier), the lock is lost;
//! * a lock taken with a lease of the caller's choosing is not renewed, and
//!   is marked lost once that lease has passed.
//!
//! A renewal racing with the final release cannot raise a false alarm:
//! entries are retired under their own lock when released, and a result for a
//! retired entry is ignored (Redisson #7272 is that race).
//!
//! The task holds only a weak reference to its client and ends when the
//! client is dropped.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::holds::{Entry, Lost, Next};
use crate::inner::Inner;

/// How long the task sleeps with nothing to watch.
const IDLE: Duration = Duration::from_secs(3600);

/// The retry interval after a failed renewal.
fn retry_after(lease: Duration) -> Duration {
    (lease / 10).max(Duration::from_millis(10))
}

/// The watchdog task of the client behind `client`: ends when it is gone.
pub(crate) async fn run(client: Weak<Inner>, wake: Arc<Notify>) {
    loop {
        let Some(inner) = client.upgrade() else {
            return;
        };
        let now = Instant::now();
        let mut next = now + IDLE;
        let mut due: Vec<(Arc<Entry>, Duration)> = Vec::new();
        for entry in inner.holds.entries() {
            let todo = entry.state().next(now);
            match todo {
                Next::Nothing => {}
                Next::Expired => inner.holds.expire_if_due(&entry, now),
                Next::Renew { lease, expires } => {
                    due.push((entry, lease));
                    next = next.min(expires);
                }
                Next::At(at) => next = next.min(at),
            }
        }

        let renewals = due.into_iter().map(|(entry, lease)| {
            let inner = &inner;
            async move {
                let sent = Instant::now();
                let result = match &entry.permits {
                    Some(ids) => inner.counted.renew_permits(&entry.name, ids, lease).await,
                    None => inner.counted.renew(entry.holder(), lease).await,
                };
                (entry, lease, sent, result)
            }
        });
        for (entry, lease, sent, result) in futures_util::future::join_all(renewals).await {
            let mut state = entry.state();
            if !state.is_held() {
                continue; // released meanwhile: its renewal proves nothing
            }
            match result {
                Ok(true) => {
                    next = next.min(state.renewed(sent, lease));
                }
                Ok(false) => {
                    drop(state);
                    inner.holds.mark_lost(&entry, Lost::NotHeld);
                }
                Err(e) => {
                    // Retried soon; the scan above declares the loss once the
                    // lease has passed.
                    next = next.min(state.renewal_failed(e.to_string(), retry_after(lease)));
                }
            }
        }
        drop(inner);
        tokio::select! {
            _ = tokio::time::sleep_until(next.into()) => {}
            _ = wake.notified() => {}
        }
    }
}
