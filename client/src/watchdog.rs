//! The watchdog: one task per client renews every lock it holds without a
//! caller-given lease, every third of the lease, and tells holders at once
//! when a lock is lost.
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

use crate::client::{Entry, Inner, LockClient, State};
use crate::error::LockError;
use crate::guard::Lost;

/// How long the task sleeps with nothing to watch.
const IDLE: Duration = Duration::from_secs(3600);

/// Marks `entry` lost with `why` and retires it (once: a second call keeps
/// the first reason).
pub(crate) fn mark_lost(inner: &Inner, entry: &Arc<Entry>, why: Lost) {
    LockClient::retire(inner, entry);
    entry.lost.send_if_modified(|lost| {
        if lost.is_none() {
            *lost = Some(why);
            true
        } else {
            false
        }
    });
}

/// Marks `entry` lost if its lease has passed at `now` without a renewal
/// that succeeded (the rule the watchdog applies). Guards call it too, so
/// telling the holder never depends on the watchdog task being scheduled
/// in time.
pub(crate) fn expire_if_due(inner: &Inner, entry: &Arc<Entry>, now: Instant) {
    let state = entry.state();
    if state.retired || state.holds == 0 || state.expires > now {
        return;
    }
    let why = match state.watchdog {
        Some(_) => Lost::RenewalFailed(
            state
                .last_error
                .clone()
                .unwrap_or_else(|| "no renewal answered in time".into()),
        ),
        None => Lost::LeaseExpired,
    };
    drop(state);
    mark_lost(inner, entry, why);
}

/// How close to the end of a caller-given lease a vanished key counts as
/// that lease's end. The server's deadline is a whole millisecond of its
/// clock, so it can fall a moment before the one this client counted; a
/// key found gone that late is reported as [`Lost::LeaseExpired`] (even if
/// an operator's `LOCK.FORCE` was what removed it: the two cannot be told
/// apart then, and the lease was ending anyway).
pub(crate) const LEASE_END_SLACK: Duration = Duration::from_millis(20);

/// Marks `entry` lost because its key was found gone (by the tracking
/// connection): [`Lost::LeaseExpired`] if a caller-given lease was ending
/// (within [`LEASE_END_SLACK`]), [`Lost::NotHeld`] otherwise.
pub(crate) fn mark_gone(inner: &Inner, entry: &Arc<Entry>, now: Instant) {
    let why = why_gone(&entry.state(), now);
    mark_lost(inner, entry, why);
}

fn why_gone(state: &State, now: Instant) -> Lost {
    if state.watchdog.is_none() && state.expires <= now + LEASE_END_SLACK {
        Lost::LeaseExpired
    } else {
        Lost::NotHeld
    }
}

/// The retry interval after a failed renewal.
fn retry_after(lease: Duration) -> Duration {
    (lease / 10).max(Duration::from_millis(10))
}

pub(crate) async fn run(client: Weak<Inner>, wake: Arc<Notify>) {
    loop {
        let Some(inner) = client.upgrade() else {
            return;
        };
        let now = Instant::now();
        let mut next = now + IDLE;
        let mut due: Vec<(Arc<Entry>, Duration)> = Vec::new();
        for entry in LockClient::entries(&inner) {
            let state = entry.state();
            if state.retired || state.holds == 0 {
                continue;
            }
            if state.expires <= now {
                // No renewal succeeded within the lease (or the caller's
                // lease ended): the server has freed it, since its lease
                // started no earlier than the command that set ours.
                drop(state);
                expire_if_due(&inner, &entry, now);
                continue;
            }
            match state.watchdog {
                Some(lease) if state.next_renewal <= now => {
                    due.push((entry.clone(), lease));
                    next = next.min(state.expires);
                }
                Some(_) => next = next.min(state.next_renewal).min(state.expires),
                None => next = next.min(state.expires),
            }
        }

        let this = LockClient::from_inner(inner.clone());
        let renewals = due.into_iter().map(|(entry, lease)| {
            let this = this.clone();
            async move {
                let sent = Instant::now();
                let result = this.renew(&entry, lease).await;
                (entry, lease, sent, result)
            }
        });
        for (entry, lease, sent, result) in futures_util::future::join_all(renewals).await {
            let mut state = entry.state();
            if state.retired || state.holds == 0 {
                continue; // released meanwhile: its renewal proves nothing
            }
            match result {
                Ok(true) => {
                    state.expires = sent + lease;
                    state.next_renewal = sent + lease / 3;
                    state.last_error = None;
                    next = next.min(state.next_renewal);
                }
                Ok(false) => {
                    drop(state);
                    mark_lost(&inner, &entry, Lost::NotHeld);
                }
                Err(e) => {
                    // Retried soon; the scan above declares the loss once the
                    // lease has passed.
                    state.last_error = Some(describe(&e));
                    state.next_renewal = (Instant::now() + retry_after(lease)).min(state.expires);
                    next = next.min(state.next_renewal);
                }
            }
        }
        drop(this);
        drop(inner);
        tokio::select! {
            _ = tokio::time::sleep_until(next.into()) => {}
            _ = wake.notified() => {}
        }
    }
}

fn describe(e: &LockError) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(watchdog: Option<Duration>, expires: Instant) -> State {
        State {
            holds: 1,
            retired: false,
            watchdog,
            expires,
            next_renewal: expires,
            last_error: None,
        }
    }

    #[test]
    fn a_key_gone_as_a_caller_given_lease_ends_is_that_lease_ending() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        // The server's whole-millisecond deadline came a moment early.
        assert_eq!(why_gone(&state(None, now + ms(3)), now), Lost::LeaseExpired);
        assert_eq!(why_gone(&state(None, now), now), Lost::LeaseExpired);
        // Long before its end: someone removed it.
        assert_eq!(why_gone(&state(None, now + ms(500)), now), Lost::NotHeld);
        // A renewed lock has no lease of its own to end.
        assert_eq!(why_gone(&state(Some(ms(100)), now), now), Lost::NotHeld);
    }
}
