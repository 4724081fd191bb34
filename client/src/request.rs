//! What a caller asks for ([`Ask`], [`Wait`]), and the task every
//! acquisition runs in ([`detached`]): a lock's (`acquire.rs`) and a
//! semaphore's (`semaphore.rs`).
//!
//! An acquisition runs in a task of its own, not in the caller's future,
//! because a caller may stop waiting at any point (its future dropped by a
//! `timeout` or `select!`) while the server goes on: a grant may be made,
//! or be on its way, at that very instant. The task outlives the caller,
//! hears that it left ([`Caller::left`]), and cleans up: it ends the wait,
//! and gives back whatever the server granted meanwhile.

use std::future::Future;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::error::{LockError, Result};
use crate::protocol::LockKind;

/// How long to wait for a held lock (or for permits).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    No,
    For(Duration),
    Forever,
}

impl From<Duration> for Wait {
    /// A zero wait is one attempt.
    fn from(wait: Duration) -> Wait {
        if wait.is_zero() {
            Wait::No
        } else {
            Wait::For(wait)
        }
    }
}

/// What a caller asks for: one lock acquisition's arguments.
#[derive(Debug)]
pub(crate) struct Ask {
    /// A lock, or a read or write hold of a read-write lock.
    pub(crate) kind: LockKind,
    pub(crate) name: String,
    pub(crate) owner: String,
    /// The caller's lease (no watchdog); None: the watchdog's, renewed.
    pub(crate) lease: Option<Duration>,
    pub(crate) wait: Wait,
    /// With a fencing token (`TOKEN`).
    pub(crate) fenced: bool,
}

/// The caller of a [`detached`] task, as the task sees it.
pub(crate) struct Caller<T> {
    reply: oneshot::Sender<Result<T>>,
}

impl<T> Caller<T> {
    /// Resolves once the caller stopped waiting (its future was dropped).
    pub(crate) async fn left(&mut self) {
        self.reply.closed().await
    }

    /// Hands the caller its result. If it left meanwhile (now, or before it
    /// reads it), the result is dropped here: whatever it holds is given
    /// back by its own drop.
    pub(crate) fn answer(self, result: Result<T>) {
        drop(self.reply.send(result))
    }
}

/// Runs `task` on `runtime`, in a task of its own that the caller's future
/// cannot cut short, and awaits what it answers ([`Caller::answer`]). A
/// task that ends without answering (its caller left) is awaited by no
/// one; one dropped unfinished means the runtime shut down.
pub(crate) async fn detached<T, F>(
    runtime: &tokio::runtime::Handle,
    task: impl FnOnce(Caller<T>) -> F,
) -> Result<T>
where
    F: Future<Output = ()> + Send + 'static,
{
    let (reply, answer) = oneshot::channel();
    runtime.spawn(task(Caller { reply }));
    // The answer only errs if the task was dropped: the runtime shut down.
    answer.await.unwrap_or_else(|_| {
        Err(LockError::Runtime(std::io::Error::other(
            "the client's runtime shut down during the acquisition",
        )))
    })
}
