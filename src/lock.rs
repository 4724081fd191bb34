//! The lock state machine: every decision the `LOCK.*` commands make, with no FFI.
//!
//! A lock is Redisson's RLock layout: a hash at the lock's key whose fields are
//! owner ids and whose values are hold counts (decimal), with the lease as the
//! key's expiry. The functions here look at what a command read from that hash
//! (a [`LockView`]) and decide three things:
//!
//! * the reply,
//! * the [`Write`] to make (which the Redis glue applies to the key *and*
//!   replicates as plain commands with an absolute deadline, so replicas and AOF
//!   never re-run this logic),
//! * the [`Event`] to announce (unlock message, keyspace notification).
//!
//! The rules follow Redisson's Lua scripts exactly (see `docs/lock.md`,
//! "Redisson's scripts, command by command"), so a lock taken by a script
//! and one taken by a command exclude each other and each side can re-enter
//! and release what the other wrote. Keeping them free of Redis makes them
//! testable in isolation.

use crate::errors::{self, Refusal};
/// What a command saw in the lock's hash before deciding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockView {
    /// No lock: the key does not exist.
    Free,
    /// Held, and not by the caller (or the caller's hold does not matter).
    Held,
    /// Held by the caller, with this many holds.
    Mine(i64),
}

/// The one write a decision makes to the lock's key, for owner type `O`
/// (the Redis string in the module, anything in tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Write<O> {
    /// Nothing changes.
    None,
    /// `HSET key owner count`, then `PEXPIREAT key expire_at` when given.
    SetCount {
        owner: O,
        count: i64,
        expire_at: Option<i64>,
    },
    /// `PEXPIREAT key expire_at`.
    ExpireAt(i64),
    /// `DEL key`.
    Delete,
}

impl<O> Write<O> {
    /// The deadline this write sets, if it sets one.
    pub fn deadline(&self) -> Option<i64> {
        match *self {
            Write::SetCount { expire_at, .. } => expire_at,
            Write::ExpireAt(at) => Some(at),
            Write::None | Write::Delete => None,
        }
    }
}

/// Something other clients may want to hear about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The lock went from free to held (not on re-entry).
    Acquired,
    /// The last hold was released: the lock is free.
    Released,
    /// The lock was deleted by `LOCK.FORCE`.
    Forced,
}

impl Event {
    /// The keyspace-notification event name: the one place it is spelled.
    pub fn name(self) -> &'static std::ffi::CStr {
        match self {
            Event::Acquired => c"lock.acquire",
            Event::Released => c"lock.release",
            Event::Forced => c"lock.force",
        }
    }

    /// Whether the lock is left free, which is when waiters and unlock
    /// subscribers must hear about it.
    pub fn frees_lock(self) -> bool {
        matches!(self, Event::Released | Event::Forced)
    }
}

/// A decision that cannot be carried out; nothing is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockError {
    /// The owner's field does not hold a decimal integer (someone else wrote it).
    CountNotInteger,
    /// Re-entering would overflow the 64-bit hold count.
    CountOverflow,
}

impl LockError {
    /// The error reply.
    pub fn refusal(self) -> Refusal {
        match self {
            LockError::CountNotInteger => errors::COUNT_NOT_INTEGER,
            LockError::CountOverflow => errors::COUNT_OVERFLOWS,
        }
    }
}

/// Parses a hold count the way `HINCRBY` does: a strict decimal `i64`.
pub fn parse_hold_count(raw: &[u8]) -> Result<i64, LockError> {
    crate::args::strict_i64(raw).ok_or(LockError::CountNotInteger)
}

/// A decision: what to reply, what to write, what to announce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision<R, O> {
    pub reply: R,
    pub write: Write<O>,
    pub event: Option<Event>,
}

impl<R, O> Decision<R, O> {
    fn new(reply: R, write: Write<O>, event: Option<Event>) -> Self {
        Decision {
            reply,
            write,
            event,
        }
    }
}

/// `LOCK.ACQUIRE`'s outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// The lock was free and is the caller's now (Redisson's `nil`).
    Taken,
    /// The caller held it and holds it once more (Redisson's `nil`).
    Reentered,
    /// Held by someone else; the caller gets the holder's remaining lease.
    Busy,
}

/// Take the lock, or re-enter it, for `owner` with a lease ending at `expire_at`.
///
/// Redisson: free -> count 1; caller already holds it -> count + 1; both set the
/// lease. Anyone else holds it -> no change, reply with the remaining lease.
pub fn acquire<O>(
    owner: O,
    view: LockView,
    expire_at: i64,
) -> Result<Decision<Acquired, O>, LockError> {
    let set = |count| Write::SetCount {
        owner,
        count,
        expire_at: Some(expire_at),
    };
    Ok(match view {
        LockView::Free => Decision::new(Acquired::Taken, set(1), Some(Event::Acquired)),
        LockView::Mine(count) => {
            let count = count.checked_add(1).ok_or(LockError::CountOverflow)?;
            Decision::new(Acquired::Reentered, set(count), None)
        }
        LockView::Held => Decision::new(Acquired::Busy, Write::None, None),
    })
}

/// Extend the lease of a lock the caller holds (a watchdog's call).
/// Replies whether the caller holds it.
pub fn renew<O>(view: LockView, expire_at: i64) -> Decision<bool, O> {
    match view {
        LockView::Mine(_) => Decision::new(true, Write::ExpireAt(expire_at), None),
        LockView::Free | LockView::Held => Decision::new(false, Write::None, None),
    }
}

/// `LOCK.RELEASE`'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Released {
    /// The caller does not hold the lock (Redisson's `nil`); nothing changed.
    NotHeld,
    /// One hold released, more remain (Redisson's `0`).
    StillHeld,
    /// The last hold released; the lock is free (Redisson's `1`).
    Freed,
}

/// Release one hold of `owner`. On the last one the key is deleted;
/// otherwise the lease is reset to `expire_at` when one is given, and kept
/// as it is when not.
pub fn release<O>(owner: O, view: LockView, expire_at: Option<i64>) -> Decision<Released, O> {
    let LockView::Mine(count) = view else {
        return Decision::new(Released::NotHeld, Write::None, None);
    };
    // Redisson decrements with HINCRBY and deletes at <= 0, so a count that was
    // somehow 0 or negative also frees the lock. Saturating keeps i64::MIN sane.
    let remaining = count.saturating_sub(1);
    if remaining > 0 {
        let write = Write::SetCount {
            owner,
            count: remaining,
            expire_at,
        };
        Decision::new(Released::StillHeld, write, None)
    } else {
        Decision::new(Released::Freed, Write::Delete, Some(Event::Released))
    }
}

/// `LOCK.FORCE`'s outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forced {
    /// A lock existed and was deleted.
    Deleted,
    /// There was none.
    NoLock,
}

/// Delete the lock whoever holds it.
pub fn force<O>(view: LockView) -> Decision<Forced, O> {
    match view {
        LockView::Free => Decision::new(Forced::NoLock, Write::None, None),
        LockView::Held | LockView::Mine(_) => {
            Decision::new(Forced::Deleted, Write::Delete, Some(Event::Forced))
        }
    }
}

/// A hand-off's outcome: the waiter holds the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandedOff;

/// Hand a lock that has just been freed to the waiter `owner`: it becomes the
/// only owner with one hold and a fresh lease. (The waiter's queue position,
/// not a race, decides who gets it: that is what makes waiting fair.)
pub fn hand_off<O>(owner: O, expire_at: i64) -> Decision<HandedOff, O> {
    let write = Write::SetCount {
        owner,
        count: 1,
        expire_at: Some(expire_at),
    };
    Decision::new(HandedOff, write, Some(Event::Acquired))
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: i64 = 1_700_000_030_000;
    const ME: &str = "me";

    fn set(count: i64, expire_at: Option<i64>) -> Write<&'static str> {
        Write::SetCount {
            owner: ME,
            count,
            expire_at,
        }
    }

    #[test]
    fn acquiring_a_free_lock_sets_count_one_and_the_lease() {
        let d = acquire(ME, LockView::Free, AT).unwrap();
        assert_eq!(d.reply, Acquired::Taken);
        assert_eq!(d.write, set(1, Some(AT)));
        assert_eq!(d.event, Some(Event::Acquired));
    }

    #[test]
    fn re_entry_increments_and_resets_the_lease_without_an_event() {
        let d = acquire(ME, LockView::Mine(2), AT).unwrap();
        assert_eq!(d.reply, Acquired::Reentered);
        assert_eq!(d.write, set(3, Some(AT)));
        assert_eq!(d.event, None);
    }

    #[test]
    fn another_owner_is_told_busy_and_nothing_changes() {
        let d = acquire(ME, LockView::Held, AT).unwrap();
        assert_eq!(d.reply, Acquired::Busy);
        assert_eq!(d.write, Write::None);
        assert_eq!(d.event, None);
    }

    #[test]
    fn re_entry_at_the_top_of_i64_is_refused() {
        assert_eq!(
            acquire(ME, LockView::Mine(i64::MAX), AT),
            Err(LockError::CountOverflow)
        );
    }

    #[test]
    fn renew_only_for_a_holder() {
        assert_eq!(
            renew::<&str>(LockView::Mine(1), AT),
            Decision::new(true, Write::ExpireAt(AT), None)
        );
        for view in [LockView::Held, LockView::Free] {
            assert_eq!(
                renew::<&str>(view, AT),
                Decision::new(false, Write::None, None)
            );
        }
    }

    #[test]
    fn release_by_a_non_holder_changes_nothing() {
        for view in [LockView::Free, LockView::Held] {
            let d = release(ME, view, Some(AT));
            assert_eq!(d, Decision::new(Released::NotHeld, Write::None, None));
        }
    }

    #[test]
    fn release_of_a_re_entered_lock_decrements_and_optionally_resets_the_lease() {
        let d = release(ME, LockView::Mine(3), Some(AT));
        assert_eq!(d.reply, Released::StillHeld);
        assert_eq!(d.write, set(2, Some(AT)));
        assert_eq!(d.event, None);
        let d = release(ME, LockView::Mine(2), None);
        assert_eq!(d.write, set(1, None));
    }

    #[test]
    fn last_release_deletes_and_announces() {
        let d = release(ME, LockView::Mine(1), None);
        assert_eq!(
            d,
            Decision::new(Released::Freed, Write::Delete, Some(Event::Released))
        );
    }

    #[test]
    fn a_tampered_non_positive_count_frees_like_redissons_script() {
        for count in [0, -5, i64::MIN] {
            assert_eq!(
                release(ME, LockView::Mine(count), Some(AT)).reply,
                Released::Freed
            );
        }
    }

    #[test]
    fn force_deletes_any_lock() {
        for view in [LockView::Held, LockView::Mine(4)] {
            assert_eq!(
                force::<&str>(view),
                Decision::new(Forced::Deleted, Write::Delete, Some(Event::Forced))
            );
        }
        assert_eq!(
            force::<&str>(LockView::Free),
            Decision::new(Forced::NoLock, Write::None, None)
        );
    }

    #[test]
    fn hand_off_gives_one_hold_and_a_fresh_lease() {
        let d = hand_off(ME, AT);
        assert_eq!(d.write, set(1, Some(AT)));
        assert_eq!(d.event, Some(Event::Acquired));
    }

    #[test]
    fn writes_know_the_deadline_they_set() {
        assert_eq!(set(2, Some(AT)).deadline(), Some(AT));
        assert_eq!(set(2, None).deadline(), None);
        assert_eq!(Write::<&str>::ExpireAt(AT).deadline(), Some(AT));
        assert_eq!(Write::<&str>::Delete.deadline(), None);
        assert_eq!(Write::<&str>::None.deadline(), None);
    }

    #[test]
    fn only_release_and_force_free_the_lock() {
        assert!(!Event::Acquired.frees_lock());
        assert!(Event::Released.frees_lock());
        assert!(Event::Forced.frees_lock());
    }

    #[test]
    fn event_names_are_the_documented_ones() {
        let names: Vec<&str> = [Event::Acquired, Event::Released, Event::Forced]
            .iter()
            .map(|e| e.name().to_str().unwrap())
            .collect();
        assert_eq!(names, ["lock.acquire", "lock.release", "lock.force"]);
    }

    #[test]
    fn hold_counts_parse_like_hincrby() {
        assert_eq!(parse_hold_count(b"1"), Ok(1));
        assert_eq!(parse_hold_count(b"0"), Ok(0));
        assert_eq!(parse_hold_count(b"-3"), Ok(-3));
        assert_eq!(parse_hold_count(b"9223372036854775807"), Ok(i64::MAX));
        for bad in [
            &b""[..],
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"-0",
            b"1.0",
            b"abc",
            b"9223372036854775808",
            b"\xff",
        ] {
            assert_eq!(
                parse_hold_count(bad),
                Err(LockError::CountNotInteger),
                "{bad:?}"
            );
        }
    }

    /// A walk through a whole life: two owners, re-entry, release, force.
    #[test]
    fn a_lock_lives_and_dies_by_these_rules() {
        // An in-memory lock: (owner, count) or free.
        let mut held: Option<(&str, i64)> = None;
        let view = |held: Option<(&str, i64)>, who: &str| match held {
            None => LockView::Free,
            Some((o, c)) if o == who => LockView::Mine(c),
            Some(_) => LockView::Held,
        };
        let apply = |held: &mut Option<(&'static str, i64)>, w: Write<&'static str>| match w {
            Write::SetCount { owner, count, .. } => *held = Some((owner, count)),
            Write::Delete => *held = None,
            Write::ExpireAt(_) | Write::None => {}
        };
        for who in ["a", "a", "b"] {
            let d = acquire(who, view(held, who), AT).unwrap();
            apply(&mut held, d.write);
        }
        assert_eq!(held, Some(("a", 2)));
        assert_eq!(release("b", view(held, "b"), None).reply, Released::NotHeld);
        let d = release("a", view(held, "a"), None);
        apply(&mut held, d.write);
        assert_eq!(held, Some(("a", 1)));
        let d = force(view(held, "b"));
        apply(&mut held, d.write);
        assert_eq!(held, None);
        assert_eq!(
            acquire("b", view(held, "b"), AT).unwrap().reply,
            Acquired::Taken
        );
    }
}
