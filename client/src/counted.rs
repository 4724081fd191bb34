//! Sending commands, and retries that cannot count twice.
//!
//! Every command goes out through [`Counted::send`], which classifies what
//! came back in one place: a reply, the server's refusal (nothing ran, the
//! connection is in order), a server that is no master (nothing ran), or a
//! connection that failed with the command in flight (it may have run; the
//! connection is thrown away). The rest of this file decides what to do
//! after each.
//!
//! # Why retries are safe (and where the check lives)
//!
//! A command whose connection fails after sending may or may not have run.
//! Resending a `LOCK.ACQUIRE` that did run re-enters the lock (hold count 2,
//! so one unlock leaves it held); resending a `LOCK.RELEASE` that did run
//! releases a hold the caller still has. The library decides on the client,
//! from the hold count it keeps for every (lock, owner) it holds
//! (`holds.rs`):
//!
//! 1. Commands that change a hold count are serialised per (lock, owner), so
//!    the count this client knows (`known`) is exactly the server's, as long
//!    as nobody else uses the owner id (which is what owner ids are for).
//! 2. After a failure in transit, the failed connection is dropped and, on a
//!    single server, killed by id (`CLIENT KILL ID`) from a new connection.
//!    When the kill returns, the server has run whatever it had read from
//!    the old connection and will read nothing more from it: no late copy of
//!    the command can arrive after step 3.
//! 3. `HGET lock owner` (`owner:write` for a write hold of a read-write
//!    lock) gives the server's count: `known + 1` (acquire) or `known - 1`
//!    (release) means the command ran and its reply was lost, so it is not
//!    sent again; `known` means it did not run, so it is resent; anything
//!    else is reported ([`LockError::HoldCountMismatch`]).
//!
//! The same check decides a wait whose connection broke: a lock granted to
//! the waiter at that instant shows as `known + 1` and is adopted (the
//! caller gets its guard), so it cannot leak.
//!
//! Limits, stated: in a cluster, or where ACLs deny `CLIENT KILL`, step 2
//! only drops the connection, and a command still travelling in the network
//! could run after the check. A re-entry whose own hold ended at the same
//! instant (count `known` either way) is indistinguishable. A module-side
//! request id would close both gaps; the client-side check needs no module
//! change and costs nothing on the happy path.

use std::time::{Duration, Instant};

use redis::{Cmd, RedisError, Value};

use crate::conn::{is_wrong_role, timeout_error, ClientId, Connections, Handle};
use crate::error::{is_transport, refused, LockError, Result};
use crate::options::Options;
use crate::protocol::{self, Holder};

/// The error for a command that must not run twice ([`Counted::once`])
/// whose connection failed in transit.
pub(crate) fn unconfirmed(name: &str, cmd: &Cmd, source: RedisError) -> LockError {
    LockError::Unconfirmed {
        name: name.to_string(),
        command: protocol::command_name(cmd).into_owned(),
        source,
    }
}

/// What became of one command sent on one connection ([`Counted::send`]).
pub(crate) enum Sent {
    /// Its reply.
    Reply(Value),
    /// The server refused it: nothing ran, the connection is in order.
    Refused(RedisError),
    /// The server is not (or no longer) the master: nothing ran. The
    /// connection was thrown away, so the next one goes (through Sentinel)
    /// to the new master.
    WrongRole(RedisError),
    /// The connection failed, or no reply came in time, with the command in
    /// flight: it may have run. The connection was thrown away.
    Broken(RedisError),
}

impl Sent {
    /// The reply, for a caller that makes one attempt: a refusal is the
    /// server's error, any other failure a connection error.
    fn reply(self) -> Result<Value> {
        match self {
            Sent::Reply(v) => Ok(v),
            Sent::Refused(e) => Err(LockError::Server(e)),
            Sent::WrongRole(e) | Sent::Broken(e) => Err(LockError::Connection(e)),
        }
    }
}

/// What became of a command that changes a hold count ([`Counted::run`]).
pub(crate) enum Outcome {
    Reply(Value),
    /// The connection failed, and the server's count shows the command ran.
    AppliedUnseen,
}

/// Whether a command broken in transit ran, by the server's hold count.
pub(crate) enum Ran {
    Yes,
    /// It did not: the failure, for the error once retries are spent.
    No(RedisError),
}

/// The connections and the settings that bound every command on them.
pub(crate) struct Counted {
    pub(crate) conns: Connections,
    pub(crate) options: Options,
}

impl Counted {
    /// Sends `cmd` on `h`, waiting at most `within` (None: as long as it
    /// takes), and classifies the result. A connection that fails or
    /// answers as no master is thrown away (if it is the shared one; a
    /// dedicated connection is the caller's to drop).
    pub(crate) async fn send(&self, h: &Handle, cmd: &Cmd, within: Option<Duration>) -> Sent {
        let mut con = h.con.clone();
        let reply = match within {
            Some(within) => match tokio::time::timeout(within, con.query(cmd)).await {
                Ok(reply) => reply,
                Err(_) => Err(timeout_error("the reply")),
            },
            None => con.query(cmd).await,
        };
        match reply {
            Ok(v) => Sent::Reply(v),
            Err(e) if is_wrong_role(&e) => {
                self.conns.discard_shared(h);
                Sent::WrongRole(e)
            }
            Err(e) if is_transport(&e) => {
                self.conns.discard_shared(h);
                Sent::Broken(e)
            }
            Err(e) => Sent::Refused(e),
        }
    }

    /// Counts one failed attempt that sent nothing (or nothing that ran):
    /// the pause before the next, or [`LockError::Connection`] once the
    /// retries are spent.
    pub(crate) async fn retry(&self, attempts: &mut u32, failure: RedisError) -> Result<()> {
        *attempts += 1;
        if *attempts > self.options.retries {
            return Err(LockError::Connection(failure));
        }
        tokio::time::sleep(self.options.retry_interval).await;
        Ok(())
    }

    /// A command whose resending is harmless (reads, `LOCK.FORCE`), with
    /// the usual retries.
    pub(crate) async fn simple(&self, cmd: &Cmd) -> Result<Value> {
        let mut attempts = 0;
        loop {
            let failure = match self.conns.shared().await {
                Ok(h) => match self.send(&h, cmd, Some(self.options.command_timeout)).await {
                    Sent::Reply(v) => return Ok(v),
                    Sent::Refused(e) => return Err(LockError::Server(e)),
                    // Broken, or a master no more: connect anew.
                    Sent::WrongRole(e) | Sent::Broken(e) => e,
                },
                Err(e) => e,
            };
            self.retry(&mut attempts, failure).await?;
        }
    }

    /// One attempt on the shared connection, without a deadline or retry
    /// (RedLock's rounds bound it, and are its retries).
    pub(crate) async fn one_shot(&self, cmd: &Cmd) -> Result<Value> {
        let h = self.conns.shared().await.map_err(LockError::Connection)?;
        self.send(&h, cmd, None).await.reply()
    }

    /// The shared connection for one watchdog attempt that may take at
    /// most `within`, connecting included: it, and the time left for the
    /// command.
    async fn shared_within(&self, within: Duration) -> Result<(Handle, Duration)> {
        let started = Instant::now();
        let h = tokio::time::timeout(within, self.conns.shared())
            .await
            .map_err(|_| LockError::Connection(timeout_error("connect")))?
            .map_err(LockError::Connection)?;
        Ok((h, within.saturating_sub(started.elapsed())))
    }

    /// A connection from `connect` (the shared one, or one of its own),
    /// each failure to connect counted as an attempt that sent nothing.
    async fn connected<F>(&self, attempts: &mut u32, connect: impl Fn() -> F) -> Result<Handle>
    where
        F: std::future::Future<Output = redis::RedisResult<Handle>>,
    {
        loop {
            match connect().await {
                Ok(h) => return Ok(h),
                Err(e) => self.retry(attempts, e).await?,
            }
        }
    }

    /// `LOCK.RENEW` (`LOCK.RWRENEW` for a read-write lock) for the
    /// watchdog, one attempt: true renewed, false not held, Err on failure
    /// (the caller decides when that means lost).
    pub(crate) async fn renew(&self, who: Holder<'_>, lease: Duration) -> Result<bool> {
        let cmd = protocol::renew(who, protocol::lease_ms(lease)?);
        // One attempt, connecting included, takes at most a third of the
        // lease: the next one is due by then.
        let (h, within) = self
            .shared_within(self.options.command_timeout.min(lease / 3))
            .await?;
        let v = self.send(&h, &cmd, Some(within)).await.reply()?;
        protocol::parse_flag(protocol::renew_command(who.kind), &v)
    }

    /// A command that must not run twice (it takes or gives back permits,
    /// counts a latch down, sets or drains a count) and that no hold count
    /// can vouch for: sent on the shared connection, and sent again only
    /// when nothing ran (no connection, or a server that is no master). A
    /// failure in transit is [`LockError::Unconfirmed`].
    pub(crate) async fn once(&self, cmd: &Cmd, name: &str) -> Result<Value> {
        let mut attempts = 0;
        loop {
            let failure = match self.conns.shared().await {
                Ok(h) => match self.send(&h, cmd, Some(self.options.command_timeout)).await {
                    Sent::Reply(v) => return Ok(v),
                    Sent::Refused(e) => return Err(refused(name, e)),
                    Sent::WrongRole(e) => e,
                    Sent::Broken(e) => return Err(unconfirmed(name, cmd, e)),
                },
                Err(e) => e,
            };
            self.retry(&mut attempts, failure).await?;
        }
    }

    /// `LOCK.PERMITRENEW` of every permit of one grant, for the watchdog,
    /// one attempt: true all renewed, false when one is not held any more,
    /// Err on failure (the caller decides when that means lost).
    pub(crate) async fn renew_permits(
        &self,
        name: &str,
        ids: &[String],
        lease: Duration,
    ) -> Result<bool> {
        let lease_ms = protocol::lease_ms(lease)?;
        let (h, within) = self
            .shared_within(self.options.command_timeout.min(lease / 3))
            .await?;
        // One connection multiplexes them: they go out together.
        let renewals = ids.iter().map(|id| {
            let cmd = protocol::permit_renew(name, id, lease_ms);
            let h = &h;
            async move { self.send(h, &cmd, Some(within)).await }
        });
        let mut all = true;
        for sent in futures_util::future::join_all(renewals).await {
            all &= protocol::parse_flag("LOCK.PERMITRENEW", &sent.reply()?)?;
        }
        Ok(all)
    }

    /// The token of a fenced grant whose reply was lost: while this owner
    /// holds the lock nobody else can be granted, so the counter's value is
    /// the token of this owner's last grant.
    pub(crate) async fn read_token(&self, name: &str) -> Result<Option<i64>> {
        protocol::parse_token(&self.simple(&protocol::token(name)?).await?)
    }

    /// Runs a command that moves `who`'s count from `known` to `applied`
    /// on the shared connection, resending it only when the server shows it
    /// did not run. `on_send` hears of each connection it goes out on (an
    /// acquisition records it, for a clean-up after its caller left).
    pub(crate) async fn run(
        &self,
        cmd: &Cmd,
        who: Holder<'_>,
        (known, applied): (u64, u64),
        on_send: &(dyn Fn(&Handle) + Sync),
        within: Duration,
    ) -> Result<Outcome> {
        let mut attempts = 0;
        loop {
            let h = self
                .connected(&mut attempts, || self.conns.shared())
                .await?;
            on_send(&h);
            let failure = match self.send(&h, cmd, Some(within)).await {
                Sent::Reply(v) => return Ok(Outcome::Reply(v)),
                Sent::Refused(e) => return Err(refused(who.name, e)),
                // Refused by a server that is no master (any more): nothing
                // ran. Send it again on a new connection (through Sentinel:
                // to the new master).
                Sent::WrongRole(e) => {
                    self.retry(&mut attempts, e).await?;
                    continue;
                }
                Sent::Broken(e) => e,
            };
            match self
                .ran(failure, h.id, false, who, (known, applied))
                .await?
            {
                Ran::Yes => return Ok(Outcome::AppliedUnseen),
                Ran::No(failure) => self.retry(&mut attempts, failure).await?,
            }
        }
    }

    /// Whether a command that moves `who`'s count from `known` to
    /// `applied`, broken by `failure` on the connection `dead` (already
    /// closed), ran: the server's count after `dead` is fenced. `waited`:
    /// it was a `WAIT`, still queued unless the fence succeeded.
    pub(crate) async fn ran(
        &self,
        failure: RedisError,
        dead: Option<ClientId>,
        waited: bool,
        who: Holder<'_>,
        (known, applied): (u64, u64),
    ) -> Result<Ran> {
        let name = who.name;
        let found = match self.read_back(dead, waited, who).await {
            Ok(found) => found,
            Err(why) => {
                let during = if waited { " while waiting" } else { "" };
                return Err(LockError::Uncertain {
                    name: name.to_string(),
                    detail: format!("{failure}{during}; reading the hold count back: {why}"),
                    source: failure,
                });
            }
        };
        if found == applied {
            Ok(Ran::Yes)
        } else if found == known {
            Ok(Ran::No(failure))
        } else {
            Err(LockError::HoldCountMismatch {
                name: name.to_string(),
                expected: vec![known, applied],
                found,
            })
        }
    }

    /// The server's hold count of `who` (its field) after a failure in
    /// transit on `dead`: fences `dead` first (see the module docs).
    pub(crate) async fn read_back(
        &self,
        dead: Option<ClientId>,
        waited: bool,
        who: Holder<'_>,
    ) -> Result<u64, String> {
        let timeout = self.options.command_timeout;
        let mut last = String::from("no attempt");
        for attempt in 0..=self.options.retries {
            if attempt > 0 {
                tokio::time::sleep(self.options.retry_interval).await;
            }
            let h = match self.conns.shared().await {
                Ok(h) => h,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            let fenced = self.conns.fence(dead, &h, timeout).await;
            if waited && !fenced {
                // No kill possible (a cluster, NOPERM): the dropped waiting
                // connection leaves the server's queue when the server reads
                // its close. Until then it could still be granted the lock.
                self.await_dequeued(&h, who.name, who.owner).await;
            }
            let hget = protocol::hold_count(who.name, who.field);
            match self.send(&h, &hget, Some(timeout)).await {
                Sent::Reply(v) => return protocol::parse_hold_count(&v),
                Sent::Refused(e) | Sent::WrongRole(e) | Sent::Broken(e) => last = e.to_string(),
            }
        }
        Err(last)
    }

    /// `who`'s hold count read on `h` itself, behind whatever went out on
    /// it before (a connection answers in order). If `h` fails meanwhile,
    /// it is fenced first and the count read elsewhere (see `read_back`).
    pub(crate) async fn read_behind(&self, h: &Handle, who: Holder<'_>) -> Result<u64, String> {
        let hget = protocol::hold_count(who.name, who.field);
        match self
            .send(h, &hget, Some(self.options.command_timeout))
            .await
        {
            Sent::Reply(v) => protocol::parse_hold_count(&v),
            Sent::Refused(e) => Err(e.to_string()),
            Sent::WrongRole(_) | Sent::Broken(_) => self.read_back(h.id, false, who).await,
        }
    }

    /// Polls `LOCK.INFO` on `h` until `owner` is no longer among the lock's
    /// waiters, for at most the command timeout.
    async fn await_dequeued(&self, h: &Handle, name: &str, owner: &str) {
        let timeout = self.options.command_timeout;
        let deadline = Instant::now() + timeout;
        let info = protocol::info(name);
        while Instant::now() < deadline {
            match self.send(h, &info, Some(timeout)).await {
                Sent::Reply(v) if !protocol::info_waiters_include(&v, owner.as_bytes()) => return,
                Sent::Reply(_) => {}
                _ => return, // the read-back that follows reports failures
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
