//! Semaphores (Redisson's `RSemaphore`) and permits with a lease
//! (`RPermitExpirableSemaphore`), on the module's `LOCK.SEM*` and
//! `LOCK.PERMIT*` commands and Redisson's layout.
//!
//! A [`Semaphore`]'s permits have no owner and no lease, as in Redisson:
//! whoever releases gives back permits, taken by anyone. A
//! [`PermitExpirableSemaphore`] hands out permits with ids and a lease,
//! held by a [`Permits`] guard; without a caller-given lease the client's
//! one watchdog renews them (`LOCK.PERMITRENEW`), and the guard says when
//! they are lost, as a [`LockGuard`](crate::LockGuard) does.
//!
//! Waiting (`... WAIT`) happens in the server's FIFO queue, in pieces on
//! connections of their own that keep the waiter's place (`pieces.rs`; the
//! acquisition names itself by a waiter id, `WAITER`), in a task of its
//! own: a caller that stops waiting (its future dropped) has the wait
//! cancelled (`LOCK.CANCEL`), and permits granted just then are given back,
//! not leaked.
//!
//! None of these commands can be resent safely after a failure in transit
//! (nothing counts them per owner, as a lock's hold count does): such a
//! failure is [`LockError::Unconfirmed`], except for giving permits back by
//! id, which is safe to repeat.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Cmd, Value};
use tokio::sync::watch;

use crate::client::LockClient;
use crate::counted::unconfirmed;
use crate::error::{refused, LockError, Result};
use crate::guard::Held;
use crate::holds::{later, lease_end, Entry, Lost};
use crate::pieces::{self, Outcome, Waiting};
use crate::protocol::{self, CancelAnswer};
use crate::request::{detached, Wait};

/// A semaphore (Redisson's `RSemaphore`): a count of permits, taken and
/// given back by anyone, with no owner and no lease (nothing renews them;
/// permits taken and never released stay taken). Waiting is FIFO on the
/// server: a newcomer never overtakes a waiter, even one that wants more
/// permits than are free.
///
/// ```no_run
/// # async fn demo(locks: redis_lock_client::LockClient) -> Result<(), redis_lock_client::LockError> {
/// let pool = locks.semaphore("db-connections");
/// pool.try_set_permits(10, None).await?; // false if it was set already
/// pool.acquire(1).await?;                // waits in the server's queue
/// // ... use one of the ten ...
/// pool.release(1).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    client: LockClient,
    name: String,
}

/// A semaphore whose permits have ids and a lease (Redisson's
/// `RPermitExpirableSemaphore`): a permit whose holder vanished comes back
/// when its lease ends. Taken permits are held by a [`Permits`] guard;
/// without a caller-given lease the client's watchdog renews them
/// ([`Options::watchdog_lease`](crate::Options::watchdog_lease)), and the
/// guard's [`Permits::lost`] says when they are gone.
///
/// ```no_run
/// # async fn demo(locks: redis_lock_client::LockClient) -> Result<(), redis_lock_client::LockError> {
/// # async fn call_the_api() {}
/// let quota = locks.permit_expirable_semaphore("api-quota");
/// quota.try_set_permits(5, None).await?;
/// let permit = quota.acquire(1, None).await?; // the watchdog keeps it
/// tokio::select! {
///     _ = call_the_api() => permit.release().await?,
///     why = permit.lost() => eprintln!("permit lost ({why})"),
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    /// The semaphore's count of free permits, which is a plain
    /// semaphore's (the leased ones live in `{name}:timeout`).
    free: Semaphore,
}

impl std::fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermitExpirableSemaphore")
            .field("client", &self.free.client)
            .field("name", &self.free.name)
            .finish()
    }
}

impl LockClient {
    /// The semaphore `name` (Redisson's `getSemaphore`): a handle, nothing
    /// is sent until it is used.
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore {
            client: self.clone(),
            name: name.into(),
        }
    }

    /// The permit-expirable semaphore `name` (Redisson's
    /// `getPermitExpirableSemaphore`): a handle, nothing is sent until it
    /// is used.
    pub fn permit_expirable_semaphore(&self, name: impl Into<String>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore {
            free: self.semaphore(name),
        }
    }

    /// A command that must not run twice, on this client's connections.
    pub(crate) async fn once(&self, cmd: &Cmd, name: &str) -> Result<Value> {
        self.inner.counted.once(cmd, name).await
    }

    /// [`LockClient::once`], its reply read by `parse` (`parse_flag`,
    /// `parse_int`, `parse_count`: given the command's name for errors).
    pub(crate) async fn once_parsed<T>(
        &self,
        cmd: &Cmd,
        name: &str,
        parse: fn(&str, &Value) -> Result<T>,
    ) -> Result<T> {
        let reply = self.once(cmd, name).await?;
        parse(&protocol::command_name(cmd), &reply)
    }

    /// Takes permits, in a task of its own: one try on the shared
    /// connection, then, if none are free and the caller waits, a wait in
    /// the server's queue in pieces (`pieces.rs`) under a waiter id of its
    /// own. Returns the reply that granted them and when its command was
    /// sent; None when none were had within the wait.
    ///
    /// A caller that stops waiting (its future dropped) cannot leave
    /// permits behind: the wait is cancelled (`LOCK.CANCEL`), and permits
    /// the cancel or a piece's reply says were granted are given back; a
    /// grant whose caller left as it came is given back too.
    async fn take(&self, take: Take, wait: Wait) -> Result<Option<(Value, Instant)>> {
        let this = self.clone();
        let got = detached(&self.inner.runtime, move |mut caller| async move {
            let (give_up, mut gave_up) = watch::channel(false);
            let attempt = this.take_or_wait(&take, wait, &mut gave_up);
            tokio::pin!(attempt);
            let result = tokio::select! {
                biased;
                result = &mut attempt => result,
                () = caller.left() => {
                    // A first try is let finish (no wait follows it); a
                    // wait cancels itself and gives back.
                    let _ = give_up.send(true);
                    attempt.await
                }
            };
            // A grant travels as a `Grant`: if the caller left (now, or
            // before it reads the channel), its drop gives the permits back.
            let result = result.map(|got| {
                got.map(|(reply, sent)| Grant {
                    back: take.granted(&reply).ok().flatten(),
                    client: this.clone(),
                    name: take.name.clone(),
                    reply,
                    sent,
                })
            });
            caller.answer(result);
        })
        .await?;
        Ok(got.map(Grant::keep))
    }

    /// One try, then (unless the caller already left) the wait in pieces.
    async fn take_or_wait(
        &self,
        take: &Take,
        wait: Wait,
        give_up: &mut watch::Receiver<bool>,
    ) -> Result<Option<(Value, Instant)>> {
        let started = Instant::now();
        let sent = Instant::now();
        let first = self.once(&take.command(None, None), &take.name).await?;
        if take.granted(&first)?.is_some() {
            return Ok(Some((first, sent)));
        }
        let deadline = match wait {
            Wait::No => return Ok(None),
            Wait::For(wait) => match started.checked_add(wait) {
                Some(deadline) if deadline > Instant::now() => Some(deadline),
                Some(_) => return Ok(None),
                None => None,
            },
            Wait::Forever => None,
        };
        if *give_up.borrow() {
            return Ok(None); // nobody to wait for
        }
        let waiter = protocol::new_waiter_id();
        let command = |wait_ms| take.command(Some(wait_ms), Some(&waiter));
        let grants = |reply: &Value| Ok(take.granted(reply)?.is_some());
        let waiting = Waiting {
            name: &take.name,
            identity: &waiter,
            command: &command,
            grants: &grants,
            extra: Duration::ZERO,
        };
        let ended = pieces::wait(&self.inner, &waiting, deadline, give_up).await?;
        match ended.outcome {
            // A piece that crossed the grant was told the same grant (the
            // module remembers it for the waiter id).
            Outcome::Granted { reply, sent, .. } => Ok(Some((reply, sent))),
            Outcome::NotGranted => Ok(None),
            Outcome::Refused(e) if protocol::is_unknown(&e) => {
                Err(protocol::module_too_old("WAITER", &e))
            }
            Outcome::Refused(e) => Err(refused(&take.name, e)),
            Outcome::Failed(e) => Err(unconfirmed(&take.name, &command(1), e)),
            Outcome::GaveUp {
                cancels, replies, ..
            } => {
                self.give_back_permits(take, &cancels, &replies).await;
                Ok(None)
            }
        }
    }

    /// Gives back what a wait given up was granted: one grant at most (a
    /// waiter id's pieces are told the one grant, and refused once it is
    /// cancelled), as the cancel (`["granted", n]`, `["granted", id...]`)
    /// or a piece's reply says.
    async fn give_back_permits(
        &self,
        take: &Take,
        cancels: &[std::result::Result<CancelAnswer, redis::RedisError>],
        replies: &[Value],
    ) {
        let mut ids: Vec<String> = Vec::new();
        let mut granted = false;
        for told in cancels {
            if let Ok(CancelAnswer::Granted(what)) = told {
                granted = true;
                ids.extend(
                    what.iter()
                        .filter_map(|id| redis::from_redis_value::<String>(id.clone()).ok()),
                );
            }
        }
        for reply in replies {
            if let Ok(Some(_)) = take.granted(reply) {
                granted = true;
                if let Ok(Some(got)) = protocol::parse_permit_ids(reply, take.permits) {
                    ids.extend(got);
                }
            }
        }
        if !granted {
            return;
        }
        let back = match take.lease_ms {
            None => protocol::sem_release(&take.name, take.permits),
            Some(_) => {
                ids.sort();
                ids.dedup();
                protocol::permit_release(&take.name, &ids)
            }
        };
        let _ = self.once(&back, &take.name).await;
    }
}

/// Permits granted to a caller that may have left: given back when
/// dropped, unless the caller kept them ([`Grant::keep`]).
struct Grant {
    client: LockClient,
    name: String,
    reply: Value,
    sent: Instant,
    /// The command that gives them back; None once kept.
    back: Option<Cmd>,
}

impl Grant {
    /// The reply that granted them and when its command was sent: the
    /// caller has them now.
    fn keep(mut self) -> (Value, Instant) {
        self.back = None;
        (std::mem::replace(&mut self.reply, Value::Nil), self.sent)
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        let Some(back) = self.back.take() else {
            return;
        };
        let (client, name) = (self.client.clone(), std::mem::take(&mut self.name));
        let runtime = client.inner.runtime.clone();
        runtime.spawn(async move {
            let _ = client.once(&back, &name).await;
        });
    }
}

/// What a `take` asks for: how many permits of which semaphore, for
/// making its command, reading its reply and giving the permits back.
#[derive(Clone, Debug)]
struct Take {
    name: String,
    permits: u64,
    /// A permit-expirable semaphore's lease; None: a plain semaphore.
    lease_ms: Option<u64>,
}

impl Take {
    /// `LOCK.SEMACQUIRE` or `LOCK.PERMITACQUIRE`, with `WAIT wait-ms` and
    /// `WAITER waiter-id`.
    fn command(&self, wait_ms: Option<u64>, waiter: Option<&str>) -> Cmd {
        let cmd = match self.lease_ms {
            None => protocol::sem_acquire(&self.name, self.permits, wait_ms),
            Some(lease) => protocol::permit_acquire(&self.name, self.permits, Some(lease), wait_ms),
        };
        match waiter {
            Some(waiter) => protocol::with_waiter(cmd, waiter),
            None => cmd,
        }
    }

    /// Reads a reply: Some when permits were taken, with the command that
    /// gives them back (`LOCK.SEMRELEASE`, or `LOCK.PERMITRELEASE` of the
    /// ids), None when not.
    fn granted(&self, reply: &Value) -> Result<Option<Cmd>> {
        Ok(match self.lease_ms {
            None => protocol::parse_flag("LOCK.SEMACQUIRE", reply)?
                .then(|| protocol::sem_release(&self.name, self.permits)),
            Some(_) => protocol::parse_permit_ids(reply, self.permits)?
                .map(|ids| protocol::permit_release(&self.name, &ids)),
        })
    }
}

impl Semaphore {
    /// The semaphore's name (its key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the number of permits if the semaphore does not exist yet
    /// (Redisson's `trySetPermits`): true if set, false if it existed
    /// (unchanged). With `ttl` the semaphore's key expires after it.
    pub async fn try_set_permits(&self, permits: u64, ttl: Option<Duration>) -> Result<bool> {
        let ttl = ttl.map(protocol::ttl_ms).transpose()?;
        let cmd = protocol::sem_set(&self.name, permits, ttl);
        self.client
            .once_parsed(&cmd, &self.name, protocol::parse_flag)
            .await
    }

    /// Adds `delta` permits (negative: removes them; a missing semaphore
    /// counts as 0) and returns the count after. Waiters are served.
    pub async fn add_permits(&self, delta: i64) -> Result<i64> {
        let cmd = protocol::sem_add(&self.name, delta);
        self.client
            .once_parsed(&cmd, &self.name, protocol::parse_int)
            .await
    }

    /// Takes `permits` (at least 1), waiting as long as it takes in the
    /// server's FIFO queue (`LOCK.SEMACQUIRE ... WAIT 0`).
    pub async fn acquire(&self, permits: u64) -> Result<()> {
        match self.take(permits, Wait::Forever).await? {
            true => Ok(()),
            false => Err(LockError::Protocol(
                "a wait without end ended without the permits".into(),
            )),
        }
    }

    /// Takes `permits` if that many are free now and nobody waits before
    /// this caller; false otherwise.
    pub async fn try_acquire(&self, permits: u64) -> Result<bool> {
        self.take(permits, Wait::No).await
    }

    /// Takes `permits`, waiting at most `wait` in the server's queue;
    /// false when they could not be had in that time.
    pub async fn try_acquire_for(&self, permits: u64, wait: Duration) -> Result<bool> {
        self.take(permits, Wait::from(wait)).await
    }

    async fn take(&self, permits: u64, wait: Wait) -> Result<bool> {
        let take = Take {
            name: self.name.clone(),
            permits: protocol::permits(permits)?,
            lease_ms: None,
        };
        Ok(self.client.take(take, wait).await?.is_some())
    }

    /// Gives back `permits` (at least 1; anyone may, as in Redisson); the
    /// head of the queue is served at once. Returns the count after the
    /// release, before the queue took its share.
    pub async fn release(&self, permits: u64) -> Result<i64> {
        let permits = protocol::permits(permits)?;
        let cmd = protocol::sem_release(&self.name, permits);
        self.client
            .once_parsed(&cmd, &self.name, protocol::parse_int)
            .await
    }

    /// The permits free now (0 when the semaphore does not exist).
    pub async fn available_permits(&self) -> Result<i64> {
        let cmd = protocol::sem_available(&self.name);
        self.client.simple_parsed(&cmd, protocol::parse_int).await
    }

    /// Takes every free permit, returning the count it found, which becomes
    /// 0 (Redisson's `drainPermits`: a count below zero, left by a negative
    /// [`add_permits`](Self::add_permits), is returned and set to 0 too).
    pub async fn drain_permits(&self) -> Result<i64> {
        let cmd = protocol::sem_drain(&self.name);
        self.client
            .once_parsed(&cmd, &self.name, protocol::parse_int)
            .await
    }
}

impl PermitExpirableSemaphore {
    /// The semaphore's name (its key; leased permits live in
    /// `{name}:timeout`).
    pub fn name(&self) -> &str {
        self.free.name()
    }

    /// Sets the number of permits if the semaphore does not exist yet: see
    /// [`Semaphore::try_set_permits`].
    pub async fn try_set_permits(&self, permits: u64, ttl: Option<Duration>) -> Result<bool> {
        self.free.try_set_permits(permits, ttl).await
    }

    /// Adds (or with a negative `delta` removes) free permits; the count
    /// after. See [`Semaphore::add_permits`].
    pub async fn add_permits(&self, delta: i64) -> Result<i64> {
        self.free.add_permits(delta).await
    }

    /// The permits free now; permits whose lease ended are reclaimed first.
    pub async fn available_permits(&self) -> Result<i64> {
        self.free.available_permits().await
    }

    /// Takes `permits` (at least 1), waiting as long as it takes in the
    /// server's FIFO queue. With `lease: None` they get the watchdog's
    /// lease and the watchdog renews them until the guard is released;
    /// with `Some(lease)` they end after it, not renewed (as in Redisson).
    pub async fn acquire(&self, permits: u64, lease: Option<Duration>) -> Result<Permits> {
        self.take(permits, Wait::Forever, lease)
            .await?
            .ok_or_else(|| {
                LockError::Protocol("a wait without end ended without the permits".into())
            })
    }

    /// Takes `permits` if that many are free now and nobody waits before
    /// this caller; None otherwise. `lease` as in
    /// [`PermitExpirableSemaphore::acquire`].
    pub async fn try_acquire(
        &self,
        permits: u64,
        lease: Option<Duration>,
    ) -> Result<Option<Permits>> {
        self.take(permits, Wait::No, lease).await
    }

    /// Takes `permits`, waiting at most `wait`; None when they could not be
    /// had in that time. `lease` as in [`PermitExpirableSemaphore::acquire`].
    pub async fn try_acquire_for(
        &self,
        permits: u64,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<Permits>> {
        self.take(permits, Wait::from(wait), lease).await
    }

    async fn take(
        &self,
        permits: u64,
        wait: Wait,
        lease: Option<Duration>,
    ) -> Result<Option<Permits>> {
        let Semaphore { client, name } = &self.free;
        let permits = protocol::permits(permits)?;
        let watchdog = lease.is_none();
        let lease = lease.unwrap_or(client.options().watchdog_lease);
        let lease_ms = protocol::lease_ms(lease)?;
        let take = Take {
            name: name.clone(),
            permits,
            lease_ms: Some(lease_ms),
        };
        let got = client.take(take, wait).await?;
        let Some((reply, sent)) = got else {
            return Ok(None);
        };
        let ids = protocol::parse_permit_ids(&reply, permits)?
            .ok_or_else(|| LockError::Protocol("LOCK.PERMITACQUIRE granted nothing".into()))?;
        Ok(Some(
            client.granted_permits(name, ids, sent, lease, watchdog),
        ))
    }
}

impl LockClient {
    /// Records a grant of permits asked for at `sent` and makes its guard.
    ///
    /// The server started the lease when it granted them, between `sent`
    /// and now. Answered at once (within a third of the lease), the lease
    /// is counted from `sent`, a safe bound. A grant that waited longer is
    /// counted from now, a moment later than the server's start (the
    /// reply's transit), and the watchdog renews it at once, which restores
    /// a safe count; a caller-given lease keeps that moment.
    fn granted_permits(
        &self,
        name: &str,
        ids: Vec<String>,
        sent: Instant,
        lease: Duration,
        watchdog: bool,
    ) -> Permits {
        let now = Instant::now();
        let (expires, renew_now) = match sent.checked_add(lease / 3) {
            Some(due) if now < due => (lease_end(sent, lease), false),
            _ => (later(now, lease), true),
        };
        let entry = self.inner.holds.permits(name, ids);
        let renewed_to = watchdog.then_some(lease);
        entry.state().granted(expires, renewed_to, renew_now, now);
        // The watchdog renews them, or marks a caller's lease ended.
        self.start_watchdog();
        self.inner.wake.notify_one();
        Permits::new(self.clone(), entry)
    }

    /// Gives back the permits of `entry` (the guard's release and drop).
    pub(crate) async fn release_permits(&self, entry: &Arc<Entry>) -> Result<()> {
        let _op = entry.op.lock().await;
        let name = entry.name.as_str();
        let ids = entry.permits.clone().unwrap_or_default();
        let (holds, lost) = {
            let state = entry.state();
            (state.holds(), state.is_retired())
        };
        let not_held = |source| LockError::PermitNotHeld {
            name: name.to_string(),
            source,
        };
        if holds == 0 {
            return Err(not_held(None));
        }
        if lost {
            // One of them is gone; the others may still be held, and are
            // given back one by one.
            self.release_each(name, &ids).await;
            entry.state().released(false);
            return Err(not_held(None));
        }
        let cmd = protocol::permit_release(name, &ids);
        let outcome = match self.once(&cmd, name).await {
            // Giving back by id is safe to repeat: sent again, a refusal
            // ("not held") then means the first one ran.
            Err(LockError::Unconfirmed { .. }) => match self.simple(&cmd).await {
                Err(LockError::Server(e)) if protocol::is_permit_not_held(&e) => Ok(()),
                other => other.map(drop),
            },
            Err(LockError::Server(e)) if protocol::is_permit_not_held(&e) => {
                // Nothing was released: give back those still held.
                self.release_each(name, &ids).await;
                entry.state().released(false);
                self.inner.holds.mark_lost(entry, Lost::NotHeld);
                return Err(not_held(Some(e)));
            }
            other => other.map(drop),
        };
        if let Err(e) = outcome {
            // Not known to be given back: the watchdog stops renewing them
            // all the same (as Redisson's release stops its renewal
            // whatever the reply), so their lease ends them.
            self.inner.holds.retire(entry);
            return Err(e);
        }
        entry.state().released(true);
        self.inner.holds.retire(entry);
        Ok(())
    }

    /// Gives back each of `ids` on its own, those not held skipped.
    async fn release_each(&self, name: &str, ids: &[String]) {
        for id in ids {
            let cmd = protocol::permit_release(name, std::slice::from_ref(id));
            let _ = self.simple(&cmd).await;
        }
    }
}

/// Permits taken from a [`PermitExpirableSemaphore`]: their ids, and the
/// signal that says when they are lost. Give them back with
/// [`Permits::release`] (which reports errors) or by dropping the guard
/// (in the background, on the client's runtime).
///
/// Without a caller-given lease the client's watchdog renews them every
/// third of [`Options::watchdog_lease`](crate::Options::watchdog_lease);
/// a renewal answered 0 (a permit reclaimed, or removed) marks them lost
/// ([`Lost::NotHeld`]), as do renewals failing until the lease passed. With
/// a caller's lease they are lost when it has passed
/// ([`Lost::LeaseExpired`]).
#[must_use = "dropping the guard gives the permits back at once"]
pub struct Permits {
    held: Held,
    armed: bool,
}

impl std::fmt::Debug for Permits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permits")
            .field("name", &self.held.entry.name)
            .field("ids", &self.ids())
            .field("lost", &*self.held.lost.borrow())
            .finish()
    }
}

impl Permits {
    fn new(client: LockClient, entry: Arc<Entry>) -> Permits {
        Permits {
            held: Held::new(client, entry),
            armed: true,
        }
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.held.entry.name
    }

    /// The permits' ids (32 lowercase hex characters each, as Redisson
    /// writes them).
    pub fn ids(&self) -> &[String] {
        self.held.entry.permits.as_deref().unwrap_or_default()
    }

    /// Whether the watchdog renews them (no caller-given lease).
    pub fn is_renewed(&self) -> bool {
        self.held.entry.state().watchdog().is_some()
    }

    /// Whether the permits are known to be lost, and why. A lease that has
    /// passed without a successful renewal counts, even before the
    /// watchdog has run.
    pub fn is_lost(&self) -> Option<Lost> {
        self.held.is_lost()
    }

    /// Resolves when the permits are lost, at once if they already are;
    /// never while they are held. The watchdog finds a permit gone at its
    /// next renewal (a third of the lease at most); a caller-given lease
    /// is lost when it has passed.
    pub async fn lost(&self) -> Lost {
        self.held.lost().await
    }

    /// A receiver of the lost signal: `None` while held, then the reason.
    pub fn lost_signal(&self) -> watch::Receiver<Option<Lost>> {
        self.held.lost.clone()
    }

    /// Gives the permits back (`LOCK.PERMITRELEASE`): the head of the
    /// semaphore's queue is served at once.
    /// [`LockError::PermitNotHeld`] when one was lost before (its lease
    /// ended, or it was removed); those still held are given back all the
    /// same.
    pub async fn release(mut self) -> Result<()> {
        self.armed = false;
        self.held
            .finish(|client, entry| async move { client.release_permits(&entry).await })
            .await
    }
}

impl Drop for Permits {
    fn drop(&mut self) {
        if self.armed {
            self.held.release_in_background(|client, entry| async move {
                client.release_permits(&entry).await
            });
        }
    }
}
