//! `LOCK.ACQUIRE key owner lease-ms [WAIT timeout-ms]`
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
//! not allowed (MULTI, Lua, a replica) WAIT is ignored. See `handoff.rs`.
//!
//! Errors: wrong arity; `lease-ms` not a positive integer, above
//! `lock.max-lease-ms`, or overflowing an absolute deadline; empty `owner`;
//! `WRONGTYPE` for a key that is not a hash; a hold count that is not an
//! integer or would overflow.
//!
//! Effects (replicated): `HSET key owner <count>` + `PEXPIREAT key <deadline>`.

use crate::args::{self, Arg};
use crate::commands::announce;
use crate::ffi::command::{ArgDoc, ArgKind, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::{Ctx, RStr};
use crate::lock::{self, Acquired};
use crate::lock_key::LockKey;
use crate::{config, handoff, stats};

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
}

impl<'a, A: Arg<'a>> Acquire<A> {
    pub fn parse(argv: &[A]) -> Result<Self, String> {
        let (key, owner, lease, wait) = match *argv {
            [_, key, owner, lease] => (key, owner, lease, None),
            [_, key, owner, lease, option, timeout] => (key, owner, lease, Some((option, timeout))),
            _ => return Err(args::arity_error(LockAcquire::SPEC.name())),
        };
        args::owner(owner.bytes())?;
        let lease_ms = args::lease_ms(lease.bytes())?;
        let wait_ms = match wait {
            None => None,
            Some((option, timeout)) if option.bytes().eq_ignore_ascii_case(b"WAIT") => {
                Some(args::wait_timeout_ms(timeout.bytes())?)
            }
            Some(_) => {
                return Err("ERR syntax error: the only option is WAIT timeout-ms".to_string())
            }
        };
        Ok(Acquire {
            key,
            owner,
            lease_ms,
            wait_ms,
        })
    }
}

impl Command for LockAcquire {
    /// `write deny-oom fast`: under memory pressure no new lock is taken, but
    /// held ones can still be released, renewed and forced. Key `RW access
    /// update`: it answers the holder's remaining lease (as `PTTL`, `RO
    /// access`) and counts a hold up (as `HINCRBY`).
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.acquire",
        flags: c"write deny-oom fast",
        acl_categories: c"write fast",
        key: KeyFlags::READ_UPDATE,
        summary:
            c"Acquires or re-enters a Redisson-compatible lock, optionally waiting in a fair queue",
        complexity: c"O(1)",
        arity: -4,
        args: &[
            ArgDoc::new(c"key", ArgKind::Key),
            ArgDoc::new(c"owner", ArgKind::String),
            ArgDoc::new(c"lease-ms", ArgKind::Integer),
            ArgDoc::new(c"timeout-ms", ArgKind::Integer)
                .token(c"WAIT")
                .optional(),
        ],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = Acquire::parse(argv)?;
        let now = ctx.now_ms();
        let expire_at = args::deadline(now, cmd.lease_ms, config::max_lease_ms())?;
        if let Some(timeout_ms) = cmd.wait_ms {
            args::wait_fits(now, timeout_ms)?;
        }
        let key = LockKey::open_write(ctx, cmd.key)?;
        let mut view = key.view(cmd.owner)?;
        if handoff::settle(ctx, &key) {
            // The lock had been freed behind the queue's back: its first waiter
            // has it now, and this caller queues behind the others.
            view = key.view(cmd.owner)?;
        }
        let decision =
            lock::acquire(cmd.owner, view, expire_at).map_err(|e| e.message().to_string())?;
        key.apply(decision.write);
        handoff::lease_changed(ctx, &key, &decision.write);
        stats::acquired(decision.reply);
        match decision.reply {
            Acquired::Taken | Acquired::Reentered => {
                announce(ctx, &key, decision.event);
                ctx.reply_null();
            }
            Acquired::Busy => match cmd.wait_ms {
                Some(timeout_ms) if ctx.can_block() => {
                    handoff::wait(ctx, &key, cmd.owner.as_bytes(), cmd.lease_ms, timeout_ms);
                }
                _ => ctx.reply_integer(key.ttl_ms()),
            },
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::args::testing::{argv, assert_refused};

    fn parse(args: &[&'static str]) -> Result<Acquire<&'static [u8]>, String> {
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
                wait_ms: None
            }
        );
        let cmd = parse(&["lock.acquire", "k", "o", "1", "wait", "0"]).unwrap();
        assert_eq!(cmd.wait_ms, Some(0));
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
                (&["LOCK.ACQUIRE", "k", "o", "1", "WAIT"], "wrong number"),
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
            ],
        );
    }
}
