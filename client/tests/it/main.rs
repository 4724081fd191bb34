//! The client library's integration tests, one file per topic, against real
//! servers with the module (`test-support/`, and `support/` for what only
//! these tests share). One test binary, not one per file, as the module's
//! tests (`tests/it/main.rs` at the repository's root say why). One file
//! alone: `cargo test --release -p redis-lock-client --test it lock::`.

mod support;

mod blocking_cluster;
mod examples;
mod fenced;
mod latch;
mod lock;
mod long_wait;
mod lost;
mod multi;
mod pieces;
mod retry;
mod rwlock;
mod semaphore;
mod sentinel;
mod sync;
