//! Redisson's lock API for Rust, on the redis-lock module.
//!
//! The module (this repository's root crate) is the server half of
//! Redisson's locks: `LOCK.*` commands on Redisson's data layout. This crate
//! is the client half, the part Redisson users actually call: owner ids,
//! waiting with a deadline, a watchdog that renews every lease/3 and *tells
//! you* when it fails, unlock on every path, retries that cannot count
//! twice, fencing tokens, MultiLock and RedLock.
//!
//! ```no_run
//! # async fn demo() -> Result<(), redis_lock_client::LockError> {
//! use redis_lock_client::{redis, LockClient};
//! let locks = LockClient::new(redis::Client::open("redis://127.0.0.1/").unwrap())?;
//! let guard = locks.lock("order:42").await?;
//! guard.unlock().await?;
//! # Ok(()) }
//! ```
//!
//! redis-rs is re-exported ([`redis`]): a program needs no `redis`
//! dependency of its own, and one that has it must use this crate's version
//! (0.27), or its `redis::Client` is another type.
//!
//! # Locks and guards
//!
//! * [`LockClient::lock`] waits as long as it takes (in the server's FIFO
//!   queue, `LOCK.ACQUIRE ... WAIT 0`) and the watchdog keeps the lock.
//! * [`LockClient::try_lock`]`(name, wait, lease)` waits at most `wait`
//!   (`Ok(None)`: still busy). With `lease: Some(..)` the lock frees itself
//!   after it and no watchdog runs, as in Redisson; with `None` the watchdog
//!   keeps it.
//! * A [`LockGuard`] is one hold: [`LockGuard::unlock`] releases it and
//!   reports errors; dropping it releases it in the background. The same
//!   owner may take a lock it holds again (re-entry): it is free once every
//!   guard is released.
//! * A read-write lock (Redisson's `RReadWriteLock`, on its layout):
//!   [`LockClient::read_lock`] / [`LockClient::write_lock`] wait as `lock`
//!   does, [`LockClient::try_read_lock`] / [`LockClient::try_write_lock`] as
//!   `try_lock`, and [`LockClient::write_lock_fenced`] /
//!   [`LockClient::try_write_lock_fenced`] return a token. Their guards
//!   are `LockGuard`s ([`LockGuard::kind`]) with all of the above.
//! * [`LockGuard::is_held`], [`LockGuard::remaining_lease`],
//!   [`LockClient::is_locked`], [`LockClient::remaining_lease`] and
//!   [`LockClient::force_unlock`] (`LOCK.FORCE`, for operators) ask the server.
//!
//! # Owner ids
//!
//! The owner is the hash field Redisson writes, `<client id>:<thread id>` in
//! Redisson. Here the client id is a random UUID per [`LockClient`]
//! ([`LockClient::id`]), and:
//!
//! * async code inside a tokio task: `<client id>:task-<tokio task id>`. A
//!   task is the unit that re-enters; two tasks of one client exclude each
//!   other (two futures joined inside one task share its id);
//! * the [`blocking`] API, and async code outside any task: `<client
//!   id>:<thread number>`, threads numbered from 1 per process;
//! * explicit: [`LockClient::as_owner`]`("worker-7")`, for a request id, a
//!   worker name, or an id shared with a Redisson application.
//!
//! An owner id must be used by one holder at a time: the hold counts this
//! client keeps, and with them the retry check, rely on it.
//!
//! # The watchdog, and knowing when a lock is lost
//!
//! One task per client renews every lock taken without a lease, every third
//! of [`Options::watchdog_lease`] (30 s by default), with `LOCK.RENEW`. When
//! a renewal answers 0 (the lock was forced, deleted, or expired) or
//! renewals fail until the lease has passed, the lock is *lost*:
//! [`LockGuard::lost`] resolves at once and [`LockGuard::is_lost`] says why
//! ([`Lost`]). Redisson only logs this.
//!
//! The renewal is the fallback. The client also asks the server to tell it
//! when a held lock's key changes (client-side tracking, `CLIENT TRACKING
//! on`, on one RESP3 connection per client, whatever the number of locks):
//! each such notice is checked with `HGET lock owner` on that connection,
//! and a count of 0 marks the lock lost, within milliseconds of a
//! `LOCK.FORCE`, a `DEL` or the lease's expiry. The client's own renewals
//! and re-entries notify too, and their check finds the hold and stays
//! quiet. Single servers and Sentinel only: in a cluster the renewal finds
//! the loss ([`Options::track_locks`] turns tracking off).
//!
//! Select on it next to your work:
//!
//! ```no_run
//! # async fn demo(locks: redis_lock_client::LockClient) -> Result<(), redis_lock_client::LockError> {
//! # async fn write_ledger() {}
//! let guard = locks.lock("ledger").await?;
//! tokio::select! {
//!     _ = write_ledger() => guard.unlock().await?,
//!     why = guard.lost() => eprintln!("stopped: lock lost ({why})"),
//! }
//! # Ok(()) }
//! ```
//!
//! A lock with a caller-given lease is lost when that lease has passed.
//!
//! # Waiting
//!
//! A wait is `LOCK.ACQUIRE ... WAIT` on a connection of its own (a blocked
//! connection cannot carry other commands), whose reply is awaited
//! [`Options::wait_margin`] longer than the wait itself. If that connection
//! breaks, the library finds out whether the server granted the lock at
//! that instant and, if so, returns its guard: a grant is never leaked.
//! `lock()` waits without end, with no reply deadline: TCP keep-alive (on
//! in redis-rs) notices a server that vanished.
//!
//! Giving up is safe: dropping a `lock()`/`try_lock()` future (an outer
//! `tokio::time::timeout`, a `select!`) leaves the server's queue, and a
//! grant made just then is found and given back instead of staying held
//! until its lease ends.
//!
//! # Retries
//!
//! After a connection fails with a command in flight, the library kills the
//! old connection (`CLIENT KILL ID`), reads the owner's hold count back and
//! compares it with its own: a command that ran is not sent again, one that
//! did not is. A retried acquire never leaves a hold count of 2, a retried
//! release never releases twice. See [`LockClient`]'s source docs for the
//! argument and its limits (a cluster, or ACLs without `CLIENT KILL`).
//!
//! # Read-write locks
//!
//! Readers share the lock, a writer excludes everyone; readers and writers
//! wait in one fair FIFO queue on the server (a reader arriving while a
//! writer waits queues behind it). Re-entry works in both modes; a writer
//! may also read (a downgrade: its write release leaves it reading), while
//! a reader asking to write gets [`LockError::UpgradeRefused`] at once, as
//! waiting would wait for itself. A read hold and a write hold of one
//! owner are counted apart (hash fields `<owner>` and `<owner>:write`);
//! the watchdog renews both with `LOCK.RWRENEW`, and each has the lost
//! signal.
//!
//! ```no_run
//! # async fn demo(locks: redis_lock_client::LockClient) -> Result<(), redis_lock_client::LockError> {
//! # async fn store_prices() {}
//! let reading = locks.read_lock("catalog").await?; // other readers may join
//! reading.unlock().await?;
//! let writing = locks.write_lock("catalog").await?; // waits for the readers to leave
//! tokio::select! {
//!     _ = store_prices() => writing.unlock().await?,
//!     why = writing.lost() => eprintln!("stopped: write lock lost ({why})"),
//! }
//! # Ok(()) }
//! ```
//!
//! # Fencing tokens
//!
//! [`LockClient::lock_fenced`] returns a [`Fenced`] guard, whose
//! [`Fenced::token`] grows with every grant; the protected resource refuses writes with a
//! token older than one it saw (`LOCK.FENCE` in the same Redis).
//!
//! # Synced grants
//!
//! With [`Options::sync_replicas`]`(n, timeout)` every acquire asks the
//! module to answer a grant only once `n` replicas acknowledged it
//! (`LOCK.ACQUIRE ... SYNC`). If they do not within `timeout`, the module
//! undoes the grant and the call fails with [`LockError::NotSynced`]: the
//! lock is not held (it was given back or handed to the next waiter).
//!
//! ```no_run
//! # use std::time::Duration;
//! # async fn demo() -> Result<(), redis_lock_client::LockError> {
//! use redis_lock_client::{redis, LockClient, LockError, Options};
//! let options = Options::default().sync_replicas(1, Duration::from_millis(200));
//! let locks = LockClient::with_options(redis::Client::open("redis://127.0.0.1/").unwrap(), options)?;
//! match locks.lock("ledger").await {
//!     Ok(guard) => guard.unlock().await?,
//!     Err(LockError::NotSynced { detail, .. }) => eprintln!("not held: {detail}"),
//!     Err(e) => return Err(e),
//! }
//! # Ok(()) }
//! ```
//!
//! # Several locks, several servers
//!
//! [`MultiLock`]: all of several locks or none, possibly on independent
//! servers, with one wait budget. [`RedLock`]: one lock on a majority of
//! independent masters. See `client/README.md` ("Which lock?") for when to
//! use which, and why Redisson deprecated RedLock.
//!
//! # Cluster
//!
//! [`LockClient::cluster`] (or [`LockClient::cluster_with_options`]) takes a
//! `redis::cluster::ClusterClient`; every command routes by the lock's name.
//!
//! # Sentinel
//!
//! [`LockClient::sentinel`] asks Sentinel for the master whenever it
//! connects; after a failover it moves to the new master, where the
//! watchdog renews, waits queue again, and locks the new master does not
//! have are reported lost.
//!
//! # Semaphores and count-down latches
//!
//! [`LockClient::semaphore`] is Redisson's `RSemaphore` (permits without
//! owner or lease), [`LockClient::permit_expirable_semaphore`] its
//! `RPermitExpirableSemaphore` (permits with ids and a lease, held by a
//! [`Permits`] guard that the watchdog renews and that has the lost
//! signal), [`LockClient::count_down_latch`] its `RCountDownLatch`. Waits
//! are FIFO on the server and use a connection of their own; a wait given
//! up gives back what it was granted.
//!
//! ```no_run
//! # async fn demo(locks: redis_lock_client::LockClient) -> Result<(), redis_lock_client::LockError> {
//! let slots = locks.semaphore("render-slots");
//! slots.try_set_permits(4, None).await?;
//! slots.acquire(1).await?;
//! slots.release(1).await?;
//! # Ok(()) }
//! ```
//!
//! # Blocking code
//!
//! [`blocking::LockClient`] offers the same single-lock API without async
//! (plain and fenced, read-write, single server, Sentinel or cluster), on a runtime
//! thread of its own (where its watchdog runs).

mod acquire;
pub mod blocking;
mod client;
mod conn;
mod counted;
mod error;
mod guard;
mod holds;
mod inner;
mod latch;
mod lock;
mod multi;
mod options;
mod owner;
mod pieces;
mod protocol;
mod request;
mod semaphore;
mod tracking;
mod watchdog;

/// The redis-rs this crate is built on (1.x), re-exported so a program
/// needs no `redis` dependency of its own to make the `redis::Client` (or
/// `ClusterClient`) a [`LockClient`] takes, and cannot pick a version
/// whose types do not match.
pub use redis;

pub use client::LockClient;
pub use error::{LockError, Result};
pub use guard::{Fenced, LockGuard};
pub use holds::Lost;
pub use latch::CountDownLatch;
pub use multi::{MultiGuard, MultiLock, RedLock, RedLockGuard};
pub use options::Options;
pub use protocol::{Awaited, LockKind};
pub use semaphore::{PermitExpirableSemaphore, Permits, Semaphore};

// The repository README's Rust start and this crate's README's complete
// example compile as doctests (`cargo test --doc`), so that neither goes
// stale; the README fragments that need a client around them are `ignore`.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct RepositoryReadme;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct CrateReadme;
