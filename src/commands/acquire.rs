//! `LOCK.ACQUIRE key owner lease-ms [WAIT timeout-ms] [KEEP grace-ms] [TOKEN]
//! [SYNC numreplicas timeout-ms]`
//!
//! Takes the lock for `owner`, or re-enters it, with a lease of `lease-ms`.
//! Redisson's `tryLockInnerAsync` script, as one command.
//!
//! Reply:
//! * nil: taken or re-entered (hold count + 1, lease set to `lease-ms`);
//! * integer: the lock is held by another owner; its remaining lease in ms
//!   (-1 if the key has no expiry). Nothing changed.
//!
//! With `WAIT timeout-ms`, a held lock blocks the client in the key's FIFO
//! queue instead: it is answered nil once the lock is handed to it, or, when
//! `timeout-ms` passes first (0 = never), the integer above. Where blocking is
//! not allowed (MULTI, Lua, a replica) WAIT is ignored. See `waiting/lock.rs`.
//! With `KEEP grace-ms` (else `lock.keep-place-ms`), a waiter that leaves by
//! its timeout or its connection closing keeps its place that long: the
//! owner asking again takes it back (`docs/waiting.md`).
//!
//! With `TOKEN`, each grant (taken, re-entered, or handed on to this waiter)
//! also raises the lock's fencing-token counter, and the reply is Redisson
//! `RFencedLock`'s pair: `[-1, token]` when granted, `[remaining-lease, -1]`
//! when held by another owner or the wait timed out. Every grant gets its
//! own token, and tokens only grow, even across failovers that lost writes
//! and with two masters at once: see `fencing.rs`.
//!
//! With `SYNC numreplicas timeout-ms` (or `lock.sync-replicas` /
//! `lock.sync-timeout-ms` when the command has no SYNC), a grant, direct,
//! re-entered or handed on after WAIT, is answered only once `numreplicas`
//! replicas have acknowledged it; when they have not within `timeout-ms`
//! (or the WAIT timeout comes first), the grant is undone (one hold released,
//! the next waiter considered; a token stays used) and the reply is an error
//! starting with `NOSYNC`. `SYNC 0 0` turns a configured default off for one
//! call. Where the client cannot block (MULTI, Lua), a grant that must wait
//! for replicas is refused instead. See `replica_sync.rs`. The options come
//! in any order.
//!
//! Errors: wrong arity; `lease-ms` not a positive integer, above
//! `lock.max-lease-ms`, or longer than 100 years; empty `owner`;
//! `WRONGTYPE` for a key that is not a hash (or, with `TOKEN`, a counter that
//! is not a string); a hold count that is not an integer or would overflow;
//! with `TOKEN`, a key whose braces would put the counter in another cluster
//! slot, a counter that is not an integer or would overflow; `SYNC` with a
//! bad number, or where the client cannot block. Nothing changes.
//!
//! Effects (replicated): `HSET key owner <count>` + `PEXPIREAT key <deadline>`;
//! with `TOKEN`, `SET redisson_lock_token:{key} <token> PXAT <deadline>` too.

use crate::args::{self, Arg};
use crate::commands::arg_docs::{KEEP, KEY, LEASE, OWNER, WAIT};
use crate::counter_key::{self, NextToken};
use crate::errors::{self, Refusal};
use crate::ffi::command::{Access, ArgDoc, ArgKind, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::{Ctx, OwnedStr, RStr};
use crate::grant_policy::Ask;
use crate::lock::{self, Acquired};
use crate::lock_key::LockKey;
use crate::replica_sync::SyncSpec;
use crate::waiting::{self, carry_out, Wants};
use crate::{config, replies};

/// `LOCK.ACQUIRE`, as registered.
pub struct LockAcquire;

/// A parsed `LOCK.ACQUIRE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Acquire<A> {
    pub key: A,
    pub owner: A,
    pub lease_ms: i64,
    /// `WAIT timeout-ms`: block until granted; 0 = forever.
    pub wait_ms: Option<i64>,
    /// `KEEP grace-ms`: how long a place is kept; else `lock.keep-place-ms`.
    pub keep_ms: Option<i64>,
    /// `TOKEN`: issue a fencing token with every grant.
    pub token: bool,
    /// `SYNC numreplicas timeout-ms`: answer a grant once replicas have it.
    pub sync: Option<SyncSpec>,
}

/// Which options an acquire command takes (WAIT always), and the syntax
/// error naming them.
#[derive(Clone, Debug)]
pub struct Options {
    pub command: &'static str,
    pub token: bool,
    pub sync: bool,
    pub syntax: Refusal,
}

impl<'a, A: Arg<'a>> Acquire<A> {
    pub fn parse(argv: &[A]) -> Result<Self, Refusal> {
        let options = Options {
            command: const { LockAcquire::SPEC.name() },
            token: true,
            sync: true,
            syntax: errors::SYNTAX_ACQUIRE,
        };
        Self::parse_with(options, argv)
    }

    /// The waiter this acquire becomes when it must wait `timeout_ms` for
    /// `ask` (the lock, or a read-write lock's read or write hold).
    pub fn waiter(&self, timeout_ms: i64, sync: Option<SyncSpec>, ask: Ask) -> Wants<'a> {
        Wants {
            owner: self.owner.bytes(),
            lease_ms: self.lease_ms,
            timeout_ms,
            token: self.token,
            sync,
            ask,
            keep_ms: self.keep_ms.unwrap_or_else(config::keep_place_ms),
        }
    }

    /// `command key owner lease-ms [options]` for any acquire command (the
    /// read-write lock's too), taking the options `allowed` says.
    pub fn parse_with(allowed: Options, argv: &[A]) -> Result<Self, Refusal> {
        let name = allowed.command;
        let [_, key, owner, lease, ref options @ ..] = *argv else {
            return Err(args::arity_error(name));
        };
        args::owner(owner.bytes())?;
        let lease_ms = args::lease_ms(lease.bytes())?;
        let (mut wait_ms, mut keep_ms, mut token, mut sync) = (None, None, false, None);
        let mut rest = options;
        while let [option, ref tail @ ..] = *rest {
            let word = option.bytes();
            rest = tail;
            if word.eq_ignore_ascii_case(b"TOKEN") && !token && allowed.token {
                token = true;
            } else if word.eq_ignore_ascii_case(b"WAIT") && wait_ms.is_none() {
                // A WAIT without its value is a malformed option, not a
                // wrong count: the options error says what WAIT takes.
                let [timeout, ref tail @ ..] = *rest else {
                    return Err(allowed.syntax);
                };
                wait_ms = Some(args::wait_timeout_ms(timeout.bytes())?);
                rest = tail;
            } else if word.eq_ignore_ascii_case(b"KEEP") && keep_ms.is_none() {
                let [grace, ref tail @ ..] = *rest else {
                    return Err(allowed.syntax);
                };
                keep_ms = Some(args::keep_ms(grace.bytes(), config::MAX_KEEP_MS)?);
                rest = tail;
            } else if word.eq_ignore_ascii_case(b"SYNC") && sync.is_none() && allowed.sync {
                let [replicas, timeout, ref tail @ ..] = *rest else {
                    return Err(allowed.syntax);
                };
                let (replicas, timeout_ms) = args::sync_spec(replicas.bytes(), timeout.bytes())?;
                sync = Some(SyncSpec {
                    replicas,
                    timeout_ms,
                });
                rest = tail;
            } else {
                return Err(allowed.syntax);
            }
        }
        Ok(Acquire {
            key,
            owner,
            lease_ms,
            wait_ms,
            keep_ms,
            token,
            sync,
        })
    }
}

/// `key owner lease-ms [WAIT timeout-ms] [KEEP grace-ms] [TOKEN] [SYNC
/// numreplicas timeout-ms]`. The read-write lock's acquires take the first
/// six.
pub const ARGS: &[ArgDoc] = &[
    KEY,
    OWNER,
    LEASE,
    WAIT,
    KEEP,
    ArgDoc::new(c"token", ArgKind::PureToken)
        .token(c"TOKEN")
        .optional(),
    ArgDoc::new(c"numreplicas", ArgKind::Integer)
        .token(c"SYNC")
        .optional(),
    ArgDoc::new(c"sync-timeout-ms", ArgKind::Integer).optional(),
];

/// What every acquire checks before it opens a key, and what it learns.
pub struct Checked {
    /// The lease's deadline.
    pub expire_at: i64,
    /// With `TOKEN`, the name of the lock's token counter.
    pub counter: Option<OwnedStr>,
}

/// What every acquire checks before it opens a key, at `now` (the one
/// clock reading the command decides with): the lease's deadline (within
/// `lock.max-lease-ms`), the WAIT timeout, and with `TOKEN` whether the key
/// can have a counter in its slot (its name, made once, is kept for the
/// grant).
pub fn check_before_opening(
    now: i64,
    key: RStr,
    lease_ms: i64,
    wait_ms: Option<i64>,
    token: bool,
) -> Result<Checked, Refusal> {
    let expire_at = args::deadline(now, lease_ms, config::max_lease_ms())?;
    if let Some(timeout_ms) = wait_ms {
        args::wait_fits(now, timeout_ms)?;
    }
    let counter = counter_key::wanted_counter(key, token)?;
    Ok(Checked { expire_at, counter })
}

impl Command for LockAcquire {
    /// `write deny-oom fast`: under memory pressure no new lock is taken, but
    /// held ones can still be released, renewed and forced. Key `RW access
    /// update`: it answers the holder's remaining lease (as `PTTL`, `RO
    /// access`) and counts a hold up (as `HINCRBY`).
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.acquire",
        access: Access::GrowFast,
        key: KeyFlags::READ_UPDATE,
        summary:
            c"Acquires or re-enters a Redisson-compatible lock, optionally waiting in a fair queue",
        complexity: c"O(1)",
        arity: -4,
        args: ARGS,
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = Acquire::parse(argv)?;
        let now = ctx.now_ms();
        let Checked { expire_at, counter } =
            check_before_opening(now, cmd.key, cmd.lease_ms, cmd.wait_ms, cmd.token)?;
        let key = LockKey::open_write(ctx, cmd.key)?;
        // A lock freed behind the queue's back goes to its first waiter
        // before this caller decides, and the caller queues behind the others.
        waiting::lock::settle(ctx, &key)?;
        let view = key.view(cmd.owner)?;
        let decision = lock::acquire(cmd.owner, view, expire_at).map_err(|e| e.refusal())?;
        let sync = SyncSpec::effective(cmd.sync, config::sync_default());
        let granted = matches!(decision.reply, Acquired::Taken | Acquired::Reentered);
        if granted && sync.is_some() && !ctx.can_block() {
            return Err(errors::SYNC_CANNOT_BLOCK);
        }
        let next_token = NextToken::prepare_if(ctx, counter.as_ref().filter(|_| granted))?;
        match carry_out(ctx, &key, decision) {
            Acquired::Taken | Acquired::Reentered => {
                let token = next_token.map(|next| next.issue(expire_at));
                match sync {
                    Some(spec) => {
                        waiting::lock::await_replicas(ctx, &key, cmd.owner.as_bytes(), token, spec);
                    }
                    None => replies::granted(ctx, token),
                }
            }
            Acquired::Busy => match cmd.wait_ms {
                Some(timeout_ms) if ctx.can_block() => {
                    waiting::lock::wait(ctx, &key, cmd.waiter(timeout_ms, sync, Ask::Lock));
                }
                _ => replies::busy(ctx, key.ttl_ms(), cmd.token),
            },
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::args::testing::{argv, assert_refused};

    fn parse(args: &[&'static str]) -> Result<Acquire<&'static [u8]>, Refusal> {
        Acquire::parse(&argv(args))
    }

    #[test]
    fn parses_a_plain_acquire_and_one_with_wait() {
        let cmd = parse(&["LOCK.ACQUIRE", "k", "o", "30000"]).unwrap();
        assert_eq!(
            cmd,
            Acquire {
                key: &b"k"[..],
                owner: &b"o"[..],
                lease_ms: 30_000,
                wait_ms: None,
                keep_ms: None,
                token: false,
                sync: None,
            }
        );
        let cmd = parse(&["lock.acquire", "k", "o", "1", "wait", "0"]).unwrap();
        assert_eq!((cmd.wait_ms, cmd.token), (Some(0), false));
    }

    #[test]
    fn parses_token_before_or_after_wait_in_any_case() {
        for args in [
            &["LOCK.ACQUIRE", "k", "o", "1", "TOKEN"][..],
            &["LOCK.ACQUIRE", "k", "o", "1", "token", "WAIT", "5"],
            &["LOCK.ACQUIRE", "k", "o", "1", "WAIT", "5", "Token"],
        ] {
            let cmd = parse(args).unwrap();
            assert!(cmd.token, "{args:?}");
            assert_eq!(cmd.wait_ms, (args.len() > 5).then_some(5), "{args:?}");
        }
    }

    #[test]
    fn parses_keep_among_the_options() {
        let cmd = parse(&["LOCK.ACQUIRE", "k", "o", "1", "KEEP", "0", "wait", "5"]).unwrap();
        assert_eq!((cmd.keep_ms, cmd.wait_ms), (Some(0), Some(5)));
        let cmd = parse(&["LOCK.ACQUIRE", "k", "o", "1", "TOKEN", "keep", "86400000"]).unwrap();
        assert_eq!(cmd.keep_ms, Some(86_400_000));
    }

    #[test]
    fn parses_sync_anywhere_among_the_options() {
        let cmd = parse(&["LOCK.ACQUIRE", "k", "o", "1", "SYNC", "2", "500", "TOKEN"]).unwrap();
        assert_eq!(
            cmd.sync,
            Some(SyncSpec {
                replicas: 2,
                timeout_ms: 500
            })
        );
        assert!(cmd.token);
        let cmd = parse(&["LOCK.ACQUIRE", "k", "o", "1", "wait", "5", "sync", "0", "0"]).unwrap();
        assert_eq!(
            cmd.sync,
            Some(SyncSpec {
                replicas: 0,
                timeout_ms: 0
            })
        );
        assert_eq!(cmd.wait_ms, Some(5));
    }

    #[test]
    fn refuses_bad_arguments_naming_them() {
        assert_refused(
            Acquire::parse,
            &[
                (
                    &["LOCK.ACQUIRE", "k", "o"][..],
                    "wrong number of arguments for 'lock.acquire'",
                ),
                (&["LOCK.ACQUIRE", "k", "o", "1", "WAIT"], "syntax error"),
                (&["LOCK.ACQUIRE", "k", "", "1"], "owner"),
                (&["LOCK.ACQUIRE", "k", "o", "0"], "lease-ms"),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "WAIT", "-1"],
                    "WAIT timeout-ms",
                ),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "NOWAIT", "1"],
                    "syntax error",
                ),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "TOKEN", "TOKEN"],
                    "syntax error",
                ),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "WAIT", "1", "WAIT", "2"],
                    "syntax error",
                ),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "TOKEN", "WAIT"],
                    "syntax error",
                ),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "WAIT", "x", "TOKEN"],
                    "WAIT timeout-ms",
                ),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "SYNC", "1"],
                    "syntax error",
                ),
                (&["LOCK.ACQUIRE", "k", "o", "1", "KEEP"], "syntax error"),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "KEEP", "-1"],
                    "KEEP grace-ms",
                ),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "KEEP", "86400001"],
                    "KEEP grace-ms",
                ),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "KEEP", "1", "KEEP", "1"],
                    "syntax error",
                ),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "SYNC", "-1", "5"],
                    "SYNC numreplicas",
                ),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "SYNC", "x", "5"],
                    "SYNC numreplicas",
                ),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "SYNC", "1", "0"],
                    "SYNC timeout-ms",
                ),
                (
                    &["LOCK.ACQUIRE", "k", "o", "1", "SYNC", "1", "86400001"],
                    "SYNC timeout-ms",
                ),
                (
                    &[
                        "LOCK.ACQUIRE",
                        "k",
                        "o",
                        "1",
                        "SYNC",
                        "1",
                        "5",
                        "SYNC",
                        "1",
                        "5",
                    ],
                    "syntax error",
                ),
            ],
        );
    }
}
