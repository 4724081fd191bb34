//! The module's integration tests, one file per topic, against real
//! servers (`test-support/`). They are one test binary, not one per file:
//! each binary links redis-rs and tokio in release mode, so forty of them
//! cost `make test` minutes of compiling and linking. One file alone:
//! `cargo test --release --test it rwlock::` (a test's path starts with its
//! file's name). The chaos test is its own binary (`tests/chaos/`), run by
//! `make test-chaos`.

mod acl;
mod bad_input;
mod cancel;
mod cluster;
mod docs;
mod failover;
mod fencing;
mod interop;
mod kept_places;
mod latch;
mod listing;
mod lock;
mod lock_events;
mod lock_server;
mod production;
mod replication;
mod robustness;
mod rwlock;
mod semaphore;
mod semaphore_redisson;
mod sentinel;
mod stock;
mod sync;
mod times;
mod version;
mod waiting;
