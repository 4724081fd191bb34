//! `LOCK.RENEW key owner lease-ms`
//!
//! Resets the lease of a lock `owner` holds: what Redisson's watchdog does
//! every `lockWatchdogTimeout / 3` (its `renewExpirationAsync` script).
//!
//! Reply: integer 1 if `owner` holds the lock and the lease was reset to
//! `lease-ms`; 0 otherwise (nothing changed).
//!
//! Errors: as `LOCK.ACQUIRE` for arity, `lease-ms`, `owner` and `WRONGTYPE`.
//!
//! Effects (replicated): `PEXPIREAT key <deadline>`.

use crate::args;
use crate::command_docs::{ArgDoc, ArgKind, CommandDoc};
use crate::config;
use crate::ffi::{bytes, CommandResult, Ctx, RStr};
use crate::handoff;
use crate::lock;
use crate::lock_key::LockKey;

pub const NAME: &str = "lock.renew";

/// `COMMAND DOCS` for this command.
pub const DOC: CommandDoc = CommandDoc {
    summary: c"Resets the lease of a lock the owner holds (watchdog renewal)",
    complexity: c"O(1)",
    arity: 4,
    args: &[
        ArgDoc::new(c"key", ArgKind::Key),
        ArgDoc::new(c"owner", ArgKind::String),
        ArgDoc::new(c"lease-ms", ArgKind::Integer),
    ],
};

pub fn run(ctx: &Ctx, argv: &[RStr]) -> CommandResult {
    let [_, key, owner, lease] = argv else {
        return Err(args::arity_error(NAME));
    };
    args::owner(bytes(*owner))?;
    let lease_ms = args::lease_ms(bytes(*lease))?;
    let expire_at = args::deadline(ctx.now_ms(), lease_ms, config::max_lease_ms())?;
    let key = LockKey::open_write(ctx, *key)?;
    let decision = lock::renew(key.view(*owner)?, expire_at);
    key.apply(*owner, decision.write);
    handoff::lease_changed(ctx, &key, decision.write);
    ctx.reply_integer(i64::from(decision.reply));
    Ok(())
}
