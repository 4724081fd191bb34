//! `LOCK.FORCE key`
//!
//! Deletes the lock whoever holds it (Redisson's `forceUnlockAsync`): an
//! operator's tool, which is why ACL setups usually deny it to applications.
//!
//! Reply: integer 1 if a lock existed and was deleted (then handed to the first
//! waiter, or the unlock message published); 0 if there was none.
//!
//! Errors: wrong arity; `WRONGTYPE`.
//!
//! Effects (replicated): `DEL key`.

use crate::args;
use crate::command_docs::{ArgDoc, ArgKind, CommandDoc};
use crate::commands::announce;
use crate::ffi::{CommandResult, Ctx, RStr};
use crate::lock;
use crate::lock_key::LockKey;
use crate::stats;

pub const NAME: &str = "lock.force";

/// `COMMAND DOCS` for this command.
pub const DOC: CommandDoc = CommandDoc {
    summary: c"Deletes a lock whoever holds it",
    complexity: c"O(1)",
    arity: 2,
    args: &[ArgDoc::new(c"key", ArgKind::Key)],
};

pub fn run(ctx: &Ctx, argv: &[RStr]) -> CommandResult {
    let [_, key] = argv else {
        return Err(args::arity_error(NAME));
    };
    let key = LockKey::open_write(ctx, *key)?;
    let decision = lock::force(key.presence());
    // A delete touches no owner field; the key name stands in for one.
    key.apply(key.name(), decision.write);
    if decision.reply {
        stats::FORCED.incr();
        announce(ctx, &key, decision.event);
    }
    ctx.reply_integer(i64::from(decision.reply));
    Ok(())
}
