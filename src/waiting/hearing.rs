//! Which keyspace events the module subscribes to, and when: the
//! subscriptions' bookkeeping, for the queue room (`queue.rs`, which hears
//! the events: a lock deleted or expired behind a queue's back, a semaphore
//! given permits, a write lock downgraded by Redisson's script).
//!
//! **Keyspace events are heard only while something needs them.** Redis
//! builds a module context for every event of a class a module subscribed
//! to, whatever the key, before the module can even look at it: subscribed
//! for the whole server, the module made `INCR` and `SET` on unrelated keys
//! 20-60% dearer. So the module subscribes to a class when a waiter or a
//! watch that needs it arrives ([`hear`], from the queue room: in that same
//! command, before anything it waits for can change); each kind says which
//! classes its waiters and watches need (`Kind::hears`). Where the server
//! can take a subscription back (Redis 8.2+), the module lets a class go
//! once nothing needs it any more ([`queues_dropped`], from a timer: never
//! while Redis walks its subscriber list). Redis 7.x and Valkey (up to 9.1)
//! have no way to unsubscribe: there a class, once heard, stays heard until
//! the server restarts (`docs/operations.md`, Known limits).

use std::cell::Cell;
use std::marker::PhantomData;

use crate::ffi::context::NotifyClass;
use crate::ffi::events::{self, KeyspaceListener};
use crate::ffi::timer::{self, TimerJob};
use crate::ffi::Ctx;

/// What tells that an object went behind its queue's back: generic events
/// (`DEL`, `UNLINK`, `RENAME`...), its expiry, its eviction.
pub(super) const DELETED: NotifyClass = NotifyClass::GENERIC
    .or(NotifyClass::EXPIRED)
    .or(NotifyClass::EVICTED);

thread_local! {
    // The keyspace event classes the module is subscribed to now, one
    // subscription per class (main thread only, like every callback).
    static HEARD: Cell<NotifyClass> = const { Cell::new(NotifyClass::NONE) };
    // A [`LetGo`] timer is due.
    static LET_GO_DUE: Cell<bool> = const { Cell::new(false) };
}

/// A waiter or a watch that needs `classes` arrived: subscribes to those not
/// heard yet. Nothing to do (one load of a cell) in the usual case.
pub(super) fn hear<L: KeyspaceListener>(ctx: Ctx, classes: NotifyClass) {
    let missing = classes.without(HEARD.with(Cell::get));
    if missing.is_empty() {
        return;
    }
    for (class, _) in NotifyClass::EACH {
        if !missing.contains(class) {
            continue;
        }
        match events::subscribe_keyspace::<L>(ctx, class) {
            Ok(()) => HEARD.with(|heard| heard.set(heard.get().or(class))),
            // Never seen: Redis's subscribe cannot fail. Waiters still get
            // their object from the queue's timer at its deadline.
            Err(e) => ctx.log_warning(&format!("lock module: {e}")),
        }
    }
}

/// A queue was dropped: where the server can unsubscribe, looks on the next
/// turn of the event loop whether some class is no longer needed, by what
/// `needed` then says the queues need.
pub(super) fn queues_dropped<L: KeyspaceListener + 'static>(ctx: Ctx, needed: fn() -> NotifyClass) {
    if HEARD.with(Cell::get).is_empty()
        || LET_GO_DUE.with(Cell::get)
        || !events::can_unsubscribe_keyspace()
    {
        return;
    }
    LET_GO_DUE.with(|due| due.set(true));
    timer::start(
        ctx,
        0,
        LetGo::<L> {
            needed,
            listener: PhantomData,
        },
    );
}

/// The keyspace event classes heard now, as `notify-keyspace-events`
/// letters, `none` when none (`INFO lock`).
pub fn heard() -> String {
    let heard = HEARD.with(Cell::get);
    if heard.is_empty() {
        "none".to_string()
    } else {
        heard.letters()
    }
}

/// Unsubscribes from the classes nothing needs any more. A timer, so never
/// inside Redis's walk of its subscriber list (see
/// [`events::unsubscribe_keyspace`]).
struct LetGo<L> {
    needed: fn() -> NotifyClass,
    listener: PhantomData<fn(L)>,
}

impl<L: KeyspaceListener + 'static> TimerJob for LetGo<L> {
    fn fire(self, ctx: Ctx) {
        LET_GO_DUE.with(|due| due.set(false));
        let surplus = HEARD.with(Cell::get).without((self.needed)());
        for (class, _) in NotifyClass::EACH {
            if !surplus.contains(class) {
                continue;
            }
            match events::unsubscribe_keyspace::<L>(ctx, class) {
                Ok(()) => HEARD.with(|heard| heard.set(heard.get().without(class))),
                Err(e) => ctx.log_warning(&format!("lock module: {e}")),
            }
        }
    }
}
