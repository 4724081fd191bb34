//! `LOCK.RELEASE key owner [lease-ms]`
//!
//! Releases one hold of `owner` (Redisson's `unlockInnerAsync` script).
//!
//! Reply:
//! * nil: `owner` does not hold the lock; nothing changed;
//! * integer 0: the hold count was decremented and is still positive (the
//!   lease is reset to `lease-ms` when given, kept otherwise);
//! * integer 1: the count reached 0: the key is deleted and the lock is
//!   handed to the first waiter, or, with none, the unlock message is published.
//!
//! `lock.max-lease-ms` never makes a release fail: a `lease-ms` above it is
//! clamped to it. Redisson sends its lease with every unlock, and a refused
//! release would leave the lock held until the lease ran out. (Acquire and
//! renew refuse leases above the cap.)
//!
//! Errors: wrong arity; `lease-ms` (when given) not a positive integer, or its
//! deadline overflowing; empty `owner`; `WRONGTYPE`; a hold count that is not
//! an integer.
//!
//! Effects (replicated): `HSET key owner <count>` [+ `PEXPIREAT key <deadline>`],
//! or `DEL key`.

use crate::args;
use crate::command_docs::{ArgDoc, ArgKind, CommandDoc};
use crate::commands::announce;
use crate::ffi::{bytes, CommandResult, Ctx, RStr};
use crate::lock::{self, Released};
use crate::lock_key::LockKey;
use crate::{config, handoff, stats};

pub const NAME: &str = "lock.release";

/// `COMMAND DOCS` for this command.
pub const DOC: CommandDoc = CommandDoc {
    summary: c"Releases one hold of a lock; the last hold frees it and hands it to the next waiter",
    complexity: c"O(1)",
    arity: -3,
    args: &[
        ArgDoc::new(c"key", ArgKind::Key),
        ArgDoc::new(c"owner", ArgKind::String),
        ArgDoc::new(c"lease-ms", ArgKind::Integer).optional(),
    ],
};

pub fn run(ctx: &Ctx, argv: &[RStr]) -> CommandResult {
    let (key, owner, lease) = match argv {
        [_, key, owner] => (*key, *owner, None),
        [_, key, owner, lease] => (*key, *owner, Some(*lease)),
        _ => return Err(args::arity_error(NAME)),
    };
    args::owner(bytes(owner))?;
    let expire_at = match lease {
        None => None,
        Some(lease) => {
            let cap = config::max_lease_ms();
            let lease_ms = args::release_lease_ms(args::lease_ms(bytes(lease))?, cap);
            Some(args::deadline(ctx.now_ms(), lease_ms, cap)?)
        }
    };
    let key = LockKey::open_write(ctx, key)?;
    let decision = lock::release(key.view(owner)?, expire_at);
    key.apply(owner, decision.write);
    handoff::lease_changed(ctx, &key, decision.write);
    match decision.reply {
        Released::NotHeld => ctx.reply_null(),
        Released::StillHeld => ctx.reply_integer(0),
        Released::Freed => {
            stats::RELEASED.incr();
            announce(ctx, &key, decision.event);
            ctx.reply_integer(1);
        }
    }
    Ok(())
}
