//! Test support for the redis-lock workspace, shared by the module's
//! integration tests (`tests/`) and the client library's (`client/tests/`),
//! as redis-rs's `redis-test` crate is for redis-rs. Not published.
//!
//! Each module does one job:
//!
//! | module | job |
//! |---|---|
//! | [`server`] | real `redis-server` processes on free loopback ports, each in its own directory, with the module loaded; replicas |
//! | [`module`] | the module under test, built from the current sources, never a stale `.so` |
//! | [`cluster`] | a three-master Redis Cluster |
//! | [`sentinel`] | Sentinel processes monitoring a master |
//! | [`commands`] | plain commands, typed (`HGETALL`, `PTTL`, `CONFIG`...) |
//! | [`lock`] | `LOCK.*` commands, typed; `LOCK.INFO` decoded; the wait queue; `INFO` counters |
//! | [`reply`] | bytes, strings and maps of a reply; server errors |
//! | [`permits`] | semaphores and latches: their keys, `LOCK.SEMINFO` decoded, their waiters, clients queued for them (blocking and async) |
//! | [`pubsub`] | unlock channels and a subscriber that needs no sleeps |
//! | [`timing`] | polling (blocking and async), clocks, running a test alone |
//! | [`raw`] | a raw RESP2 client: blocked commands, pushes, disconnects; queued waiters |
//! | [`redisson`] | Redisson's scripts (read from `redisson/*.lua`) and the calls it makes |
//!
//! Every test starts its own servers, so tests run in parallel; a server is
//! killed and its directory removed when its [`Server`] is dropped. A test
//! file takes the everyday helpers with one `use`:
//!
//! ```ignore
//! use redis_lock_test_support::*;
//! use redis_lock_test_support::raw::{RawClient, Resp};
//!
//! let server = Server::start();
//! let mut con = server.connection();
//! assert_eq!(acquire(&mut con, "L", "a", 30_000), None);
//! ```
//!
//! Helpers take keys and owners as anything the `redis` crate can send
//! (`"L"`, `b"k\x00"`, `&String`, `&[u8]`...) and any connection
//! (`redis::Connection`, a cluster connection). A failed command or a
//! condition that never came fails the test, saying what was expected.

pub mod cluster;
pub mod commands;
pub mod lock;
pub mod module;
pub mod permits;
pub mod pubsub;
pub mod raw;
pub mod redisson;
pub mod reply;
pub mod sentinel;
pub mod server;
pub mod timing;

pub use cluster::{cluster_info, node_options, Cluster};
pub use commands::*;
pub use lock::*;
pub use module::module_path;
pub use permits::*;
pub use pubsub::*;
pub use raw::{queue, queue_with, reply_at, waits_that_time_out, while_writes_paused};
pub use reply::*;
pub use server::*;
pub use timing::*;
