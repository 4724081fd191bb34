//! Waiting: the one wing through which every kind of object (lock,
//! read-write lock, semaphore, latch) makes clients wait server-side,
//! carries out its decisions, and hands what frees to its first waiters.
//!
//! A client that waits (`... WAIT`, `LOCK.AWAIT`) is blocked in the key's
//! FIFO queue (`wait_queue.rs`). When the object frees, the waiters its
//! kind's policy admits (`grant_policy.rs`) are granted **in that same
//! event**, written and replicated as effects, before anyone else can act:
//! waiting is fair and nobody barges. A freed lock is a deleted hash, which
//! Redis's own key-readiness never signals, so the module keeps its queues
//! itself.
//!
//! Where blocking is not allowed (MULTI, Lua, a replica) a wait acts as a
//! plain attempt. When the server becomes a replica, waiters get an error
//! (usually Redis's own, which it sends before telling modules; see
//! README). Waiters that time out or disconnect (also `CLIENT KILL`) leave
//! their queue at once.
//!
//! The rooms, from the ground up; every import runs downwards:
//! * `queue.rs`: the queues and their one timer each; what the queue asks
//!   of a kind ([`queue::Kind`]: the timer fired, a waiter timed out, a
//!   waiter left), so that the queue never names a kind; when writes are
//!   held back (pauses, too few good replicas).
//! * `carry_out.rs`: the one carry-out of every decision of every kind.
//! * `synced.rs`: the lock's `SYNC`, grants answered once replicas have
//!   them.
//! * `blocked.rs`: how a client starts waiting, and the one handler of
//!   every blocked client (granted, timed out, gone).
//! * `lock.rs`, `semaphore.rs`, `latch.rs`: one room per kind (the lock's
//!   holds the read-write lock too): its callbacks for the queue, its keys
//!   as the carry-out's target, how it settles and serves its queue.
//! * `listeners.rs`: server events; `hearing.rs`: which keyspace events are
//!   heard, and when (the queue room hears them).

mod blocked;
mod carry_out;
mod hearing;
pub mod latch;
mod listeners;
pub mod lock;
mod queue;
pub mod semaphore;
mod synced;

pub use blocked::{answer_remembered, cancel, CancelReply};
pub use carry_out::carry_out;
pub use queue::{kept_places, remember_grant, snapshot, Keep, Wants};

// The module entry point uses these; unit-test builds leave it out.
#[cfg_attr(test, allow(unused_imports))]
pub use hearing::heard;
#[cfg_attr(test, allow(unused_imports))]
pub use listeners::subscribe;
#[cfg_attr(test, allow(unused_imports))]
pub use queue::{absent_counts, live_timers, waiting_clients};
#[cfg_attr(test, allow(unused_imports))]
pub use synced::grants_awaiting_replicas;
