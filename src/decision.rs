//! What every kind's decision tells the waiting wing that carries it out
//! (`waiting/carry_out.rs`): the one contract of the four decision types
//! (`lock.rs`, `rwlock.rs`, `semaphore.rs`, `latch.rs`), as data. No FFI.
//!
//! A decision says what to reply and what to write; through [`Decision`]
//! it also says what it counts (`INFO lock`), which keyspace notification
//! it makes, whether the object's wait queue is to be served after it, and
//! whether the kind's own message is published. Redisson's layouts differ
//! in that last step, and the differences are data here, not code: a freed
//! lock is announced only when nobody was handed it (its waiters listen for
//! the message to race for it, ours were served first), while a semaphore
//! announces its permits every time, after the queue took its share. So one
//! carry-out serves every kind, and a new kind brings a decision type, not
//! a new way of carrying it out.

use crate::stats::Tally;

/// The keyspace notification a decision makes (class `h`: locks and
/// read-write locks are hashes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A lock went from free to held (not on re-entry).
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

/// Whether the kind's message is published after a decision, which is
/// always the last step (so a message that carries the object's state,
/// like a semaphore's permits, carries it as the queue left it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publish {
    Never,
    Always,
    /// Only when serving the queue granted nobody (a freed lock: a waiter
    /// that was handed it needs no message, and Redisson's would race for
    /// a lock that is not free).
    UnlessServed,
}

/// One kind's decision, as the one carry-out reads it.
pub trait Decision {
    /// What the command (or the waiter) is answered.
    type Reply;
    /// What it counts.
    fn tally(&self) -> Tally;
    /// The keyspace notification it makes, if any.
    fn event(&self) -> Option<Event>;
    /// Whether the object's queue is served after it (something was freed).
    fn serves(&self) -> bool;
    /// Whether the kind's message is published.
    fn publishes(&self) -> Publish;
    fn into_reply(self) -> Self::Reply;
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
