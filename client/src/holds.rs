//! The hold registry: what this client knows of every (lock, owner) it
//! holds, and the rules that change it.
//!
//! An [`Entry`] is one (lock, owner): its hold count, when its lease ends,
//! whether the watchdog renews it, and the lost signal its guards listen
//! to. Its [`State`] changes only through the methods here, so each rule
//! is written once: a grant, a renewal, a release, and when a hold counts
//! as lost. The acquisition (`acquire.rs`), the release (`client.rs`), the
//! watchdog, the tracking task and the guards all go through them.
//!
//! A lease's end is counted from when the command that set it was *sent*
//! ([`lease_end`]): the server started the lease no earlier, so the
//! client's count never outlives the server's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::protocol::{Holder, LockKind};

/// Why a held lock was lost. Once lost, the holder must stop relying on it:
/// another owner may already hold it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Lost {
    /// A renewal found the lock no longer held by this owner: an operator
    /// forced it (`LOCK.FORCE`), someone deleted the key, or the lease ended
    /// before the renewal arrived. For [`Permits`](crate::Permits): a
    /// `LOCK.PERMITRENEW` answered 0 (a permit was reclaimed or removed).
    NotHeld,
    /// Renewals failed (the server was unreachable) until the lease had
    /// passed: the server has freed the lock by now. Carries the last error.
    RenewalFailed(String),
    /// A lease the caller chose (no watchdog) has run out.
    LeaseExpired,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::NotHeld => write!(f, "the lock (or permit) is no longer held by this owner"),
            Lost::RenewalFailed(e) => write!(f, "renewals failed until the lease passed: {e}"),
            Lost::LeaseExpired => write!(f, "the lease ran out"),
        }
    }
}

/// `at + d`, or as late as the clock goes (a lease of centuries).
pub(crate) fn later(at: Instant, d: Duration) -> Instant {
    at.checked_add(d)
        .or_else(|| at.checked_add(Duration::from_secs(1 << 32)))
        .unwrap_or(at)
}

/// When a lease of `lease` set by a command sent at `sent` ends at the
/// earliest: the one place that counts `sent + lease`.
pub(crate) fn lease_end(sent: Instant, lease: Duration) -> Instant {
    later(sent, lease)
}

/// How close to the end of a caller-given lease a vanished key counts as
/// that lease's end. The server's deadline is a whole millisecond of its
/// clock, so it can fall a moment before the one this client counted; a
/// key found gone that late is reported as [`Lost::LeaseExpired`] (even if
/// an operator's `LOCK.FORCE` was what removed it: the two cannot be told
/// apart then, and the lease was ending anyway).
pub(crate) const LEASE_END_SLACK: Duration = Duration::from_millis(20);

/// What this client knows about one (lock, owner, kind) it holds: one hash
/// field's count. A read hold and a write hold of one owner on one
/// read-write lock are two entries (fields `<owner>` and `<owner>:write`),
/// each with its own count, lease and lost signal.
///
/// The permits of one grant of a permit-expirable semaphore are an entry
/// too ([`Registry::permits`]), so the one watchdog renews them and the
/// same rules say when they are lost: `permits` holds their ids, its hold
/// count is 1 until they are given back, and `owner`/`field` are the first
/// id (permits have no owner; the id makes the entry's key unique).
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) owner: String,
    pub(crate) kind: LockKind,
    /// The hash field that counts these holds ([`LockKind::field`]).
    pub(crate) field: String,
    /// The permit ids of a semaphore's grant; None for a lock's holds.
    pub(crate) permits: Option<Vec<String>>,
    /// Serialises hold-count changes (acquire, release, and the tracking
    /// task's checks), so `State::holds` is the server's.
    pub(crate) op: tokio::sync::Mutex<()>,
    state: Mutex<State>,
    lost: watch::Sender<Option<Lost>>,
}

impl Entry {
    fn new(name: &str, owner: &str, kind: LockKind) -> Entry {
        let now = Instant::now();
        Entry {
            name: name.to_string(),
            owner: owner.to_string(),
            kind,
            field: kind.field(owner),
            permits: None,
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
        }
    }

    /// Its state; a panic elsewhere cannot leave it half-written (every
    /// change is a few plain assignments), so a poisoned lock is used as is.
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Its coordinates on the server, for the commands and read-backs.
    pub(crate) fn holder(&self) -> Holder<'_> {
        Holder {
            kind: self.kind,
            name: &self.name,
            owner: &self.owner,
            field: &self.field,
        }
    }

    /// A receiver of the lost signal: `None` while held, then the reason.
    pub(crate) fn lost_signal(&self) -> watch::Receiver<Option<Lost>> {
        self.lost.subscribe()
    }
}

/// An [`Entry`]'s changing part.
pub(crate) struct State {
    holds: u64,
    /// Removed from the registry (released or lost): a new acquisition
    /// starts a new entry.
    retired: bool,
    /// The lease the watchdog renews to; None: a caller-given lease.
    watchdog: Option<Duration>,
    /// When the lease ends unless renewed, never later than the server's
    /// deadline: counted from when the command that set it was sent, or
    /// from a measurement of it (see `acquire.rs`, `grant_expiry`).
    expires: Instant,
    next_renewal: Instant,
    /// Why the last renewal failed, if it did (for `Lost::RenewalFailed`).
    last_error: Option<String>,
}

/// What the watchdog should do about one entry ([`State::next`]).
pub(crate) enum Next {
    /// Not held (released, lost, or not granted yet).
    Nothing,
    /// Its lease has passed without a renewal: lost.
    Expired,
    /// Renew it now to `lease`; it ends at `expires` unless renewed.
    Renew { lease: Duration, expires: Instant },
    /// Look again at this instant.
    At(Instant),
}

impl State {
    /// This owner's holds, as this client counts them.
    pub(crate) fn holds(&self) -> u64 {
        self.holds
    }

    /// Released or lost: no longer in the registry.
    pub(crate) fn is_retired(&self) -> bool {
        self.retired
    }

    /// Held: in the registry with at least one hold.
    pub(crate) fn is_held(&self) -> bool {
        !self.retired && self.holds > 0
    }

    /// When the lease ends unless renewed.
    pub(crate) fn expires(&self) -> Instant {
        self.expires
    }

    /// The lease the watchdog renews to; None for a caller-given lease.
    pub(crate) fn watchdog(&self) -> Option<Duration> {
        self.watchdog
    }

    /// Records a grant (a re-entry too: any acquire resets the server's
    /// lease) whose lease ends at `expires`. With `watchdog: Some(lease)`
    /// the watchdog keeps it, renewing a third of the lease after it
    /// started, or at once when `renew_now` (its end is only estimated).
    pub(crate) fn granted(
        &mut self,
        expires: Instant,
        watchdog: Option<Duration>,
        renew_now: bool,
        now: Instant,
    ) {
        self.holds += 1;
        self.expires = expires;
        if let Some(lease) = watchdog {
            self.watchdog = Some(lease);
            // Two thirds of the lease before its end.
            self.next_renewal = match expires.checked_sub(lease - lease / 3) {
                Some(at) if !renew_now => at,
                _ => now,
            };
        }
    }

    /// Records a release: `held` when the server had the hold (one fewer
    /// now), not when it had none (none left here either). Returns the
    /// holds left. (A release runs only with a hold counted, under the
    /// entry's operation lock; saturating all the same, so a slip can
    /// never panic in a user's drop.)
    pub(crate) fn released(&mut self, held: bool) -> u64 {
        self.holds = if held {
            self.holds.saturating_sub(1)
        } else {
            0
        };
        self.holds
    }

    /// Forgets one hold of a lost tenure (nothing to send: the server has
    /// none of it left), so a new tenure of the same owner keeps its own.
    pub(crate) fn drop_lost_hold(&mut self) {
        self.holds = self.holds.saturating_sub(1);
    }

    /// A renewal to `lease`, sent at `sent`, succeeded. Returns when the
    /// next one is due.
    pub(crate) fn renewed(&mut self, sent: Instant, lease: Duration) -> Instant {
        self.expires = lease_end(sent, lease);
        self.next_renewal = later(sent, lease / 3);
        self.last_error = None;
        self.next_renewal
    }

    /// A renewal failed with `why`: retried after `retry`, never after
    /// the lease's end. Returns when.
    pub(crate) fn renewal_failed(&mut self, why: String, retry: Duration) -> Instant {
        self.last_error = Some(why);
        self.next_renewal = later(Instant::now(), retry).min(self.expires);
        self.next_renewal
    }

    /// The lease was restarted to `lease` by a command sent at `sent`
    /// (a multi-lock's parts, made to end together).
    pub(crate) fn lease_restarted(&mut self, sent: Instant, lease: Duration) {
        self.expires = lease_end(sent, lease);
    }

    /// What the watchdog should do about this entry at `now`.
    pub(crate) fn next(&self, now: Instant) -> Next {
        if !self.is_held() {
            return Next::Nothing;
        }
        if self.expires <= now {
            // No renewal succeeded within the lease (or the caller's lease
            // ended): the server has freed it, since its lease started no
            // earlier than the command that set ours.
            return Next::Expired;
        }
        match self.watchdog {
            Some(lease) if self.next_renewal <= now => Next::Renew {
                lease,
                expires: self.expires,
            },
            Some(_) => Next::At(self.next_renewal.min(self.expires)),
            None => Next::At(self.expires),
        }
    }

    /// Why the hold is lost if its lease has passed at `now` without a
    /// renewal that succeeded; None while it lasts (or is not held).
    fn why_expired(&self, now: Instant) -> Option<Lost> {
        if !self.is_held() || self.expires > now {
            return None;
        }
        Some(match self.watchdog {
            Some(_) => Lost::RenewalFailed(
                self.last_error
                    .clone()
                    .unwrap_or_else(|| "no renewal answered in time".into()),
            ),
            None => Lost::LeaseExpired,
        })
    }

    /// Why the hold is lost when its key was found gone at `now`:
    /// [`Lost::LeaseExpired`] if a caller-given lease was ending (within
    /// [`LEASE_END_SLACK`]), [`Lost::NotHeld`] otherwise.
    fn why_gone(&self, now: Instant) -> Lost {
        if self.watchdog.is_none() && self.expires <= now + LEASE_END_SLACK {
            Lost::LeaseExpired
        } else {
            Lost::NotHeld
        }
    }
}

/// An entry's key: the lock's name, the hash field that counts the holds,
/// the kind (a plain lock and a read hold both count in `<owner>`), and
/// whether it is a grant of permits.
type Key = (String, String, LockKind, bool);

fn key_of(entry: &Entry) -> Key {
    (
        entry.name.clone(),
        entry.field.clone(),
        entry.kind,
        entry.permits.is_some(),
    )
}

/// Every (lock, owner, kind) this client holds.
#[derive(Default)]
pub(crate) struct Registry {
    entries: Mutex<HashMap<Key, Arc<Entry>>>,
}

impl Registry {
    fn map(&self) -> MutexGuard<'_, HashMap<Key, Arc<Entry>>> {
        // As for `Entry::state`: insertions and removals only.
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The entry of `owner`'s holds of `kind` on `name`, a new one if it
    /// holds nothing.
    pub(crate) fn entry(&self, name: &str, owner: &str, kind: LockKind) -> Arc<Entry> {
        let key = (name.to_string(), kind.field(owner), kind, false);
        self.map()
            .entry(key)
            .or_insert_with(|| Arc::new(Entry::new(name, owner, kind)))
            .clone()
    }

    /// A new entry for the permits `ids` (at least one) of semaphore
    /// `name`, just granted: the caller records the grant.
    pub(crate) fn permits(&self, name: &str, ids: Vec<String>) -> Arc<Entry> {
        let first = ids.first().cloned().unwrap_or_default();
        let mut entry = Entry::new(name, &first, LockKind::Lock);
        entry.permits = Some(ids);
        let entry = Arc::new(entry);
        self.map().insert(key_of(&entry), entry.clone());
        entry
    }

    /// Removes `entry` (its holds are gone, or lost).
    pub(crate) fn retire(&self, entry: &Arc<Entry>) {
        entry.state().retired = true;
        let mut map = self.map();
        let key = key_of(entry);
        if map.get(&key).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            map.remove(&key);
        }
    }

    /// Every entry, for the watchdog.
    pub(crate) fn entries(&self) -> Vec<Arc<Entry>> {
        self.map().values().cloned().collect()
    }

    /// Marks `entry` lost with `why` and retires it (once: a second call
    /// keeps the first reason).
    pub(crate) fn mark_lost(&self, entry: &Arc<Entry>, why: Lost) {
        self.retire(entry);
        entry.lost.send_if_modified(|lost| {
            if lost.is_none() {
                *lost = Some(why);
                true
            } else {
                false
            }
        });
    }

    /// Marks `entry` lost if its lease has passed at `now` without a
    /// renewal that succeeded (the rule the watchdog applies). Guards call
    /// it too, so telling the holder never depends on the watchdog task
    /// being scheduled in time.
    pub(crate) fn expire_if_due(&self, entry: &Arc<Entry>, now: Instant) {
        let why = entry.state().why_expired(now);
        if let Some(why) = why {
            self.mark_lost(entry, why);
        }
    }

    /// Marks `entry` lost because its key was found gone (by the tracking
    /// connection) at `now`.
    pub(crate) fn mark_gone(&self, entry: &Arc<Entry>, now: Instant) {
        let why = entry.state().why_gone(now);
        self.mark_lost(entry, why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(watchdog: Option<Duration>, expires: Instant) -> State {
        let mut state = Entry::new("k", "o", LockKind::Lock)
            .state
            .into_inner()
            .unwrap();
        state.granted(expires, watchdog, false, Instant::now());
        state
    }

    #[test]
    fn a_read_and_a_write_hold_of_one_owner_are_two_entries_keyed_by_their_field() {
        let registry = Registry::default();
        let read = registry.entry("doc", "o", LockKind::Read);
        let write = registry.entry("doc", "o", LockKind::Write);
        let lock = registry.entry("doc", "o", LockKind::Lock);
        assert!(!Arc::ptr_eq(&read, &write) && !Arc::ptr_eq(&read, &lock));
        assert_eq!(
            (read.field.as_str(), write.field.as_str()),
            ("o", "o:write")
        );
        assert!(Arc::ptr_eq(
            &read,
            &registry.entry("doc", "o", LockKind::Read)
        ));
        registry.retire(&write);
        assert!(Arc::ptr_eq(
            &read,
            &registry.entry("doc", "o", LockKind::Read)
        ));
        assert!(!Arc::ptr_eq(
            &write,
            &registry.entry("doc", "o", LockKind::Write)
        ));
    }

    #[test]
    fn a_key_gone_as_a_caller_given_lease_ends_is_that_lease_ending() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        // The server's whole-millisecond deadline came a moment early.
        assert_eq!(held(None, now + ms(3)).why_gone(now), Lost::LeaseExpired);
        assert_eq!(held(None, now).why_gone(now), Lost::LeaseExpired);
        // Long before its end: someone removed it.
        assert_eq!(held(None, now + ms(500)).why_gone(now), Lost::NotHeld);
        // A renewed lock has no lease of its own to end.
        assert_eq!(held(Some(ms(100)), now).why_gone(now), Lost::NotHeld);
    }

    #[test]
    fn a_lease_passed_without_renewal_is_lost_for_the_reason_it_had() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(held(None, now + ms(5)).why_expired(now), None);
        assert_eq!(held(None, now).why_expired(now), Some(Lost::LeaseExpired));
        let mut renewed = held(Some(ms(300)), now + ms(300));
        let retry_at = renewed.renewal_failed("refused".into(), ms(30));
        assert!(retry_at <= now + ms(300));
        assert_eq!(
            renewed.why_expired(now + ms(300)),
            Some(Lost::RenewalFailed("refused".into()))
        );
        renewed.renewed(now, ms(300));
        assert_eq!(renewed.why_expired(now + ms(299)), None);
    }

    #[test]
    fn the_watchdog_renews_a_third_into_the_lease() {
        let now = Instant::now();
        let lease = Duration::from_millis(300);
        let state = held(Some(lease), lease_end(now, lease));
        assert!(matches!(state.next(now), Next::At(at) if at == now + Duration::from_millis(100)));
        assert!(matches!(
            state.next(now + Duration::from_millis(100)),
            Next::Renew { .. }
        ));
        assert!(matches!(state.next(now + lease), Next::Expired));
        let mut state = state;
        assert_eq!(state.released(true), 0);
        assert!(matches!(state.next(now), Next::Nothing));
    }

    #[test]
    fn a_grant_of_permits_is_an_entry_of_its_own_whatever_the_names() {
        let registry = Registry::default();
        let id = "0123456789abcdef0123456789abcdef";
        let lock = registry.entry("s", id, LockKind::Lock);
        let permits = registry.permits("s", vec![id.to_string(), "f".repeat(32)]);
        assert!(!Arc::ptr_eq(&lock, &permits));
        assert_eq!(permits.permits.as_ref().map(Vec::len), Some(2));
        assert!(lock.permits.is_none());
        assert_eq!(registry.entries().len(), 2);
        registry.retire(&permits);
        assert!(Arc::ptr_eq(&lock, &registry.entry("s", id, LockKind::Lock)));
        assert_eq!(registry.entries().len(), 1);
    }
}
