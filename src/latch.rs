//! The count-down latch's decisions, pure: Redisson's `RCountDownLatch` as
//! a state machine. No FFI.
//!
//! A latch is a string `name` holding its count, deleted when the count
//! reaches zero (a missing latch is open). Redisson's messages on
//! `redisson_countdownlatch__channel__{name}`: `1` when a count is set, `0`
//! when the latch opens. Unlike Redisson's, a latch may be given an expiry
//! (`LOCK.LATCHSET ... PX`): when it passes, the latch is deleted, `0` is
//! published (a Redisson waiter then finds it open and stops waiting), and
//! the module's waiters hear that it expired (`waiting/latch.rs`).

use crate::args::strict_i64;
use crate::decision::{Decision, Event, Publish};
use crate::errors::{self, Refusal};
use crate::stats::Tally;

/// Redisson's message when a count is set.
pub const NEW_COUNT_MESSAGE: &[u8] = b"1";
/// Redisson's message when the latch opens.
pub const ZERO_MESSAGE: &[u8] = b"0";

/// The count a latch key holds.
pub fn parse_count(raw: &[u8]) -> Result<i64, Refusal> {
    strict_i64(raw).ok_or(errors::LATCH_NOT_INTEGER)
}

/// What a latch decision does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatchWrite {
    /// Nothing.
    None,
    /// Set the count, with an absolute expiry or keeping the key's.
    Set { count: i64, expire_at: Option<i64> },
    /// Set the count, keeping the key's expiry.
    Keep(i64),
    /// Delete the latch: it opened.
    Open,
    /// Nothing to write: the latch is gone already, deleted by someone
    /// else (it opened) or `expired` past its `PX` deadline.
    Gone { expired: bool },
}

/// A latch decision: its write, its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatchDecision<R> {
    pub write: LatchWrite,
    pub reply: R,
}

/// A new count and the latch's opening are announced on Redisson's
/// channel; its opening (or expiry) lets every waiter go.
impl<R> Decision for LatchDecision<R> {
    type Reply = R;

    fn tally(&self) -> Tally {
        match self.write {
            LatchWrite::Open | LatchWrite::Gone { expired: false } => Tally::LatchOpened,
            LatchWrite::Gone { expired: true } => Tally::LatchExpired,
            LatchWrite::None | LatchWrite::Set { .. } | LatchWrite::Keep(_) => Tally::Nothing,
        }
    }

    fn event(&self) -> Option<Event> {
        None
    }

    fn serves(&self) -> bool {
        matches!(self.write, LatchWrite::Open | LatchWrite::Gone { .. })
    }

    fn publishes(&self) -> Publish {
        match self.write {
            LatchWrite::Set { .. } | LatchWrite::Open | LatchWrite::Gone { .. } => Publish::Always,
            LatchWrite::None | LatchWrite::Keep(_) => Publish::Never,
        }
    }

    fn into_reply(self) -> R {
        self.reply
    }
}

/// The latch was found gone (deleted, expired, its key reused): its
/// waiters are let go, hearing whether it `expired` or opened.
pub fn gone(expired: bool) -> LatchDecision<()> {
    LatchDecision {
        write: LatchWrite::Gone { expired },
        reply: (),
    }
}

/// `LOCK.LATCHSET`: sets the count when the latch does not exist (Redisson's
/// `trySetCount`). Reply: whether it did.
pub fn set_count(count: Option<i64>, new: i64, expire_at: Option<i64>) -> LatchDecision<bool> {
    match count {
        None => LatchDecision {
            write: LatchWrite::Set {
                count: new,
                expire_at,
            },
            reply: true,
        },
        Some(_) => LatchDecision {
            write: LatchWrite::None,
            reply: false,
        },
    }
}

/// `LOCK.COUNTDOWN`: one less; at zero the latch opens. Reply: the count
/// left (0 for a latch that was already open).
pub fn count_down(count: Option<i64>) -> LatchDecision<i64> {
    match count {
        Some(c) if c > 1 => LatchDecision {
            write: LatchWrite::Keep(c - 1),
            reply: c - 1,
        },
        // 1 -> 0 opens it; a count already at or below zero (written by
        // someone else) is an open latch left behind: delete it too.
        Some(_) => LatchDecision {
            write: LatchWrite::Open,
            reply: 0,
        },
        None => LatchDecision {
            write: LatchWrite::None,
            reply: 0,
        },
    }
}

/// Whether a waiter waits: only for a latch with a count above zero.
pub fn is_open(count: Option<i64>) -> bool {
    count.is_none_or(|c| c <= 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_set_once() {
        assert_eq!(
            set_count(None, 3, Some(9)).write,
            LatchWrite::Set {
                count: 3,
                expire_at: Some(9)
            }
        );
        assert!(!set_count(Some(1), 3, None).reply);
        assert_eq!(set_count(Some(1), 3, None).write, LatchWrite::None);
    }

    #[test]
    fn counting_down_opens_at_zero() {
        assert_eq!(count_down(Some(3)).write, LatchWrite::Keep(2));
        assert_eq!(count_down(Some(3)).reply, 2);
        assert_eq!(count_down(Some(1)).write, LatchWrite::Open);
        assert_eq!(count_down(Some(1)).reply, 0);
        assert_eq!(count_down(Some(-2)).write, LatchWrite::Open);
        assert_eq!(count_down(None).write, LatchWrite::None);
    }

    #[test]
    fn a_latch_gone_lets_its_waiters_go_and_counts_how_it_went() {
        assert_eq!(gone(true).tally(), Tally::LatchExpired);
        assert_eq!(gone(false).tally(), Tally::LatchOpened);
        assert_eq!(count_down(Some(1)).tally(), Tally::LatchOpened);
        assert!(gone(true).serves() && count_down(Some(1)).serves());
        assert!(!count_down(Some(2)).serves());
        assert_eq!(count_down(Some(2)).publishes(), Publish::Never);
        assert_eq!(set_count(None, 2, None).publishes(), Publish::Always);
    }

    #[test]
    fn only_a_positive_count_keeps_waiters_waiting() {
        assert!(is_open(None));
        assert!(is_open(Some(0)));
        assert!(!is_open(Some(1)));
    }
}
