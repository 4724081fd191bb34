//! `LOCK.RWRENEW key owner lease-ms`
//!
//! A watchdog's call on a read-write lock: every hold `owner` has on `key`
//! (its read holds' keys, and its write hold) gets a lease of `lease-ms`
//! from now, and the hash's deadline becomes the latest live hold's.
//!
//! Reply: **1** when `owner` holds anything; **0** otherwise (nothing
//! changes), also when all of its read holds passed their deadlines while
//! other readers kept the lock alive (its field is still in the hash).
//!
//! Unlike Redisson's read renewal, which renews every reader's hold keys,
//! only `owner`'s own holds are renewed: a dead reader's holds end on their
//! deadlines while live readers go on renewing theirs.
//!
//! Errors: wrong arity; bad `lease-ms` (also above `lock.max-lease-ms`);
//! empty `owner`; `WRONGTYPE`; a hold count that is not an integer.
//!
//! Effects (replicated): `PEXPIREAT <hold i> <deadline>` for each of the
//! owner's read holds, `PEXPIREAT key <deadline>`.

use crate::args;
use crate::commands::renew::{self, Renew};
use crate::config;
use crate::ffi::command::{Access, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::{Ctx, RStr};
use crate::lock_key::LockKey;
use crate::rwlock;
use crate::rwlock_key::RwLockKey;
use crate::waiting::carry_out;
use crate::waiting::lock::RwCaller;

/// `LOCK.RWRENEW`, as registered.
pub struct LockRwRenew;

impl Command for LockRwRenew {
    /// As `LOCK.RENEW`: `write fast`, key `RW update`.
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.rwrenew",
        access: Access::WriteFast,
        key: KeyFlags::UPDATE,
        summary: c"Renews every hold an owner has on a read-write lock (a watchdog's call)",
        complexity: c"O(N) where N is the number of read holds of the lock",
        arity: 4,
        args: renew::ARGS,
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = Renew::parse_for(LockRwRenew::SPEC.name(), argv)?;
        let expire_at = args::deadline(ctx.now_ms(), cmd.lease_ms, config::max_lease_ms())?;
        let lock = LockKey::open_write(ctx, cmd.key)?;
        let rw = RwLockKey::of(&lock);
        let view = rw.view(cmd.owner)?;
        let (others, own_latest) = rw.others(cmd.owner.as_bytes(), view.reads);
        let decision = rwlock::renew(view, &others, own_latest, ctx.now_ms(), expire_at);
        let caller = RwCaller {
            lock: &lock,
            owner: cmd.owner,
        };
        let renewed = carry_out(ctx, &caller, decision);
        ctx.reply_integer(i64::from(renewed));
        Ok(())
    }
}
