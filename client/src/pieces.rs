//! Waiting in pieces (`docs/waiting.md`): the one way every kind waits on
//! the server (a lock's `LOCK.ACQUIRE ... WAIT`, a semaphore's or permits'
//! acquire, a latch's `LOCK.AWAIT`).
//!
//! A wait is cut into pieces, each a waiting command on a connection of its
//! own answered within [`Options::wait_piece`](crate::Options::wait_piece),
//! so no driver, proxy or PING check ever sees a command outstanding
//! longer. Half a piece after a piece went out, the next goes out on a
//! second connection: the server gives it the first one's place in the
//! queue and answers the first at once as timed out. So the waiter is never
//! absent from the queue, and nobody who arrived after it overtakes it. A
//! piece that ends before its successor went out (a stalled client) leaves
//! its place kept on the server, and the next piece takes it back.
//!
//! Each piece runs in a task of its own, so its reply is read even after
//! the wait moved on. A piece can cross its predecessor's grant (sent just
//! before the grant was read): the kind is handed those crossing replies
//! (a lock re-entered, to give back; a waiter id's grant told again).
//!
//! A caller that gives up says so through `give_up`: the wait is cancelled
//! with `LOCK.CANCEL` on another connection (never by killing the waiting
//! one), every piece's reply is read (a piece sent before the cancel but
//! read after it is cancelled again), and the kind is handed what was
//! granted, to give back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Cmd, RedisError, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::conn::{timeout_error, ClientId};
use crate::counted::Sent;
use crate::error::{LockError, Result};
use crate::inner::Inner;
use crate::protocol::{self, CancelAnswer};

/// How many times a give-up cancels, for pieces still on their way.
const CANCEL_ROUNDS: usize = 3;

/// One kind's waiting command, as the pieces send it.
pub(crate) struct Waiting<'a> {
    /// The object's name (its key).
    pub(crate) name: &'a str,
    /// What `LOCK.CANCEL` names: the owner, or the waiter id.
    pub(crate) identity: &'a str,
    /// The command of a piece that waits `wait-ms` (never 0).
    pub(crate) command: &'a (dyn Fn(u64) -> Cmd + Send + Sync),
    /// Whether a reply ends the wait: a grant (a latch's end too).
    pub(crate) grants: &'a (dyn Fn(&Value) -> Result<bool> + Send + Sync),
    /// How much longer than its `WAIT` a piece's reply may take (a grant
    /// waiting for replicas).
    pub(crate) extra: Duration,
}

/// How a wait in pieces ended.
pub(crate) struct Ended {
    pub(crate) outcome: Outcome,
    /// Pieces whose connection failed on the way (dropped; their `CLIENT
    /// ID`s): each may have been granted before it failed.
    pub(crate) broken: Vec<Option<ClientId>>,
}

pub(crate) enum Outcome {
    /// A piece was granted: its reply, when it went out, and the replies of
    /// later pieces that crossed the grant.
    Granted {
        reply: Value,
        sent: Instant,
        crossed: Vec<Value>,
    },
    /// The caller's deadline came without a grant.
    NotGranted,
    /// The server refused a piece (an error reply).
    Refused(RedisError),
    /// Pieces failed more often than the retries allow: the last failure.
    Failed(RedisError),
    /// The caller gave up: what each cancel said (`Err`: the server refused
    /// it, an older module), the pieces' replies, and the pieces never
    /// answered (their connections dropped).
    GaveUp {
        cancels: Vec<std::result::Result<CancelAnswer, RedisError>>,
        replies: Vec<Value>,
        unanswered: Vec<Option<ClientId>>,
    },
}

/// A piece in flight: its command runs in a task that owns its connection
/// (aborted, so the connection closed, when the piece is dropped unread).
struct Piece {
    sent: Instant,
    wait: Duration,
    id: Option<ClientId>,
    task: JoinHandle<Sent>,
}

impl Piece {
    /// Its reply (read once).
    async fn reply(&mut self) -> Sent {
        match (&mut self.task).await {
            Ok(sent) => sent,
            Err(_) => Sent::Broken(timeout_error("the wait's task")),
        }
    }
}

impl Drop for Piece {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What happened next to a wait.
enum Event {
    GiveUp,
    Reply(Sent),
    Overlap,
}

/// Resolves once the caller gives up (never if the signal is gone).
async fn gave_up(give_up: &mut watch::Receiver<bool>) {
    if give_up.wait_for(|gave_up| *gave_up).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// One wait in progress.
struct Run<'a, 'w> {
    inner: &'a Arc<Inner>,
    w: &'a Waiting<'w>,
    deadline: Option<Instant>,
    broken: Vec<Option<ClientId>>,
    attempts: u32,
    /// The last piece failed: the next waits the retry pause first, and
    /// goes out even past the deadline (it learns what the failed one got).
    failed: bool,
}

/// Waits for what `w` asks, in pieces, until it is granted, `deadline`
/// comes (None: forever), or the caller gives up (`give_up`).
pub(crate) async fn wait(
    inner: &Arc<Inner>,
    w: &Waiting<'_>,
    deadline: Option<Instant>,
    give_up: &mut watch::Receiver<bool>,
) -> Result<Ended> {
    let mut run = Run {
        inner,
        w,
        deadline,
        broken: Vec::new(),
        attempts: 0,
        failed: false,
    };
    let mut current = run.start(true).await?;
    let mut overlapped = false;
    loop {
        let overlap_at =
            (!overlapped && run.more_after(&current)).then(|| current.sent + run.piece() / 2);
        let event = tokio::select! {
            biased;
            () = gave_up(give_up) => Event::GiveUp,
            sent = current.reply() => Event::Reply(sent),
            () = tokio::time::sleep_until(overlap_at.unwrap_or_else(Instant::now).into()),
                if overlap_at.is_some() => Event::Overlap,
        };
        let outcome = match event {
            Event::GiveUp => run.give_up(vec![current]).await,
            Event::Reply(sent) => match run.answered(&current, sent)? {
                Some(outcome) => outcome,
                None if run.more_after(&current) || run.failed => {
                    // Ended before its successor went out: its place is kept
                    // on the server, and the next piece takes it back.
                    current = run.start(false).await?;
                    overlapped = false;
                    continue;
                }
                None => Outcome::NotGranted,
            },
            Event::Overlap => {
                let Ok(next) = run.start(false).await else {
                    overlapped = true; // no second connection: wait on this one
                    continue;
                };
                match run.handed_over(current, next, give_up).await? {
                    Ok(next) => {
                        current = next;
                        overlapped = false;
                        continue;
                    }
                    Err(outcome) => outcome,
                }
            }
        };
        return Ok(Ended {
            outcome,
            broken: run.broken,
        });
    }
}

impl Run<'_, '_> {
    fn piece(&self) -> Duration {
        self.inner.counted.options.wait_piece
    }

    /// Whether the caller's deadline lies beyond `piece`'s end.
    fn more_after(&self, piece: &Piece) -> bool {
        self.deadline.is_none_or(|d| piece.sent + piece.wait < d)
    }

    /// Sends the next piece on a connection of its own. The `first` piece,
    /// and one after a failed piece, go out even when the deadline has come
    /// (waiting 1 ms): a wait of nothing still asks once, and a failed
    /// piece's outcome is learnt (the place it kept, the grant remembered).
    async fn start(&mut self, first: bool) -> Result<Piece> {
        let counted = &self.inner.counted;
        let after_failure = std::mem::take(&mut self.failed);
        if after_failure {
            tokio::time::sleep(counted.options.retry_interval).await;
        }
        let left = match self.deadline {
            Some(deadline) => deadline.saturating_duration_since(Instant::now()),
            None => self.piece(),
        };
        if left.is_zero() && !first && !after_failure {
            return Err(LockError::Protocol("a piece past the deadline".into()));
        }
        let wait = left.min(self.piece());
        let h = loop {
            match counted.conns.dedicated().await {
                Ok(h) => break h,
                Err(e) => counted.retry(&mut self.attempts, e).await?,
            }
        };
        let cmd = (self.w.command)(protocol::wait_ms(wait));
        let within = wait + counted.options.wait_margin + self.w.extra;
        let (inner, id, sent) = (self.inner.clone(), h.id, Instant::now());
        let task = self.inner.runtime.spawn(async move {
            let counted = &inner.counted;
            let sent = counted.send(&h, &cmd, Some(within)).await;
            if matches!(sent, Sent::Reply(_) | Sent::Refused(_)) {
                counted.conns.give_back(h);
            }
            sent
        });
        Ok(Piece {
            sent,
            wait,
            id,
            task,
        })
    }

    /// `piece` was answered `sent`: the outcome, or `None` when it ended
    /// without one (not granted in its time, or its connection failed and
    /// a retry is due: then `failed`).
    fn answered(&mut self, piece: &Piece, sent: Sent) -> Result<Option<Outcome>> {
        Ok(match sent {
            Sent::Reply(reply) if (self.w.grants)(&reply)? => Some(Outcome::Granted {
                reply,
                sent: piece.sent,
                crossed: Vec::new(),
            }),
            Sent::Reply(_) => None,
            Sent::Refused(e) => Some(Outcome::Refused(e)),
            Sent::WrongRole(e) | Sent::Broken(e) => {
                self.broken.push(piece.id);
                self.attempts += 1;
                self.failed = true;
                if self.attempts > self.inner.counted.options.retries {
                    Some(Outcome::Failed(e))
                } else {
                    None
                }
            }
        })
    }

    /// `next` went out to take `current`'s place: reads `current`'s reply,
    /// answered at once as timed out (then `next` waits on: `Ok(next)`), or
    /// a grant `next` crossed, or a refusal (`Err(outcome)`).
    async fn handed_over(
        &mut self,
        mut current: Piece,
        mut next: Piece,
        give_up: &mut watch::Receiver<bool>,
    ) -> Result<std::result::Result<Piece, Outcome>> {
        let sent = tokio::select! {
            biased;
            () = gave_up(give_up) => return Ok(Err(self.give_up(vec![current, next]).await)),
            sent = current.reply() => sent,
        };
        match self.answered(&current, sent)? {
            None => Ok(Ok(next)),
            Some(Outcome::Granted { reply, sent, .. }) => {
                // `next` crossed the grant: read what it was told.
                let crossed = match next.reply().await {
                    Sent::Reply(v) => vec![v],
                    Sent::Broken(_) | Sent::WrongRole(_) => {
                        self.broken.push(next.id);
                        Vec::new()
                    }
                    Sent::Refused(_) => Vec::new(),
                };
                Ok(Err(Outcome::Granted {
                    reply,
                    sent,
                    crossed,
                }))
            }
            // Refused (a cancel from elsewhere, a key that changed type):
            // `next` ends the same way, or granted.
            Some(refused) => {
                let told = next.reply().await;
                match self.answered(&next, told)? {
                    Some(granted @ Outcome::Granted { .. }) => Ok(Err(granted)),
                    _ => Ok(Err(refused)),
                }
            }
        }
    }

    /// The caller gave up: cancels the wait (again while a piece is still
    /// on its way: it may have reached the server after the cancel), reads
    /// every piece's reply, and drops the pieces never answered.
    async fn give_up(&mut self, mut pending: Vec<Piece>) -> Outcome {
        let counted = &self.inner.counted;
        let cancel = protocol::cancel(self.w.name, self.w.identity);
        let (mut cancels, mut replies) = (Vec::new(), Vec::new());
        for _ in 0..CANCEL_ROUNDS {
            match counted.simple(&cancel).await {
                Ok(reply) => match protocol::parse_cancel(&reply) {
                    Ok(told) => cancels.push(Ok(told)),
                    Err(_) => break,
                },
                Err(LockError::Server(e)) => {
                    cancels.push(Err(e));
                    break;
                }
                Err(_) => break, // no connection: the pieces are dropped below
            }
            let mut still = Vec::new();
            for mut piece in pending {
                let within = counted.options.command_timeout;
                match tokio::time::timeout(within, piece.reply()).await {
                    Ok(Sent::Reply(reply)) => replies.push(reply),
                    Ok(Sent::Refused(_)) => {} // CANCELLED
                    Ok(Sent::WrongRole(_) | Sent::Broken(_)) => self.broken.push(piece.id),
                    Err(_) => still.push(piece),
                }
            }
            pending = still;
            if pending.is_empty() {
                break;
            }
        }
        Outcome::GaveUp {
            cancels,
            replies,
            unanswered: pending.iter().map(|p| p.id).collect(),
        }
    }
}
