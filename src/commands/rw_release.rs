//! `LOCK.RRELEASE key owner`
//! `LOCK.WRELEASE key owner [lease-ms]`
//!
//! Release one read hold / one write hold of `owner` on the read-write lock
//! `key`: Redisson's read and write `unlockInnerAsync` scripts, as commands.
//!
//! Reply:
//! * nil: `owner` holds no such hold; nothing changes;
//! * 0: one hold released, the lock is still held (for a write: the lease is
//!   reset to `lease-ms` when given, at most `lock.max-lease-ms`);
//! * 1: `owner`'s last hold of this kind released.
//!
//! A read release deletes that hold's key and leaves the hash to the latest
//! live hold of anyone (holds whose deadline passed keep nothing alive); with
//! none left the lock is deleted. A write release at 0 deletes the lock, or,
//! when the writer still holds read (it downgraded), leaves it in read mode.
//! Whenever holders leave, the queue is served (readers at the head as one
//! batch, or the next writer); a lock left free with nobody waiting publishes
//! Redisson's message on `redisson_rwlock:{key}`: `0` after a read release,
//! `1` after a write release.
//!
//! Errors: wrong arity; empty `owner`; bad `lease-ms`; `WRONGTYPE`; a hold
//! count that is not an integer. Nothing changes.

use crate::commands::release::{self, Release};
use crate::ffi::command::{Access, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::{Ctx, RStr};
use crate::lock_key::LockKey;
use crate::rwlock::{self, RwReleased};
use crate::rwlock_key::RwLockKey;
use crate::waiting::carry_out;
use crate::waiting::lock::RwCaller;

/// `LOCK.RRELEASE`, as registered.
pub struct LockRRelease;
/// `LOCK.WRELEASE`, as registered.
pub struct LockWRelease;

impl Command for LockRRelease {
    /// As `LOCK.RELEASE`: `write fast`, key `RW delete`.
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.rrelease",
        access: Access::WriteFast,
        key: KeyFlags::REMOVE_PART,
        summary:
            c"Releases one read hold of a read-write lock; waiting writers or readers are served",
        complexity: c"O(N) where N is the number of read holds of the lock",
        arity: 3,
        args: release::ARGS.split_at(2).0,
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        // Arity 3: Redis refuses a lease before this runs.
        let cmd = Release::parse_for(LockRRelease::SPEC.name(), argv)?;
        let lock = LockKey::open_write(ctx, cmd.key)?;
        let rw = RwLockKey::of(&lock);
        let view = rw.view(cmd.owner)?;
        let (others, own_latest) = match view.reads {
            0 => Default::default(),
            reads => rw.others(cmd.owner.as_bytes(), reads - 1),
        };
        let decision = rwlock::read_release(view, &others, own_latest, ctx.now_ms());
        let caller = RwCaller {
            lock: &lock,
            owner: cmd.owner,
        };
        reply(ctx, carry_out(ctx, &caller, decision));
        Ok(())
    }
}

impl Command for LockWRelease {
    /// As `LOCK.RELEASE`: `write fast`, key `RW delete`.
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.wrelease",
        access: Access::WriteFast,
        key: KeyFlags::REMOVE_PART,
        summary:
            c"Releases one write hold of a read-write lock; waiting readers or a writer are served",
        complexity: c"O(1)",
        arity: -3,
        args: release::ARGS,
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = Release::parse_for(LockWRelease::SPEC.name(), argv)?;
        let expire_at = cmd.deadline(ctx)?;
        let lock = LockKey::open_write(ctx, cmd.key)?;
        let view = RwLockKey::of(&lock).view(cmd.owner)?;
        let decision = rwlock::write_release(view, expire_at);
        let caller = RwCaller {
            lock: &lock,
            owner: cmd.owner,
        };
        reply(ctx, carry_out(ctx, &caller, decision));
        Ok(())
    }
}

fn reply(ctx: Ctx, released: RwReleased) {
    match released {
        RwReleased::NotHeld => ctx.reply_null(),
        RwReleased::StillHeld => ctx.reply_integer(0),
        RwReleased::Done => ctx.reply_integer(1),
    }
}
