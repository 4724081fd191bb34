//! The read-write lock state machine: every decision the `LOCK.R*`/`LOCK.W*`
//! commands and the hand-off make, with no FFI.
//!
//! The layout is Redisson's `RReadWriteLock` (3.14.1 and current), so a lock
//! taken by Redisson's scripts and one taken by a command exclude each other:
//!
//! * hash `<name>`: field `mode` = `read` | `write`; a reader's field
//!   `<owner>` -> its read hold count; the writer's field `<owner>:write` ->
//!   its write hold count. The hash's expiry is the longest remaining hold.
//! * one string per read hold, `<hold prefix>:<owner>:rwlock_timeout:<n>` =
//!   `1`, where `n` is that owner's hold number (1 for its first) and the
//!   prefix is `{<name>}` (or `<name>` when it has a `{`: Redisson's
//!   `suffixName` rule, so every key is in the name's cluster slot). Its
//!   expiry is that hold's own deadline.
//!
//! Where this differs from Redisson's scripts, on purpose:
//! * Fair: a reader that is not re-entering does not join a read-held lock
//!   while anyone queues (a writer, or readers behind one): the queue's
//!   head goes first (`grant_policy.rs`). Redisson admits it ("non-fair
//!   mode", #5379).
//! * A reader asking for write while it holds read is refused with an
//!   error instead of waiting for itself forever (Redisson, #4796).
//! * A renewal renews the caller's own holds only, and the hash's deadline
//!   is recomputed from the live holds: a dead reader's holds end on their
//!   own deadlines, while Redisson's renewal renews every reader's holds,
//!   the dead one's included.
//!
//! Decisions are lists of [`Effect`]s the glue (`rwlock_key.rs`) applies and
//! replicates as plain commands with absolute deadlines.

use crate::decision::{Decision, Event, Publish};
use crate::errors::{self, Refusal};
use crate::grant_policy::Mode;
use crate::lock::parse_hold_count;
use crate::stats::Tally;

/// What the key holds, as far as a read-write lock is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// No key.
    Free,
    /// A read-write lock in this mode.
    Rw(Mode),
    /// A hash that is not a read-write lock (a plain lock): busy for us.
    Other,
}

/// What a command saw, for one caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RwView {
    pub shape: Shape,
    /// The caller's read holds (field `<owner>`), 0 if none.
    pub reads: i64,
    /// The caller's write holds (field `<owner>:write`), 0 if none.
    pub writes: i64,
    /// The hash's remaining lease (`PTTL`: -1 no expiry, -2 no key).
    pub ttl_ms: i64,
}

impl RwView {
    #[cfg(test)]
    pub const FREE: RwView = RwView {
        shape: Shape::Free,
        reads: 0,
        writes: 0,
        ttl_ms: -2,
    };
}

/// Which of an owner's two fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// `<owner>`: read holds.
    Read,
    /// `<owner>:write`: write holds.
    Write,
}

/// One write to the lock's keys, for the caller (the glue knows its name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// `HSET name mode <mode>`.
    SetMode(Mode),
    /// `HSET name <field> <count>`.
    SetCount(Field, i64),
    /// `HDEL name <field>`.
    DelField(Field),
    /// `SET <hold n> 1 PXAT at`: the caller's read hold number `n`.
    SetHold { n: i64, at: i64 },
    /// `DEL <hold n>`.
    DelHold(i64),
    /// The caller's read holds `1..=count` all get the deadline `at`.
    RenewHolds { count: i64, at: i64 },
    /// `PEXPIREAT name at`.
    ExpireAt(i64),
    /// `DEL name` and every read hold key it lists.
    Delete,
}

/// What happened, for events and the hand-off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RwEvent {
    /// Went from free to held.
    Acquired,
    /// Fewer holders than before (a last read or write hold released): the
    /// queue may now be served; `freed` when nobody holds it any more.
    Released { message: Mode, freed: bool },
    /// Deleted by `LOCK.FORCE`.
    Forced { message: Mode },
}

/// A decision: reply, effects, event, what it counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RwDecision<R> {
    pub reply: R,
    pub effects: Vec<Effect>,
    pub event: Option<RwEvent>,
    pub tally: Tally,
}

impl<R> RwDecision<R> {
    fn new(reply: R, effects: Vec<Effect>, event: Option<RwEvent>) -> Self {
        RwDecision {
            reply,
            effects,
            event,
            tally: Tally::Nothing,
        }
    }

    fn nothing(reply: R) -> Self {
        RwDecision::new(reply, Vec::new(), None)
    }

    fn counting(self, tally: Tally) -> Self {
        RwDecision { tally, ..self }
    }

    /// Redisson's unlock message, when the lock is left free: after a read
    /// unlock or after a write unlock.
    pub fn unlock_message(&self) -> Option<Mode> {
        match self.event? {
            RwEvent::Released { message, freed } => freed.then_some(message),
            RwEvent::Forced { message } => Some(message),
            RwEvent::Acquired => None,
        }
    }
}

impl RwDecision<RwAcquired> {
    /// Not grantable now: nothing changes.
    pub fn busy(ttl_ms: i64) -> Self {
        RwDecision::nothing(RwAcquired::Busy(ttl_ms)).counting(Tally::Contended)
    }
}

/// Fewer holders serve the queue (readers may join the ones left, a
/// writer take a lock left free); a lock left free is announced, with the
/// mode it was unlocked from, only when nobody in the queue was served.
impl<R> Decision for RwDecision<R> {
    type Reply = R;

    fn tally(&self) -> Tally {
        self.tally
    }

    fn event(&self) -> Option<Event> {
        match self.event? {
            RwEvent::Acquired => Some(Event::Acquired),
            RwEvent::Released { freed: true, .. } => Some(Event::Released),
            RwEvent::Released { freed: false, .. } => None,
            RwEvent::Forced { .. } => Some(Event::Forced),
        }
    }

    fn serves(&self) -> bool {
        self.event.is_some_and(|e| e != RwEvent::Acquired)
    }

    fn publishes(&self) -> Publish {
        match self.unlock_message() {
            Some(_) => Publish::UnlessServed,
            None => Publish::Never,
        }
    }

    fn into_reply(self) -> R {
        self.reply
    }
}

/// An acquire's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RwAcquired {
    /// Free before: the caller's now.
    Taken,
    /// The caller held it (in some mode) and holds it once more.
    Reentered,
    /// Not grantable now; the hash's remaining lease.
    Busy(i64),
}

/// Refusals of a read-write decision; nothing is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RwError {
    /// A hold count field is not a decimal integer.
    CountNotInteger,
    /// A hold count would overflow.
    CountOverflow,
    /// A reader asked for write while it holds read.
    UpgradeRefused,
}

impl RwError {
    pub fn refusal(self) -> Refusal {
        match self {
            RwError::CountNotInteger => errors::COUNT_NOT_INTEGER,
            RwError::CountOverflow => errors::COUNT_OVERFLOWS,
            RwError::UpgradeRefused => errors::RW_UPGRADE_REFUSED,
        }
    }
}

/// Parses a field's hold count (`HINCRBY`'s rule).
pub fn parse_count(raw: &[u8]) -> Result<i64, RwError> {
    parse_hold_count(raw).map_err(|_| RwError::CountNotInteger)
}

fn plus_one(count: i64) -> Result<i64, RwError> {
    count.checked_add(1).ok_or(RwError::CountOverflow)
}

/// Take a read hold (or another one) for the caller, with a lease ending at
/// `expire_at` (`now + lease`). `queued`: clients wait for this lock, so a
/// caller that holds nothing yet must queue behind them (fairness); a
/// re-entering reader or a writer taking read (downgrade) never waits.
pub fn read_acquire(
    view: RwView,
    queued: bool,
    now: i64,
    expire_at: i64,
) -> Result<RwDecision<RwAcquired>, RwError> {
    let holds = view.reads > 0 || view.writes > 0;
    match view.shape {
        Shape::Free => Ok(RwDecision::new(
            RwAcquired::Taken,
            vec![
                Effect::SetMode(Mode::Read),
                Effect::SetCount(Field::Read, 1),
                Effect::SetHold {
                    n: 1,
                    at: expire_at,
                },
                Effect::ExpireAt(expire_at),
            ],
            Some(RwEvent::Acquired),
        )
        .counting(Tally::Granted(Mode::Read))),
        Shape::Rw(Mode::Read) if holds || !queued => read_again(view, now, expire_at),
        Shape::Rw(Mode::Write) if view.writes > 0 => read_again(view, now, expire_at),
        Shape::Rw(_) | Shape::Other => Ok(RwDecision::busy(view.ttl_ms)),
    }
}

fn read_again(view: RwView, now: i64, expire_at: i64) -> Result<RwDecision<RwAcquired>, RwError> {
    let n = plus_one(view.reads)?;
    // The hash lives as long as its longest hold (Redisson: max(pttl, lease)).
    let hash_at = match view.ttl_ms {
        ttl if ttl >= 0 => expire_at.max(now.saturating_add(ttl)),
        _ => expire_at,
    };
    let reply = match view.reads > 0 || view.writes > 0 {
        true => RwAcquired::Reentered,
        false => RwAcquired::Taken,
    };
    Ok(RwDecision::new(
        reply,
        vec![
            Effect::SetCount(Field::Read, n),
            Effect::SetHold { n, at: expire_at },
            Effect::ExpireAt(hash_at),
        ],
        None,
    )
    .counting(Tally::Granted(Mode::Read)))
}

/// Take the write hold (or re-enter it) for the caller, lease `lease_ms`.
/// A free lock with clients queued is the queue's (the glue serves it
/// first), so `Free` here means nobody waits.
pub fn write_acquire(
    view: RwView,
    now: i64,
    lease_ms: i64,
) -> Result<RwDecision<RwAcquired>, RwError> {
    let expire_at = now.saturating_add(lease_ms);
    match view.shape {
        Shape::Free => Ok(RwDecision::new(
            RwAcquired::Taken,
            vec![
                Effect::SetMode(Mode::Write),
                Effect::SetCount(Field::Write, 1),
                Effect::ExpireAt(expire_at),
            ],
            Some(RwEvent::Acquired),
        )
        .counting(Tally::Granted(Mode::Write))),
        Shape::Rw(Mode::Write) if view.writes > 0 => {
            // Redisson's rule: a re-entry adds the lease to what is left.
            let at = match view.ttl_ms {
                ttl if ttl >= 0 => expire_at.saturating_add(ttl),
                _ => expire_at,
            };
            Ok(RwDecision::new(
                RwAcquired::Reentered,
                vec![
                    Effect::SetCount(Field::Write, plus_one(view.writes)?),
                    Effect::ExpireAt(at),
                ],
                None,
            )
            .counting(Tally::Granted(Mode::Write)))
        }
        Shape::Rw(Mode::Read) if view.reads > 0 => Err(RwError::UpgradeRefused),
        Shape::Rw(_) | Shape::Other => Ok(RwDecision::busy(view.ttl_ms)),
    }
}

/// A release's answer (Redisson's replies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RwReleased {
    /// The caller holds no such hold (nil); nothing changed.
    NotHeld,
    /// One hold released, the lock is still held (0).
    StillHeld,
    /// The caller's last hold of this mode released (1).
    Done,
}

/// The deadlines of every read hold of the lock, for the holders other than
/// the caller: what a release or a renewal needs to recompute the hash's
/// deadline. (`None` for a hold whose key is gone.)
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtherHolds {
    /// Other owners' read holds still alive: their latest deadline.
    pub latest_read: Option<i64>,
    /// Another owner holds write (the writer's field exists).
    pub writer: bool,
}

/// Release one read hold of the caller (Redisson's read unlock): its field
/// counts down (and goes at 0), its newest hold key goes, and the hash's
/// deadline becomes the latest live hold's; with no live hold left (and no
/// writer) the lock is deleted. `own_latest`: the caller's remaining holds'
/// latest deadline after this release.
pub fn read_release(
    view: RwView,
    others: &OtherHolds,
    own_latest: Option<i64>,
    now: i64,
) -> RwDecision<RwReleased> {
    if view.reads <= 0 || !matches!(view.shape, Shape::Rw(_)) {
        return RwDecision::nothing(RwReleased::NotHeld);
    }
    let remaining = view.reads - 1;
    let mut effects = vec![
        match remaining {
            0 => Effect::DelField(Field::Read),
            n => Effect::SetCount(Field::Read, n),
        },
        Effect::DelHold(view.reads),
    ];
    let latest = others
        .latest_read
        .into_iter()
        .chain(own_latest.filter(|_| remaining > 0))
        .filter(|at| *at > now)
        .max();
    let writer = others.writer || view.writes > 0;
    let reply = match remaining {
        0 => RwReleased::Done,
        _ => RwReleased::StillHeld,
    };
    match (latest, writer) {
        (Some(at), false) => {
            effects.push(Effect::ExpireAt(at));
            let event = (remaining == 0).then_some(RwEvent::Released {
                message: Mode::Read,
                freed: false,
            });
            RwDecision::new(reply, effects, event)
        }
        (Some(at), true) => {
            // Redisson lets a writer's read holds stretch the hash too.
            if view.ttl_ms >= 0 && at > now.saturating_add(view.ttl_ms) {
                effects.push(Effect::ExpireAt(at));
            }
            RwDecision::new(reply, effects, None)
        }
        (None, true) => RwDecision::new(reply, effects, None),
        (None, false) => {
            effects.push(Effect::Delete);
            let event = RwEvent::Released {
                message: Mode::Read,
                freed: true,
            };
            // Redisson answers 1 when its unlock deleted the lock.
            RwDecision::new(RwReleased::Done, effects, Some(event)).counting(Tally::Released)
        }
    }
}

/// Release one write hold of the caller (Redisson's write unlock): counted
/// down, with the lease reset to `expire_at` when given; at 0 the lock is
/// deleted, or, if the caller still holds read (it downgraded), left in
/// read mode.
pub fn write_release(view: RwView, expire_at: Option<i64>) -> RwDecision<RwReleased> {
    if view.writes <= 0 || view.shape != Shape::Rw(Mode::Write) {
        return RwDecision::nothing(RwReleased::NotHeld);
    }
    let remaining = view.writes - 1;
    if remaining > 0 {
        let mut effects = vec![Effect::SetCount(Field::Write, remaining)];
        effects.extend(expire_at.map(Effect::ExpireAt));
        return RwDecision::new(RwReleased::StillHeld, effects, None);
    }
    if view.reads > 0 {
        let effects = vec![Effect::DelField(Field::Write), Effect::SetMode(Mode::Read)];
        let event = RwEvent::Released {
            message: Mode::Write,
            freed: false,
        };
        return RwDecision::new(RwReleased::Done, effects, Some(event));
    }
    let event = RwEvent::Released {
        message: Mode::Write,
        freed: true,
    };
    RwDecision::new(RwReleased::Done, vec![Effect::Delete], Some(event)).counting(Tally::Released)
}

/// Renew every hold of the caller to `expire_at` (a watchdog's call): its
/// read holds' keys, and the hash to the latest of that and the other live
/// holds. Replies whether the caller holds anything.
///
/// A reader whose every hold has passed its deadline (`own_latest`, the
/// latest of them, is gone or past `now`) holds nothing any more, even if
/// its field is still in the hash (another reader kept the hash alive):
/// the answer is 0, as for a lock whose lease ended.
pub fn renew(
    view: RwView,
    others: &OtherHolds,
    own_latest: Option<i64>,
    now: i64,
    expire_at: i64,
) -> RwDecision<bool> {
    let reading = view.reads > 0 && own_latest.is_some_and(|at| at > now);
    if (!reading && view.writes <= 0) || !matches!(view.shape, Shape::Rw(_)) {
        return RwDecision::nothing(false);
    }
    let mut effects = Vec::new();
    if view.reads > 0 {
        effects.push(Effect::RenewHolds {
            count: view.reads,
            at: expire_at,
        });
    }
    let at = match others.latest_read {
        Some(other) if view.writes == 0 => other.max(expire_at),
        _ => expire_at,
    };
    effects.push(Effect::ExpireAt(at));
    RwDecision::new(true, effects, None)
}

/// Delete the lock whoever holds it (`LOCK.FORCE` on a read-write lock).
pub fn force(shape: Shape) -> RwDecision<bool> {
    match shape {
        Shape::Rw(mode) => RwDecision::new(
            true,
            vec![Effect::Delete],
            Some(RwEvent::Forced { message: mode }),
        )
        .counting(Tally::Forced),
        Shape::Free | Shape::Other => RwDecision::nothing(false),
    }
}

/// Hand the lock to a waiter (the queue's pass decided it may have it):
/// what [`read_acquire`] / [`write_acquire`] do for a caller that holds
/// nothing, with no queue ahead.
pub fn hand_off(
    mode: Mode,
    view: RwView,
    now: i64,
    lease_ms: i64,
) -> Result<RwDecision<RwAcquired>, RwError> {
    let expire_at = now.saturating_add(lease_ms);
    let decision = match mode {
        Mode::Read => read_acquire(view, false, now, expire_at)?,
        Mode::Write => write_acquire(view, now, lease_ms)?,
    };
    Ok(match decision.reply {
        RwAcquired::Busy(_) => decision,
        _ => decision.counting(Tally::HandedOffAs(mode)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000;

    fn view(shape: Shape, reads: i64, writes: i64, ttl_ms: i64) -> RwView {
        RwView {
            shape,
            reads,
            writes,
            ttl_ms,
        }
    }

    const READ: Shape = Shape::Rw(Mode::Read);
    const WRITE: Shape = Shape::Rw(Mode::Write);

    /// Other readers whose latest live hold ends at `at`.
    fn readers_until(at: i64) -> OtherHolds {
        OtherHolds {
            latest_read: Some(at),
            writer: false,
        }
    }

    fn released(message: Mode, freed: bool) -> Option<RwEvent> {
        Some(RwEvent::Released { message, freed })
    }

    #[test]
    fn a_free_lock_is_taken_in_either_mode_as_redissons_scripts_do() {
        let d = read_acquire(RwView::FREE, false, NOW, NOW + 100).unwrap();
        assert_eq!(d.reply, RwAcquired::Taken);
        assert_eq!(
            d.effects,
            vec![
                Effect::SetMode(Mode::Read),
                Effect::SetCount(Field::Read, 1),
                Effect::SetHold {
                    n: 1,
                    at: NOW + 100
                },
                Effect::ExpireAt(NOW + 100),
            ]
        );
        assert_eq!(d.event, Some(RwEvent::Acquired));
        assert_eq!(d.tally, Tally::Granted(Mode::Read));
        let d = write_acquire(RwView::FREE, NOW, 100).unwrap();
        assert_eq!(d.reply, RwAcquired::Taken);
        assert_eq!(
            d.effects,
            vec![
                Effect::SetMode(Mode::Write),
                Effect::SetCount(Field::Write, 1),
                Effect::ExpireAt(NOW + 100),
            ]
        );
    }

    #[test]
    fn readers_share_and_the_hash_lives_as_long_as_the_longest_hold() {
        let d = read_acquire(view(READ, 0, 0, 500), false, NOW, NOW + 100).unwrap();
        assert_eq!(d.reply, RwAcquired::Taken);
        assert_eq!(
            d.effects,
            vec![
                Effect::SetCount(Field::Read, 1),
                Effect::SetHold {
                    n: 1,
                    at: NOW + 100
                },
                Effect::ExpireAt(NOW + 500),
            ]
        );
        let d = read_acquire(view(READ, 2, 0, 50), false, NOW, NOW + 100).unwrap();
        assert_eq!(d.reply, RwAcquired::Reentered);
        assert_eq!(
            d.effects[..2],
            [
                Effect::SetCount(Field::Read, 3),
                Effect::SetHold {
                    n: 3,
                    at: NOW + 100
                }
            ]
        );
        assert_eq!(d.effects[2], Effect::ExpireAt(NOW + 100));
    }

    #[test]
    fn a_new_reader_queues_behind_waiters_but_a_reentering_one_does_not() {
        let d = read_acquire(view(READ, 0, 0, 500), true, NOW, NOW + 100).unwrap();
        assert_eq!(d.reply, RwAcquired::Busy(500));
        assert!(d.effects.is_empty());
        let d = read_acquire(view(READ, 1, 0, 500), true, NOW, NOW + 100).unwrap();
        assert_eq!(d.reply, RwAcquired::Reentered);
    }

    #[test]
    fn a_writer_excludes_readers_and_other_writers_but_may_read_itself() {
        let held = view(WRITE, 0, 0, 300);
        assert_eq!(
            read_acquire(held, false, NOW, NOW + 1).unwrap().reply,
            RwAcquired::Busy(300)
        );
        assert_eq!(
            write_acquire(held, NOW, 1).unwrap().reply,
            RwAcquired::Busy(300)
        );
        let mine = view(WRITE, 0, 1, 300);
        let d = read_acquire(mine, true, NOW, NOW + 100).unwrap();
        assert_eq!(d.reply, RwAcquired::Reentered, "downgrade");
        assert_eq!(d.effects[0], Effect::SetCount(Field::Read, 1));
        assert_eq!(
            write_acquire(view(READ, 0, 0, 5), NOW, 1).unwrap().reply,
            RwAcquired::Busy(5)
        );
        assert_eq!(
            write_acquire(view(Shape::Other, 0, 0, 5), NOW, 1)
                .unwrap()
                .reply,
            RwAcquired::Busy(5)
        );
    }

    #[test]
    fn write_reentry_adds_the_lease_to_what_is_left_as_redisson_does() {
        let d = write_acquire(view(WRITE, 2, 1, 250), NOW, 100).unwrap();
        assert_eq!(d.reply, RwAcquired::Reentered);
        assert_eq!(
            d.effects,
            vec![
                Effect::SetCount(Field::Write, 2),
                Effect::ExpireAt(NOW + 350)
            ]
        );
    }

    #[test]
    fn a_reader_asking_for_write_is_refused_not_left_to_deadlock() {
        assert_eq!(
            write_acquire(view(READ, 1, 0, 5), NOW, 1),
            Err(RwError::UpgradeRefused)
        );
    }

    #[test]
    fn counts_that_would_overflow_are_refused() {
        assert_eq!(
            read_acquire(view(READ, i64::MAX, 0, 5), false, NOW, NOW + 1),
            Err(RwError::CountOverflow)
        );
        assert_eq!(
            write_acquire(view(WRITE, 0, i64::MAX, 5), NOW, 1),
            Err(RwError::CountOverflow)
        );
    }

    #[test]
    fn the_last_reader_deletes_the_lock_and_frees_it() {
        let d = read_release(view(READ, 1, 0, 50), &OtherHolds::default(), None, NOW);
        assert_eq!(d.reply, RwReleased::Done);
        assert_eq!(
            d.effects,
            vec![
                Effect::DelField(Field::Read),
                Effect::DelHold(1),
                Effect::Delete
            ]
        );
        assert_eq!(d.event, released(Mode::Read, true));
    }

    #[test]
    fn a_read_release_leaves_the_hash_to_the_latest_live_hold() {
        let others = readers_until(NOW + 700);
        let d = read_release(view(READ, 2, 0, 900), &others, Some(NOW + 400), NOW);
        assert_eq!(d.reply, RwReleased::StillHeld);
        assert_eq!(
            d.effects,
            vec![
                Effect::SetCount(Field::Read, 1),
                Effect::DelHold(2),
                Effect::ExpireAt(NOW + 700)
            ]
        );
        assert_eq!(d.event, None);
        // Holds whose deadline passed (a dead reader's) keep nothing alive.
        let dead = readers_until(NOW - 1);
        let d = read_release(view(READ, 1, 0, 900), &dead, None, NOW);
        assert_eq!(d.effects.last(), Some(&Effect::Delete));
    }

    #[test]
    fn releasing_what_one_does_not_hold_changes_nothing() {
        let d = read_release(view(READ, 0, 0, 9), &OtherHolds::default(), None, NOW);
        assert_eq!(d, RwDecision::nothing(RwReleased::NotHeld));
        assert_eq!(
            write_release(view(WRITE, 1, 0, 9), None),
            RwDecision::nothing(RwReleased::NotHeld)
        );
        assert_eq!(
            write_release(view(READ, 1, 1, 9), None).reply,
            RwReleased::NotHeld,
            "a write field in read mode is not a write hold"
        );
    }

    #[test]
    fn a_write_release_counts_down_then_frees_or_leaves_the_writers_reads() {
        let d = write_release(view(WRITE, 0, 2, 9), Some(NOW + 30));
        assert_eq!(d.reply, RwReleased::StillHeld);
        assert_eq!(
            d.effects,
            vec![
                Effect::SetCount(Field::Write, 1),
                Effect::ExpireAt(NOW + 30)
            ]
        );
        let d = write_release(view(WRITE, 0, 1, 9), None);
        assert_eq!(
            (d.reply, d.effects.clone()),
            (RwReleased::Done, vec![Effect::Delete])
        );
        let d = write_release(view(WRITE, 2, 1, 9), None);
        assert_eq!(
            d.effects,
            vec![Effect::DelField(Field::Write), Effect::SetMode(Mode::Read)]
        );
        assert_eq!(d.event, released(Mode::Write, false));
    }

    #[test]
    fn a_renewal_renews_the_callers_holds_only() {
        let others = readers_until(NOW + 50);
        let live = Some(NOW + 10);
        let d = renew(view(READ, 2, 0, 9), &others, live, NOW, NOW + 300);
        assert!(d.reply);
        assert_eq!(
            d.effects,
            vec![
                Effect::RenewHolds {
                    count: 2,
                    at: NOW + 300
                },
                Effect::ExpireAt(NOW + 300)
            ]
        );
        let later = readers_until(NOW + 900);
        let d = renew(view(READ, 1, 0, 9), &later, live, NOW, NOW + 300);
        assert_eq!(d.effects[1], Effect::ExpireAt(NOW + 900));
        let d = renew(view(WRITE, 0, 1, 9), &later, None, NOW, NOW + 300);
        assert_eq!(d.effects, vec![Effect::ExpireAt(NOW + 300)]);
        assert!(!renew(view(READ, 0, 0, 9), &later, live, NOW, NOW + 300).reply);
        assert!(!renew(RwView::FREE, &later, live, NOW, NOW + 300).reply);
        // Holds that all passed their deadline are not renewed back to life.
        assert!(!renew(view(READ, 1, 0, 9), &later, None, NOW, NOW + 300).reply);
        assert!(!renew(view(READ, 1, 0, 9), &later, Some(NOW), NOW, NOW + 300).reply);
    }

    #[test]
    fn force_deletes_a_read_write_lock_only() {
        assert_eq!(force(READ).effects, vec![Effect::Delete]);
        assert_eq!(
            force(WRITE).event,
            Some(RwEvent::Forced {
                message: Mode::Write
            })
        );
        assert!(!force(Shape::Other).reply);
        assert!(!force(Shape::Free).reply);
    }

    #[test]
    fn each_decision_says_what_it_counts_and_when_its_unlock_is_announced() {
        let handed = hand_off(Mode::Write, RwView::FREE, NOW, 100).unwrap();
        assert_eq!(handed.tally, Tally::HandedOffAs(Mode::Write));
        let freed = write_release(view(WRITE, 0, 1, 50), None);
        assert_eq!(freed.tally, Tally::Released);
        let announced = (freed.event(), freed.publishes());
        assert_eq!(announced, (Some(Event::Released), Publish::UnlessServed));
        // A writer that still reads: readers behind it may join, but the
        // lock is not free, so nothing is announced.
        let kept = write_release(view(WRITE, 1, 1, 50), None);
        let announced = (kept.event(), kept.serves(), kept.publishes());
        assert_eq!(announced, (None, true, Publish::Never));
    }
}
