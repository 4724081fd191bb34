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

use crate::args;
use crate::command_docs::{ArgDoc, ArgKind, CommandDoc};
use crate::commands::announce;
use crate::ffi::{bytes, CommandResult, Ctx, RStr};
use crate::lock::{self, Acquired};
use crate::lock_key::LockKey;
use crate::{config, handoff, stats};

pub const NAME: &str = "lock.acquire";

/// `COMMAND DOCS` for this command.
pub const DOC: CommandDoc = CommandDoc {
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

/// A parsed `LOCK.ACQUIRE`.
pub struct Acquire {
    pub key: RStr,
    pub owner: RStr,
    pub lease_ms: i64,
    /// `WAIT timeout-ms`: block until granted; 0 = forever.
    pub wait_ms: Option<i64>,
}

impl Acquire {
    pub fn parse(argv: &[RStr]) -> Result<Acquire, String> {
        if argv.len() != 4 && argv.len() != 6 {
            return Err(args::arity_error(NAME));
        }
        args::owner(bytes(argv[2]))?;
        let lease_ms = args::lease_ms(bytes(argv[3]))?;
        let wait_ms = match argv.get(4..6) {
            None => None,
            Some([option, timeout]) if bytes(*option).eq_ignore_ascii_case(b"WAIT") => {
                Some(args::wait_timeout_ms(bytes(*timeout))?)
            }
            Some(_) => {
                return Err("ERR syntax error: the only option is WAIT timeout-ms".to_string())
            }
        };
        Ok(Acquire {
            key: argv[1],
            owner: argv[2],
            lease_ms,
            wait_ms,
        })
    }
}

pub fn run(ctx: &Ctx, argv: &[RStr]) -> CommandResult {
    let cmd = Acquire::parse(argv)?;
    let now = ctx.now_ms();
    let expire_at = args::deadline(now, cmd.lease_ms, config::max_lease_ms())?;
    if let Some(timeout_ms) = cmd.wait_ms {
        args::wait_fits(now, timeout_ms)?;
    }
    let key = LockKey::open_write(ctx, cmd.key)?;
    let mut view = key.view(cmd.owner)?;
    if !view.exists && handoff::settle(ctx, &key) {
        // The lock had been freed behind the queue's back: its first waiter
        // has it now, and this caller queues behind the others.
        view = key.view(cmd.owner)?;
    }
    let decision = lock::acquire(view, expire_at).map_err(|e| e.message().to_string())?;
    key.apply(cmd.owner, decision.write);
    handoff::lease_changed(ctx, &key, decision.write);
    match decision.reply {
        Acquired::Granted => {
            if decision.event.is_some() {
                stats::ACQUIRED.incr();
            } else {
                stats::REENTERED.incr();
            }
            announce(ctx, &key, decision.event);
            ctx.reply_null();
        }
        Acquired::Busy => {
            stats::CONTENDED.incr();
            match cmd.wait_ms {
                Some(timeout_ms) if handoff::can_block(ctx) => {
                    handoff::wait(ctx, &key, bytes(cmd.owner), cmd.lease_ms, timeout_ms);
                }
                _ => ctx.reply_integer(key.ttl_ms()),
            }
        }
    }
    Ok(())
}
