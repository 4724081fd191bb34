//! Owner ids: who holds a lock, as the hash field Redisson writes.
//!
//! Redisson's owner is `<client uuid>:<thread id>`: re-entry is per thread.
//! An async task moves between threads, so the async API uses the tokio task
//! instead: `<client uuid>:task-<task id>`. The blocking API, and async code
//! running outside any task (`block_on`), use the thread: `<client
//! uuid>:<thread number>`, numbered from 1 per process by this library
//! (Rust's `ThreadId` has no stable number). The `task-` prefix keeps the two
//! kinds apart.

use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD_NUMBER: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

/// This thread's number, as used in owner ids.
pub(crate) fn thread_number() -> u64 {
    THREAD_NUMBER.with(|n| *n)
}

/// The owner id of the calling thread: `<client id>:<thread number>`.
pub(crate) fn thread_owner(client_id: &str) -> String {
    format!("{client_id}:{}", thread_number())
}

/// The owner id of the calling task, or of the thread outside any task.
pub(crate) fn current_owner(client_id: &str) -> String {
    match tokio::task::try_id() {
        Some(task) => format!("{client_id}:task-{task}"),
        None => thread_owner(client_id),
    }
}
