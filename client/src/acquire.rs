//! Taking a lock: the one acquisition path every API uses (`lock`,
//! `try_lock`, the read-write lock's `read_lock` / `write_lock` and their
//! `try_`, their fenced and blocking forms, `MultiLock`). The ask's
//! [`LockKind`] picks the commands (`LOCK.ACQUIRE`, `LOCK.RACQUIRE`,
//! `LOCK.WACQUIRE`) and the hash field a read-back counts; nothing else
//! differs.
//!
//! An acquisition first tries once on the shared connection, then, if the
//! lock is busy and the caller waits, queues on the server with
//! `LOCK.ACQUIRE ... WAIT`, in pieces on connections of their own that
//! keep its place (`pieces.rs`). A send may break in transit: the hold
//! count decides whether it ran (`counted.rs`). It runs in a task of its
//! own (`request.rs`), so a caller that stops waiting cannot leave a lock
//! behind: a wait is cancelled (`LOCK.CANCEL`) and a grant that came first
//! given back; a first try is read back ([`LockClient::abandon`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Value;
use tokio::sync::watch;

use crate::client::LockClient;
use crate::conn::{ClientId, Handle};
use crate::counted::Outcome;
use crate::error::{refused, LockError, Result};
use crate::guard::LockGuard;
use crate::holds::{later, lease_end, Entry, Lost};
use crate::pieces::{self, Ended, Outcome as Waited, Waiting};
use crate::protocol::{self, Acquired, CancelAnswer, Holder, LockKind};
use crate::request::{detached, Ask, Wait};

/// When a grant's lease ends on the server, as far as the client can tell
/// ([`LockClient::grant_expiry`]).
enum Expiry {
    /// No earlier than this.
    Until(Instant),
    /// The lease could not be measured: about then, to be confirmed by a
    /// renewal at once.
    Unmeasured(Instant),
    /// The owner no longer held the lock when its lease was measured.
    Gone,
}

/// What an acquisition in progress has done, for [`LockClient::abandon`].
#[derive(Default)]
struct Progress {
    /// The entry whose operation lock it took, and the count it found.
    entry: Option<Arc<Entry>>,
    known: u64,
    /// Set once the wait in pieces began: a caller leaving then is seen by
    /// the wait itself, which cancels and gives back.
    waiting: bool,
    /// The shared connection the last acquire without `WAIT` went out on.
    /// A clean-up reads behind it there, or fences it: the shared slot may
    /// hold another connection by then, one not ordered after the acquire.
    sent_on: Option<Handle>,
}

type Tracker = Arc<Mutex<Progress>>;

fn progress(tracker: &Tracker) -> std::sync::MutexGuard<'_, Progress> {
    // Plain assignments only: a poisoned lock holds whole values.
    tracker
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One acquisition's fixed parts, for its waiting half.
struct Request<'a> {
    entry: &'a Arc<Entry>,
    /// The entry's hold count before this acquisition.
    known: u64,
    lease: Duration,
    lease_ms: u64,
    /// Whether the watchdog keeps the lock (no caller-given lease).
    watchdog: bool,
    fenced: bool,
    sync: Option<(u32, u64)>,
    /// How much longer than a plain command a synced grant may take.
    sync_time: Duration,
    deadline: Option<Instant>,
}

impl LockClient {
    /// Takes `name` for `owner`: the one acquisition path every API uses.
    ///
    /// The work runs in a task of its own, so a caller that stops waiting
    /// (its future dropped by a `timeout` or `select!`) cannot leave a lock
    /// behind: the task then finds out whether the server granted the lock
    /// meanwhile and, if so, gives it back ([`LockClient::abandon`]). A
    /// grant that completes after the caller left is released the same way,
    /// through its guard's drop.
    pub(crate) async fn acquire_as(&self, ask: Ask) -> Result<Option<LockGuard>> {
        let this = self.clone();
        detached(&self.inner.runtime, move |mut caller| async move {
            let tracker: Tracker = Arc::default();
            let (give_up, gave_up) = watch::channel(false);
            // Boxed, so that `drop(work)` below really drops it (and the
            // entry's operation lock it holds) before the clean-up.
            let mut work = Box::pin(this.acquire_inner(&ask, &tracker, gave_up));
            let finished = tokio::select! {
                biased;
                result = &mut work => Some(result),
                () = caller.left() => None,
            };
            match finished {
                // If the caller left meanwhile, the guard comes back here
                // and its drop releases the lock.
                Some(result) => caller.answer(result),
                // Waiting: the wait cancels itself and gives back what it
                // was granted (a guard it returns is dropped: released).
                None if progress(&tracker).waiting => {
                    let _ = give_up.send(true);
                    drop(work.as_mut().await);
                }
                None => {
                    drop(work);
                    this.abandon(&tracker).await;
                }
            }
        })
        .await
    }

    /// Cleans up after a caller that stopped waiting for an acquisition
    /// before it began to wait: the acquisition's future has been dropped
    /// (releasing the entry's operation lock) during its first try. A grant
    /// it made but did not record shows as `known + 1` on the server, and
    /// is released.
    async fn abandon(&self, tracker: &Tracker) {
        let (entry, known, sent_on) = {
            let p = progress(tracker);
            (p.entry.clone(), p.known, p.sent_on.clone())
        };
        let Some(entry) = entry else {
            return; // nothing was sent
        };
        let _op = entry.op.lock().await;
        if entry.state().holds() != known {
            return; // the grant was recorded: its guard releases it
        }
        let counted = &self.inner.counted;
        let found = match sent_on {
            // Read on the connection the acquire went out on, after it,
            // even if the shared slot moved on to another connection: a
            // read elsewhere could come before an acquire still delayed in
            // the network, which would then take the lock for nobody.
            Some(h) => counted.read_behind(&h, entry.holder()).await,
            None => Ok(known), // nothing was sent
        };
        if found == Ok(known + 1) {
            let release = protocol::release(entry.holder(), None);
            let within = counted.options.command_timeout;
            let _ = counted
                .run(
                    &release,
                    entry.holder(),
                    (known + 1, known),
                    &|_| {},
                    within,
                )
                .await;
        }
        if known == 0 {
            self.inner.holds.retire(&entry);
        }
    }

    async fn acquire_inner(
        &self,
        ask: &Ask,
        tracker: &Tracker,
        mut give_up: watch::Receiver<bool>,
    ) -> Result<Option<LockGuard>> {
        let started = Instant::now();
        let (name, owner) = (ask.name.as_str(), ask.owner.as_str());
        let (lease, wait, fenced) = (ask.lease, ask.wait, ask.fenced);
        let counted = &self.inner.counted;
        let options = &counted.options;
        let watchdog = lease.is_none();
        let lease = lease.unwrap_or(options.watchdog_lease);
        let lease_ms = protocol::lease_ms(lease)?;
        let sync = match (ask.kind, options.sync_args()?) {
            (LockKind::Lock, sync) => sync,
            (_, Some((replicas, _))) if replicas > 0 => {
                return Err(LockError::InvalidArgument(
                    "synced grants (Options::sync_replicas) are not offered for read-write \
                     locks: the module's LOCK.RACQUIRE and LOCK.WACQUIRE take no SYNC"
                        .into(),
                ))
            }
            (_, _) => None,
        };
        let sync_time = match sync {
            Some(_) => options.sync_time(),
            None => Duration::ZERO,
        };
        if fenced && ask.kind == LockKind::Read {
            return Err(LockError::InvalidArgument(
                "a read hold has no fencing token: only writes are fenced".into(),
            ));
        }
        if owner.is_empty() {
            return Err(LockError::InvalidArgument(
                "an owner id must not be empty".into(),
            ));
        }
        if fenced {
            // Refused before anything is sent, as the module would.
            protocol::token_key(name)?;
        }
        let deadline = match wait {
            Wait::No => Some(started),
            // A wait too long for the clock to represent is a wait forever.
            Wait::For(d) => started.checked_add(d),
            Wait::Forever => None,
        };
        loop {
            let entry = self.inner.holds.entry(name, owner, ask.kind);
            let _op = entry.op.lock().await;
            let (retired, known) = {
                let state = entry.state();
                (state.is_retired(), state.holds())
            };
            if retired {
                continue; // released or lost meanwhile: take a fresh entry
            }
            {
                let mut p = progress(tracker);
                p.entry = Some(entry.clone());
                p.known = known;
            }

            // One attempt without waiting, on the shared connection.
            let sent = Instant::now();
            let cmd = protocol::acquire(entry.holder(), lease_ms, None, fenced, sync);
            // The module answers a synced grant once replicas acknowledged
            // it, or undid it: up to the sync timeout later.
            let within = options.command_timeout + sync_time;
            let record = |h: &Handle| progress(tracker).sent_on = Some(h.clone());
            let acquired = match counted
                .run(&cmd, entry.holder(), (known, known + 1), &record, within)
                .await?
            {
                Outcome::Reply(v) => protocol::parse_acquire(v, fenced)?,
                Outcome::AppliedUnseen if fenced => {
                    Acquired::Granted(counted.read_token(name).await?)
                }
                Outcome::AppliedUnseen => Acquired::Granted(None),
            };
            if let Acquired::Granted(token) = acquired {
                let expiry = self.grant_expiry(entry.holder(), sent, lease).await;
                return Ok(Some(self.granted(&entry, expiry, watchdog, token)));
            }
            if matches!(wait, Wait::No) {
                return Ok(None);
            }
            let request = Request {
                entry: &entry,
                known,
                lease,
                lease_ms,
                watchdog,
                fenced,
                sync,
                sync_time,
                deadline,
            };
            progress(tracker).waiting = true;
            return self.wait_for(&request, &mut give_up).await;
        }
    }

    /// The waiting half of an acquisition: `LOCK.ACQUIRE ... WAIT` in
    /// pieces that keep the owner's place (`pieces.rs`). Called with the
    /// entry's operation lock held.
    ///
    /// The replies alone tell the outcome, unless a piece crossed a grant
    /// (a re-entry: two holds), a piece's connection failed (it may have
    /// been granted unseen), or the caller gave up: then the hold count,
    /// read after the failed connections are fenced, says how many holds
    /// this acquisition gained. One is kept (a grant), the others given
    /// back; all of them when the caller gave up.
    async fn wait_for(
        &self,
        request: &Request<'_>,
        give_up: &mut watch::Receiver<bool>,
    ) -> Result<Option<LockGuard>> {
        let entry = request.entry;
        let who = entry.holder();
        let command = |wait_ms| {
            let (lease_ms, fenced) = (request.lease_ms, request.fenced);
            protocol::acquire(who, lease_ms, Some(wait_ms), fenced, request.sync)
        };
        let grants = |reply: &Value| granted(reply, request.fenced);
        let waiting = Waiting {
            name: who.name,
            identity: who.owner,
            command: &command,
            grants: &grants,
            extra: request.sync_time,
        };
        let Ended { outcome, broken } =
            pieces::wait(&self.inner, &waiting, request.deadline, give_up).await?;
        let uncertain = !broken.is_empty();
        match outcome {
            Waited::Granted {
                reply,
                sent,
                crossed,
            } => {
                let mut token = token_of(reply, request.fenced)?;
                let reentered = crossed.iter().any(|r| grants(r).unwrap_or(false));
                if reentered || uncertain {
                    let gained = self.gained(request, &broken).await?;
                    self.give_back_holds(who, request.known + gained, gained.saturating_sub(1))
                        .await?;
                    if uncertain && request.fenced {
                        token = self.inner.counted.read_token(who.name).await?;
                    }
                }
                Ok(Some(self.grant(request, sent, token).await))
            }
            Waited::NotGranted | Waited::Failed(_) if uncertain => {
                // A failed piece may have been granted: the count says.
                let sent = Instant::now();
                match self.gained(request, &broken).await? {
                    0 => match outcome {
                        Waited::Failed(e) => Err(LockError::Connection(e)),
                        _ => Ok(None),
                    },
                    gained => {
                        self.give_back_holds(who, request.known + gained, gained - 1)
                            .await?;
                        let token = match request.fenced {
                            true => self.inner.counted.read_token(who.name).await?,
                            false => None,
                        };
                        Ok(Some(self.grant(request, sent, token).await))
                    }
                }
            }
            Waited::NotGranted => Ok(None),
            Waited::Failed(e) => Err(LockError::Connection(e)),
            Waited::Refused(e) if protocol::is_cancelled(&e) => Err(LockError::Server(e)),
            Waited::Refused(e) => Err(refused(who.name, e)),
            Waited::GaveUp {
                cancels,
                replies,
                unanswered,
            } => {
                // The caller left: whatever was granted goes back. Only a
                // grant seen, a piece unanswered or failed, or a cancel the
                // server does not know (an older module) needs the count.
                let told_granted = cancels
                    .iter()
                    .any(|c| matches!(c, Ok(CancelAnswer::Granted(_)) | Err(_)));
                let seen = replies.iter().any(|r| grants(r).unwrap_or(false));
                if told_granted || seen || uncertain || !unanswered.is_empty() {
                    let mut dead = broken;
                    dead.extend(unanswered);
                    let gained = self.gained(request, &dead).await?;
                    self.give_back_holds(who, request.known + gained, gained)
                        .await?;
                }
                Ok(None)
            }
        }
    }

    /// How many holds the acquisition `request` gained, by the server's
    /// hold count, read once the connections `dead` (dropped: pieces that
    /// failed or were never answered) are fenced (`counted.rs`).
    async fn gained(&self, request: &Request<'_>, dead: &[Option<ClientId>]) -> Result<u64> {
        let counted = &self.inner.counted;
        let who = request.entry.holder();
        if let Ok(shared) = counted.conns.shared().await {
            let within = counted.options.command_timeout;
            for id in dead.iter().skip(1) {
                counted.conns.fence(*id, &shared, within).await;
            }
        }
        let first = dead.first().copied().flatten();
        let found = counted.read_back(first, !dead.is_empty(), who).await;
        let found = found.map_err(|why| LockError::Uncertain {
            name: who.name.to_string(),
            detail: format!(
                "a wait ended without a clear outcome; reading the hold count back: {why}"
            ),
            source: redis::RedisError::from(std::io::Error::other(why)),
        })?;
        Ok(found.saturating_sub(request.known))
    }

    /// Gives back `holds` of `who`'s holds, counted `from` down.
    async fn give_back_holds(&self, who: Holder<'_>, from: u64, holds: u64) -> Result<()> {
        let counted = &self.inner.counted;
        let release = protocol::release(who, None);
        for given in 0..holds {
            let count = from - given;
            let within = counted.options.command_timeout;
            counted
                .run(&release, who, (count, count - 1), &|_| {}, within)
                .await?;
        }
        Ok(())
    }

    /// Records the grant of a wait sent at `sent`, and makes its guard.
    async fn grant(&self, request: &Request<'_>, sent: Instant, token: Option<i64>) -> LockGuard {
        let entry = request.entry;
        let expiry = self.grant_expiry(entry.holder(), sent, request.lease).await;
        self.granted(entry, expiry, request.watchdog, token)
    }

    /// When the lease of a grant to `owner`, asked for at `sent`, ends on
    /// the server at the earliest.
    ///
    /// The server started the lease when it granted the lock: no earlier
    /// than `sent`, no later than now (the reply's arrival). Counting from
    /// `sent` is safe, and it is what a grant answered at once gets. A
    /// grant that took a third of the lease or more to arrive (a wait
    /// handed the lock over late, a slow server, retries) would be due for
    /// renewal, or even expired, on arrival by that count: a lock held
    /// fresh would be reported lost and never renewed. Its lease is
    /// measured instead: `LOCK.INFO`, sent at `asked`, shows the lease left
    /// at some instant after `asked`, so the lease ends no earlier than
    /// `asked` + that, again a safe bound, and a tight one.
    async fn grant_expiry(&self, who: Holder<'_>, sent: Instant, lease: Duration) -> Expiry {
        let received = Instant::now();
        if sent
            .checked_add(lease / 3)
            .is_some_and(|due| received < due)
        {
            return Expiry::Until(lease_end(sent, lease));
        }
        let asked = Instant::now();
        let info = self.inner.counted.simple(&protocol::info(who.name)).await;
        match info.map(|v| protocol::info_lease_left(&v, who)) {
            Ok(Some(Some(left))) => Expiry::Until(lease_end(asked, left.min(lease))),
            Ok(Some(None)) => Expiry::Gone,
            // The lease could not be measured. The grant is certain and a
            // few moments old, so it is not reported lost: its lease is
            // counted from the reply's arrival (later than the server's
            // start by the reply's transit only) and the watchdog renews it
            // at once, which restores a safe count.
            Ok(None) | Err(_) => Expiry::Unmeasured(later(received, lease)),
        }
    }

    /// Records a grant (called with the entry's operation lock held) and
    /// makes its guard.
    fn granted(
        &self,
        entry: &Arc<Entry>,
        expiry: Expiry,
        watchdog: bool,
        token: Option<i64>,
    ) -> LockGuard {
        let now = Instant::now();
        let (expires, renew_now) = match expiry {
            Expiry::Until(at) => (at, false),
            Expiry::Unmeasured(at) => (at, true),
            Expiry::Gone => (now, true),
        };
        let renewed_to = watchdog.then_some(self.inner.counted.options.watchdog_lease);
        {
            let mut state = entry.state();
            // A read re-entry adds a hold with a lease of its own; the
            // earlier holds keep theirs (a lock's or a write's re-entry
            // extends the one lease). The entry counts the earliest end.
            let expires = if entry.kind == LockKind::Read && state.holds() > 0 {
                expires.min(state.expires())
            } else {
                expires
            };
            state.granted(expires, renewed_to, renew_now, now);
        }
        self.start_watchdog();
        self.inner.wake.notify_one();
        let guard = LockGuard::new(self.clone(), entry.clone(), token);
        if matches!(expiry, Expiry::Gone) {
            // Forced or deleted between the grant and the measurement.
            self.inner.holds.mark_lost(entry, Lost::NotHeld);
        } else if let Some(tracking) = &self.inner.tracking {
            tracking.watch(entry);
        }
        guard
    }
}

/// Whether an acquire's reply grants (with `TOKEN`, the pair's shape).
fn granted(reply: &Value, fenced: bool) -> Result<bool> {
    let acquired = protocol::parse_acquire(reply.clone(), fenced)?;
    Ok(matches!(acquired, Acquired::Granted(_)))
}

/// The fencing token of a granting reply.
fn token_of(reply: Value, fenced: bool) -> Result<Option<i64>> {
    match protocol::parse_acquire(reply, fenced)? {
        Acquired::Granted(token) => Ok(token),
        Acquired::Busy => Err(LockError::Protocol("a grant that was no grant".into())),
    }
}
