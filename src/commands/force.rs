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

use crate::args::KeyOnly;
use crate::commands::arg_docs::KEY;
use crate::ffi::command::{Access, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::{Ctx, RStr};
use crate::lock::{self, Forced};
use crate::lock_key::LockKey;
use crate::rwlock::{self, Shape};
use crate::rwlock_key::RwLockKey;
use crate::waiting::carry_out;
use crate::waiting::lock::RwCaller;

/// `LOCK.FORCE`, as registered.
pub struct LockForce;

impl Command for LockForce {
    /// Key `RM delete`: it deletes the key (as `DEL`).
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.force",
        access: Access::WriteFast,
        key: KeyFlags::DELETE_KEY,
        summary: c"Deletes a lock whoever holds it",
        complexity: c"O(1)",
        arity: 2,
        args: &[KEY],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = KeyOnly::parse(LockForce::SPEC.name(), argv)?;
        let key = LockKey::open_write(ctx, cmd.key)?;
        let shape = RwLockKey::of(&key).shape();
        if let Shape::Rw(_) = shape {
            // A read-write lock: its hold keys go too. The decision's one
            // effect, Delete, names no owner; the key stands in for one.
            let caller = RwCaller {
                lock: &key,
                owner: cmd.key,
            };
            let forced = carry_out(ctx, &caller, rwlock::force(shape));
            ctx.reply_integer(i64::from(forced));
            return Ok(());
        }
        let forced = carry_out(ctx, &key, lock::force(key.presence()));
        ctx.reply_integer(i64::from(forced == Forced::Deleted));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_exactly_one_key() {
        let parse = |argv| KeyOnly::parse(LockForce::SPEC.name(), argv);
        assert_eq!(parse(&["LOCK.FORCE", "k"]), Ok(KeyOnly { key: "k" }));
        for args in [&["LOCK.FORCE"][..], &["LOCK.FORCE", "k", "x"]] {
            assert!(parse(args).unwrap_err().contains("'lock.force'"));
        }
    }
}
