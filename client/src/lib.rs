//! Redisson's lock API for Rust, on the redis-lock module.
//!
//! ```no_run
//! # async fn demo() -> Result<(), redis_lock_client::LockError> {
//! let locks = redis_lock_client::LockClient::new(redis::Client::open("redis://127.0.0.1/").unwrap())?;
//! let guard = locks.lock("order:42").await?;
//! guard.unlock().await?;
//! # Ok(()) }
//! ```

pub mod blocking;
mod client;
mod conn;
mod error;
mod guard;
mod multi;
mod owner;
mod watchdog;

pub use client::{LockClient, Options};
pub use error::{LockError, Result};
pub use guard::{LockGuard, Lost};
pub use multi::{MultiGuard, MultiLock, RedLock, RedLockGuard};
